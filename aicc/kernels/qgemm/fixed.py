"""Requantization in 32-bit integer arithmetic, for targets whose YAML says ``requant: integer``
(the default with ``double_fpu: false``: cortex-m4, whose FPv4-SP makes every double a libgcc
call; also cortex-m7 and cortex-m55, on which the float rows, written for SIMD hosts, take
more instructions): the int32 sums of QLinearConv / QLinearMatMul on the portable and pair
kernels (kernels/qgemm/portable.py, pairs.py, ops/qlinear.py) become outputs with no float64
and no libm call.

Values: ``y = saturate(rint(a * m) + zp)``, a = int32(acc + bias) (the sum modulo 2^32, as
everywhere), m the float32 multiplier ``sa * sw / sy`` computed in float32 as before, rint
half to even: the values of the float64 form (aicc_qround_double of the exact float64
product) for every sum with |a| < 2^29, and every multiplier. A finite m is a float32, so
m = M 2^-s exactly with M its 24-bit significand: |m| in [2^-33, 1/2) is written with s >= 32
and |M| < 2^31 (the significand shifted left while s < 32), the product a M is exact in int64,
and rint(a m) is the floor of (a M + 2^(s-1)) / 2^s: the high word of the 64-bit sum shifted
right by s - 32 (an arithmetic shift, written so that no implementation-defined right shift of
a negative value is involved: GCC compiles it to ASR), except on a tie (a M + 2^(s-1) a
multiple of 2^s), where rounding up is replaced by the even neighbour. That is the float64
form's value as long as the float64 product is exact: |a| < 2^29 makes a M at most 53
significant bits. Beyond that (sums no build could bound: K above 8000 full-range taps) the
float64 product itself rounds, and where it rounds onto or across a half-integer (|m| < 2^-20
only: otherwise the product saturates or keeps every bit) the two differ by one step; the
integer form is then the exact rint(a m).

onnxruntime multiplies in float32 (MlasRequantizeOutput: float(a) * m rounded to float32,
then rounded half to even), so both the float64 form and this one differ from it by one step
where the float32 product lands on the other side of a half-integer (near-ties: one output in
a few thousand on random data; ops/qlinear.py documents the float64 form's choice).

Special multipliers and ranges (the float64 form's behaviour, value for value):
- NaN m (a NaN scale, or zero over zero): every output is the zero point (saturated to the
  type). A zero y_scale otherwise makes m +-Inf: below.
- |m| < 2^-33 (zero and subnormals included): |a m| < 1/4, every output the zero point.
- |m| >= 1/2: a m = (a 2^u)(m 2^-u), u = e - 125 for the float's exponent e (at most 20), a
  first clamped to [-2^10, 2^10]: beyond, |a m| > 512 saturates whatever the zero point of a
  byte type, and the clamped value saturates the same way. |m| >= 2^19 and +-Inf keep u = 20
  and a significand whose product still saturates for every a != 0 (Inf: a = 0 gives NaN in
  float64, hence the zero point; here 0, the zero point as well).
- Out-of-range results saturate to [lo, hi] of the output type (SSAT / USAT where the
  compiler has ACLE's __ssat / __usat: GCC 12 compiles the int8 clamp to compares and
  branches); no intermediate overflows: |a M| < 2^62.

The row helper picks one of two loops per row. The fast loop needs |bias| + the build's bound
on |acc| below 2^29 (no wrap modulo 2^32, the float64 product exact), |m| in [2^-31, 1/2)
(s <= 54: zp 2^s fits an int64) and no possible tie: a tie needs 2^(s-1-c) to divide a for
c = ctz(M), so none exists when bound + |bias| < 2^(s-1-c) (random scales: s - c is about 31
for m near 2^-8, sums below 2^24). It folds bias M, 2^(s-1) and zp 2^s into one 64-bit addend
and runs in blocks of 4 outputs: per output a load, SMLAL with the two moves of its
accumulator, SSAT and a byte store on the Cortex-M4 (GCC 12 -O2), plus an ASR unless s = 32
(|m| >= 2^-9: a second copy of the block without it). Otherwise the general loop: the sum
wrapped in uint32 as the reference, the |m| >= 1/2 clamp and shift, the tie check, zp added
after rounding. DS-CNN int8: 72000 outputs in 576 rows (one in the general loop: a
significand whose trailing zeros leave a tie possible within the bound), 0.56M executed
instructions with the per-row set-up, against 5.9M for the float64 form and its soft-double
calls.

Why not float32: with a fused multiply-add, float32 gives the float64 value when |a| <= 2^24
and |m| <= 0.75 (kernels/qgemm/requant.py, ``_f32f``), but on the M4 that is a load, an
integer add of the bias, a move to the FPU, VCVT, a copy of the addend, VFMA, a move back, a
subtraction, SSAT and the store per output (10, against 6 or 7 here), and it needs a fallback
for the other cases; this form is exact on every case and never leaves the integer unit.
Except for one-row products with a multiplier per column (fully connected layers): there the
row helper's set-up (the significand and shift of m, the bound and tie checks) runs once per
output, and ``one_fma`` uses the fused multiply-add form where the FPU description has it and
the build proves its conditions (every |m| <= 0.75, |sum + bias| <= 2^24): 12 instructions an
output on the autoencoder's layers against about 90 through the row helper.
"""
from __future__ import annotations

