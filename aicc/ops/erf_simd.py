"""Float32 Erf and exact Gelu loops on the x86 SIMD targets: the piecewise polynomials of
activations._erf evaluated on whole vectors (every piece computed, then selected by compares
and blends), so the loop needs no branches. GCC does not vectorize the scalar form on AVX2
(the selects of trapping arithmetic stay branches under the default -ftrapping-math).

Bit-for-bit the scalar expression: the same operations in the same order, multiplies and adds
kept separate (no FMA: the ISO C scalar code is not contracted either), so the vector body, the
scalar tail and the generic target agree exactly. NaN takes the small piece (x * P = NaN),
+-Inf give +-1, -0 gives -0, as the scalar form.
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import c_literal
from .activations import ERF_BIG, ERF_MID, ERF_SMALL, act_expr
from .simd import SIMD, include, simd_isa

# blend(a, b, m): b where the compare mask m holds, else a; cmp(x, c, pred) the mask
_SEL = {
    "avx2": dict(mask="__m256", cmp="_mm256_cmp_ps({x}, {y}, {p})",
                 blend="_mm256_blendv_ps({a}, {b}, {m})", bit="_mm256_{op}_ps({a}, {b})",
                 any_big="_mm256_movemask_ps(_mm256_andnot_ps(lt2, lt4)) != 0"),
    "avx512": dict(mask="__mmask16", cmp="_mm512_cmp_ps_mask({x}, {y}, {p})",
                   blend="_mm512_mask_blend_ps({m}, {a}, {b})",     # float and/or: AVX512DQ
                   bit="_mm512_castsi512_ps(_mm512_{op}_si512(_mm512_castps_si512({a}), "
                       "_mm512_castps_si512({b})))",
                   any_big="(lt4 & (__mmask16)~lt2) != 0"),
}


def supports(node, ctx, params: dict) -> str | None:
    """The ISA for a float32 Erf / Gelu (approximate none) node, or None."""
    if node.op_type not in ("Erf", "Gelu") or ctx.in_dtype(0) != np.float32:
        return None
    if node.op_type == "Gelu" and params.get("approximate", "none") != "none":
        return None
    return simd_isa(ctx)


def _horner(d, u: str, coefs) -> str:
    e = f"{d['set1']}({c_literal(coefs[-1], np.float32)})"
    for c in coefs[-2::-1]:
        e = f"{d['add']}({d['set1']}({c_literal(c, np.float32)}), {d['mul']}({u}, {e}))"
    return e


def erf_helper(ctx, isa: str) -> str:
    d, s = SIMD[isa], _SEL[isa]
    v = d["v"]
    name = f"aicc_erf_{isa}"
    include(ctx, isa)
    one, sign = f"{d['set1']}(1.0f)", f"{d['set1']}(-0.0f)"

    def cmp(x, c, p):
        return s["cmp"].format(x=x, y=f"{d['set1']}({c})", p=p)

    def bit(op, a, b):
        return s["bit"].format(op=op, a=a, b=b)

    ctx.helper(f"gemm_simd.7.erf.{name}", f"""\
/* erf of {d['L']} floats: activations._erf's pieces on vectors (bit-identical to the scalar;
 * the [2.25, 4) piece only when a lane needs it). */
static {v} {name}({v} x)
{{
    const {v} t = {bit('andnot', sign, 'x')};
    const {v} u = {d['mul']}(x, x);
    const {v} sm = {d['mul']}(x, {_horner(d, 'u', ERF_SMALL)});
    const {v} um = {d['sub']}(t, {d['set1']}(1.5625f));
    const {v} mid = {d['sub']}({one}, {_horner(d, 'um', ERF_MID)});
    const {s['mask']} lt4 = {cmp('t', '4.0f', '_CMP_LT_OQ')};
    const {s['mask']} lt2 = {cmp('t', '2.25f', '_CMP_LT_OQ')};
    const {s['mask']} small = {cmp('t', '0.875f', '_CMP_NGE_UQ')};
    {v} h = {one};
    if ({s['any_big']}) {{   /* a lane in [2.25, 4): the third piece (rare for activations) */
        const {v} ub = {d['sub']}(t, {d['set1']}(3.125f));
        const {v} big = {d['sub']}({one}, {_horner(d, 'ub', ERF_BIG)});
        h = {s['blend'].format(a=one, b='big', m='lt4')};
    }}
    h = {s['blend'].format(a='h', b='mid', m='lt2')};
    h = {bit('or', bit('andnot', sign, 'h'), bit('and', sign, 'x'))};
    return {s['blend'].format(a='h', b='sm', m='small')};
}}""")
    return name


def emit(ctx, node, isa: str, params: dict, n: int) -> None:
    """out[i] = Erf / Gelu(in[i]) for i < n: vectors, then the scalar expression for the tail."""
    d = SIMD[isa]
    L = d["L"]
    ctx.kernel = isa
    full = n - n % L
    erf = erf_helper(ctx, isa) if full else ""
    x = f"{d['ld']}({ctx.inp[0]} + i)"
    if node.op_type == "Erf":
        val = f"{erf}({x})"
    else:      # scalar: (0.5f * x) * (1.0f + erf(x * 0.70710678f))
        val = (f"{d['mul']}({d['mul']}({d['set1']}(0.5f), xv), {d['add']}({d['set1']}(1.0f), "
               f"{erf}({d['mul']}(xv, {d['set1']}({c_literal(0.7071067811865476, np.float32)})))))")
    if full:
        with ctx.block(f"for (size_t i = 0; i < {full}u; i += {L}u)"):
            if node.op_type != "Erf":
                ctx(f"const {d['v']} xv = {x};")
            ctx(f"{d['st']}({ctx.out[0]} + i, {val});")
    if full < n:        # the tail: the scalar expression (no loop left empty for GCC to flag)
        with ctx.block(f"for (size_t i = {full}u; i < {n}u; ++i)"):
            ctx(f"const float x = {ctx.inp[0]}[i];")
            ctx(f"{ctx.out[0]}[i] = {act_expr(node.op_type, params, 'x', np.float32)};")
