"""avx512: the qgemm kernels' spellings and tuning (kernels/qgemm).

Templates: each ``{name}`` is filled by name (kernels/qgemm/spell.fill), other braces are C's;
a tuple is a template's lines. The float32 / integer vocabulary of the description
(isa/avx512/__init__.py: vector, integer, int_bits, gemm's masks) is not repeated here.
"""
from __future__ import annotations

_RN = "_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC"      # embedded rounding: to nearest
_K16 = ("    const __mmask16 k = n - j >= 16u ? (__mmask16)0xFFFFu : "
        "(__mmask16)((1u << (n - j)) - 1u);")             # the lanes j.. of n, at most 16
_AI16 = ("    const __m512i ai = _mm512_add_epi32(_mm512_maskz_loadu_epi32(k, acc + j),",
         "                                        as ? _mm512_maskz_loadu_epi32(k, add + j) : "
         "va16);")                                        # acc + add of those lanes

# one row of w bytes split into its even and odd columns, x - zp as float (depthwise.py's
# DE2): two 16-byte loads, their 32 values' evens and odds by two-source permutes; the last
# n < 32 values under masks
_DE2 = """\
/* e[q] = x[2q] - zp (q < (w + 1) / 2), o[q] = x[2q + 1] - zp (q < w / 2), as float */
static void aicc_qdwde2_{isa}_SFX(const TA *restrict x, size_t w, int32_t zp,
                                   float *restrict e, float *restrict o)
{
    const __m512i z = _mm512_set1_epi32(zp);
    const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26,
                                         28, 30);
    const __m512i io = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27,
                                         29, 31);
    size_t q = 0;
    for (; 2u * q + 32u <= w; q += 16u) {
        const __m512i a = _mm512_sub_epi32(
            {widen}(_mm_loadu_si128((const __m128i *)(const void *)(x + 2u * q))), z);
        const __m512i b = _mm512_sub_epi32(
            {widen}(_mm_loadu_si128((const __m128i *)(const void *)(x + 2u * q + 16u))), z);
        _mm512_storeu_ps(e + q, _mm512_cvtepi32_ps(_mm512_permutex2var_epi32(a, ie, b)));
        _mm512_storeu_ps(o + q, _mm512_cvtepi32_ps(_mm512_permutex2var_epi32(a, io, b)));
    }
    if (2u * q < w) {        /* the last n < 32 values under masks */
        const size_t n = w - 2u * q;
        const __mmask16 la = (__mmask16)(n >= 16u ? 0xFFFFu : (1u << n) - 1u);
        const __mmask16 lb = (__mmask16)(n > 16u ? (1u << (n - 16u)) - 1u : 0u);
        const __m512i a = _mm512_sub_epi32(
            {widen}(_mm_maskz_loadu_epi8(la, (const void *)(x + 2u * q))), z);
        const __m512i b = _mm512_sub_epi32(   /* (no address past the row's end formed) */
            {widen}(_mm_maskz_loadu_epi8(lb, (const void *)(x + 2u * q + (lb ? 16u : 0u)))), z);
        _mm512_mask_storeu_ps(e + q, (__mmask16)((1u << ((n + 1u) / 2u)) - 1u),
                              _mm512_cvtepi32_ps(_mm512_permutex2var_epi32(a, ie, b)));
        _mm512_mask_storeu_ps(o + q, (__mmask16)((1u << (n / 2u)) - 1u),
                              _mm512_cvtepi32_ps(_mm512_permutex2var_epi32(a, io, b)));
    }
}"""

