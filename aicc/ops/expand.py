"""Expand and Tile: broadcast copies.

Expand: the output shape is the numpy broadcast of the input shape with the shape input, as
inferred; broadcast dims read with stride 0. Tile: the output dim d is
``input dim d * repeats[d]``; every output dim is split into a (repeat, input dim) loop pair,
the repeat loop reading with stride 0. Both go through the strided copy of transpose.py
(merged dims, memcpy of contiguous runs).

The shape/repeats inputs are never read by the C code: everything follows from the static
input and output shapes (Tile's repeats are output dim / input dim). They may therefore be
computed at run time (graph inputs) when the output shape is static (inferred, or declared by
the model); a run-time value that disagrees with the static output shape is ignored (the
static broadcast/tiling is done; nothing is read or written out of bounds). Dtype-agnostic,
bit-exact.
"""
from __future__ import annotations

from ..emit_c.loops import strides_of
from ..errors import UnsupportedError
from ..kernels.move.copy import emit_copy, emit_gather_copy, empty_guard
from .base import Op, dtype_reason, register
from .reshape import static_output_reason
from .traits import HALF_NATIVE


@register("Expand", since=8)
class Expand(Op):
    traits = frozenset({HALF_NATIVE})
    def check(self, node, g):
        return (dtype_reason(g, node.inputs[:1])
                or static_output_reason(node, g, "the run-time shape input")
                or _expand_reason(g.shape(node.inputs[0]), g.shape(node.outputs[0])))

    def emit(self, node, ctx):
        out = ctx.out_shape(0)
        shape = ctx.in_shape(0)
        r = len(out)
        ins = (1,) * (r - len(shape)) + tuple(shape)
        ist = strides_of(ins)
        if empty_guard(ctx):
            return
        emit_gather_copy(ctx, out, [0 if ins[d] == 1 and out[d] != 1 else ist[d] for d in range(r)],
                         note=f"Expand {list(shape)} -> {list(out)}: stride 0 on broadcast dims")


def _expand_reason(shape, out):
    if not all(isinstance(d, int) for d in tuple(shape) + tuple(out)):
        return None                     # non-static shapes are reported elsewhere
    ins = (1,) * (len(out) - len(shape)) + tuple(shape)
    if len(shape) > len(out) or any(a not in (1, b) for a, b in zip(ins, out)):
        return f"output {list(out)} is not a broadcast of the input {list(shape)}"
    return None


def _tile_reason(shape, out):
    if not all(isinstance(d, int) for d in tuple(shape) + tuple(out)):
        return None                     # non-static shapes are reported elsewhere
    if len(shape) != len(out) or any(a and b % a for a, b in zip(shape, out)) \
            or any(a == 0 and b for a, b in zip(shape, out)):
        return f"output {list(out)} is not a tiling of the input {list(shape)}"
    return None


@register("Tile", since=6)
class Tile(Op):
    traits = frozenset({HALF_NATIVE})
    def check(self, node, g):
        return (dtype_reason(g, node.inputs[:1])
                or static_output_reason(node, g, "the run-time repeats input")
                or _tile_reason(g.shape(node.inputs[0]), g.shape(node.outputs[0])))

    def emit(self, node, ctx):
        shape, out = ctx.in_shape(0), ctx.out_shape(0)
        why = _tile_reason(shape, out)
        if why:
            raise UnsupportedError(f"Tile {node.name}: {why}")
        if empty_guard(ctx):
            return
        ist, ost = strides_of(shape), strides_of(out)
        dims, os_, is_ = [], [], []
        for d in range(len(shape)):
            dims += [out[d] // shape[d], shape[d]]
            os_ += [shape[d] * ost[d], ost[d]]
            is_ += [0, ist[d]]
        emit_copy(ctx, dims, os_, is_, ctx.out_ctype(0),
                  note=f"Tile {list(shape)} -> {list(out)}: (repeat, dim) loop pairs")
