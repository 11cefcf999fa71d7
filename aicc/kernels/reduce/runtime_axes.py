"""Reductions whose axes arrive at run time (the ``axes`` input is not a constant).

The output shape is static (onnx shape inference or the model's declared output); the axes
values are read in C: negative axes count from the end, duplicates are harmless, no axes
reduce everything (or nothing, with noop_with_empty_axes). A per-dim mask gives each input
dim an output stride (0 for reduced dims); the input is walked once in row-major order (an
odometer over the outer dims, a strided inner loop over the last dim), every value folded
into its output in ascending input order (the compile-time path's order, except its float
sums over contiguous rows, which use kernels/vmath/sum16.py's 16-lane order: those can differ by rounding).

Invalid axes at run time (a value outside [-rank, rank-1], or a reduced set whose result does
not have the static output shape) are not undefined behaviour: the output is filled with NaN
(floats) or 0 (integers, bool) and nothing else is written. Empty sets give the identity as
in reduce.py; NaN/Inf behaviour is reduce.py's (same accumulation expressions).

Layout of the generated call (shape facts are static, so they are local constant arrays):
``dims`` (the input dims; a rank-0 input is treated as [1]), ``odims`` (the static output
dims), and ``ws`` (3 * rank size_t: reduced mask, output strides, odometer).
"""
from __future__ import annotations

import numpy as np

from ...emit_c.cwriter import c_literal, ctype
from ...emit_c.loops import numel

AXES_HELPER = "aicc_reducert_0_axes"


def _axes_helper(ctx) -> str:
    return ctx.helper(AXES_HELPER, f"""\
/* Run-time reduce axes over x of rank R (dims): red[r] = 1 for reduced dims (no axes: all,
 * or none when noop), ostr[r] = output stride of dim r (0 when reduced). Returns 1 when the
 * axes are in range and the result has the static output dims odims[0..OR) (keepdims: rank
 * R with reduced dims 1; otherwise the kept dims in order), 0 otherwise. */
static int {AXES_HELPER}(size_t R, const size_t *dims, const int64_t *axes, size_t NA,
    int noop, int keepdims, size_t OR, const size_t *odims, size_t *red, size_t *ostr)
{{
    size_t n = 1, k = 0;
    for (size_t r = 0; r < R; ++r) red[r] = (NA == 0 && !noop) ? 1u : 0u;
    for (size_t a = 0; a < NA; ++a) {{
        int64_t v = axes[a];
        if (v < 0) v += (int64_t)R;
        if (v < 0 || v >= (int64_t)R) return 0;
        red[(size_t)v] = 1u;
    }}
    for (size_t r = R; r-- > 0;) {{
        ostr[r] = red[r] ? 0u : n;
        if (!red[r]) n *= dims[r];
    }}
    if (keepdims) {{
        if (OR != R) return 0;
        for (size_t r = 0; r < R; ++r)
            if (odims[r] != (red[r] ? 1u : dims[r])) return 0;
        return 1;
    }}
    for (size_t r = 0; r < R; ++r) {{
        if (red[r]) continue;
        if (k >= OR || odims[k] != dims[r]) return 0;
        ++k;
    }}
    return k == OR;
}}""")


def _walk(ct, body: str) -> str:
    """C statements visiting every x value ``v`` with its output index ``j``."""
    return f"""\
    if (NX) {{
        const size_t L = dims[R - 1], s = ostr[R - 1];
        size_t o = 0;
        for (size_t r = 0; r < R; ++r) idx[r] = 0;
        for (size_t i = 0; i < NX; i += L) {{
            for (size_t d = 0; d < L; ++d) {{
                const {ct} v = x[i + d];
                const size_t j = o + d * s;
                {body}
            }}
            for (size_t r = R - 1; r-- > 0;) {{
                if (++idx[r] < dims[r]) {{
                    o += ostr[r];
                    break;
                }}
                o -= (dims[r] - 1) * ostr[r];
                idx[r] = 0;
            }}
        }}
    }}"""


def _sig(name, ct, extra="") -> str:
    return (f"static void {name}(size_t R, const size_t *dims,\n"
            f"    const int64_t *axes, size_t NA, int noop, int keepdims, size_t OR,\n"
            f"    const size_t *odims, size_t *ws,\n"
            f"    const {ct} *restrict x, {ct} *restrict y, size_t NX, size_t NY{extra})")


