"""Float32 erf on NEON: erf.py's pieces and FMA Horner steps in one chain per lane.

erf.py evaluates every piece on the whole vector (the small one, the mid one, the big one when
a lane needs it) and blends. Here each lane runs one Horner chain of 10 steps whose
coefficients TBL picks from tables of the three pieces (one table register per degree: lane
byte index piece * 4 + 0..3), in the piece's variable (x^2 for the small piece, |x| minus the
piece's center for the others). The small piece's 6 coefficients are preceded by 4 zeros:
0 * x^2 + 0 is +0 for the finite x^2 of its lanes, so its chain reaches its leading
coefficient exactly and then takes erf.py's steps. A vector whose lanes are all in the small
piece (or NaN: FMAXNMV skips them) takes that piece's 6 steps alone (most of the values of
an activation: the benchmark transformer's Gelu, 38% of its vectors). Each lane therefore gets erf.py's bits
(the same products, sums and selects: x * P for the small piece, 1 - P past it, 1 from 4,
the sign of x), in about 40 instructions per vector instead of about 60 (the Gelu of the
benchmark transformer: 16.8 executed instructions per element before).
"""
from __future__ import annotations

import numpy as np

from ...emit_c.cwriter import c_literal
from .coeffs import ERF_BIG, ERF_MID, ERF_SMALL

DEG = max(len(ERF_SMALL), len(ERF_MID), len(ERF_BIG))


def _lit(v) -> str:
    return c_literal(v, np.float32)


def erf_tbl_text(name: str) -> str:
    """C text of ``float32x4_t name(float32x4_t x)`` (the NEON erf, bit-identical to erf.py's
    form on NEON)."""
    pieces = [(0.0,) * (DEG - len(c)) + tuple(reversed(c)) for c in (ERF_SMALL, ERF_MID,
                                                                     ERF_BIG)]
    rows = ",\n        ".join("{" + ", ".join(_lit(p[i]) for p in pieces) + ", 0.0f}"
                              for i in range(DEG))
    # the small piece alone: its coefficient of degree k is lane 0 of row DEG - 1 - k, taken
    # by TBL from the table registers the loop keeps (GCC reloads constants in the loop)
    n = len(ERF_SMALL)
    e = f"aicc_erf_tbl(c[{DEG - n}], i0)"
    for k in range(n - 2, -1, -1):
        e = f"vfmaq_f32(aicc_erf_tbl(c[{DEG - 1 - k}], i0), {e}, u)"
    small = e
    steps = "\n".join(f"    p = vfmaq_f32(aicc_erf_tbl(c[{i}], ix), p, v);"
                      for i in range(1, DEG))
    return f"""\
/* erf of 4 floats (kernels/vmath/erf_tbl.py): erf.py's pieces and FMA Horner steps, one chain
 * per lane; TBL takes each lane's coefficient from the row of its piece (small, mid, big) */
static inline float32x4_t aicc_erf_tbl(float32x4_t t, uint8x16_t ix)
{{
    return vreinterpretq_f32_u8(vqtbl1q_u8(vreinterpretq_u8_f32(t), ix));
}}

static AICC_UNUSED float32x4_t {name}(float32x4_t x)
{{
    static const float cf[{DEG + 1}][4] = {{   /* highest degree first; the pieces' centers */
        {rows},
        {{0.0f, 1.5625f, 3.125f, 0.0f}}}};
    float32x4_t c[{DEG + 1}];
    for (int i = 0; i < {DEG + 1}; ++i)
        c[i] = vld1q_f32(cf[i]);
    const float32x4_t one = vdupq_n_f32(1.0f);
    /* |x|, clamped at 4: the big piece's 1 - P at 4 is 1.0f, erf.py's value from 4 on; FMIN
     * keeps NaN */
    const float32x4_t t = vminq_f32(vabsq_f32(x), vdupq_n_f32(4.0f));
    if (!(vmaxnmvq_f32(t) >= 0.875f)) {{   /* every lane small (or NaN): that piece alone */
        const uint8x16_t i0 = vreinterpretq_u8_u32(vdupq_n_u32(0x03020100u));
        const float32x4_t u = vmulq_f32(x, x);
        return vmulq_f32(x, {small});
    }}
    const uint32x4_t mid = vcgeq_f32(t, vdupq_n_f32(0.875f));   /* not small (NaN: small) */
    const uint32x4_t big = vcgeq_f32(t, vdupq_n_f32(2.25f));
    /* byte indices piece * 4 + 0..3; piece = -(mid + big) */
    const uint8x16_t ix = vreinterpretq_u8_u32(vmlsq_u32(vdupq_n_u32(0x03020100u),
        vaddq_u32(mid, big), vdupq_n_u32(0x04040404u)));
    const float32x4_t v = vbslq_f32(mid, vsubq_f32(t, aicc_erf_tbl(c[{DEG}], ix)),
                                    vmulq_f32(x, x));
    float32x4_t p = aicc_erf_tbl(c[0], ix);
{steps}
    const float32x4_t h = vbslq_f32(vreinterpretq_u32_f32(vdupq_n_f32(-0.0f)), x,
                                    vsubq_f32(one, p));                  /* the sign of x */
    return vbslq_f32(mid, h, vmulq_f32(x, p));
}}"""
