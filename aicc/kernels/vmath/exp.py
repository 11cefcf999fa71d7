"""Float32 exp and tanh on the x86 SIMD targets, and the activations built on them (Exp,
Sigmoid, Tanh and Gelu(tanh) with vector loops; Erf and Gelu(none) with kernels/vmath/erf.py's erf;
Log, Softplus and Mish with kernels/vmath/log.py's log / log1p; Elu, Celu and Selu with kernels/vmath/expm1.py's
expm1 and this exp; Sin, Cos, Atan, Asin and Acos with kernels/vmath/trig.py's functions).
Also the vector forms of HardSigmoid and HardSwish (min / max), whose scalar clamps GCC does
not vectorize when a multiplication follows them (1x64x56x56 HardSwish, avx2: 104 -> 22 us).

On a SIMD target every float32 use of these activations computes exp and tanh with the vector
functions below, also where a single value is needed (a loop tail, a fused epilogue's scalar
pass): the scalar form broadcasts the value, runs the vector function and takes lane 0. So the
standalone op, its vector body and tail, and every fused form give the same bits for the same
input. activations.act_expr(..., ctx) routes ``exp`` / ``tanh`` / ``erf`` (kernels/vmath/erf.py)
here; ``array_act`` is the in-place vector pass over contiguous values that the fused
epilogues use.

exp(x): Cody-Waite reduction x = n ln2 + r (|r| <= ln2 / 2), Cephes' expf polynomial for e^r
(about 1 ulp), scaled by 2^n with one rounding (AVX-512: scalef; AVX2: by 2^(n - n/2), exact,
then by 2^(n/2)), so both ISAs give the same bits, subnormal results round correctly and
results past FLT_MAX overflow to +Inf; x is clamped to [-104, 89]
first (exp(-104) rounds to 0, exp(89) overflows). +Inf -> +Inf, -Inf -> 0, NaN -> NaN.

tanh(x): on |x|, then the sign of x: |x| < 0.625: Cephes' tanhf odd polynomial |x| + |x|^3
P(x^2); else 1 - 2 / (exp(2|x|) + 1) (exp overflow gives 1). Relative error about 2e-7;
+-Inf -> +-1, -0 -> -0, NaN -> NaN. Sigmoid is 1 / (1 + exp(-x)) with these exp values
(x < -88.7: 0; NaN: NaN); Gelu(tanh) is x / (1 + exp(-2u)), u = sqrt(2 / pi) (x + 0.044715 x^3),
the same function as 0.5 x (1 + tanh(u)) without its cancellation for x < 0 (+Inf -> +Inf,
-Inf -> NaN as -Inf * 0 in the tanh form, NaN -> NaN).

Nodes without a SIMD ISA (the generic target) use kernels/vmath/portable.py's portable exp / tanh / erf: results
differ between targets by rounding (a few ulp), never by more than the tests' tolerance
against onnxruntime.
"""
from __future__ import annotations

from ..isa.x86 import INT, INT_BITS, SIMD, include_vmath, vconst, vpoly
from .coeffs import EXP_C, TANH_P

FUNCS = ("exp", "tanh", "erf")          # the libm names act_expr routes here (erf: erf_simd)
LN_FLT_MIN = -87.33654                  # float32 just above ln(FLT_MIN): its exp is normal
# vexp's variants by name suffix: the low end of the clamp of x, then the helper comment's
# range and what results below the normal range become
VARIANTS = {
    "": (-104.0, "[-104, 89]", "subnormal results round correctly, past FLT_MAX gives +Inf"),
    "z": (LN_FLT_MIN, "[ln FLT_MIN, 0] (x <= 0)", "results below FLT_MIN are +0"),
    "p": (-87.0, "[-87, 89]", "results below 2^-125 are +0 or under 2^-125, for 1 + exp(x)"),
}


