"""Expand and Tile: broadcast copies.

Expand: the output shape is the numpy broadcast of the input shape with the (constant) shape
input, as inferred; broadcast dims read with stride 0. Tile: the output dim d is
``input dim d * repeats[d]``; every output dim is split into a (repeat, input dim) loop pair,
the repeat loop reading with stride 0. Both go through the strided copy of transpose.py
(merged dims, memcpy of contiguous runs). Shape/repeats inputs must be compile-time constants
and are never read by the C code. Dtype-agnostic, bit-exact.
"""
from __future__ import annotations

from ..errors import UnsupportedError
from .base import Op, register
from .loops import strides_of
from .reshape import runtime_input_reason
from .transpose import dtype_reason, emit_copy, emit_gather_copy, empty_guard


@register("Expand", since=8)
class Expand(Op):
    def check(self, node, g):
        return (dtype_reason(g, node.inputs[:1])
                or runtime_input_reason(node, g, (1,), "shape input"))

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


@register("Tile", since=6)
class Tile(Op):
    def check(self, node, g):
        return (dtype_reason(g, node.inputs[:1])
                or runtime_input_reason(node, g, (1,), "repeats input"))

    def emit(self, node, ctx):
        shape, out = ctx.in_shape(0), ctx.out_shape(0)
        for a, b in zip(shape, out):
            if a and b % a:
                raise UnsupportedError(f"Tile {node.name}: output {out} is not a tiling of {shape}")
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
