"""Trilu: keep the upper (upper=1: j - i >= k) or lower (upper=0: j - i <= k) triangle of
each trailing [N, M] matrix and write zeros elsewhere; leading dims are a batch.

k (optional input, default 0) may be a constant (baked in) or a run-time scalar; any int64
value is valid (|k| beyond the matrix keeps everything or nothing) and the comparisons cannot
overflow. Kept values are copied bit for bit (NaN preserved); zeros are the dtype's 0
(+0.0 for floats, 0 bits for float16/bfloat16). Any dtype with a C type.
"""
from __future__ import annotations

from ..emit_c.loops import numel
from ..kernels.move.copy import empty_guard
from .base import Op, dtype_reason, register
from .traits import HALF_NATIVE


@register("Trilu", since=14)
class Trilu(Op):
    traits = frozenset({HALF_NATIVE})
    attrs = {"upper": 1}

    def check(self, node, g):
        if len(g.shape(node.inputs[0])) < 2:
            return "input rank < 2"
        return dtype_reason(g, node.inputs[:1])

    def emit(self, node, ctx):
        shape = ctx.in_shape(0)
        n, m = shape[-2], shape[-1]
        batch = numel(shape[:-2])
        upper = int(self.attr(node, "upper"))
        ct = ctx.out_ctype(0)
        if empty_guard(ctx):
            return
        kc = ctx.in_const(1)
        if not ctx.has_input(1):
            k = "INT64_C(0)"
        elif kc is not None:
            k = f"INT64_C({int(kc.reshape(-1)[0])})" if int(kc.reshape(-1)[0]) != -2 ** 63 \
                else "INT64_MIN"
        else:
            k = f"(int64_t){ctx.inp[1]}[0]"
        keep = "d >= k" if upper else "d <= k"
        ctx(f"/* Trilu {'upper' if upper else 'lower'}: keep element (i, j) when j - i "
            f"{'>=' if upper else '<='} k */")
        ctx(f"const int64_t k = {k};")
        ctx("size_t o = 0;")
        with ctx.block(f"for (size_t b = 0; b < {batch}u; ++b)"):
            with ctx.block(f"for (int64_t i = 0; i < {n}; ++i)"):
                with ctx.block(f"for (int64_t j = 0; j < {m}; ++j, ++o)"):
                    ctx("const int64_t d = j - i;")
                    ctx(f"{ctx.out[0]}[o] = ({keep}) ? {ctx.inp[0]}[o] : ({ct})0;")