import numpy as np

from ...emit_c.cwriter import ctype
from .requant import WRAP

LIMIT = (1 << 31) - 1

SAT = """\
#if defined(__ARM_FEATURE_SAT)
#include <arm_acle.h>
#endif
/* r saturated to [@LO@, @HI@] (kernels/qgemm/fixed.py): ACLE's @INTRIN@ where the compiler has it
 * (GCC 12 compiles the int8 clamp to compares and branches on the Cortex-M4). */
static inline int32_t aicc_sat_SFX(int32_t r)
{
#if defined(__ARM_FEATURE_SAT)
    return (int32_t)@INTRIN@(r, 8);
#else
    return r < @LO@ ? @LO@ : (r > @HI@ ? @HI@ : r);
#endif
}"""

ROW = """\
/* Requantization of n uint32 sums in 32-bit integer arithmetic (kernels/qgemm/fixed.py; no
 * float64, no libm call): y[q] = saturate(rint(int32(acc[q] + bias) * m) + zp), rint half to
 * even, the float64 form's values (|int32(acc[q] + bias)| < 2^29). m = M 2^-s exactly (M its
 * significand, |M| < 2^31, s >= 32): the product exact in int64, + 2^(s-1), floored by 2^s as
 * the high word shifted right by s - 32; a tie goes to the even neighbour. bnd: a bound on
 * |int32(acc[q])| the build proved (>= 2^31: none); zp: a value of the output type. NaN m:
 * zp; |m| < 2^-33: zp; |m| >= 1/2 and Inf: the sum clamped to +-2^10 (beyond, every product
 * saturates), then shifted left. */
static void aicc_rqrowi_SFX(size_t n, const uint32_t *restrict acc, uint32_t bias, float mlt,
                            int32_t zp, uint32_t bnd, YT *restrict y)
{
    uint32_t b, e, f, u = 0u;
    memcpy(&b, &mlt, sizeof b);
    e = b >> 23 & 0xffu;
    f = (b & 0x7fffffu) | 0x800000u;
    if ((e == 0xffu && f != 0x800000u) || e < 94u) {    /* NaN; |m| < 2^-33: |a m| < 1/4 */
        const YT z = (YT)aicc_sat_SFX(zp);
        for (size_t q = 0; q < n; ++q)
            y[q] = z;
        return;
    }
    if (e > 125u) {         /* |m| >= 1/2, Inf: (a 2^u) (m 2^-u), |a| clamped to 2^10 */
        u = e - 125u < 20u ? e - 125u : 20u;
        e = 125u;
    }
    const uint32_t s0 = 150u - e, k = s0 < 32u ? 32u - s0 : 0u, s = s0 + k, t = s - 32u;
    const uint32_t mu = f << k;     /* |M| < 2^31 */
    const int32_t M = b >> 31 ? -(int32_t)mu : (int32_t)mu;
    const uint64_t reach = (uint64_t)bnd + (bias >> 31 ? 0u - bias : bias);   /* |a| <= */
    if (u == 0u && s <= 54u && reach < (1u << 29) &&
            reach * (mu & (0u - mu)) < (uint64_t)1 << (s - 1u)) {
        /* no wrap, no tie: bias M + 2^(s-1) + zp 2^s in one addend */
        const uint64_t K = (uint64_t)((int64_t)aicc_u32_i32(bias) * M) +
                           ((uint64_t)1 << (s - 1u)) + (uint64_t)((int64_t)zp * ((int64_t)1 << s));
        size_t q = 0;
        if (t == 0u)        /* s = 32: the high word itself */
            for (; q + 4u <= n; q += 4u) {
                y[q + 0u] = (YT)aicc_sat_SFX(aicc_u32_i32((uint32_t)(((uint64_t)(
                    (int64_t)aicc_u32_i32(acc[q + 0u]) * M) + K) >> 32)));
                y[q + 1u] = (YT)aicc_sat_SFX(aicc_u32_i32((uint32_t)(((uint64_t)(
                    (int64_t)aicc_u32_i32(acc[q + 1u]) * M) + K) >> 32)));
                y[q + 2u] = (YT)aicc_sat_SFX(aicc_u32_i32((uint32_t)(((uint64_t)(
                    (int64_t)aicc_u32_i32(acc[q + 2u]) * M) + K) >> 32)));
                y[q + 3u] = (YT)aicc_sat_SFX(aicc_u32_i32((uint32_t)(((uint64_t)(
                    (int64_t)aicc_u32_i32(acc[q + 3u]) * M) + K) >> 32)));
            }
        for (; q + 4u <= n; q += 4u) {
            const uint64_t p0 = (uint64_t)((int64_t)aicc_u32_i32(acc[q + 0u]) * M) + K;
            const int32_t h0 = aicc_u32_i32((uint32_t)(p0 >> 32));
            y[q + 0u] = (YT)aicc_sat_SFX(h0 < 0 ? ~(~h0 >> t) : h0 >> t);
            const uint64_t p1 = (uint64_t)((int64_t)aicc_u32_i32(acc[q + 1u]) * M) + K;
            const int32_t h1 = aicc_u32_i32((uint32_t)(p1 >> 32));
            y[q + 1u] = (YT)aicc_sat_SFX(h1 < 0 ? ~(~h1 >> t) : h1 >> t);
            const uint64_t p2 = (uint64_t)((int64_t)aicc_u32_i32(acc[q + 2u]) * M) + K;
            const int32_t h2 = aicc_u32_i32((uint32_t)(p2 >> 32));
            y[q + 2u] = (YT)aicc_sat_SFX(h2 < 0 ? ~(~h2 >> t) : h2 >> t);
            const uint64_t p3 = (uint64_t)((int64_t)aicc_u32_i32(acc[q + 3u]) * M) + K;
            const int32_t h3 = aicc_u32_i32((uint32_t)(p3 >> 32));
            y[q + 3u] = (YT)aicc_sat_SFX(h3 < 0 ? ~(~h3 >> t) : h3 >> t);
        }
        for (; q < n; ++q) {
            const uint64_t p = (uint64_t)((int64_t)aicc_u32_i32(acc[q]) * M) + K;
            const int32_t h = aicc_u32_i32((uint32_t)(p >> 32));
            y[q] = (YT)aicc_sat_SFX(h < 0 ? ~(~h >> t) : h >> t);
        }
        return;
    }
    const uint64_t R = (uint64_t)1 << (s - 1u);
    const uint32_t tm = (1u << t) - 1u;
    for (size_t q = 0; q < n; ++q) {
        int32_t a = aicc_u32_i32(acc[q] + bias);
        if (u != 0u)
            a = (a < -1024 ? -1024 : (a > 1024 ? 1024 : a)) * (int32_t)(1u << u);
        const uint64_t p = (uint64_t)((int64_t)a * M) + R;
        const int32_t h = aicc_u32_i32((uint32_t)(p >> 32));
        int32_t r = h < 0 ? ~(~h >> t) : h >> t;
        if ((uint32_t)p == 0u && ((uint32_t)h & tm) == 0u)    /* a tie: the even neighbour */
            r -= (int32_t)((uint32_t)r & 1u);
        y[q] = (YT)aicc_sat_SFX(r + zp);
    }
}"""

