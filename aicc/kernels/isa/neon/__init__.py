"""NEON (AArch64, Armv8-A Advanced SIMD): 128-bit vectors, 32 registers, fused multiply-add
(FMLA), no lane masks.

The float32 vector vocabulary (``vector``, ``integer``, ``int_bits``, ``vmath``) keeps the
meaning the kernels give the x86 spellings, through the prelude's inline helpers: ``fma`` /
``fnma`` take (a, b, c) for a * b + c / c - a * b (one rounding); ``max`` / ``min`` are
a > b ? a : b / a < b ? a : b (the second operand when either is NaN, and -0 / +0 kept as
given, like MAXPS / MINPS: NEON's FMAX / FMIN would return NaN and order -0 below +0);
``sel`` and the vmath compares map the x86 _CMP_ predicate names to NEON compares
(aicc_neon_CMP_LT_OQ, ...); ``bit`` is and / or / xor / andnot on the float bits.

Tails are loads and stores of the first n lanes (the prelude's aicc_neon_mload /
aicc_neon_mstore, a switch on n; ``masked``: a tail is a load / store of n lanes, as with
mask registers, no lane-mask table). The kernel families this description has entries for run
on NEON; the others stay portable C on arm-neon (isa_for picks only ISAs whose description
has the family's entry).
"""
from __future__ import annotations

from ..base import Isa
from . import conv, pool, qgemm, vmath, winograd

