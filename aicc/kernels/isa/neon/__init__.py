"""NEON (AArch64, Armv8-A Advanced SIMD): 128-bit vectors, 32 registers, fused multiply-add
(FMLA), no lane masks.

Tails are loads and stores of the first n lanes through a small stack buffer (the prelude's
aicc_neon_mload / aicc_neon_mstore; ``masked``: a tail is a load / store of n lanes, as with
mask registers, no lane-mask table). The kernel families this description has entries for run
on NEON; the others stay portable C on arm-neon (isa_for picks only ISAs whose description
has the family's entry).
"""
from __future__ import annotations

from ..base import Isa
from . import conv

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
}"""

# tails: {n} lanes, a count
MASK = dict(mtype="size_t", mask="(size_t)({n})",
            mload="aicc_neon_mload({p}, {m})", mstore="aicc_neon_mstore({p}, {m}, {v})")

ISA = Isa(
    name="neon", family="arm", header="<arm_neon.h>", vector_bytes=16, registers=32,
    prefix="", mask=MASK, masked=True, prelude=PRELUDE,
    # vfmaq_f32(c, a, b) = c + a * b, one rounding (FMLA)
    gemm=dict(vec="float32x4_t", lanes=4, mr=8, kc=256, mc=96, jb=64, nc=256, prefetch_kb=0,
              pf_rows=1, pf_next="T0", pf_first=False,
              load="vld1q_f32({p})", store="vst1q_f32({p}, {v})",
              bcast="vld1q_dup_f32({p})", fma="vfmaq_f32({c}, {a}, {b})",
              # {c} + {b} * lane {lane} of {a}: FMLA by element (gemm/tile.py tile_k_loop)
              fma_lane="vfmaq_laneq_f32({c}, {b}, {a}, {lane})",
              zero="vdupq_n_f32(0.0f)", add="vaddq_f32", **MASK,
              # the clamp epilogue's min / max (gemm/tile.py tile_clamp); FMIN / FMAX return
              # NaN when either operand is NaN, so NaN passes the clamp as on x86
              min="vminq_f32", max="vmaxq_f32",
              # no software prefetch: the Cortex-A cores' stream prefetchers follow the panel
              # rows, and each PRFM is one more instruction (the 1-row kernels issued one per
              # panel and k)
              prefetch="",
              # most accumulators a kernel of several panels keeps: 24 of the 32 registers
              acc_max=24),
    gemm_mr_max={1: 24, 2: 12, 3: 8},
    conv=dict(mr=12, kc=256, jb=64, tile_kb=192, implicit_pct=5, algo="auto", wino_m=0,
              wino_kb=768, wino_chan=1, edge_kernels=8),
    conv_kernels=conv.TABLE,
)
