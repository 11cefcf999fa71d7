"""avx2: the qgemm kernels' spellings and tuning (kernels/qgemm).

Templates: each ``{name}`` is filled by name (kernels/qgemm/spell.fill), other braces are C's;
a tuple is a template's lines. The float32 / integer vocabulary of the description
(isa/avx2/__init__.py: vector, integer, int_bits) is not repeated here. No mask registers:
the kernels' tails are scalar loops, or (nhwc_dw.py) a helper reading the tail's bytes and
the description's lane-mask stores.
"""
from __future__ import annotations

_RN = "_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC"      # round to nearest, no exception
_LD8 = "_mm256_loadu_si256((const __m256i *)({p}))"

# one row of w bytes split into its even and odd columns, x - zp as float (depthwise.py's
# DE2): two 8-byte loads, each widened and permuted to evens low / odds high, the halves
# recombined; the odd rest scalar
_DE2 = """\
/* e[q] = x[2q] - zp (q < (w + 1) / 2), o[q] = x[2q + 1] - zp (q < w / 2), as float */
static void aicc_qdwde2_{isa}_SFX(const TA *restrict x, size_t w, int32_t zp,
                                 float *restrict e, float *restrict o)
{
    const __m256i z = _mm256_set1_epi32(zp);
    const __m256i eo = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);   /* evens low, odds high */
    size_t q = 0;
    for (; 2u * q + 16u <= w; q += 8u) {
        const __m256i a = _mm256_permutevar8x32_epi32(_mm256_sub_epi32(
            {widen}(_mm_loadl_epi64((const __m128i *)(const void *)(x + 2u * q))), z), eo);
        const __m256i b = _mm256_permutevar8x32_epi32(_mm256_sub_epi32(
            {widen}(_mm_loadl_epi64((const __m128i *)(const void *)(x + 2u * q + 8u))), z),
            eo);
        _mm256_storeu_ps(e + q, _mm256_cvtepi32_ps(_mm256_permute2x128_si256(a, b, 0x20)));
        _mm256_storeu_ps(o + q, _mm256_cvtepi32_ps(_mm256_permute2x128_si256(a, b, 0x31)));
    }
    for (; 2u * q + 1u < w; ++q) {
        e[q] = (float)((int32_t)x[2u * q] - zp);
        o[q] = (float)((int32_t)x[2u * q + 1u] - zp);
    }
    if (2u * q < w)
        e[q] = (float)((int32_t)x[2u * q] - zp);
}"""

# the n < 8 bytes of a channel-last row's last vector (a 64-bit load past them may pass the
# tensor's end): nhwc_dw.py's masked byte load
_TAIL = """\
/* the {n} bytes at p, zeros after them */
static __m128i aicc_qdw_tail{n}(const void *p)
{
    long long v = 0;
    memcpy(&v, p, {n}u);
    return _mm_cvtsi64_si128(v);
}

"""

# the 8 int32 lanes of r packed to 8 int16 w by a 128-bit pack of its halves (in range: no
# saturation)
_NARROW = ("const __m128i w = {pk}(_mm256_castsi256_si128(r), "
           "_mm256_extracti128_si256(r, 1));")