PRELUDE = """\
/* NEON tails: the first n (<= 4) floats at p as a vector (the other lanes 0), and the first n
 * lanes of v stored to p; nothing past p + n is read or written. */
static inline float32x4_t aicc_neon_mload(const float *p, size_t n)
{
    switch (n) {
    case 0:
        return vdupq_n_f32(0.0f);
    case 1:
        return vsetq_lane_f32(p[0], vdupq_n_f32(0.0f), 0);
    case 2:
        return vcombine_f32(vld1_f32(p), vdup_n_f32(0.0f));
    case 3:
        return vcombine_f32(vld1_f32(p), vset_lane_f32(p[2], vdup_n_f32(0.0f), 0));
    default:
        return vld1q_f32(p);
    }
}

/* the lanes [a, b) of a vector set (a, b <= 4) */
static inline uint32x4_t aicc_neon_lanes(size_t a, size_t b)
{
    static const uint32_t io[4] = {0u, 1u, 2u, 3u};
    const uint32x4_t i = vld1q_u32(io);
    return vandq_u32(vcgeq_u32(i, vdupq_n_u32((uint32_t)a)),
                     vcltq_u32(i, vdupq_n_u32((uint32_t)b)));
}

static inline void aicc_neon_mstore(float *p, size_t n, float32x4_t v)
{
    switch (n) {
    case 0:
        break;
    case 1:
        vst1q_lane_f32(p, v, 0);
        break;
    case 2:
        vst1_f32(p, vget_low_f32(v));
        break;
    case 3:
        vst1_f32(p, vget_low_f32(v));
        vst1q_lane_f32(p + 2, v, 2);
        break;
    default:
        vst1q_f32(p, v);
        break;
    }
}

/* The x86 vector vocabulary's meanings in NEON (isa/neon: ``vector``, ``integer``). */
static inline float32x4_t aicc_neon_fma(float32x4_t a, float32x4_t b, float32x4_t c)
{
    return vfmaq_f32(c, a, b);          /* a * b + c, one rounding */
}

static inline float32x4_t aicc_neon_fnma(float32x4_t a, float32x4_t b, float32x4_t c)
{
    return vfmsq_f32(c, a, b);          /* c - a * b, one rounding */
}

/* a > b ? a : b and a < b ? a : b per lane: b when either is NaN (as MAXPS / MINPS) */
static inline float32x4_t aicc_neon_max(float32x4_t a, float32x4_t b)
{
    return vbslq_f32(vcgtq_f32(a, b), a, b);
}

static inline float32x4_t aicc_neon_min(float32x4_t a, float32x4_t b)
{
    return vbslq_f32(vcltq_f32(a, b), a, b);
}

/* bit operations on float lanes; andnot(a, b) = ~a & b */
static inline float32x4_t aicc_neon_and(float32x4_t a, float32x4_t b)
{
    return vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(a), vreinterpretq_u32_f32(b)));
}

static inline float32x4_t aicc_neon_or(float32x4_t a, float32x4_t b)
{
    return vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(a), vreinterpretq_u32_f32(b)));
}

static inline float32x4_t aicc_neon_xor(float32x4_t a, float32x4_t b)
{
    return vreinterpretq_f32_u32(veorq_u32(vreinterpretq_u32_f32(a), vreinterpretq_u32_f32(b)));
}

static inline float32x4_t aicc_neon_andnot(float32x4_t a, float32x4_t b)
{
    return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(b), vreinterpretq_u32_f32(a)));
}

/* p (a pointer variable) in a general register: an empty asm that may change it, so that the
 * compiler adds offsets to it instead of folding its base into each address. */
#if defined(__GNUC__)
#define AICC_NEON_PIN_PTR(p) __asm__("" : "+r"(p))
#else
#define AICC_NEON_PIN_PTR(p) ((void)0)
#endif

/* The GEMM K loop's step (gemm/tile.py): the pointer p in a general register, advanced by
 * the code after it, and no load moved across (so each k's loads stay next to their FMAs
 * rather than being hoisted into the registers of the accumulators). */
#if defined(__GNUC__)
#define AICC_NEON_KSTEP(p) __asm__ __volatile__("" : "+r"(p) : : "memory")
#else
#define AICC_NEON_KSTEP(p) ((void)0)
#endif

/* The 4 x 4 block at s (rows of stride ls) transposed to d (rows of stride ld): d[j * ld + i]
 * = s[i * ls + j] (TRN1 / TRN2 of 32-bit, then of 64-bit lanes). */
static inline void aicc_neon_tr4(const float *s, size_t ls, float *d, size_t ld)
{
    const float32x4_t r0 = vld1q_f32(s), r1 = vld1q_f32(s + ls);
    const float32x4_t r2 = vld1q_f32(s + 2u * ls), r3 = vld1q_f32(s + 3u * ls);
    const float64x2_t t0 = vreinterpretq_f64_f32(vtrn1q_f32(r0, r1));
    const float64x2_t t1 = vreinterpretq_f64_f32(vtrn2q_f32(r0, r1));
    const float64x2_t t2 = vreinterpretq_f64_f32(vtrn1q_f32(r2, r3));
    const float64x2_t t3 = vreinterpretq_f64_f32(vtrn2q_f32(r2, r3));
    vst1q_f32(d, vreinterpretq_f32_f64(vtrn1q_f64(t0, t2)));
    vst1q_f32(d + ld, vreinterpretq_f32_f64(vtrn1q_f64(t1, t3)));
    vst1q_f32(d + 2u * ld, vreinterpretq_f32_f64(vtrn2q_f64(t0, t2)));
    vst1q_f32(d + 3u * ld, vreinterpretq_f32_f64(vtrn2q_f64(t1, t3)));
}

/* The rows a0..a3 (vectors) of a 4 x 4 block transposed: o_j holds column j (lvalues). */
#define AICC_NEON_TR4V(a0, a1, a2, a3, o0, o1, o2, o3) do { \
        const float32x4_t r0_ = (a0), r1_ = (a1), r2_ = (a2), r3_ = (a3); \
        const float64x2_t t0_ = vreinterpretq_f64_f32(vtrn1q_f32(r0_, r1_)); \
        const float64x2_t t1_ = vreinterpretq_f64_f32(vtrn2q_f32(r0_, r1_)); \
        const float64x2_t t2_ = vreinterpretq_f64_f32(vtrn1q_f32(r2_, r3_)); \
        const float64x2_t t3_ = vreinterpretq_f64_f32(vtrn2q_f32(r2_, r3_)); \
        (o0) = vreinterpretq_f32_f64(vtrn1q_f64(t0_, t2_)); \
        (o1) = vreinterpretq_f32_f64(vtrn1q_f64(t1_, t3_)); \
        (o2) = vreinterpretq_f32_f64(vtrn2q_f64(t0_, t2_)); \
        (o3) = vreinterpretq_f32_f64(vtrn2q_f64(t1_, t3_)); \
    } while (0)

static inline float aicc_neon_lane0(float32x4_t v)
{
    return vgetq_lane_f32(v, 0);
}

/* int32 lanes shifted right by the constant n, zeros in (x86 srli) */
#define aicc_neon_srli(x, n) vreinterpretq_s32_u32(vshrq_n_u32(vreinterpretq_u32_s32(x), n))

/* The x86 compare predicates the kernels name (_CMP_*): lanes where x p y. O: false when
 * either is NaN; U: true then. */
static inline uint32x4_t aicc_neon_CMP_EQ_OQ(float32x4_t x, float32x4_t y)
{
    return vceqq_f32(x, y);
}

static inline uint32x4_t aicc_neon_CMP_NEQ_OQ(float32x4_t x, float32x4_t y)
{
    return vorrq_u32(vcltq_f32(x, y), vcgtq_f32(x, y));
}

static inline uint32x4_t aicc_neon_CMP_NEQ_UQ(float32x4_t x, float32x4_t y)
{
    return vmvnq_u32(vceqq_f32(x, y));
}

static inline uint32x4_t aicc_neon_CMP_LT_OQ(float32x4_t x, float32x4_t y)
{
    return vcltq_f32(x, y);
}

static inline uint32x4_t aicc_neon_CMP_LE_OQ(float32x4_t x, float32x4_t y)
{
    return vcleq_f32(x, y);
}

static inline uint32x4_t aicc_neon_CMP_GT_OQ(float32x4_t x, float32x4_t y)
{
    return vcgtq_f32(x, y);
}

static inline uint32x4_t aicc_neon_CMP_GE_OQ(float32x4_t x, float32x4_t y)
{
    return vcgeq_f32(x, y);
}

static inline uint32x4_t aicc_neon_CMP_NGE_UQ(float32x4_t x, float32x4_t y)
{
    return vmvnq_u32(vcgeq_f32(x, y));
}

static inline uint32x4_t aicc_neon_CMP_NGT_UQ(float32x4_t x, float32x4_t y)
{
    return vmvnq_u32(vcgtq_f32(x, y));
}

static inline uint32x4_t aicc_neon_CMP_UNORD_Q(float32x4_t x, float32x4_t y)
{
    return vmvnq_u32(vandq_u32(vceqq_f32(x, x), vceqq_f32(y, y)));
}"""

