"""LRN: local response normalization across channels (opset 1/13).

Layout [N, C, S] (S = product of the spatial dims). For channel c the window is
``max(0, c - floor((size-1)/2)) .. min(C-1, c + ceil((size-1)/2))``; the squares of the
window's channels are summed per position into S values of step scratch (ascending channel
order, tensor dtype), then ``y = x / pow(bias + alpha / size * sum, beta)``.

NaN/Inf: a NaN or Inf within a position's window makes that output NaN (or 0 for an Inf
sum with a finite x); a negative base (bias < 0) gives pow's NaN. Empty tensors produce no
code.
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import c_literal, ctype
from ..emit_c.loops import numel
from .base import Op, empty_body, float_dtype_reason, register


def _helper(ctx, dt) -> str:
    ct = ctype(dt)
    f32 = dt == np.float32
    name = f"aicc_lrn_{'f32' if f32 else 'f64'}"
    pw = "powf" if f32 else "pow"
    z = c_literal(0, dt)
    return ctx.helper(name, f"""\
/* LRN over [N, C, S]: channels c-lo..c+hi (clamped) summed as squares into ws (S values),
 * y = x / pow(bias + ascale * sum, beta) with ascale = alpha / size. */
static void {name}(size_t N, size_t C, size_t S, size_t lo, size_t hi, const {ct} *restrict x,
    {ct} bias, {ct} ascale, {ct} beta, {ct} *restrict y, {ct} *restrict ws)
{{
    for (size_t n = 0; n < N; ++n)
        for (size_t c = 0; c < C; ++c) {{
            const size_t first = c > lo ? c - lo : 0;
            const size_t last = C - 1 - c > hi ? c + hi : C - 1;
            const size_t o = (n * C + c) * S;
            for (size_t s = 0; s < S; ++s) ws[s] = {z};
            for (size_t i = first; i <= last; ++i) {{
                const {ct} *restrict xi = x + (n * C + i) * S;
                for (size_t s = 0; s < S; ++s) ws[s] += xi[s] * xi[s];
            }}
            for (size_t s = 0; s < S; ++s)
                y[o + s] = x[o + s] / {pw}(bias + ascale * ws[s], beta);
        }}
}}""")


@register("LRN", since=1)
class LRN(Op):
    attrs = {"alpha": 1e-4, "beta": 0.75, "bias": 1.0, "size": None}

    def check(self, node, g):
        r = float_dtype_reason([g.dtype(node.inputs[0])])
        if r:
            return r
        if len(g.shape(node.inputs[0])) < 2:
            return "input of rank < 2"
        if int(self.attr(node, "size")) < 1:
            return f"size {self.attr(node, 'size')} < 1"
        return None

    def emit(self, node, ctx):
        dt = ctx.out_dtype(0)
        shape = ctx.in_shape(0)
        if numel(shape) == 0:
            empty_body(ctx)
            return
        size = int(self.attr(node, "size"))
        lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
        n, c, s = shape[0], shape[1], numel(shape[2:])
        ws = ctx.scratch(s * dt.itemsize, ctype(dt), "ws")
        alpha = float(self.attr(node, "alpha"))
        bias = float(self.attr(node, "bias"))
        beta = float(self.attr(node, "beta"))
        if dt == np.float32:
            ascale = float(np.float32(alpha) / np.float32(size))
        else:
            ascale = alpha / size
        L = lambda v: c_literal(v, dt)  # noqa: E731
        ctx(f"{_helper(ctx, dt)}({n}u, {c}u, {s}u, {lo}u, {hi}u, {ctx.inp[0]}, {L(bias)}, "
            f"{L(ascale)}, {L(beta)}, {ctx.out[0]}, {ws});")
