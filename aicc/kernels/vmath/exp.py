"""Float32 exp and tanh on the x86 SIMD targets, and the activations built on them (Exp,
Sigmoid, Tanh and Gelu(tanh) with vector loops; Erf and Gelu(none) with erf_simd.py's erf;
Log, Softplus and Mish with log_simd.py's log / log1p; Elu, Celu and Selu with expm1_simd.py's
expm1 and this exp; Sin, Cos, Atan, Asin and Acos with trig_simd.py's functions).
Also the vector forms of HardSigmoid and HardSwish (min / max), whose scalar clamps GCC does
not vectorize when a multiplication follows them (1x64x56x56 HardSwish, avx2: 104 -> 22 us).

On a SIMD target every float32 use of these activations computes exp and tanh with the vector
functions below, also where a single value is needed (a loop tail, a fused epilogue's scalar
pass): the scalar form broadcasts the value, runs the vector function and takes lane 0. So the
standalone op, its vector body and tail, and every fused form give the same bits for the same
input. activations.act_expr(..., ctx) routes ``exp`` / ``tanh`` / ``erf`` (erf_simd.py)
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
(x < -88.7: 0; NaN: NaN).

Nodes without a SIMD ISA (the generic target) use math_c.py's portable exp / tanh / erf: results
differ between targets by rounding (a few ulp), never by more than the tests' tolerance
against onnxruntime.
"""
from __future__ import annotations

import hashlib

import numpy as np

from ..isa.x86 import SIMD, simd_isa, vconst, vpoly

VECTOR = {"Exp", "Sigmoid", "Tanh"}      # standalone ops with a vector loop here
FUNCS = ("exp", "tanh", "erf")          # the libm names act_expr routes here (erf: erf_simd)

# per ISA: integer vector type and ops, abs/sign masks, compare-select, lane 0
_I = {
    "avx2": dict(vi="__m256i", cvt="_mm256_cvtps_epi32", srai="_mm256_srai_epi32",
                 sub="_mm256_sub_epi32", add="_mm256_add_epi32", slli="_mm256_slli_epi32",
                 c127="_mm256_set1_epi32(127)", cast="_mm256_castsi256_ps",
                 min="_mm256_min_ps", bit="_mm256_{op}_ps({a}, {b})",
                 lane0="_mm256_cvtss_f32", scalef=None),
    "avx512": dict(vi="__m512i", cvt="_mm512_cvtps_epi32", srai="_mm512_srai_epi32",
                   sub="_mm512_sub_epi32", add="_mm512_add_epi32", slli="_mm512_slli_epi32",
                   c127="_mm512_set1_epi32(127)", cast="_mm512_castsi512_ps",
                   min="_mm512_min_ps",      # float and/or/xor are AVX512DQ: integer ones
                   bit="_mm512_castsi512_ps(_mm512_{op}_si512(_mm512_castps_si512({a}), "
                       "_mm512_castps_si512({b})))",
                   lane0="_mm512_cvtss_f32",
                   scalef="_mm512_scalef_ps({p}, {n})"),   # p * 2^n, rounded once
}
_EXP_C = (("l2e", 1.44269504088896341), ("c1", 0.693359375), ("c2", -2.12194440e-4),
          ("p0", 1.9875691500e-4), ("p1", 1.3981999507e-3), ("p2", 8.3334519073e-3),
          ("p3", 4.1665795894e-2), ("p4", 1.6666665459e-1), ("p5", 5.0000001201e-1))
_TANH_P = (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1,
           -3.33332819422e-1)



def _include(ctx, isa):
    ctx.helper(f"0.{isa}.0.include", "#include <immintrin.h>")