ONE = """\
/* One output of aicc_rqrowi_SFX for a sum without a bound. */
static AICC_UNUSED int32_t aicc_rqonei_SFX(uint32_t acc, float mlt, int32_t zp)
{
    YT y;
    aicc_rqrowi_SFX(1u, &acc, 0u, mlt, zp, 0xffffffffu, &y);
    return (int32_t)y;
}"""


def usable(ctx) -> bool:
    """Whether ctx's target requantizes in integers (its ``requant``: no double-precision
    hardware, or a core where this takes fewer instructions than the float rows)."""
    return ctx.target.requant == "integer"


def _sfx(ydt) -> str:
    return "u8" if np.dtype(ydt).name == "uint8" else "s8"


def _text(code: str, ydt) -> str:
    sfx = _sfx(ydt)
    lo, hi = (0, 255) if sfx == "u8" else (-128, 127)
    return (code.replace("_SFX", f"_{sfx}").replace("YT", ctype(np.dtype(ydt)))
            .replace("@INTRIN@", "__usat" if sfx == "u8" else "__ssat")
            .replace("@LO@", str(lo)).replace("@HI@", str(hi)))


def _sat(ctx, ydt) -> None:
    """The saturation and uint32 -> int32 helpers the requantization helpers call."""
    ctx.helper("qlinear.0.wrap", WRAP)
    ctx.helper(f"qlinear.0.xsat_{_sfx(ydt)}", _text(SAT, ydt))


