"""Vector forms of the activations on the SIMD targets (x86-avx2, x86-avx512, arm-neon): the
standalone ops' vector loops (Exp, Sigmoid, Tanh, Erf, Gelu, HardSigmoid, HardSwish, Clip,
Sqrt, LeakyRelu and the log / expm1 / trig families; an ISA's vmath ``portable`` leaves some
to the portable loops), and ``array_act``, the in-place vector pass over contiguous
values that the fused epilogues use. The scalar tails use the lane-0 forms (mathlib.py), so
every element gets the same bits.
"""
from __future__ import annotations

import hashlib

import numpy as np

from . import erf as erf_simd
from . import expm1 as expm1_simd
from . import log as log_simd
from . import trig as trig_simd
from ..isa.registry import ISAS
from ..isa.x86 import INT, SIMD, include_vmath, simd_isa, vconst
from .act import act_expr
from .coeffs import GELU_TANH_C
from .exp import vexp, vtanh


VECTOR = {"Exp", "Sigmoid", "Tanh"}      # standalone ops with a vector loop here


HARD = {"HardSigmoid", "HardSwish"}     # clamps: vector min / max (GCC keeps their branches)


# min / max (GCC's k-mask code), sqrt (errno checks), a select (GCC 12 keeps LeakyRelu's
# branch on avx2: 1x64x56x56 868 us against onnxruntime's 101; avx512 52)
PLAIN = {"Clip", "Sqrt", "LeakyRelu"}


def vectorizes(act: str, params: dict) -> bool:
    """Whether vector_expr has a form of this activation: Exp, Sigmoid, Tanh, Erf, Gelu,
    HardSigmoid, HardSwish, Clip (constant bounds), Sqrt, LeakyRelu, log_simd's,
    expm1_simd's and trig_simd's."""
    return act in VECTOR | HARD | PLAIN | log_simd.VECTOR | expm1_simd.VECTOR | trig_simd.VECTOR | {"Erf", "Gelu", "Swish"}


def _takes(isa: str, act: str) -> bool:
    """Whether the vector forms take ``act`` on ``isa``: not the activations its vmath table
    leaves to the compiler (``portable``: their C loops vectorize as well there)."""
    return act not in ISAS[isa].vmath.get("portable", ())


def _clamp01(d, isa, t):
    """min(1, max(0, t)) with the constant first: a NaN t is returned (max / min give their
    second operand when unordered), -0 stays -0: activations._clamp01's values."""
    return f"{d['min']}({vconst(d, 1.0)}, {d['max']}({vconst(d, 0.0)}, {t}))"


def vector_expr(ctx, isa: str, act: str, xv: str, params: dict | None = None) -> str:
    """The vector form of Exp / Sigmoid / Tanh / Erf / Gelu / HardSigmoid / HardSwish of the
    vector variable ``xv``, bit-identical to its scalar expression under math_override (the
    same operations in the same order: ISO C does not contract the scalar form into FMAs
    either)."""
    d = SIMD[isa]
    include_vmath(ctx, isa)
    if act == "Swish":
        return swish_vector(ctx, isa, xv, float((params or {}).get("alpha", 1.0)))
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
            e = f"{d['min']}({vconst(d, p['max'])}, {e})"
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
    if act == "Gelu":         # x / (1 + exp(-2c * (x + k * x * x * x))), act._gelu's order
        mul, add = d["mul"], d["add"]
        cube = f"{mul}({mul}({mul}({vconst(d, 0.044715)}, {xv}), {xv}), {xv})"
        w = f"{mul}({vconst(d, -2 * GELU_TANH_C)}, {add}({xv}, {cube}))"
        return f"{d['div']}({xv}, {add}({vconst(d, 1.0)}, {vexp(ctx, isa, plus1=True)}({w})))"
    one = vconst(d, 1.0)          # 1 / (1 + exp(-x)); -x flips the sign bit, as C's negation
    neg = INT[isa]["bit"].format(op="xor", a=xv, b=vconst(d, -0.0))
    return f"{d['div']}({one}, {d['add']}({one}, {vexp(ctx, isa, plus1=True)}({neg})))"


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
    isa = simd_isa(ctx)
    return isa if isa is not None and _takes(isa, node.op_type) else None


def emit(ctx, node, isa: str, n: int, params: dict) -> None:
    """out[i] = act(in[i]) for i < n: vectors, then the lane-0 form for the tail."""
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
    isa = simd_isa(ctx)
    if isa is None or not vectorizes(act, params) or not _takes(isa, act):
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
