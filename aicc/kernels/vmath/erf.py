"""Float32 erf on the x86 SIMD targets: the piecewise polynomials of activations._erf
evaluated on whole vectors with FMA Horner steps (every piece computed, then selected by
compares and blends), so the loop needs no branches. GCC does not vectorize the scalar form on
AVX2 (the selects of trapping arithmetic stay branches under the default -ftrapping-math).

On a SIMD target every float32 use of erf (Erf, Gelu with approximate none, and their fused
epilogues) goes through this vector function, also where a single value is needed: the scalar
form broadcasts the value and takes lane 0 (exp_simd.math_override routes ``erf`` here), so a
loop's vector body, its tail and every fused form give the same bits. The generic target keeps
activations._erf's scalar expression (separate multiplies and adds): the targets differ by the
FMA roundings (a few 1e-8 absolute), far inside the tests' tolerance.

On NEON (vmath ``erf``: "tbl") the same pieces and steps run as one chain per lane with
TBL-picked coefficients (erf_tbl.py), giving the same bits with fewer instructions.

NaN takes the small piece (x * P = NaN), +-Inf give +-1, -0 gives -0, as the scalar form.
"""
from __future__ import annotations

import numpy as np

from ...emit_c.cwriter import c_literal
from ..isa.registry import ISAS
from ..isa.x86 import SIMD, include_vmath, vpoly
from .coeffs import ERF_BIG, ERF_MID, ERF_SMALL, GELU_K
from .erf_tbl import erf_tbl_text

def verf(ctx, isa: str) -> str:
    """Name of the vector erf ``V aicc_erf_ISA(V x)`` (registered once)."""
    d, s = SIMD[isa], ISAS[isa].vmath     # s: compare masks, blend (isa/<name>/vmath.py)
    v = d["v"]
    name = f"aicc_erf_{isa}"
    include_vmath(ctx, isa)
    one, sign = f"{d['set1']}(1.0f)", f"{d['set1']}(-0.0f)"

    def cmp(x, c, p):
        return s["cmp"].format(x=x, y=f"{d['set1']}({c})", p=p)

    def bit(op, a, b):
        return ISAS[isa].integer["bit"].format(op=op, a=a, b=b)

    if s.get("erf") == "tbl":          # one Horner chain per lane (erf_tbl.py)
        ctx.helper(f"0.{isa}.2.{name}", erf_tbl_text(name))
        return name
    any_big = s["any"].format(m=s["mask_andnot"].format(a="lt2", b="lt4"))   # t in [2.25, 4)
    ctx.helper(f"0.{isa}.2.{name}", f"""\
/* erf of {d['L']} floats: activations._erf's pieces with FMA Horner steps (the [2.25, 4) piece
 * only when a lane needs it) */
static AICC_UNUSED {v} {name}({v} x)
{{
    const {v} t = {bit('andnot', sign, 'x')};
    const {v} u = {d['mul']}(x, x);
    const {v} sm = {d['mul']}(x, {vpoly(d, 'u', ERF_SMALL)});
    const {v} um = {d['sub']}(t, {d['set1']}(1.5625f));
    const {v} mid = {d['sub']}({one}, {vpoly(d, 'um', ERF_MID)});
    const {s['mask']} lt4 = {cmp('t', '4.0f', '_CMP_LT_OQ')};
    const {s['mask']} lt2 = {cmp('t', '2.25f', '_CMP_LT_OQ')};
    const {s['mask']} small = {cmp('t', '0.875f', '_CMP_NGE_UQ')};
    {v} h = {one};
    if ({any_big} != 0) {{   /* a lane in [2.25, 4): the third piece (rare for activations) */
        const {v} ub = {d['sub']}(t, {d['set1']}(3.125f));
        const {v} big = {d['sub']}({one}, {vpoly(d, 'ub', ERF_BIG)});
        h = {s['blend'].format(a=one, b='big', m='lt4')};
    }}
    h = {s['blend'].format(a='h', b='mid', m='lt2')};
    h = {bit('or', bit('andnot', sign, 'h'), bit('and', sign, 'x'))};
    return {s['blend'].format(a='h', b='sm', m='small')};
}}""")
    return name


def vector_expr(ctx, isa: str, act: str, xv: str) -> str:
    """Erf, or Gelu (approximate none) as activations._gelu's C order
    (0.5 * x) * (1 + erf(x * k)), of the vector variable ``xv``."""
    d = SIMD[isa]
    erf = verf(ctx, isa)
    if act == "Erf":
        return f"{erf}({xv})"
    k = f"{d['set1']}({c_literal(GELU_K, np.float32)})"
    return (f"{d['mul']}({d['mul']}({d['set1']}(0.5f), {xv}), "
            f"{d['add']}({d['set1']}(1.0f), {erf}({d['mul']}({xv}, {k}))))")