def row(ctx, ydt) -> str:
    """Name of the row helper for output dtype ydt (uint8 / int8): ``(n, acc, bias, mlt,
    zp, bnd, y)``, acc uint32 sums, bias uint32, bnd the C of bound_arg."""
    _sat(ctx, ydt)
    ctx.helper(f"qlinear.4.rqrowi_{_sfx(ydt)}", _text(ROW, ydt))
    return f"aicc_rqrowi_{_sfx(ydt)}"


def one(ctx, ydt) -> str:
    """Name of the one-output helper ``(acc, mlt, zp) -> int32``."""
    row(ctx, ydt)
    ctx.helper(f"qlinear.4.rqrowi_{_sfx(ydt)}.one", _text(ONE, ydt))
    return f"aicc_rqonei_{_sfx(ydt)}"


def bound_arg(b: int) -> str:
    """The C of a build-time bound b on |sum| (0xffffffffu: none, or not below 2^31)."""
    return f"{int(b)}u" if 0 <= b <= LIMIT else "0xffffffffu"


FMA_ONE = """\
/* rint(a * m) + zp saturated (kernels/qgemm/fixed.py one_fma), for |a| <= 2^24 and |m| <= 0.75
 * (the build checks both): fmaf(a, m, 1.5 * 2^23) rounds the exact a m + 1.5 * 2^23 once to an
 * integer while |a m| < 2^22 (kernels/qgemm/requant.py's _f32f form), whose float bits are
 * those of 1.5 * 2^23 plus rint(a m), half to even; beyond, the bits still order the values
 * and the result saturates. The float64 form's value, one VFMA. */
static inline int32_t aicc_rqfma_SFX(int32_t a, float m, int32_t zp)
{
    const float f = @FMA@;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return aicc_sat_SFX(aicc_u32_i32(u - 0x4B400000u) + zp);
}"""


def one_fma(ctx, ydt, mults, bound: int) -> str | None:
    """Name of the one-output helper ``(a, m, zp) -> int32`` of the fused multiply-add form
    for a target whose FPU description has one (``qround``'s ``fma``: isa/fpv4, isa/helium;
    every output one VFMA instead of the row helper's per-call set-up: per-column multipliers
    of one-row products), when every multiplier in ``mults`` (the build-time float32 values)
    is finite with |m| <= 0.75 and ``bound`` (on |sum + bias|) is at most 2^24; else None."""
    from ..isa.registry import ISAS
    from .quantize import round_isa
    from .requant import F_MAX
    isa = round_isa(ctx)
    fma = ISAS[isa].qround.get("fma") if isa else None
    m = np.asarray(mults, np.float32)
    if fma is None or not 0 <= bound <= 1 << 24 or m.size == 0 \
            or not np.all(np.isfinite(m)) or np.abs(m).max() > F_MAX:
        return None
    _sat(ctx, ydt)
    text = _text(FMA_ONE, ydt).replace("@FMA@", fma.format(a="(float)a", b="m",
                                                            c="12582912.0f"))
    ctx.helper(f"qlinear.4.rqfma_{_sfx(ydt)}", text)
    return f"aicc_rqfma_{_sfx(ydt)}"
