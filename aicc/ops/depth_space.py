"""SpaceToDepth and DepthToSpace (modes DCR and CRD): pure permutations of 4-D NCHW data.

Each is the spec's reshape -> 6-D transpose -> reshape, done as one strided copy
(transpose.emit_gather_copy: the output is walked in order, the input read through the
permuted strides of its 6-D view; contiguous runs become memcpy). blocksize must be >= 1 and
divide the spatial dims (SpaceToDepth) or the channels by blocksize^2 (DepthToSpace); check()
says so otherwise. Dtype-agnostic, bit-exact (NaN payloads preserved).
"""
from __future__ import annotations

from ..emit_c.loops import strides_of
from ..kernels.move.copy import emit_gather_copy, empty_guard
from .base import Op, dtype_reason, register
from .traits import HALF_NATIVE


def _mode(op, node):
    m = op.attr(node, "mode")
    return m.decode() if isinstance(m, bytes) else str(m)


class _Block(Op):
    traits = frozenset({HALF_NATIVE})
    attrs = {"blocksize": None, "mode": "DCR"}

    def check(self, node, g):
        why = dtype_reason(g, node.inputs[:1])
        if why:
            return why
        b = self.attr(node, "blocksize")
        if b is None or int(b) < 1:
            return f"blocksize {b} must be >= 1"
        if _mode(self, node) not in ("DCR", "CRD"):
            return f"mode {_mode(self, node)!r} not supported (DCR, CRD)"
        shape = g.shape(node.inputs[0])
        if len(shape) != 4:
            return f"input rank {len(shape)} (4-D NCHW only)"
        return self.shape_reason(shape, int(b))

    def emit(self, node, ctx):
        b = int(self.attr(node, "blocksize"))
        mode = _mode(self, node)
        view, perm = self.view6(ctx.in_shape(0), b, mode)
        if empty_guard(ctx):
            return
        st = strides_of(view)
        out6 = [view[p] for p in perm]
        emit_gather_copy(ctx, out6, [st[p] for p in perm],
                         note=f"{node.op_type} {mode} blocksize {b}: input viewed as {view}, "
                              f"read in order {perm}")


@register("DepthToSpace", since=1)
class DepthToSpace(_Block):
    def shape_reason(self, shape, b):
        if shape[1] % (b * b):
            return f"channels {shape[1]} not divisible by blocksize^2 = {b * b}"
        return None

    @staticmethod
    def view6(shape, b, mode):
        n, c, h, w = shape
        if mode == "DCR":
            return [n, b, b, c // (b * b), h, w], [0, 3, 4, 1, 5, 2]
        return [n, c // (b * b), b, b, h, w], [0, 1, 4, 2, 5, 3]


@register("SpaceToDepth", since=1)
class SpaceToDepth(_Block):
    def shape_reason(self, shape, b):
        if shape[2] % b or shape[3] % b:
            return f"spatial dims {list(shape[2:])} not divisible by blocksize {b}"
        return None

    @staticmethod
    def view6(shape, b, mode):
        n, c, h, w = shape
        return ([n, c, h // b, b, w // b, b],
                [0, 3, 5, 1, 2, 4] if mode == "DCR" else [0, 1, 3, 5, 2, 4])