# tails: {n} lanes, a count
MASK = dict(mtype="size_t", mask="(size_t)({n})",
            mload="aicc_neon_mload({p}, {m})", mstore="aicc_neon_mstore({p}, {m}, {v})")

# the float32 vector vocabulary (isa/x86.py), in the x86 spellings' meanings (module docstring)
VECTOR = dict(v="float32x4_t", L=4, set1="vdupq_n_f32", add="vaddq_f32", sub="vsubq_f32",
              mul="vmulq_f32", div="vdivq_f32", fma="aicc_neon_fma", fnma="aicc_neon_fnma",
              max="aicc_neon_max", min="aicc_neon_min", ld="vld1q_f32", st="vst1q_f32",
              zero="vdupq_n_f32(0.0f)", sqrt="vsqrtq_f32",
              # max / min of a constant (not NaN) and x: FMAX / FMIN give max / min's values
              # (x when NaN, quieted); a softmax row's running max: a NaN the x86 max drops
              # makes the row NaN all the same (exp(NaN - max) enters its sum), and FMAX's
              # order of -0 and +0 changes no x - max
              kmax="vmaxq_f32", kmin="vminq_f32", rowmax="vmaxq_f32",
              # 4 consecutive vectors with one LD1 / ST1 (the softmax rows' scaling)
              ld4v="vld1q_f32_x4", st4v="vst1q_f32_x4", v4="float32x4x4_t",
              sel="vbslq_f32(aicc_neon{p}({x}, {y}), {b}, {a})",
              rnd="vrndnq_f32({x})")         # to nearest, ties to even (FRINTN)

