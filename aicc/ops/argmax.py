"""ArgMax, ArgMin (moved out of reduce.py).

The index of the first extreme value along ``axis`` (the last one with select_last_index),
as int64. Comparisons with NaN are false (onnxruntime), so NaN is only selected when it is
the first value. Integers compare exactly. An empty reduced axis is rejected by check();
an otherwise empty tensor produces no code.
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import ctype
from ..emit_c.loops import numel
from .base import Op, empty_body, register_many


def _sfx(dt) -> str:
    return np.dtype(dt).name.replace("float", "f").replace("uint", "u").replace("int", "i")


def _arg_helper(ctx, kind, dt) -> str:
    ct = ctype(dt)
    name = f"aicc_{kind.lower()}_{_sfx(dt)}"
    cmp = ">" if kind == "ArgMax" else "<"
    return ctx.helper(name, f"""\
/* {kind} over the middle axis of [O, D, I] (D >= 1): index of the first extreme value, or
 * of the last one when last != 0. Comparisons with NaN are false (onnxruntime). */
static void {name}(size_t O, size_t D, size_t I, const {ct} *restrict x,
    int64_t *restrict y, int last)
{{
    for (size_t o = 0; o < O; ++o)
        for (size_t i = 0; i < I; ++i) {{
            const {ct} *restrict xo = x + o * D * I + i;
            {ct} best = xo[0];
            size_t at = 0;
            for (size_t d = 1; d < D; ++d) {{
                const {ct} v = xo[d * I];
                if (v {cmp} best || (last && v == best)) {{
                    best = v;
                    at = d;
                }}
            }}
            y[o * I + i] = (int64_t)at;
        }}
}}""")


@register_many(["ArgMax", "ArgMin"], since=1)
class ArgReduce(Op):
    attrs = {"axis": 0, "keepdims": 1, "select_last_index": 0}

    def check(self, node, g):
        dt = g.dtype(node.inputs[0])
        if dt.kind not in "iuf" or dt == np.float16:
            return f"dtype {dt.name} not supported"
        shape = g.shape(node.inputs[0])
        ax = int(self.attr(node, "axis"))
        if not -len(shape) <= ax < len(shape):
            return f"axis {ax} out of range for rank {len(shape)}"
        if int(shape[ax]) == 0:
            return "empty reduced axis"
        return None

    def emit(self, node, ctx):
        shape = ctx.in_shape(0)
        ax = int(self.attr(node, "axis"))
        ax = ax + len(shape) if ax < 0 else ax
        o, d, i = numel(shape[:ax]), shape[ax], numel(shape[ax + 1:])
        if o * d * i == 0:
            empty_body(ctx)
            return
        fn = _arg_helper(ctx, self.op_type, ctx.in_dtype(0))
        last = 1 if self.attr(node, "select_last_index") else 0
        ctx(f"{fn}({o}u, {d}u, {i}u, {ctx.inp[0]}, {ctx.out[0]}, {last});")