def _prologue(ct, bad) -> str:
    return f"""\
    size_t *red = ws, *ostr = ws + R, *idx = ws + 2 * R;
    if (NY == 0) return;
    if (!{AXES_HELPER}(R, dims, axes, NA, noop, keepdims, OR, odims, red, ostr)) {{
        for (size_t o = 0; o < NY; ++o) y[o] = {bad};
        return;
    }}"""


def rt_helper(ctx, kind, dt, sfx, exprs) -> str:
    """The run-time-axes kernel of ``kind`` for dtype dt; exprs = (init, acc, fin) templates
    (reduce.py's, ``D`` the number of values per output); LogSumExp has its own."""
    _axes_helper(ctx)
    ct = ctype(dt)
    bad = c_literal(float("nan"), dt) if dt.kind == "f" else c_literal(0, dt)
    name = f"aicc_reducert_1_{kind.lower()}_{sfx}"
    if kind == "ReduceLogSumExp":
        mx = "(v > y[j] || v != v ? v : y[j])"
        ninf, z = c_literal(float("-inf"), dt), c_literal(0, dt)
        exp, log = ("expf", "logf") if dt == np.float32 else ("exp", "log")
        return ctx.helper(name, f"""\
/* ReduceLogSumExp over dims chosen at run time: the maxima m in y, the sums of exp(x - m)
 * in sm (NY values of scratch), then y = log(sum) + m (m taken as 0 when infinite). */
{_sig(name, ct, f", {ct} *restrict sm")}
{{
{_prologue(ct, bad)}
    for (size_t o = 0; o < NY; ++o) {{
        y[o] = {ninf};
        sm[o] = {z};
    }}
{_walk(ct, f"y[j] = {mx};")}
    for (size_t o = 0; o < NY; ++o)
        if (isinf(y[o])) y[o] = {z};
{_walk(ct, f"sm[j] += {exp}(v - y[j]);")}
    for (size_t o = 0; o < NY; ++o) y[o] = {log}(sm[o]) + y[o];
}}""")
    init, acc, fin = exprs
    dline = "\n    const size_t D = NX / NY;   /* values per output */" if fin and "D" in fin \
        else ""
    finish = f"\n    for (size_t o = 0; o < NY; ++o) y[o] = {fin.format(a='y[o]')};" if fin else ""
    return ctx.helper(name, f"""\
/* {kind} over dims chosen at run time (ascending input order; empty sets: identity). */
{_sig(name, ct)}
{{
{_prologue(ct, bad)}{dline}
    for (size_t o = 0; o < NY; ++o) y[o] = {init};
{_walk(ct, "y[j] = " + acc.format(a="y[j]", v="v") + ";")}{finish}
}}""")


def _arr(vals) -> str:
    vals = list(vals) or [0]
    return "{" + ", ".join(f"{int(v)}u" for v in vals) + "}"


def emit_runtime(ctx, kind, dt, sfx, exprs, keepdims: int, noop: int) -> None:
    """The step body of a reduction with run-time axes (input 1)."""
    shape = ctx.in_shape(0) or (1,)
    oshape = ctx.out_shape(0)
    ny = numel(oshape)
    if ny == 0:
        ctx(f"(void){ctx.out[0]};  /* empty output: nothing to do */")
        return
    r = len(shape)
    na = numel(ctx.in_shape(1))
    fn = rt_helper(ctx, kind, dt, sfx, exprs)
    ctx(f"static const size_t dims[{r}] = {_arr(shape)};")
    ctx(f"static const size_t odims[{max(len(oshape), 1)}] = {_arr(oshape)};")
    ctx(f"size_t ws[{3 * r}];")
    extra = ""
    if kind == "ReduceLogSumExp":
        extra = ", " + ctx.scratch(ny * dt.itemsize, ctype(dt), "sm")
    ctx(f"{fn}({r}u, dims, {ctx.inp[1]}, {na}u, {int(bool(noop))}, {int(bool(keepdims))}, "
        f"{len(oshape)}u, odims, ws, {ctx.inp[0]}, {ctx.out[0]}, {numel(shape)}u, {ny}u{extra});")
