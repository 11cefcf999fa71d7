"""Concat: each input is block-copied into its slab of the output along ``axis`` (negative
axis counts from the end). After dim merging a copy is ``outer`` memcpys of one contiguous
row per input (a single memcpy when axis is the first non-unit dim). Empty inputs are skipped.
Dtype-agnostic; values (NaN included) are copied bit for bit.
"""
from __future__ import annotations

from ..emit_c.loops import strides_of
from ..kernels.move.copy import emit_copy, empty_guard
from .base import Op, dtype_reason, register
from .traits import HALF_NATIVE


@register("Concat", since=1)
class Concat(Op):
    traits = frozenset({HALF_NATIVE})
    attrs = {"axis": None}

    def check(self, node, g):
        r = dtype_reason(g, node.inputs)
        if r:
            return r
        out = g.shape(node.outputs[0])
        rank = len(out)
        axis = self.attr(node, "axis")
        axis = 1 if axis is None else int(axis)
        if not -rank <= axis < rank:
            return f"axis {axis} out of range for rank {rank}"
        axis %= rank
        total = 0
        for i in node.inputs:
            if not i:
                continue
            s = g.shape(i)
            if len(s) != rank or any(a != b for d, (a, b) in enumerate(zip(s, out)) if d != axis):
                return f"input shape {list(s)} does not fit output {list(out)} on axis {axis}"
            total += s[axis]
        if total != out[axis]:
            return f"inputs add up to {total} along axis {axis}, output has {out[axis]}"
        return None

    def placed_inputs(self, node, g):
        """Every dim before the axis is 1: input k is the contiguous chunk starting at the sum
        of the sizes before it."""
        out = g.shape(node.outputs[0])
        axis = int(self.attr(node, "axis") if self.attr(node, "axis") is not None else 1)
        axis %= max(len(out), 1)
        if not node.inputs or not all(node.inputs) or any(int(d) != 1 for d in out[:axis]):
            return None
        offs, off = [], 0
        for name in node.inputs:
            offs.append(off)
            off += g.type_of(name).nbytes
        return offs

    def emit(self, node, ctx):
        out_shape = ctx.out_shape(0)
        r = len(out_shape)
        axis = int(self.attr(node, "axis") if self.attr(node, "axis") is not None else 1)
        axis = axis + r if axis < 0 else axis
        if empty_guard(ctx):
            return
        ost = strides_of(out_shape)
        ct = ctx.out_ctype(0)
        off = 0
        for k, name in enumerate(node.inputs):
            if not name:
                continue
            shape = ctx.in_shape(k)
            emit_copy(ctx, shape, ost, strides_of(shape), ct, in_var=ctx.inp[k],
                      out_base=off * ost[axis],
                      note=f"input {k} -> output[{off}:{off + shape[axis]}] along axis {axis}")
            off += shape[axis]
        assert off == out_shape[axis], (off, out_shape)