def vexp(ctx, isa: str, flush: bool = False, plus1: bool = False) -> str:
    """Name of the vector exp ``V aicc_exp_ISA(V x)`` (registered once). flush: a variant for
    x <= 0 or NaN (the softmax rows' x - max), aicc_expz_ISA: no clamp at 89 (it leaves such x
    unchanged), and results below FLT_MIN (x < ln FLT_MIN) are +0 instead of subnormal, no
    subnormal computed: x is clamped there, then 0 selected (on x86 a multiplication with a
    subnormal result takes a slow path: Softmax of 4 x 128 x 128 causally masked rows,
    x86-avx2, 66 -> 41 us); 2^n, n in [-126, 0], is then one normal power of two, so p is
    scaled once (12 x 197 x 197 rows: 0.28 -> 0.24 ms). The same bits as the plain exp
    wherever its result is 0 or normal.

    plus1: a variant for an exp whose result is only added to 1 (Sigmoid, Swish, Tanh's
    1 - 2 / (exp(2|x|) + 1), Gelu(tanh)), aicc_expp_ISA, without the AVX2 plain exp's two
    scalings: x is clamped to [-87, 89] and p * 2^n computed as (2p) * 2^(n - 1), 2p exact and
    2^(n - 1) normal up to n = 128, so one rounding: the plain exp's bits wherever the result
    is at least 2^-125, past FLT_MAX included (+Inf); below, +0 or a value under 2^-125
    instead of the subnormal, which 1 + e rounds away as it does any e below 2^-24 (Swish
    1 x 32 x 56 x 56, x86-avx2: 0.054 -> 0.046 ms). ISAs with scalef: the plain exp."""
    if plus1 and INT[isa]["scalef"]:
        return vexp(ctx, isa)
    kind = "z" if flush else "p" if plus1 else ""
    low, rng, sub = VARIANTS[kind]
    d, i = SIMD[isa], INT[isa]
    v, fma, fnma, mul = d["v"], d["fma"], d["fnma"], d["mul"]
    c = {k: vconst(d, val) for k, val in EXP_C}
    name = f"aicc_exp{kind}_{isa}"
    lo = f"{d.get('kmax', d['max'])}({vconst(d, low)}, x)"
    clamp = lo if flush else f"{d.get('kmin', d['min'])}({vconst(d, 89.0)}, {lo})"
    include_vmath(ctx, isa)

    def pow2(e, bias: int = 127):
        """2^(e + bias - 127) as a float from the integer vector e (biased exponent field)."""
        b = i["c127"] if bias == 127 else f"{INT_BITS[isa]['set1']}({bias})"
        return f"{i['cast']}({i['slli']}({i['add']}({e}, {b}), 23))"
    ret = "return " if not flush else f"const {v} e = "
    if i["scalef"]:           # one instruction, the same single rounding of p * 2^n
        scale = f"{ret}{i['scalef'].format(p='p', n='n')};"
        how = "times 2^n by scalef (one rounding"
    elif flush:               # 2^n normal: one exact scaling
        scale = f"{ret}{mul}(p, {pow2(i['cvt'] + '(n)')});"
        how = "times 2^n (a normal power of two: exact"
    elif plus1:               # (2p) 2^(n - 1): 2^(n - 1) normal for n in [-125, 128]
        scale = f"{ret}{mul}({d['add']}(p, p), {pow2(i['cvt'] + '(n)', 126)});"
        how = "times 2^n as 2p times 2^(n - 1) (one rounding"
    else:
        scale = (f"const {i['vi']} ni = {i['cvt']}(n), n1 = {i['srai']}(ni, 1), "
                 f"n2 = {i['sub']}(ni, n1);\n"
                 f"    {ret}{mul}({mul}(p, {pow2('n2')}), {pow2('n1')});")
        how = "times 2^(n - n/2) and 2^(n/2) (the first exact"
    if flush:
        zero = d["sel"].format(a="e", b=d["zero"], x="x", y=vconst(d, LN_FLT_MIN),
                               p="_CMP_LT_OQ")
        scale += f"\n    return {zero};   /* below FLT_MIN: +0 (NaN stays) */"
    ctx.helper(f"0.{isa}.1.{name}", f"""\
/* exp of {d['L']} floats (kernels/vmath/exp.py): clamp to {rng}, x = n ln2 + r, Cephes' expf
 * polynomial for e^r, {how}: {sub}).
 * NaN stays NaN. */
static {v} {name}({v} x)
{{
    const {v} xc = {clamp};   /* NaN stays */
    const {v} n = {d['rnd'].format(x=f"{mul}(xc, {c['l2e']})")};
    const {v} r = {fnma}(n, {c['c2']}, {fnma}(n, {c['c1']}, xc));
    {v} p = {fma}({c['p0']}, r, {c['p1']});
    p = {fma}(p, r, {c['p2']});
    p = {fma}(p, r, {c['p3']});
    p = {fma}(p, r, {c['p4']});
    p = {fma}(p, r, {c['p5']});
    p = {fma}(p, {mul}(r, r), {d['add']}(r, {vconst(d, 1.0)}));
    {scale}
}}""")
    return name


def vtanh(ctx, isa: str) -> str:
    """Name of the vector tanh ``V aicc_tanh_ISA(V x)``."""
    d, i = SIMD[isa], INT[isa]
    v, fma, mul = d["v"], d["fma"], d["mul"]
    e = vexp(ctx, isa, plus1=True)
    name = f"aicc_tanh_{isa}"
    one, sign = vconst(d, 1.0), vconst(d, -0.0)
    p = vpoly(d, "z", TANH_P[::-1])
    def bit(op, a, b):
        return i["bit"].format(op=op, a=a, b=b)
    two = vconst(d, 2.0)
    big = f"{d['sub']}({one}, {d['div']}({two}, {d['add']}({e}({d['add']}(ax, ax)), {one})))"
    ctx.helper(f"0.{isa}.2.{name}", f"""\
/* tanh of {d['L']} floats (kernels/vmath/exp.py), on |x| with the sign of x put back: |x| < 0.625:
 * |x| + |x|^3 P(x^2) (Cephes' tanhf), else 1 - 2 / (exp(2|x|) + 1). NaN takes the polynomial
 * (NaN); -0 gives -0. */
static {v} {name}({v} x)
{{
    const {v} ax = {bit('andnot', sign, 'x')};
    const {v} z = {mul}(x, x);
    const {v} small = {fma}({mul}({p}, z), ax, ax);
    const {v} big = {big};
    const {v} t = {d['sel'].format(a='small', b='big', x='ax', y=vconst(d, 0.625), p='_CMP_GE_OQ')};
    return {bit('or', 't', bit('and', sign, 'x'))};
}}""")
    return name