TABLE = dict(
    # -- the integer GEMM micro-kernel (simd.py) --
    # B panels of nr columns (2 vectors of 16 int32 lanes); tiles of at most mr rows: mr x 2
    # accumulators, the 2 B vectors and the broadcast A lane in the 32 registers
    nr=32, mr=8,
    zero="_mm512_setzero_si512()",                        # an integer vector of zeros
    ld="_mm512_loadu_si512((const void *)({p}))",          # an integer vector at {p}
    st="_mm512_storeu_si512((void *)({p}), {v})",
    madd="_mm512_madd_epi16",       # vpmaddwd: int16 pairs multiplied, each pair's sum as int32
    # AVX-512 VNNI (when the target's cpu_flags list ``flag``): one accumulation step of the
    # dot-product forms (simd.FORMS), av the broadcast A lane, {b} the B vector, {c} the sums
    vnni=dict(flag="avx512_vnni",
              pv="_mm512_dpwssd_epi32({c}, av, {b})",      # int16 pairs (vpdpwssd)
              qa="_mm512_dpbusd_epi32({c}, av, {b})",      # uint8 A x int8 B (vpdpbusd)
              qb="_mm512_dpbusd_epi32({c}, {b}, av)"),     # int8 A x uint8 B
    # -- bytes as lanes (depthwise.py, nhwc_dw.py, qadd.py), per vector width in float
    # lanes: 16 (zmm), 8 (ymm with AVX-512VL masks: kernels/conv/nhwc_dw.py's vectors for C
    # <= 8). p the vectors' prefix; widen: L bytes to int32 lanes, by type; ld: the L bytes at
    # {p} (128 / 64 bits); mld: those of the lanes of mask {m}; st / mst: an int32 vector
    # {v} at {p} (under mask {m})
    widths={
        16: dict(p="_mm512",
                 widen=dict(uint8="_mm512_cvtepu8_epi32", int8="_mm512_cvtepi8_epi32"),
                 ld="_mm_loadu_si128((const __m128i *){p})",
                 mld="_mm_maskz_loadu_epi8({m}, {p})",
                 st="_mm512_storeu_si512({p}, {v})",
                 mst="_mm512_mask_storeu_epi32({p}, {m}, {v})"),
        8: dict(p="_mm256",
                widen=dict(uint8="_mm256_cvtepu8_epi32", int8="_mm256_cvtepi8_epi32"),
                ld="_mm_loadl_epi64((const __m128i *){p})",
                mld="_mm_maskz_loadu_epi8((__mmask16){m}, {p})",
                st="_mm256_storeu_si256((__m256i *){p}, {v})",
                mst="_mm256_mask_storeu_epi32({p}, {m}, {v})"),
    },
    de2=_DE2,
    # -- QuantizeLinear (quantize.py): the int32 vector {v} at {p} as the output type
    # (down-converting stores; the values are in range) --
    q_store=dict(
        uint8="_mm_storeu_si128((__m128i *)({p}), _mm512_cvtepi32_epi8({v}))",
        int8="_mm_storeu_si128((__m128i *)({p}), _mm512_cvtepi32_epi8({v}))",
        uint16="_mm256_storeu_si256((__m256i *)({p}), _mm512_cvtepi32_epi16({v}))",
        int16="_mm256_storeu_si256((__m256i *)({p}), _mm512_cvtepi32_epi16({v}))"),
    # -- requantization (requant.py) --
    pack=dict(uint8="packus", int8="packs"),     # {pk}: int16 to the output bytes, saturating
    f64=dict(v="__m512d", set1="_mm512_set1_pd"),           # float64: 8 per vector
    half=dict(vi="__m256i", set1="_mm256_set1_epi32"),      # the 8 int32 of 8 float64
    # the float64 form, 8 outputs (a half vector of sums) per step; the store narrows to
    # bytes (in range after the clamp)
    rq_body=(
        "const __m256i ai = _mm256_add_epi32(_mm256_loadu_si256((const __m256i *)(acc + j)), "
        "as ? _mm256_loadu_si256((const __m256i *)(add + j)) : va);",
        "const __m512d vm = ms ? _mm512_cvtps_pd(_mm256_loadu_ps(m + j)) : vm0;",
        "__m512d t = _mm512_mul_pd(_mm512_cvtepi32_pd(ai), vm);",
        f"t = _mm512_add_pd(_mm512_roundscale_pd(t, {_RN}), vz);",
        "t = _mm512_max_pd(vlo, _mm512_min_pd(vhi, t));   /* NaN stays (second operand) */",
        "t = _mm512_mask_blend_pd(_mm512_cmp_pd_mask(t, t, _CMP_UNORD_Q), t, vzc);",
        "_mm_storel_epi64((__m128i *)(void *)(y + j), "
        "_mm256_cvtepi32_epi8(_mm512_cvtpd_epi32(t)));"),
    # the float64 form for one finite multiplier (setup, loop): 16 per step, the last n % 16
    # under a lane mask; the product clamped to [lo - yzp, hi - yzp] in double, then converted
    # rounding half to even (embedded rounding, whatever MXCSR says) and yzp added in int32:
    # the bounds are integers, so clamping before rounding gives rint's value clamped
    rq_fast=((
        "const __m512i va16 = _mm512_set1_epi32(add[0]), vzi = _mm512_set1_epi32(yzp);",
        "const __m512d vlz = _mm512_sub_pd(vlo, vz), vhz = _mm512_sub_pd(vhi, vz);"), (
        "for (; j < n; j += 16u) {",
        _K16, *_AI16,
        "    __m512d t0 = _mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(ai)), vm0);",
        "    __m512d t1 = _mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(ai, 1)), "
        "vm0);",
        "    t0 = _mm512_max_pd(vlz, _mm512_min_pd(vhz, t0));",
        "    t1 = _mm512_max_pd(vlz, _mm512_min_pd(vhz, t1));",
        "    const __m512i r = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvt_roundpd_epi32(",
        f"        t0, {_RN})), _mm512_cvt_roundpd_epi32(",
        f"        t1, {_RN}), 1);",
        "    _mm512_mask_cvtepi32_storeu_epi8(y + j, k, _mm512_add_epi32(r, vzi));",
        "}")),
    # the float32 forms: fma {a} * {b} + {c} rounded to nearest (embedded rounding); the
    # checked form's body (requant.py's module doc): rint(a * vm) with the half-integer
    # products' side decided by the exact error, under masks
    fma_rn=f"_mm512_fmadd_round_ps({{a}}, {{b}}, {{c}}, {_RN})",
    rqf_body=(
        "const __m512 a = _mm512_cvtepi32_ps(ai);      /* exact: |ai| <= 2^24 */",
        f"const __m512 p = _mm512_mul_round_ps(a, vm, {_RN});",
        f"__m512i q = _mm512_cvt_roundps_epi32(p, {_RN});",
        "const __m512 d = _mm512_sub_ps(p, _mm512_cvtepi32_ps(q));",
        "const __mmask16 tie = _mm512_cmp_ps_mask(_mm512_abs_ps(d), _mm512_set1_ps(0.5f), "
        "_CMP_EQ_OQ);",
        "if (tie) {     /* p a half-integer: the exact product's side of it */",
        f"    const __m512 e = _mm512_fmsub_round_ps(a, vm, p, {_RN}), z = _mm512_setzero_ps();",
        "    const __mmask16 up = _mm512_mask_cmp_ps_mask(tie, e, z, _CMP_GT_OQ) & "
        "_mm512_cmp_ps_mask(d, z, _CMP_GT_OQ);",
        "    const __mmask16 dn = _mm512_mask_cmp_ps_mask(tie, e, z, _CMP_LT_OQ) & "
        "_mm512_cmp_ps_mask(d, z, _CMP_LT_OQ);",
        "    const __m512i one = _mm512_set1_epi32(1);",
        "    q = _mm512_mask_sub_epi32(_mm512_mask_add_epi32(q, up, q, one), dn, q, one);",
        "}", "return q;"),
    # the float32 forms' loops: the constants after va16 / vmf (the output range {lo}..{hi}
    # for the masked tail's clamp; the lane order undoing the packs' per-128-bit-lane
    # interleave); one vector of outputs {o}.. rounded by {rf} with multipliers {vm}; 4 such
    # vectors r0..r3 packed to bytes and stored; then the single vectors, the last under a
    # lane mask (multipliers {mk}), clamped in int32
    rqf_setup=(
        "const __m512i vqlo = _mm512_set1_epi32({lo}), vqhi = _mm512_set1_epi32({hi});",
        "const __m512i vperm = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, "
        "11, 15);"),
    rqf_one=("_mm512_add_epi32({rf}(_mm512_add_epi32(_mm512_loadu_si512(acc + j + {o}u), "
             "as ? _mm512_loadu_si512(add + j + {o}u) : va16), {vm}), vzi)"),
    rqf_pack4=(
        "const __m512i w = _mm512_{pk}_epi16(_mm512_packs_epi32(r0, r1), "
        "_mm512_packs_epi32(r2, r3));   /* saturating */",
        "_mm512_storeu_si512(y + j, _mm512_permutexvar_epi32(vperm, w));"),
    rqf_tail=(
        "for (; j < n; j += 16u) {",
        _K16, *_AI16,
        "    const __m512i r = _mm512_add_epi32({rf}(ai, {mk}), vzi);",
        "    _mm512_mask_cvtepi32_storeu_epi8(y + j, k, _mm512_max_epi32(vqlo, "
        "_mm512_min_epi32(vqhi, r)));",
        "}"),
)
