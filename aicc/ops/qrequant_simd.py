"""Requantization of integer GEMM results on the x86 SIMD targets (qgemm_simd.py,
qgemm_conv.py, qconv_dw.py): ``y = saturate(rint((acc + add) * m) + yzp)`` with the product
in float64, as qlinear.py's scalar loop (quantize.round_helper), value for value: the int32
sum (modulo 2^32) converted exactly, one float64 product, round half to even (the default
rounding mode, as rint), the zero point added, clamped; NaN -> the zero point, clamped; +-Inf
saturate. The n % lanes tail calls the scalar helper. Also the output stage shared by the
integer kernels: the int32 outputs (MatMulInteger / ConvInteger) as acc + add.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..emit_c.cwriter import ctype

WRAP = """\
/* uint32 accumulator (sum modulo 2^32) -> int32 two's complement, without
 * implementation-defined conversions. */
static AICC_UNUSED int32_t aicc_u32_i32(uint32_t u)
{
    return u < 0x80000000u ? (int32_t)u : -(int32_t)(~u) - 1;
}"""

ADD = """\
/* y[j] = acc[j] + add[j * as] modulo 2^32 (the int32 outputs of MatMulInteger / ConvInteger). */
static void aicc_qadd(size_t n, const int32_t *restrict acc, const int32_t *restrict add,
                      size_t as, int32_t *restrict y)
{
    for (size_t j = 0; j < n; ++j)
        y[j] = aicc_u32_i32((uint32_t)acc[j] + (uint32_t)add[j * as]);
}"""


class Requant(NamedTuple):
    """How a QLinear* op turns its int32 sums into outputs: rnd, the scalar rounding helper
    (quantize.round_helper); mult, the C expression of the float multiplier (conv: of output
    channel ``oc``; matmul: a pointer to one, or to N when per_col); bias, the conv's int32
    bias of ``oc`` as a C expression, or None."""
    rnd: str
    mult: str
    bias: str | None = None
    per_col: bool = False


def _requant_fast(isa: str, ydt: str) -> tuple:
    """(setup lines, loop lines) of the requantization for one finite multiplier (no NaN can
    arise). AVX-512: 16 outputs per step, the last n % 16 under a lane mask; the product
    clamped to [lo - yzp, hi - yzp] in double, then converted rounding half to even (the
    embedded rounding of the conversion, whatever MXCSR says) and yzp added in int32: the
    bounds are integers, so clamping before rounding gives rint's value clamped, the scalar
    helper's. AVX2: 8 per step (the tail is the caller's scalar loop), rounded, yzp added and
    clamped in double."""
    if isa == "avx512":
        return [
            "const __m512i va16 = _mm512_set1_epi32(add[0]), vzi = _mm512_set1_epi32(yzp);",
            "const __m512d vlz = _mm512_sub_pd(vlo, vz), vhz = _mm512_sub_pd(vhi, vz);"], [
            "for (; j < n; j += 16u) {",
            "    const __mmask16 k = n - j >= 16u ? (__mmask16)0xFFFFu : (__mmask16)((1u << (n - j)) - 1u);",
            "    const __m512i ai = _mm512_add_epi32(_mm512_maskz_loadu_epi32(k, acc + j),",
            "                                        as ? _mm512_maskz_loadu_epi32(k, add + j) : va16);",
            "    __m512d t0 = _mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(ai)), vm0);",
            "    __m512d t1 = _mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(ai, 1)), vm0);",
            "    t0 = _mm512_max_pd(vlz, _mm512_min_pd(vhz, t0));",
            "    t1 = _mm512_max_pd(vlz, _mm512_min_pd(vhz, t1));",
            "    const __m512i r = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvt_roundpd_epi32(",
            "        t0, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)), _mm512_cvt_roundpd_epi32(",
            "        t1, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), 1);",
            "    _mm512_mask_cvtepi32_storeu_epi8(y + j, k, _mm512_add_epi32(r, vzi));",
            "}"]
    pk = "_mm_packus_epi16" if ydt == "uint8" else "_mm_packs_epi16"
    return ["const __m256i va8 = _mm256_set1_epi32(add[0]);"], [
        "for (const size_t f = n - n % 8u; j < f; j += 8u) {",
        "    const __m256i ai = _mm256_add_epi32(_mm256_loadu_si256((const __m256i *)(acc + j)),",
        "                                        as ? _mm256_loadu_si256((const __m256i *)(add + j)) : va8);",
        "    __m256d t0 = _mm256_mul_pd(_mm256_cvtepi32_pd(_mm256_castsi256_si128(ai)), vm0);",
        "    __m256d t1 = _mm256_mul_pd(_mm256_cvtepi32_pd(_mm256_extracti128_si256(ai, 1)), vm0);",
        "    t0 = _mm256_add_pd(_mm256_round_pd(t0, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), vz);",
        "    t1 = _mm256_add_pd(_mm256_round_pd(t1, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), vz);",
        "    t0 = _mm256_max_pd(vlo, _mm256_min_pd(vhi, t0));",
        "    t1 = _mm256_max_pd(vlo, _mm256_min_pd(vhi, t1));",
        "    const __m128i w = _mm_packs_epi32(_mm256_cvtpd_epi32(t0), _mm256_cvtpd_epi32(t1));",
        f"    _mm_storel_epi64((__m128i *)(void *)(y + j), {pk}(w, w));  /* in range: exact packs */",
        "}"]


def requant_helper(ctx, isa: str, ydt: str, rnd: str) -> str:
    """``aicc_qreq_{isa}_{y}(rows, n, acc, sa, add, as, m, ms, yzp, y, sy)``: for each of rows
    rows (acc and y advancing by sa and sy), y[j] = saturate(rint((acc[j] + add[j * as]) *
    m[j * ms]) + yzp), the product in double (the scalar loops' values)."""
    lo, hi = (0, 255) if ydt == "uint8" else (-128, 127)
    yc = ctype(np.dtype(ydt))
    name = f"aicc_qreq_{isa}_{ydt}"
    scalar = (f"y[j] = ({yc}){rnd}((double)aicc_u32_i32((uint32_t)acc[j] + (uint32_t)add[as ? j : 0u]) "
              f"* (double)m[ms ? j : 0u], yzp, {lo}, {hi});")
    if isa == "avx512":
        L, pd = 8, "_mm512"
        body = [
            "const __m256i ai = _mm256_add_epi32(_mm256_loadu_si256((const __m256i *)(acc + j)), "
            "as ? _mm256_loadu_si256((const __m256i *)(add + j)) : va);",
            "const __m512d vm = ms ? _mm512_cvtps_pd(_mm256_loadu_ps(m + j)) : vm0;",
            "__m512d t = _mm512_mul_pd(_mm512_cvtepi32_pd(ai), vm);",
            "t = _mm512_add_pd(_mm512_roundscale_pd(t, _MM_FROUND_TO_NEAREST_INT | "
            "_MM_FROUND_NO_EXC), vz);",
            "t = _mm512_max_pd(vlo, _mm512_min_pd(vhi, t));   /* NaN stays (second operand) */",
            "t = _mm512_mask_blend_pd(_mm512_cmp_pd_mask(t, t, _CMP_UNORD_Q), t, vzc);",
            "_mm_storel_epi64((__m128i *)(void *)(y + j), "
            "_mm256_cvtepi32_epi8(_mm512_cvtpd_epi32(t)));"]
    else:
        L, pd = 4, "_mm256"
        pk = "_mm_packus_epi16" if ydt == "uint8" else "_mm_packs_epi16"
        body = [
            "const __m128i ai = _mm_add_epi32(_mm_loadu_si128((const __m128i *)(acc + j)), "
            "as ? _mm_loadu_si128((const __m128i *)(add + j)) : va);",
            "const __m256d vm = ms ? _mm256_cvtps_pd(_mm_loadu_ps(m + j)) : vm0;",
            "__m256d t = _mm256_mul_pd(_mm256_cvtepi32_pd(ai), vm);",
            "t = _mm256_add_pd(_mm256_round_pd(t, _MM_FROUND_TO_NEAREST_INT | "
            "_MM_FROUND_NO_EXC), vz);",
            "t = _mm256_max_pd(vlo, _mm256_min_pd(vhi, t));   /* NaN stays (second operand) */",
            "t = _mm256_blendv_pd(t, vzc, _mm256_cmp_pd(t, t, _CMP_UNORD_Q));",
            "__m128i w = _mm256_cvtpd_epi32(t);",
            f"w = {pk}(_mm_packs_epi32(w, w), w);    /* in range: the packs never saturate */",
            "const int32_t o = _mm_cvtsi128_si32(w);",
            "memcpy(y + j, &o, 4);"]
    setup, fast = _requant_fast(isa, ydt)
    vd, ai = f"__m{512 if isa == 'avx512' else 256}d", ("_mm256_set1_epi32" if isa == "avx512"
                                                         else "_mm_set1_epi32")
    C = [f"/* y[j] = saturate(rint((acc[j] + add[j * as]) * m[j * ms]) + yzp) for j < n ({ydt}; the "
         "product in\n * double, add modulo 2^32; NaN -> yzp, clamped): the scalar helper's "
         f"values, {L} at a time; for rows\n * rows of n, acc and y advancing by sa and sy "
         "elements per row. */",
         f"static void {name}(size_t rows, size_t n, const int32_t *restrict acc, size_t sa,",
         f"    const int32_t *restrict add, size_t as, const float *restrict m, size_t ms, "
         f"int32_t yzp, {yc} *restrict y, size_t sy)", "{",
         f"    const {'__m256i' if isa == 'avx512' else '__m128i'} va = {ai}(add[0]);",
         f"    const {vd} vm0 = {pd}_set1_pd((double)m[0]), vz = {pd}_set1_pd((double)yzp);",
         f"    const {vd} vlo = {pd}_set1_pd({float(lo)!r}), vhi = {pd}_set1_pd({float(hi)!r});",
         f"    const {vd} vzc = {pd}_set1_pd((double)(yzp < {lo} ? {lo} : "
         f"(yzp > {hi} ? {hi} : yzp)));",
         "    const int finite = ms == 0u && m[0] - m[0] == 0.0f;  /* one finite multiplier: no NaN */",
         *["    " + ln for ln in setup],
         "    for (size_t row = 0; row < rows; ++row, acc += sa, y += sy) {"]
    row = (["size_t j = 0;", "if (finite) {"] + ["    " + s for s in fast]
           + ["}", f"for (const size_t f = n - n % {L}u; j < f; j += {L}u) {{"]
           + ["    " + s for s in body] + ["}", "for (; j < n; ++j)", "    " + scalar])
    C += ["        " + s for s in row] + ["    }", "}"]
    ctx.helper("qlinear.0.wrap", WRAP)
    ctx.helper("qlinear.4.0.string", "#include <string.h>")
    ctx.helper(f"qlinear.4.3.req_{isa}_{ydt}", "\n".join(C))
    return name


def channel_terms(ctx, rq: Requant | None, corr: str | None = None) -> None:
    """Declare ``mlt`` and ``add`` of output channel ``oc``: the bias, minus zu * (the sum of
    w - wzp) in the quad form (corr: the C name of those sums)."""
    if rq is not None:
        ctx(f"const float mlt = {rq.mult};")
    terms = [f"(uint32_t){rq.bias}"] if rq is not None and rq.bias else []
    if corr:
        terms.append(f"0u - zu * (uint32_t){corr}[oc]")
    if terms:
        ctx.helper("qlinear.0.wrap", WRAP)
    ctx(f"const int32_t add = {'aicc_u32_i32(' + ' + '.join(terms) + ')' if terms else '0'};")


def output(ctx, isa: str, rq: Requant | None, n: str, src: str, dst: str,
           add: str = "&add, 0u", mlt: str = "&mlt, 0u", rows: tuple = ("1u", "0u", "0u")) -> None:
    """Write n outputs at dst from the int32 sums at src: requantized, or (rq None) the int32
    sums plus add. add / mlt: the helpers' (pointer, stride) arguments; rows: (count, src
    stride, dst stride) of rows of n (one call, not one per row: the helper's setup is a large
    part of a short row)."""
    cnt, sa, sy = rows
    if rq is None:
        ctx.helper("qlinear.0.wrap", WRAP)
        ctx.helper("qlinear.4.3.add", ADD)
        if cnt == "1u":
            ctx(f"aicc_qadd({n}, {src}, {add}, {dst});")
        else:
            with ctx.block(f"for (size_t r_ = 0; r_ < {cnt}; ++r_)"):
                ctx(f"aicc_qadd({n}, {src} + r_ * {sa}, {add}, {dst} + r_ * {sy});")
        return
    fn = requant_helper(ctx, isa, ctx.out_dtype(0).name, rq.rnd)
    ctx(f"{fn}({cnt}, {n}, {src}, {sa}, {add}, {mlt}, yzp, ({ctype(ctx.out_dtype(0))} *)({dst}), "
        f"{sy});")
