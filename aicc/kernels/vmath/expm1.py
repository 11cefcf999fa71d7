"""Float32 expm1 on the x86 SIMD targets, and the activations built on exp / expm1 that had
only scalar loops: Elu, Celu (expm1) and Selu (exp_simd's exp). kernels/vmath/exp.py dispatches here;
the lane-0 form of expm1 serves every scalar use on these targets (a loop tail, a fused
epilogue's scalar pass), so the vector body and those give the same bits. Before: a libm
``expm1f`` call (Elu, Celu) or a lane-0 exp (Selu) per element, 1x64x56x56 Elu on x86-avx512
1811 us against onnxruntime's 398.

expm1(x): x clamped to [-30, 89] (expm1(-30) rounds to -1, past 88.72 overflows), x = n ln2
+ r with |r| <= ln2 / 2 (exp's Cody-Waite constants), e = expm1(r) by its Taylor series to r^7
(truncation below 2e-8 relative), then expm1(x) = 2 (2^(n-1) e + (2^(n-1) - 1/2)) with one
FMA: 2^(n-1) is a normal float for every n (-44..128), the doubling is exact or overflows to
+Inf; n = 0 takes e itself (halving a subnormal e would round it). About 1 ulp; +Inf -> +Inf,
-Inf -> -1, NaN -> NaN, -0 -> +0 (Elu and Celu return x itself there).

Elu(x) = x < 0 ? alpha expm1(x) : x; Celu(x) = x < 0 ? alpha expm1(x / alpha) : x; Selu(x) =
x <= 0 ? gamma (alpha exp(x) - alpha) : gamma x: kernels/vmath/act.py's expressions with the same
operations in the same order, as selects (NaN takes the branch of x, as there).

The generic target keeps the C library's expm1f / expf: results differ between targets by
rounding (a few ulp).
"""
from __future__ import annotations

from ..isa.registry import include_line
from ..isa.x86 import INT, INT_BITS, SIMD, lane0, vconst, vpoly
from .coeffs import EXP_C

FUNCS = ("expm1",)
VECTOR = {"Elu", "Celu", "Selu"}
_TAYLOR = (1 / 5040, 1 / 720, 1 / 120, 1 / 24, 1 / 6, 1 / 2)   # e = r + r^2 P(r), P's terms



def vexpm1(ctx, isa: str) -> str:
    """Name of the vector expm1 ``V aicc_expm1_ISA(V x)`` (registered once)."""
    d, i, li = SIMD[isa], INT[isa], INT_BITS[isa]
    v, fma, fnma, mul = d["v"], d["fma"], d["fnma"], d["mul"]
    c = {k: vconst(d, val) for k, val in EXP_C}
    p = vpoly(d, "r", _TAYLOR[::-1])
    hi = vconst(d, 89.0)
    name = f"aicc_expm1_{isa}"
    ctx.helper(f"0.{isa}.0.include", include_line(isa))
    ctx.helper(f"0.{isa}.1.{name}", f"""\
/* expm1 of {d['L']} floats (kernels/vmath/expm1.py): clamp to [-30, 89], x = n ln2 + r, e = expm1(r)
 * by its series to r^7, then 2 (2^(n-1) e + 2^(n-1) - 1/2) in one FMA (2^(n-1) normal for
 * every n; past FLT_MAX gives +Inf), e itself when n = 0 (0.5 e would round a subnormal e).
 * NaN stays NaN. */
static {v} {name}({v} x)
{{
    const {v} xc = {d['min']}({hi}, {d['max']}({vconst(d, -30.0)}, x));   /* NaN stays */
    const {v} n = {d['rnd'].format(x=f"{mul}(xc, {c['l2e']})")};
    const {v} r = {fnma}(n, {c['c2']}, {fnma}(n, {c['c1']}, xc));
    const {v} e = {fma}({mul}(r, r), {p}, r);
    const {v} h = {i['cast']}({i['slli']}({i['add']}({i['cvt']}(n), {li['set1']}(126)), 23));
    const {v} y = {fma}(h, e, {d['sub']}(h, {vconst(d, 0.5)}));
    return {d['sel'].format(a=f"{d['add']}(y, y)", b='e', x='n', y=vconst(d, 0.0), p='_CMP_EQ_OQ')};
}}""")
    return name


def scalar(ctx, isa: str, fn: str) -> str:
    """Name of ``float aicc_expm11_ISA(float x)``: the vector function on lane 0."""
    return lane0(ctx, isa, fn, vexpm1(ctx, isa))


def vector_expr(ctx, isa: str, act: str, xv: str, params: dict, vexp) -> str:
    """Elu / Celu / Selu of the vector variable ``xv`` (vexp: exp_simd's exp)."""
    d = SIMD[isa]

    def sel(a, b, p):         # b where xv p 0 holds, else a (NaN: a, the branch of x)
        return d["sel"].format(a=a, b=b, x=xv, y=vconst(d, 0.0), p=p)
    alpha = vconst(d, params["alpha"])
    if act == "Selu":
        gamma = vconst(d, params["gamma"])
        ex = f"{d['mul']}({alpha}, {vexp(ctx, isa)}({xv}))"
        neg = f"{d['mul']}({gamma}, {d['sub']}({ex}, {alpha}))"
        return sel(f"{d['mul']}({gamma}, {xv})", neg, "_CMP_LE_OQ")
    arg = xv if act == "Elu" else f"{d['div']}({xv}, {alpha})"
    return sel(xv, f"{d['mul']}({alpha}, {vexpm1(ctx, isa)}({arg}))", "_CMP_LT_OQ")
