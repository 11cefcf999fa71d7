"""Float32 exp, tanh, erf, log and log1p in portable C, for the nodes that run no SIMD kernel
(the generic, arm-neon and cortex-m4 targets, or ``aicc_kernel: generic``).

The C library's expf / tanhf / logf are calls, so no loop that uses them vectorizes, and the
piecewise erf written as nested conditionals keeps its branches (GCC does not speculate the
polynomials under the default -ftrapping-math). These functions compute every piece
unconditionally and select among the values, with no call, so GCC 12 vectorizes the loops
that inline them (-O2 on x86-64 SSE2, -O3 on AArch64 NEON). They are kernels/vmath/exp.py's,
kernels/vmath/erf.py's and kernels/vmath/log.py's algorithms with separate multiplies and adds (ISO C: no
contraction):

- exp(x): x clamped to [-104, 89]; n = round(x log2 e) by adding 1.5 * 2^23 (round to
  nearest even; the assignments round to float, as C99 requires under any FLT_EVAL_METHOD),
  whose low mantissa bits are then n (read as an unsigned integer: no float -> int
  conversion, which C leaves undefined for NaN); Cody-Waite r = x - n ln2 in two steps (the
  first product exact); Cephes' expf polynomial; times 2^(n - n/2), exact, then 2^(n/2),
  rounded once (subnormal results round correctly, past FLT_MAX gives +Inf). +Inf -> +Inf,
  -Inf -> 0, NaN -> NaN (it passes the clamps and the arithmetic). Within about 1 ulp of the
  correctly rounded value.
- tanh(x): |x| < 0.625: |x| + |x|^3 P(x^2) (Cephes' tanhf), else 1 - 2 / (exp(2|x|) + 1),
  the sign of x put back (copysignf): relative error about 2e-7; +-Inf -> +-1, -0 -> -0,
  NaN -> NaN.
- erf(x): activations._erf's pieces and Horner order (the same values as its scalar form).
- log(x), log1p(u) (u in [0, 1]): kernels/vmath/log.py's steps (about 1 and 2 ulp); Softplus and Mish on
  them as log_simd's max(x, 0) + log1p(exp(-|x|)), which gives the values of
  activations.ACT's two arms.

FP exception flags are unspecified: the pieces a value does not select may overflow or be
invalid. Results differ from the SIMD targets' by the FMA roundings (a few ulp), inside the
tests' tolerance against onnxruntime.
"""
from __future__ import annotations

import numpy as np

from ...emit_c.cwriter import c_literal
from ..isa.x86 import simd_isa
from .coeffs import ERF_BIG, ERF_MID, ERF_SMALL, EXP_C, LOG_P, TANH_P, horner

# the activations that use them (activations.act_expr): loops of these vectorize. The others
# keep the C library's functions: in a loop that stays scalar (a log1pf call, an exp in one
# arm of a ?:) glibc's expf is faster than this one.
PORTABLE = {"Exp", "Sigmoid", "Tanh", "Erf", "Gelu", "Log", "Swish"}   # (Selu, Softplus, Mish: act_form)


def _L(v) -> str:
    return c_literal(v, np.float32)


def sel(ctx, dt=np.float32) -> str:
    """Name of ``T aicc_sel_c(int c, T a, T b)`` (float32; float64: aicc_sel_c64): c ? a : b as
    a bit select (also PRelu's, pointwise.py)."""
    f64 = np.dtype(dt) == np.float64
    name, ct, ut, what = ("aicc_sel_c64", "double", "uint64_t", "doubles") if f64 else \
        ("aicc_sel_c", "float", "uint32_t", "floats")
    ctx.helper(f"0.c.0.sel{'64' if f64 else ''}", f"""\
/* c ? a : b of {what} as a bit select (kernels/vmath/portable.py). GCC vectorizes loops of it; a float ?:
 * whose operands are computed for it alone keeps its branch (GCC sinks their arithmetic into
 * the branches, which -ftrapping-math then keeps from being if-converted). */
static inline {ct} {name}(int c, {ct} a, {ct} b)
{{
    const {ut} m = 0u - ({ut})(c != 0);
    {ut} ab, bb, r;
    {ct} y;
    memcpy(&ab, &a, sizeof ab);
    memcpy(&bb, &b, sizeof bb);
    r = (ab & m) | (bb & ~m);
    memcpy(&y, &r, sizeof y);
    return y;
}}""")
    return name