ISA = Isa(
    name="neon", family="arm", header="<arm_neon.h>", vector_bytes=16, registers=32,
    prefix="", mask=MASK, masked=True, prelude=PRELUDE, vector=VECTOR,
    # FCVTNS rounds to nearest even (cvtps_epi32's default mode)
    integer=dict(vi="int32x4_t", cvt="vcvtnq_s32_f32", srai="vshrq_n_s32", sub="vsubq_s32",
                 add="vaddq_s32", slli="vshlq_n_s32", c127="vdupq_n_s32(127)",
                 cast="vreinterpretq_f32_s32", bit="aicc_neon_{op}({a}, {b})",
                 lane0="aicc_neon_lane0", scalef=None),
    int_bits=dict(vi="int32x4_t", bits="vreinterpretq_s32_f32", flt="vreinterpretq_f32_s32",
                  srli="aicc_neon_srli", sub="vsubq_s32", set1="vdupq_n_s32",
                  band="vandq_s32", bor="vorrq_s32", cvt="vcvtq_f32_s32"),
    # vfmaq_f32(c, a, b) = c + a * b, one rounding (FMLA)
    gemm=dict(vec="float32x4_t", lanes=4, mr=8, kc=256, mc=96, jb=64, nc=256, prefetch_kb=0,
              pf_rows=1, pf_next="T0", pf_first=False,
              load="vld1q_f32({p})", store="vst1q_f32({p}, {v})",
              bcast="vld1q_dup_f32({p})", fma="vfmaq_f32({c}, {a}, {b})",
              # {c} + {b} * lane {lane} of {a}: FMLA by element (gemm/tile.py tile_k_loop)
              fma_lane="vfmaq_laneq_f32({c}, {b}, {a}, {lane})",
              # {n} (2..loadn_max) consecutive vectors at {p} with one LD1 of n registers,
              # their type and vector {i} of {t} (gemm/tile.py: the packed A of one k, a
              # panel's B row)
              loadn="vld1q_f32_x{n}({p})", loadn_max=4, vecn="float32x4x{n}_t",
              val="{t}.val[{i}]",
              # GEMMs of at least pack_a rows and pack_n columns pack A per block into row
              # tiles of pack_a rows, k-major (gemm/pack.py pack_a_text; 4 x 4 blocks by tr4):
              # 12 x 8 tiles, per k one LD1 of 3 for A, one of 2 for B, 24 FMLA (with A rows
              # in place: 8 x 8, 8 loads of A and 4 of B per 64 FMLA, and register moves);
              # balanced row tiles in multiples of row_step
              pack_a=12, pack_n=40, row_step=4, tr4="aicc_neon_tr4({s}, {lda}, {d}, {ldd})",
              # run-time B packed with full panels of contiguous rows copied (portable.py)
              pack_rows=True,
              # the packing's full tiles: rows {a0}..{a3} (vectors) transposed into {o0}..{o3}
              tr4v="AICC_NEON_TR4V({a0}, {a1}, {a2}, {a3}, {o0}, {o1}, {o2}, {o3})",
              zero="vdupq_n_f32(0.0f)", add="vaddq_f32", **MASK,
              # the clamp epilogue's min / max (gemm/clamp.py tile_clamp); FMIN / FMAX return
              # NaN when either operand is NaN, so NaN passes the clamp as on x86
              min="vminq_f32", max="vmaxq_f32",
              # no software prefetch: the Cortex-A cores' stream prefetchers follow the panel
              # rows, and each PRFM is one more instruction (the 1-row kernels issued one per
              # panel and k)
              prefetch="",
              kstep="AICC_NEON_KSTEP({p})",
              # most accumulators a kernel of several panels keeps: 24 of the 32 registers
              acc_max=24),
    gemm_mr_max={1: 24, 2: 12, 3: 8},
    # conv schedule defaults; implicit_pct 7: the implicit GEMM takes 3x3 stride-1 convs on
    # 32x32 maps (a virtual grid of pitch 34: 6% of its lanes garbage), whose im2col packing
    # costs more (ResNet-8's 16-channel stage, executed instructions -9% each)
    # row_step 4: balanced row tiles in multiples of the packed A's vectors (conv/schedule.py
    # balanced)
    conv=dict(mr=12, kc=256, jb=64, tile_kb=192, implicit_pct=7, algo="auto", wino_m=0,
              wino_kb=768, wino_chan=1, edge_kernels=8, row_step=4),
    conv_kernels=conv.TABLE, vmath=vmath.TABLE, pool=pool.TABLE,
    winograd=winograd.TABLE, qgemm=qgemm.TABLE,
)