TABLE = dict(
    # -- the integer GEMM micro-kernel (simd.py) --
    # B panels of nr columns (2 vectors of 8 int32 lanes); tiles of at most mr rows: mr x 2
    # accumulators, the 2 B vectors and the broadcast A lane in the 16 registers
    nr=16, mr=6,
    zero="_mm256_setzero_si256()",                        # an integer vector of zeros
    ld=_LD8,                                               # an integer vector at {p}
    st="_mm256_storeu_si256((__m256i *)({p}), {v})",
    madd="_mm256_madd_epi16",       # vpmaddwd: int16 pairs multiplied, each pair's sum as int32
    # -- bytes as lanes (depthwise.py, nhwc_dw.py, qadd.py), per vector width in float
    # lanes (8). p the vectors' prefix; widen: L bytes to int32 lanes, by type; ld: the L
    # bytes at {p} (64 bits); mld: the {n} bytes of a tail (tail: its helper); st / mst: an
    # int32 vector {v} at {p} (the lanes of lane mask {m})
    widths={
        8: dict(p="_mm256",
                widen=dict(uint8="_mm256_cvtepu8_epi32", int8="_mm256_cvtepi8_epi32"),
                ld="_mm_loadl_epi64((const __m128i *){p})",
                mld="aicc_qdw_tail{n}({p})", tail=_TAIL,
                st="_mm256_storeu_si256((__m256i *){p}, {v})",
                mst="_mm256_maskstore_epi32((int *){p}, {m}, {v})"),
    },
    de2=_DE2,
    # -- QuantizeLinear (quantize.py): the int32 vector r narrowed to int16 w first (no
    # down-converting store), then w stored as the output type at {p} (bytes: packed again;
    # the values are in range: the saturation never acts) --
    q_narrow=dict(uint8=_NARROW.format(pk="_mm_packs_epi32"),
                  int8=_NARROW.format(pk="_mm_packs_epi32"),
                  uint16=_NARROW.format(pk="_mm_packus_epi32"),
                  int16=_NARROW.format(pk="_mm_packs_epi32")),
    q_store=dict(
        uint8="_mm_storel_epi64((__m128i *)({p}), _mm_packus_epi16({w}, {w}))",
        int8="_mm_storel_epi64((__m128i *)({p}), _mm_packs_epi16({w}, {w}))",
        uint16="_mm_storeu_si128((__m128i *)({p}), {w})",
        int16="_mm_storeu_si128((__m128i *)({p}), {w})"),
    # -- requantization (requant.py) --
    pack=dict(uint8="packus", int8="packs"),     # {pk}: int16 to the output bytes, saturating
    f64=dict(v="__m256d", set1="_mm256_set1_pd"),           # float64: 4 per vector
    half=dict(vi="__m128i", set1="_mm_set1_epi32"),         # the 4 int32 of 4 float64
    # the float64 form, 4 outputs per step: rounded, yzp added, clamped in double, then
    # packed to bytes (in range: the packs never saturate) and stored with a 4-byte memcpy
    rq_body=(
        "const __m128i ai = _mm_add_epi32(_mm_loadu_si128((const __m128i *)(acc + j)), "
        "as ? _mm_loadu_si128((const __m128i *)(add + j)) : va);",
        "const __m256d vm = ms ? _mm256_cvtps_pd(_mm_loadu_ps(m + j)) : vm0;",
        "__m256d t = _mm256_mul_pd(_mm256_cvtepi32_pd(ai), vm);",
        f"t = _mm256_add_pd(_mm256_round_pd(t, {_RN}), vz);",
        "t = _mm256_max_pd(vlo, _mm256_min_pd(vhi, t));   /* NaN stays (second operand) */",
        "t = _mm256_blendv_pd(t, vzc, _mm256_cmp_pd(t, t, _CMP_UNORD_Q));",
        "__m128i w = _mm256_cvtpd_epi32(t);",
        "w = _mm_{pk}_epi16(_mm_packs_epi32(w, w), w);    /* in range: the packs never saturate */",
        "const int32_t o = _mm_cvtsi128_si32(w);",
        "memcpy(y + j, &o, 4);"),
    # the float64 form for one finite multiplier (setup, loop): 8 per step (the tail is the
    # caller's scalar loop), rounded, yzp added and clamped in double
    rq_fast=((
        "const __m256i va8 = _mm256_set1_epi32(add[0]);",), (
        "for (const size_t f = n - n % 8u; j < f; j += 8u) {",
        "    const __m256i ai = _mm256_add_epi32(_mm256_loadu_si256((const __m256i *)(acc + j)),",
        "                                        as ? _mm256_loadu_si256((const __m256i *)"
        "(add + j)) : va8);",
        "    __m256d t0 = _mm256_mul_pd(_mm256_cvtepi32_pd(_mm256_castsi256_si128(ai)), vm0);",
        "    __m256d t1 = _mm256_mul_pd(_mm256_cvtepi32_pd(_mm256_extracti128_si256(ai, 1)), "
        "vm0);",
        f"    t0 = _mm256_add_pd(_mm256_round_pd(t0, {_RN}), vz);",
        f"    t1 = _mm256_add_pd(_mm256_round_pd(t1, {_RN}), vz);",
        "    t0 = _mm256_max_pd(vlo, _mm256_min_pd(vhi, t0));",
        "    t1 = _mm256_max_pd(vlo, _mm256_min_pd(vhi, t1));",
        "    const __m128i w = _mm_packs_epi32(_mm256_cvtpd_epi32(t0), _mm256_cvtpd_epi32(t1));",
        "    _mm_storel_epi64((__m128i *)(void *)(y + j), _mm_{pk}_epi16(w, w));  "
        "/* in range: exact packs */",
        "}")),
    # the float32 forms: fma {a} * {b} + {c} in the MXCSR's rounding mode (the C default,
    # round to nearest, that all of the float kernels assume); the checked form's body
    # (requant.py's module doc): rint(a * vm) with the half-integer products' side decided
    # by the exact error, on all-ones lane masks
    fma_rn="_mm256_fmadd_ps({a}, {b}, {c})",
    rqf_body=(
        "const __m256 a = _mm256_cvtepi32_ps(ai);      /* exact: |ai| <= 2^24 */",
        "const __m256 p = _mm256_mul_ps(a, vm);",
        f"__m256 q = _mm256_round_ps(p, {_RN});",
        "const __m256 d = _mm256_sub_ps(p, q);",
        "const __m256 tie = _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), d), "
        "_mm256_set1_ps(0.5f), _CMP_EQ_OQ);",
        "if (_mm256_movemask_ps(tie)) {     /* p a half-integer: the exact product's side */",
        "    const __m256 e = _mm256_fmsub_ps(a, vm, p), z = _mm256_setzero_ps();",
        "    const __m256 one = _mm256_set1_ps(1.0f);",
        "    const __m256 up = _mm256_and_ps(tie, _mm256_and_ps(_mm256_cmp_ps(e, z, _CMP_GT_OQ), "
        "_mm256_cmp_ps(d, z, _CMP_GT_OQ)));",
        "    const __m256 dn = _mm256_and_ps(tie, _mm256_and_ps(_mm256_cmp_ps(e, z, _CMP_LT_OQ), "
        "_mm256_cmp_ps(d, z, _CMP_LT_OQ)));",
        "    q = _mm256_sub_ps(_mm256_add_ps(q, _mm256_and_ps(up, one)), _mm256_and_ps(dn, one));",
        "}", "return _mm256_cvtps_epi32(q);     /* an integer: exact */"),
    # the float32 forms' loops: the constants after va8 / vmf (the lane order undoing the
    # packs' per-128-bit-lane interleave); one vector of outputs {o}.. rounded by {rf} with
    # multipliers {vm}; 4 such vectors r0..r3 packed to bytes and stored; then single
    # vectors ({one}: the one at j) packed by halves (the scalar tail follows)
    rqf_setup=("const __m256i vperm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);",),
    rqf_one=("_mm256_add_epi32({rf}(_mm256_add_epi32(" + _LD8.format(p="acc + j + {o}u")
             + ", as ? " + _LD8.format(p="add + j + {o}u") + " : va8), {vm}), vzi)"),
    rqf_pack4=(
        "const __m256i w = _mm256_{pk}_epi16(_mm256_packs_epi32(r0, r1), "
        "_mm256_packs_epi32(r2, r3));   /* saturating */",
        "_mm256_storeu_si256((__m256i *)(void *)(y + j), _mm256_permutevar8x32_epi32(w, vperm));"),
    rqf_tail=(
        "for (const size_t f = n - n % 8u; j < f; j += 8u) {",
        "    const __m256i r = {one};",
        "    const __m128i h = _mm_packs_epi32(_mm256_castsi256_si128(r), "
        "_mm256_extracti128_si256(r, 1));",
        "    _mm_storel_epi64((__m128i *)(void *)(y + j), _mm_{pk}_epi16(h, h));",
        "}"),
)
