"""neon: the qgemm kernels' spellings (kernels/qgemm): the integer GEMM's pair form (and the
quad form on SDOT where the target has the dot-product extension), the depthwise convs' row
splitter and tail store, and the requantization (float64 and float32 forms). The other qgemm
families (channel-last depthwise: ``widths`` with ``mld``; QLinearAdd, QuantizeLinear:
``q_store``) have no NEON spellings yet and stay portable C on arm-neon.

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

# one row of w bytes split into its even and odd columns, x - zp as float (depthwise.py's
# DE2): 16 bytes widened to int16 in two halves, UZP1 / UZP2 to evens / odds, widened to
# int32; the rest scalar. AICC_NEON_W: 8 bytes (uint8x8_t) as int16 lanes, by type
_DE2 = """\
#define AICC_NEON_W_SFX(h) {widen}

/* e[q] = x[2q] - zp (q < (w + 1) / 2), o[q] = x[2q + 1] - zp (q < w / 2), as float */
static void aicc_qdwde2_{isa}_SFX(const TA *restrict x, size_t w, int32_t zp,
                                 float *restrict e, float *restrict o)
{
    const int32x4_t z = vdupq_n_s32(zp);
    size_t q = 0;
    for (; 2u * q + 16u <= w; q += 8u) {
        const uint8x16_t b = vld1q_u8((const uint8_t *)(const void *)(x + 2u * q));
        const int16x8_t lo = AICC_NEON_W_SFX(vget_low_u8(b)), hi = AICC_NEON_W_SFX(vget_high_u8(b));
        const int16x8_t ev = vuzp1q_s16(lo, hi), od = vuzp2q_s16(lo, hi);
        vst1q_f32(e + q, vcvtq_f32_s32(vsubq_s32(vmovl_s16(vget_low_s16(ev)), z)));
        vst1q_f32(e + q + 4u, vcvtq_f32_s32(vsubq_s32(vmovl_high_s16(ev), z)));
        vst1q_f32(o + q, vcvtq_f32_s32(vsubq_s32(vmovl_s16(vget_low_s16(od)), z)));
        vst1q_f32(o + q + 4u, vcvtq_f32_s32(vsubq_s32(vmovl_high_s16(od), z)));
    }
    for (; 2u * q + 1u < w; ++q) {
        e[q] = (float)((int32_t)x[2u * q] - zp);
        o[q] = (float)((int32_t)x[2u * q + 1u] - zp);
    }
    if (2u * q < w)
        e[q] = (float)((int32_t)x[2u * q] - zp);
}"""

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
}

/* the same for the 4 bytes at *p (k .. k + 3 of a quad-form A row), as int8 lanes */
static inline int8x16_t aicc_neon_ld1r_s8x4(const uint8_t **p)
{
#if defined(__GNUC__)
    int32x4_t v;
    __asm__("ld1r {%0.4s}, [%1], #4" : "=w"(v), "+r"(*p) : "m"(*(const uint8_t (*)[4])*p));
    return vreinterpretq_s8_s32(v);
#else
    const int8x16_t v = vreinterpretq_s8_s32(vld1q_dup_s32((const int32_t *)(const void *)*p));
    *p += 4;
    return v;
#endif
}""",
    # -- the quad form with the dot-product extension (Armv8.2-A dotprod: the target's
    # cpu_flags list ``flag``, Linux's name; the key's name is x86's): SDOT multiplies 4 int8
    # of A by 4 int8 of B per int32 lane and adds them (exact, wrapping int32), signed x
    # signed: the activations' bytes are x + quad_flip (uint8 - 128, int8 as is), the
    # constant operand w - wzp when it fits int8 (simd.quad_form). A B vector: 4 columns x 4
    # k; tiles of up to 12 rows: 24 accumulators, the 2 B vectors and the A lane. The pair
    # form keeps SMLAL (no ``pv``).
    vnni=dict(flag="asimddp",
              qa="vdotq_s32({c}, av, {b})",
              qb="vdotq_s32({c}, av, {b})"),
    quad_flip={"uint8": -128, "int8": 0},
    form_keys={f: dict(mr=12, vb="int8x16_t", split=None,
                       ld="vld1q_s8((const int8_t *)(const void *)({p}))",
                       bcast="aicc_neon_ld1r_s8x4(&{p})") for f in ("qa", "qb")},
    # the unreduced accumulators {c}a (low 4 int16: columns 0, 1) and {c}b (high: 2, 3) of B
    # vector {b}, and their reduction to the 4 columns' int32 sums (ADDP)
    split=dict(acc=("a", "b"),
               steps=("{c}a = vmlal_s16({c}a, vget_low_s16({b}), vget_low_s16(av));",
                      "{c}b = vmlal_high_s16({c}b, {b}, av);"),
               reduce="vpaddq_s32({c}a, {c}b)"),
    # -- the depthwise convs' exact float32 sums (depthwise.py): the row splitter and, per
    # vector width in float lanes, widen (de2's 8 bytes {h} as int16 lanes, by type) and mst
    # (the first {m} int32 lanes of {v} stored at {p}: through a buffer, a tail of < 4) --
    de2=_DE2,
    widths={4: dict(widen=dict(uint8="vreinterpretq_s16_u16(vmovl_u8(h))",
                               int8="vmovl_s8(vreinterpret_s8_u8(h))"),
                    mst="do { int32_t t_[4]; vst1q_s32(t_, {v}); "
                        "memcpy({p}, t_, {m} * sizeof t_[0]); } while (0)")},
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
    # -- the float32 forms (requant.py's module doc: sums proven within 2^24) --
    # fma {a} * {b} + {c}, one rounding to nearest (FMLA; FPCR's default mode)
    fma_rn="vfmaq_f32({c}, {a}, {b})",
    # the checked form's body: rint(a * vm), a half-integer product's side decided by the
    # exact error e = fma(a, vm, -p)
    rqf_body=(
        "const float32x4_t a = vcvtq_f32_s32(ai);      /* exact: |ai| <= 2^24 */",
        "const float32x4_t p = vmulq_f32(a, vm);",
        "float32x4_t q = vrndnq_f32(p);",
        "const float32x4_t d = vsubq_f32(p, q);",
        "const uint32x4_t tie = vceqq_f32(vabsq_f32(d), vdupq_n_f32(0.5f));",
        "if (vmaxvq_u32(tie)) {     /* p a half-integer: the exact product's side */",
        "    const float32x4_t e = vfmaq_f32(vnegq_f32(p), a, vm), z = vdupq_n_f32(0.0f);",
        "    const uint32x4_t one = vreinterpretq_u32_f32(vdupq_n_f32(1.0f));",
        "    const uint32x4_t up = vandq_u32(tie, vandq_u32(vcgtq_f32(e, z), vcgtq_f32(d, z)));",
        "    const uint32x4_t dn = vandq_u32(tie, vandq_u32(vcltq_f32(e, z), vcltq_f32(d, z)));",
        "    q = vsubq_f32(vaddq_f32(q, vreinterpretq_f32_u32(vandq_u32(up, one))),",
        "                  vreinterpretq_f32_u32(vandq_u32(dn, one)));",
        "}", "return vcvtnq_s32_f32(q);     /* an integer: exact */"),
    # the float32 forms' loops: constants (the output range as int16); one vector of outputs
    # {o}.. rounded by {rf} with multipliers {vm}; 4 such vectors r0..r3 narrowed with
    # saturation to int16, clamped to the output range there, narrowed to bytes (exact) and
    # stored; then single vectors (the scalar tail follows)
    rqf_setup=("const int16x8_t vlo16 = vdupq_n_s16({lo}), vhi16 = vdupq_n_s16({hi});",),
    rqf_one=("vaddq_s32({rf}(vaddq_s32(vld1q_s32(acc + j + {o}u), as ? vld1q_s32(add + j + {o}u)"
             " : va4), {vm}), vzi)"),
    rqf_pack4=(
        "const int16x8_t h0 = vminq_s16(vmaxq_s16(vcombine_s16(vqmovn_s32(r0), vqmovn_s32(r1)), "
        "vlo16), vhi16);",
        "const int16x8_t h1 = vminq_s16(vmaxq_s16(vcombine_s16(vqmovn_s32(r2), vqmovn_s32(r3)), "
        "vlo16), vhi16);",
        "vst1q_s8((int8_t *)(void *)(y + j), vcombine_s8(vmovn_s16(h0), vmovn_s16(h1)));"),
    rqf_tail=(
        "for (const size_t f = n - n % 4u; j < f; j += 4u) {",
        "    const int32x4_t r = {one};",
        "    const int16x4_t h = vmin_s16(vmax_s16(vqmovn_s32(r), vget_low_s16(vlo16)), "
        "vget_low_s16(vhi16));",
        "    const uint32_t o = vget_lane_u32(vreinterpret_u32_s8(vmovn_s16(vcombine_s16(h, h))), "
        "0);",
        "    memcpy(y + j, &o, 4);",
        "}"),
)
