"""Transpose: a permutation of the axes, as a strided box copy (kernels/move/copy.py).
"""
from __future__ import annotations

from ..emit_c.loops import strides_of
from ..kernels.move.copy import emit_gather_copy, empty_guard
from .base import Op, dtype_reason, register
from .traits import HALF_NATIVE


@register("Transpose", since=1)
class Transpose(Op):
    traits = frozenset({HALF_NATIVE})
    attrs = {"perm": None}

    def check(self, node, g):
        return dtype_reason(g, node.inputs)

    def emit(self, node, ctx):
        shape = ctx.in_shape(0)
        r = len(shape)
        perm = self.attr(node, "perm")
        perm = list(reversed(range(r))) if perm is None else [int(p) % r if r else 0 for p in perm]
        if empty_guard(ctx):
            return
        st = strides_of(shape)
        emit_gather_copy(ctx, ctx.out_shape(0), [st[p] for p in perm],
                         note=f"Transpose perm={perm}: output-order loops, input read strided")