def _exp(ctx) -> str:
    c = {k: _L(v) for k, v in EXP_C}
    poly = c["p0"]
    for k in ("p1", "p2", "p3", "p4", "p5"):
        poly = f"{poly} * r + {c[k]}" if poly == c["p0"] else f"({poly}) * r + {c[k]}"
    ctx.helper("0.c.1.exp", f"""\
/* exp(x) in portable C without branches or calls (kernels/vmath/portable.py): clamp to [-104, 89], n = x log2 e
 * rounded to an integer by +- 1.5 * 2^23, Cody-Waite r = x - n ln2, Cephes' expf polynomial,
 * times 2^(n - n/2) (exact) and 2^(n/2) (one rounding). NaN -> NaN. */
static inline AICC_UNUSED AICC_INLINE float aicc_expf_c(float x)
{{
    float xc = x < -104.0f ? -104.0f : x;
    xc = xc > 89.0f ? 89.0f : xc;
    xc = x != x ? x : xc;       /* (keeps GCC from threading the clamps into branches) */
    const float t = xc * {c['l2e']};
    const float tb = t + 12582912.0f;
    const float n = tb - 12582912.0f;
    const float r = (xc - n * {c['c1']}) - n * {c['c2']};
    const float p = (({poly}) * (r * r)) + (r + 1.0f);
    uint32_t m, e1, e2;
    float s1, s2;
    memcpy(&m, &tb, sizeof m);
    m = m - 0x4B400000u + 256u;       /* n + 256 (tb's low bits hold n) */
    e1 = ((m >> 1) - 1u) << 23;       /* 2^(n/2), n/2 rounded down */
    e2 = (m - (m >> 1) - 1u) << 23;   /* 2^(n - n/2) */
    memcpy(&s1, &e1, sizeof s1);
    memcpy(&s2, &e2, sizeof s2);
    return p * s2 * s1;
}}""")
    return "aicc_expf_c"


def _tanh(ctx) -> str:
    e = _exp(ctx)
    p = horner("z", TANH_P[::-1], _L)
    ctx.helper("0.c.2.tanh", f"""\
/* tanh(x) in portable C without branches or calls (kernels/vmath/portable.py): |x| < 0.625: |x| + |x|^3 P(x^2)
 * (Cephes' tanhf), else 1 - 2 / (exp(2|x|) + 1); the sign of x put back. NaN -> NaN. */
static inline AICC_UNUSED AICC_INLINE float aicc_tanhf_c(float x)
{{
    const float ax = fabsf(x);
    const float z = x * x;
    const float small = {p} * z * ax + ax;
    const float big = 1.0f - 2.0f / ({e}(ax + ax) + 1.0f);
    return copysignf({sel(ctx)}(ax >= 0.625f, big, small), x);
}}""")
    return "aicc_tanhf_c"


def _erf(ctx) -> str:
    small = horner("u", ERF_SMALL, _L)
    mid = horner("(t - 1.5625f)", ERF_MID, _L)
    big = horner("(t - 3.125f)", ERF_BIG, _L)
    sl = sel(ctx)
    ctx.helper("0.c.3.erf", f"""\
/* erf(x) in portable C without branches (kernels/vmath/portable.py): activations._erf's pieces, each
 * computed, then selected: |x| < 0.875 (or NaN): x P(x^2); [0.875, 2.25) and [2.25, 4):
 * 1 - Q(|x| - mid) with the sign of x; beyond: +-1. */
static inline AICC_UNUSED AICC_INLINE float aicc_erff_c(float x)
{{
    const float t = fabsf(x);
    const float u = x * x;
    const float sm = x * {small};
    const float mid = 1.0f - {mid};
    const float big = 1.0f - {big};
    const float h = {sl}(t < 2.25f, mid, {sl}(t < 4.0f, big, 1.0f));
    return {sl}(!(t >= 0.875f), sm, copysignf(h, x));
}}""")
    return "aicc_erff_c"


