"""QuantizeLinear of float32 with one scale and zero point to uint8 / int8 / uint16 / int16 on
the x86 SIMD targets: ``y = saturate(rint(x / scale) + zp)`` on whole vectors (quantize.py's
scalar loop called rintf and added in double per element: 15x onnxruntime's time).

The same values as quantize.round_helper, element by element: the division in float32,
round to nearest even (the default rounding mode, as rint), the zero point added in float
(exact while |rint(x / scale)| < 2^24; beyond that both saturate, the ranges being within
+-65535), clamped to [lo, hi], NaN -> the zero point (clamped), +-Inf saturate. The n % L
tail goes through the scalar helper.
"""
from __future__ import annotations

import numpy as np

from ...emit_c.cwriter import ctype
from ..isa.x86 import SIMD, include

TYPES = {"uint8", "int8", "uint16", "int16"}

# per ISA and output type: the C statement storing the int32 vector ``v`` at ``p``
_STORE = {
    "avx512": {
        "uint8": "_mm_storeu_si128((__m128i *)({p}), _mm512_cvtepi32_epi8({v}))",
        "int8": "_mm_storeu_si128((__m128i *)({p}), _mm512_cvtepi32_epi8({v}))",
        "uint16": "_mm256_storeu_si256((__m256i *)({p}), _mm512_cvtepi32_epi16({v}))",
        "int16": "_mm256_storeu_si256((__m256i *)({p}), _mm512_cvtepi32_epi16({v}))",
    },
    "avx2": {      # 128-bit packs (values already in range: the saturation never acts)
        "uint8": "_mm_storel_epi64((__m128i *)({p}), _mm_packus_epi16({w}, {w}))",
        "int8": "_mm_storel_epi64((__m128i *)({p}), _mm_packs_epi16({w}, {w}))",
        "uint16": "_mm_storeu_si128((__m128i *)({p}), {w})",
        "int16": "_mm_storeu_si128((__m128i *)({p}), {w})",
    },
}
_I = {"avx512": dict(vi="__m512i", cvt="_mm512_cvtps_epi32", min="_mm512_min_ps",
                     rnd="_mm512_roundscale_ps({x}, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)",
                     nan="_mm512_mask_blend_ps(_mm512_cmp_ps_mask({x}, {x}, _CMP_UNORD_Q), {a}, {b})"),
      "avx2": dict(vi="__m256i", cvt="_mm256_cvtps_epi32", min="_mm256_min_ps",
                   rnd="_mm256_round_ps({x}, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)",
                   nan="_mm256_blendv_ps({a}, {b}, _mm256_cmp_ps({x}, {x}, _CMP_UNORD_Q))")}


def emit(ctx, isa: str, ydt: str, n: int, x: str, y: str, s: str, zp: str, lo: int, hi: int,
         rnd: str, vec=None, one=None) -> None:
    """The loop over n elements: x, y the arrays; s, zp the C names of the float scale and the
    int32 zero point; rnd: the scalar helper for the tail. vec / one: the C of the float
    vector / value at element k instead of x's (qadd.py: computed from two byte tensors)."""
    d, i = SIMD[isa], _I[isa]
    v, L = d["v"], d["L"]
    vec = vec or (lambda k: f"{d['ld']}({x} + {k})")
    one = one or (lambda k: f"{x}[{k}]")
    include(ctx, isa)
    ctx.kernel = isa
    yct = ctype(np.dtype(ydt))
    full = n - n % L
    if full == 0:             # the scalar loop only
        ctx(f"for (size_t k = 0; k < {n}u; ++k)")
        ctx(f"    {y}[k] = ({yct}){rnd}({one('k')} / {s}, zp, {lo}, {hi});")
        return
    ctx(f"const {v} vs = {d['set1']}({s}), vz = {d['set1']}((float)zp);")
    ctx(f"const {v} vlo = {d['set1']}({float(lo)!r}f), vhi = {d['set1']}({float(hi)!r}f);")
    ctx(f"const {v} vzc = {d['set1']}((float)(zp < {lo} ? {lo} : (zp > {hi} ? {hi} : zp)));")
    with ctx.block(f"for (size_t k = 0; k < {full}u; k += {L}u)"):
        ctx(f"const {v} q = {d['div']}({vec('k')}, vs);")
        ctx(f"{v} t = {d['add']}({i['rnd'].format(x='q')}, vz);")
        ctx(f"t = {d['max']}(vlo, {i['min']}(vhi, t));   /* NaN stays (second operand) */")
        ctx(f"t = {i['nan'].format(x='q', a='t', b='vzc')};")
        ctx(f"const {i['vi']} r = {i['cvt']}(t);")
        if isa == "avx2":
            pk = "_mm_packus_epi32" if ydt == "uint16" else "_mm_packs_epi32"
            ctx(f"const __m128i w = {pk}(_mm256_castsi256_si128(r), "
                f"_mm256_extracti128_si256(r, 1));")
        ctx(_STORE[isa][ydt].format(p=f"{y} + k", v="r", w="w") + ";")
    if full < n:
        with ctx.block(f"for (size_t k = {full}u; k < {n}u; ++k)"):
            ctx(f"{y}[k] = ({yct}){rnd}({one('k')} / {s}, zp, {lo}, {hi});")
