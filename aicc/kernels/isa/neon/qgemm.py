"""neon: the qgemm kernels' spellings (kernels/qgemm): the integer GEMM's pair form and the
float64 requantization. The other qgemm families (depthwise, channel-last depthwise, QLinearAdd,
QuantizeLinear: the keys ``widths``, ``q_store``) have no NEON spellings yet and stay portable C
on arm-neon.

Pair form on Armv8-A (kernels/qgemm/simd.py): a B vector holds 8 int16, 4 columns x 2
consecutive k; the broadcast A lane (LD1R of 32 bits) holds the row's 2 k. SMLAL / SMLAL2
multiply the low / high 4 int16 of both and add the 4 int32 products to an accumulator of
unreduced products (lanes: column j's k, k + 1 for 2 columns): 2 instructions per 8 products,
no pairwise add in the k loop. At the store one ADDP of the two accumulators gives the 4
columns' sums. Every product fits int32 (|.| <= 255 * 255) and the lane adds wrap: the sum
modulo 2^32 in another order, the portable loops' value bit for bit.

Templates: each ``{name}`` is filled by name (kernels/qgemm/spell.fill), other braces are C's;
a tuple is a template's lines.
"""
from __future__ import annotations

TABLE = dict(
    # -- the integer GEMM micro-kernel (simd.py) --
    # B panels of nr columns (2 vectors of 4 columns x 2 k); tiles of at most mr rows: mr x 2 x
    # 2 accumulators (24), the 2 B vectors and the broadcast A lane in the 32 registers
    nr=8, mr=6,
    zero="vdupq_n_s32(0)",
    vb="int16x8_t",                                         # the B vectors' type
    ld="vld1q_s16({p})",                                    # a B vector at {p}
    st="vst1q_s32({p}, {v})",
    # the 2 int16 at the row pointer {p} (k, k + 1 of an A row) in every 32-bit lane, {p}
    # advanced past them: one LD1R with post-increment (bcast_c: its helper; GCC splits
    # vld1q_dup_s32 of an indexed address into LDR + DUP: 44 -> 38 instructions per k group
    # of a 6-row tile)
    bcast="aicc_neon_ld1r_s16x2(&{p})",
    bcast_c="""\
/* the 32 bits at *p (k, k + 1 of an A row) in every 32-bit lane, *p advanced past them (LD1R
 * with post-increment) */
static inline int16x8_t aicc_neon_ld1r_s16x2(const int16_t **p)
{
#if defined(__GNUC__)
    int32x4_t v;
    __asm__("ld1r {%0.4s}, [%1], #4" : "=w"(v), "+r"(*p) : "m"(*(const int16_t (*)[2])*p));
    return vreinterpretq_s16_s32(v);
#else
    const int16x8_t v = vreinterpretq_s16_s32(vld1q_dup_s32((const int32_t *)(const void *)*p));
    *p += 2;
    return v;
#endif
}""",
    # the unreduced accumulators {c}a (low 4 int16: columns 0, 1) and {c}b (high: 2, 3) of B
    # vector {b}, and their reduction to the 4 columns' int32 sums (ADDP)
    split=dict(acc=("a", "b"),
               steps=("{c}a = vmlal_s16({c}a, vget_low_s16({b}), vget_low_s16(av));",
                      "{c}b = vmlal_high_s16({c}b, {b}, av);"),
               reduce="vpaddq_s32({c}a, {c}b)"),
    # -- requantization (requant.py), float64 form: 2 per vector --
    pack=dict(uint8="u8", int8="s8"),       # (the stores below narrow in-range values)
    f64=dict(v="float64x2_t", set1="vdupq_n_f64"),
    half=dict(vi="int32x2_t", set1="vdup_n_s32"),             # the 2 int32 of 2 float64
    # 2 outputs: rounded (FRINTN: half to even), yzp added, clamped (FMIN / FMAX keep NaN),
    # NaN -> the clamped zero point, converted and stored (in range: exact)
    rq_body=(
        "const int32x2_t ai = vadd_s32(vld1_s32(acc + j), as ? vld1_s32(add + j) : va);",
        "const float64x2_t vm = ms ? vcvt_f64_f32(vld1_f32(m + j)) : vm0;",
        "float64x2_t t = vmulq_f64(vcvtq_f64_s64(vmovl_s32(ai)), vm);",
        "t = vaddq_f64(vrndnq_f64(t), vz);",
        "t = vmaxq_f64(vlo, vminq_f64(vhi, t));",
        "t = vbslq_f64(vceqq_f64(t, t), t, vzc);",
        "const int32x2_t w = vmovn_s64(vcvtq_s64_f64(t));",
        "y[j] = vget_lane_s32(w, 0);",
        "y[j + 1u] = vget_lane_s32(w, 1);"),
    # one finite multiplier (setup, loop): 4 per step (the tail is the caller's loop)
    rq_fast=((
        "const int32x4_t va4 = vdupq_n_s32(add[0]);",), (
        "for (const size_t f = n - n % 4u; j < f; j += 4u) {",
        "    const int32x4_t ai = vaddq_s32(vld1q_s32(acc + j), as ? vld1q_s32(add + j) : va4);",
        "    float64x2_t t0 = vmulq_f64(vcvtq_f64_s64(vmovl_s32(vget_low_s32(ai))), vm0);",
        "    float64x2_t t1 = vmulq_f64(vcvtq_f64_s64(vmovl_high_s32(ai)), vm0);",
        "    t0 = vmaxq_f64(vlo, vminq_f64(vhi, vaddq_f64(vrndnq_f64(t0), vz)));",
        "    t1 = vmaxq_f64(vlo, vminq_f64(vhi, vaddq_f64(vrndnq_f64(t1), vz)));",
        "    const int32x4_t w = vcombine_s32(vmovn_s64(vcvtq_s64_f64(t0)), "
        "vmovn_s64(vcvtq_s64_f64(t1)));",
        "    const int16x4_t h = vmovn_s32(w);",
        "    const uint32_t o = vget_lane_u32(vreinterpret_u32_s8(vmovn_s16(vcombine_s16(h, h))), "
        "0);   /* in range: exact */",
        "    memcpy(y + j, &o, 4);",
        "}")),
)