def _log(ctx) -> str:
    sl = sel(ctx)
    poly = horner("f", LOG_P[::-1], _L)
    ctx.helper("0.c.4.log", f"""\
/* log(x) in portable C without branches or calls (kernels/vmath/portable.py, kernels/vmath/log.py's steps): x = m 2^e,
 * m in [sqrt(1/2), sqrt(2)) from the bits (subnormal x scaled by 2^23 first), f = m - 1,
 * Cephes' logf polynomial, + e ln 2 in two parts. x < 0 and NaN -> NaN, +-0 -> -Inf,
 * +Inf -> +Inf. */
static inline AICC_UNUSED AICC_INLINE float aicc_logf_c(float x)
{{
    const int tiny = x < 1.17549435e-38f;
    const float xs = {sl}(tiny, x * 8388608.0f, x);
    uint32_t b, mb;
    float m;
    memcpy(&b, &xs, sizeof b);
    mb = (b & 0x007fffffu) | 0x3f800000u;
    memcpy(&m, &mb, sizeof m);
    const int big = m > 1.41421356f;
    const float e = ((float)(int32_t)((b >> 23) & 0xffu) - 127.0f) + (tiny ? -23.0f : 0.0f)
                    + (big ? 1.0f : 0.0f);
    const float mm = {sl}(big, m * 0.5f, m);
    const float f = mm - 1.0f;
    const float z = f * f;
    float y = f * z * {poly};
    y = e * -2.12194440e-4f + y;
    y = y - z * 0.5f;
    float r = e * 0.693359375f + (f + y);
    r = {sl}(x == INFINITY, INFINITY, r);
    r = {sl}(x == 0.0f, -INFINITY, r);
    return {sl}(!(x >= 0.0f), NAN, r);
}}""")
    return "aicc_logf_c"


def _log1p(ctx) -> str:
    lg = _log(ctx)
    ctx.helper("0.c.5.log1p", f"""\
/* log1p(u) for u in [0, 1] (Softplus' and Mish's exp(-|x|)) in portable C (kernels/vmath/portable.py,
 * kernels/vmath/log.py's form): log(w) for w = 1 + u, plus the rounding of w to first order. */
static inline AICC_UNUSED AICC_INLINE float aicc_log1pf_c(float u)
{{
    const float w = 1.0f + u;
    return {lg}(w) + (u - (w - 1.0f)) / w;
}}""")
    return "aicc_log1pf_c"


_FN = {"exp": _exp, "tanh": _tanh, "erf": _erf, "log": _log}


def act_form(ctx, name: str, params: dict, x: str) -> str | None:
    """The portable form of activation ``name`` of the float32 variable x where it differs
    from activations.ACT's, on nodes without a SIMD ISA (else None): LeakyRelu and Selu as bit
    selects of their two arms (GCC keeps the branch of their ?:; LeakyRelu 1x64x56x56 at -O2:
    848 us), Selu's exp the portable one."""
    if name not in ("LeakyRelu", "Selu", "Softplus", "Mish") or simd_isa(ctx) is not None:
        return None
    if name in ("Softplus", "Mish"):  # max(x, 0) + log1p(exp(-|x|)): ACT's two arms' values
        sp = (f"(0.0f > {x} ? 0.0f : {x}) + {_log1p(ctx)}({portable(ctx, 'exp')}"
              f"(-fabsf({x})))")
        return f"({sp})" if name == "Softplus" else f"({x} * {portable(ctx, 'tanh')}({sp}))"
    if name == "Selu":        # activations.ACT's arms in its order, both computed
        g, a = _L(params["gamma"]), _L(params["alpha"])
        return (f"{sel(ctx)}({x} <= 0.0f, {g} * ({a} * {portable(ctx, 'exp')}({x}) - {a}), "
                f"{g} * {x})")
    return f"{sel(ctx)}({x} < 0.0f, {_L(params['alpha'])} * {x}, {x})"


def portable(ctx, f: str) -> str:
    """Name of the portable float32 function f (exp, tanh, erf or log), registered in ctx."""
    return _FN[f](ctx)


def override(ctx, m):
    """``m`` (activations.math_fn's float32 name mapping) with exp, tanh and erf routed to the
    portable functions above."""
    return lambda f: _FN[f](ctx) if f in _FN else m(f)