def vexp(ctx, isa: str) -> str:
    """Name of the vector exp ``V aicc_exp_ISA(V x)`` (registered once)."""
    d, i = SIMD[isa], _I[isa]
    v, fma, fnma, mul = d["v"], d["fma"], d["fnma"], d["mul"]
    c = {k: vconst(d, val) for k, val in _EXP_C}
    c89 = vconst(d, 89.0)
    name = f"aicc_exp_{isa}"
    _include(ctx, isa)

    def pow2(e):
        return f"{i['cast']}({i['slli']}({i['add']}({e}, {i['c127']}), 23))"
    if i["scalef"]:           # one instruction, the same single rounding of p * 2^n
        scale = f"return {i['scalef'].format(p='p', n='n')};"
        how = "times 2^n by scalef (one rounding"
    else:
        scale = (f"const {i['vi']} ni = {i['cvt']}(n), n1 = {i['srai']}(ni, 1), "
                 f"n2 = {i['sub']}(ni, n1);\n"
                 f"    return {mul}({mul}(p, {pow2('n2')}), {pow2('n1')});")
        how = "times 2^(n - n/2) and 2^(n/2) (the first exact"
    ctx.helper(f"0.{isa}.1.{name}", f"""\
/* exp of {d['L']} floats (exp_simd.py): clamp to [-104, 89], x = n ln2 + r, Cephes' expf
 * polynomial for e^r, {how}: subnormal results round correctly, past
 * FLT_MAX gives +Inf). NaN stays NaN. */
static {v} {name}({v} x)
{{
    const {v} xc = {i['min']}({c89}, {d['max']}({vconst(d, -104.0)}, x));   /* NaN stays */
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
    d, i = SIMD[isa], _I[isa]
    v, fma, mul = d["v"], d["fma"], d["mul"]
    e = vexp(ctx, isa)
    name = f"aicc_tanh_{isa}"
    one, sign = vconst(d, 1.0), vconst(d, -0.0)
    p = vpoly(d, "z", _TANH_P[::-1])
    def bit(op, a, b):
        return i["bit"].format(op=op, a=a, b=b)
    two = vconst(d, 2.0)
    big = f"{d['sub']}({one}, {d['div']}({two}, {d['add']}({e}({d['add']}(ax, ax)), {one})))"
    ctx.helper(f"0.{isa}.2.{name}", f"""\
/* tanh of {d['L']} floats (exp_simd.py), on |x| with the sign of x put back: |x| < 0.625:
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


def scalar(ctx, isa: str, fn: str) -> str:
    """Name of ``float aicc_exp1_ISA(float x)`` / tanh / erf: the vector function on lane 0."""
    if fn == "erf":
        from .erf import verf
        return lane0(ctx, isa, fn, verf(ctx, isa))
    return lane0(ctx, isa, fn, vexp(ctx, isa) if fn == "exp" else vtanh(ctx, isa))


def lane0(ctx, isa: str, fn: str, vf: str) -> str:
    """Name of ``float aicc_FN1_ISA(float x)``: the vector function ``vf`` on lane 0."""
    d = SIMD[isa]
    name = f"aicc_{fn}1_{isa}"
    ctx.helper(f"0.{isa}.3.{name}", f"""\
/* {fn}(x) through {vf} (the same bits as the vector loops) */
static AICC_UNUSED float {name}(float x)
{{
    return {_I[isa]['lane0']}({vf}({d['set1']}(x)));
}}""")
    return name


def math_override(ctx, m, portable: bool = True):
    """``m`` (activations.math_fn's float32 name mapping) with exp, tanh, erf, log, log1p,
    expm1, sin, cos, atan, asin and acos routed to the lane-0 forms of the vector functions
    when ctx's node runs on a SIMD ISA; else (``portable``) with exp, tanh and erf routed to
    math_c.py's portable forms, or ``m`` itself."""
    from . import expm1 as expm1_simd
    from . import log as log_simd
    from . import portable as math_c
    from . import trig as trig_simd
    isa = simd_isa(ctx)
    if isa is None:
        return math_c.override(ctx, m) if portable else m

    def routed(f):
        for mod in (expm1_simd, log_simd, trig_simd):
            if f in mod.FUNCS:
                return mod.scalar(ctx, isa, f)
        return scalar(ctx, isa, f) if f in FUNCS else m(f)
    return routed


def tag_of(expr: str) -> str:
    """Suffix for a helper name whose C text is ``expr``: the ISA when the expression uses the
    lane-0 forms (the same activation emits different text per ISA)."""
    from .expm1 import FUNCS as EXPM1_FUNCS
    from .log import FUNCS as LOG_FUNCS
    from .trig import FUNCS as TRIG_FUNCS
    for isa in _I:
        if any(f"aicc_{f}1_{isa}(" in expr
               for f in FUNCS + LOG_FUNCS + EXPM1_FUNCS + TRIG_FUNCS):
            return f"_{isa}"
    return ""


HARD = {"HardSigmoid", "HardSwish"}     # clamps: vector min / max (GCC keeps their branches)
# min / max (GCC's k-mask code), sqrt (errno checks), a select (GCC 12 keeps LeakyRelu's
# branch on avx2: 1x64x56x56 868 us against onnxruntime's 101; avx512 52)
PLAIN = {"Clip", "Sqrt", "LeakyRelu"}


def vectorizes(act: str, params: dict) -> bool:
    """Whether vector_expr has a form of this activation: Exp, Sigmoid, Tanh, Erf, Gelu,
    HardSigmoid, HardSwish, Clip (constant bounds), Sqrt, LeakyRelu, log_simd's,
    expm1_simd's and trig_simd's."""
    from .expm1 import VECTOR as EXPM1S
    from .log import VECTOR as LOGS
    from .trig import VECTOR as TRIGS
    return act in VECTOR | HARD | PLAIN | LOGS | EXPM1S | TRIGS | {"Erf", "Gelu"}


def _clamp01(d, isa, t):
    """min(1, max(0, t)) with the constant first: a NaN t is returned (max / min give their
    second operand when unordered), -0 stays -0: activations._clamp01's values."""
    return f"{_I[isa]['min']}({vconst(d, 1.0)}, {d['max']}({vconst(d, 0.0)}, {t}))"


def vector_expr(ctx, isa: str, act: str, xv: str, params: dict | None = None) -> str:
    """The vector form of Exp / Sigmoid / Tanh / Erf / Gelu / HardSigmoid / HardSwish of the
    vector variable ``xv``, bit-identical to its scalar expression under math_override (the
    same operations in the same order: ISO C does not contract the scalar form into FMAs
    either)."""
    from . import erf as erf_simd
    from . import expm1 as expm1_simd
    from . import log as log_simd
    from . import trig as trig_simd
    d = SIMD[isa]
    _include(ctx, isa)
    if act in expm1_simd.VECTOR:
        return expm1_simd.vector_expr(ctx, isa, act, xv, params, vexp)
    if act in trig_simd.VECTOR:
        return trig_simd.vector_expr(ctx, isa, act, xv)
    if act == "Erf" or (act == "Gelu" and (params or {}).get("approximate", "none") != "tanh"):
        return erf_simd.vector_expr(ctx, isa, act, xv)
    if act in log_simd.VECTOR:
        return log_simd.vector_expr(ctx, isa, act, xv, vexp, vtanh)
    if act == "Sqrt":         # IEEE square root: sqrtf's value (NaN below 0, -0 stays)
        return f"{d['sqrt']}({xv})"
    if act == "Clip":         # activations._clip's selects: max(lo, x) then min(hi, .)
        p, e = params or {}, xv
        if p.get("min") is not None:
            e = f"{d['max']}({vconst(d, p['min'])}, {e})"
        if p.get("max") is not None:
            e = f"{_I[isa]['min']}({vconst(d, p['max'])}, {e})"
        return e
    if act == "LeakyRelu":    # x < 0 ? alpha * x : x (NaN: x)
        ax = f"{d['mul']}({vconst(d, (params or {}).get('alpha', 0.01))}, {xv})"
        return d["sel"].format(a=xv, b=ax, x=xv, y=vconst(d, 0.0), p="_CMP_LT_OQ")
    if act in HARD:           # clamp(alpha * x + beta), times x for HardSwish (C's order)
        p = params or {}
        a, b = (1 / 6, 0.5) if act == "HardSwish" else (p.get("alpha", 0.2), p.get("beta", 0.5))
        t = _clamp01(d, isa, f"{d['add']}({d['mul']}({vconst(d, a)}, {xv}), {vconst(d, b)})")
        return f"{d['mul']}({xv}, {t})" if act == "HardSwish" else t
    if act == "Exp":
        return f"{vexp(ctx, isa)}({xv})"
    if act == "Tanh":
        return f"{vtanh(ctx, isa)}({xv})"
    if act == "Gelu":         # 0.5 * x * (1 + tanh(c * (x + k * x * x * x))), C's order
        mul, add = d["mul"], d["add"]
        cube = f"{mul}({mul}({mul}({vconst(d, 0.044715)}, {xv}), {xv}), {xv})"
        inner = f"{mul}({vconst(d, 0.7978845608028654)}, {add}({xv}, {cube}))"
        return (f"{mul}({mul}({vconst(d, 0.5)}, {xv}), "
                f"{add}({vconst(d, 1.0)}, {vtanh(ctx, isa)}({inner})))")
    one = vconst(d, 1.0)          # 1 / (1 + exp(-x)); -x flips the sign bit, as C's negation
    neg = _I[isa]["bit"].format(op="xor", a=xv, b=vconst(d, -0.0))
    return f"{d['div']}({one}, {d['add']}({one}, {vexp(ctx, isa)}({neg})))"


def swish_vector(ctx, isa: str, xv: str, alpha: float) -> str:
    """x * (1 / (1 + exp(-(alpha * x)))) of the vector variable ``xv``, in swish.swish_expr's
    order (alpha == 1: no multiplication)."""
    d = SIMD[isa]
    ax = xv if alpha == 1.0 else f"{d['mul']}({vconst(d, alpha)}, {xv})"
    return f"{d['mul']}({xv}, {vector_expr(ctx, isa, 'Sigmoid', ax)})"


def supports(node, ctx, params: dict) -> str | None:
    """The ISA for a float32 standalone op that vector_expr has (vectorizes), or None."""
    if not vectorizes(node.op_type, params) or ctx.in_dtype(0) != np.float32:
        return None
    return simd_isa(ctx)


def emit(ctx, node, isa: str, n: int, params: dict) -> None:
    """out[i] = act(in[i]) for i < n: vectors, then the lane-0 form for the tail."""
    from .act import act_expr
    d = SIMD[isa]
    L = d["L"]
    ctx.kernel = isa
    full = n - n % L
    if full:
        with ctx.block(f"for (size_t i = 0; i < {full}u; i += {L}u)"):
            ctx(f"const {d['v']} xv = {d['ld']}({ctx.inp[0]} + i);")
            ctx(f"{d['st']}({ctx.out[0]} + i, "
                f"{vector_expr(ctx, isa, node.op_type, 'xv', params)});")
    if full < n:
        with ctx.block(f"for (size_t i = {full}u; i < {n}u; ++i)"):
            ctx(f"const float x = {ctx.inp[0]}[i];")
            ctx(f"{ctx.out[0]}[i] = {act_expr(node.op_type, params, 'x', np.float32, ctx)};")


def array_act(ctx, act: str, params: dict):
    """Name of ``void f(float *v, size_t n)``, act applied in place on n contiguous floats with
    vectors (vectorizes' activations on a SIMD ISA), or None (the caller's scalar
    loop)."""
    from .act import act_expr
    isa = simd_isa(ctx)
    if isa is None or not vectorizes(act, params):
        return None
    d = SIMD[isa]
    name = f"aicc_act_{act.lower()}_{isa}"
    if params:                # one helper per parameter set (HardSigmoid's alpha, Clip's bounds)
        name += "_" + hashlib.sha1(repr(sorted(params.items())).encode()).hexdigest()[:8]
    body = vector_expr(ctx, isa, act, "xv", params)
    ctx.helper(f"0.{isa}.4.{name}", f"""\
/* {act} in place on n contiguous floats ({isa} vectors, the tail through the lane-0 form) */
static AICC_UNUSED void {name}(float *v, size_t n)
{{
    const size_t nv = n - n % {d['L']}u;
    for (size_t i = 0; i < nv; i += {d['L']}u) {{
        const {d['v']} xv = {d['ld']}(v + i);
        {d['st']}(v + i, {body});
    }}
    for (size_t i = nv; i < n; ++i) {{
        const float x = v[i];
        v[i] = {act_expr(act, params, 'x', np.float32, ctx)};
    }}
}}""")
    return name
