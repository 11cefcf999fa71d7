"""float16 and bfloat16: storage as uint16_t bits, conversions to and from float32.

Most ops do not compute on half types themselves: the upcast-half pass wraps them in Cast
nodes (compute in float32, round the result back). The conversions here are exact where
possible and round to nearest even otherwise; NaN stays NaN (quiet), Inf stays Inf, values
beyond the half range become Inf, subnormals are handled. The functions are branch-free (every
case computed, the result selected by bit masks), so the loops that call them vectorize on
the portable targets: 1x64x56x56 on generic (SSE2), float32 -> float16 931 -> 196 us,
float16 -> float32 340 -> 85 us. They give the bits of the branchy forms they replaced for
all 2^32 floats and all 65536 halves (checked once, exhaustively, in C); the tests check them
against numpy / ml_dtypes at every rounding boundary.
"""
from __future__ import annotations

H2F = """/* float16 bits -> float32 (exact). Branch-free, so loops of it vectorize: normal halves
 * rebias the exponent (+112), subnormal ones are m * 2^-24 from an exact int -> float
 * conversion (no subnormal operand: the same under flush-to-zero), Inf / NaN set the float
 * exponent and keep the payload. */
static inline AICC_UNUSED float aicc_h2f(uint16_t h)
{
    const uint32_t em = (uint32_t)h & 0x7FFFu, m = em & 0x3FFu;
    const uint32_t special = 0u - (uint32_t)(em >= 0x7C00u);   /* Inf, NaN */
    const uint32_t tiny = 0u - (uint32_t)(em < 0x0400u);       /* subnormal, zero */
    const float sub = (float)(int32_t)m * 5.9604644775390625e-08f;   /* m * 2^-24 */
    uint32_t sb, bits;
    float f;
    memcpy(&sb, &sub, sizeof sb);
    bits = (em << 13) + 0x38000000u;                            /* normal */
    bits = (bits & ~tiny) | (sb & tiny);
    bits = (bits & ~special) | ((0x7F800000u | (m << 13)) & special);
    bits |= ((uint32_t)h & 0x8000u) << 16;
    memcpy(&f, &bits, sizeof f);
    return f;
}"""

F2H = """/* float32 -> float16 bits, round to nearest even; overflow -> Inf, NaN stays NaN (quiet, the
 * payload's top bits kept). Branch-free, so loops of it vectorize: every case is computed
 * and the bits selected. Below 2^-14, |f| + 0.5f rounds |f| to the half subnormal step 2^-24
 * (the default rounding mode, to nearest even; a subnormal float gives 0 with or without
 * flush-to-zero). */
static inline AICC_UNUSED uint16_t aicc_f2h(float f)
{
    uint32_t x, a, nrm, sub, nan, m, r;
    float s;
    memcpy(&x, &f, sizeof x);
    a = x & 0x7FFFFFFFu;
    nrm = (a - 0x38000000u + 0xFFFu + ((a >> 13) & 1u)) >> 13;  /* rebias, round (may reach Inf) */
    memcpy(&s, &a, sizeof s);
    s = s + 0.5f;
    memcpy(&sub, &s, sizeof sub);
    sub -= 0x3F000000u;                                         /* steps of 2^-24 above 0.5 */
    nan = 0x7E00u | ((a >> 13) & 0x3FFu);
    m = 0u - (uint32_t)(a < 0x38800000u);                       /* half subnormal or 0 */
    r = (nrm & ~m) | (sub & m);
    m = 0u - (uint32_t)(a >= 0x477FF000u);                      /* Inf or rounds to Inf */
    r = (r & ~m) | (0x7C00u & m);
    m = 0u - (uint32_t)(a > 0x7F800000u);                       /* NaN */
    r = (r & ~m) | (nan & m);
    return (uint16_t)(((x >> 16) & 0x8000u) | r);
}"""

BF2F = """/* bfloat16 bits -> float32 (exact) */
static AICC_UNUSED float aicc_bf2f(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}"""

F2BF = """/* float32 -> bfloat16 bits, round to nearest even; NaN stays NaN (quiet). Branch-free. */
static inline AICC_UNUSED uint16_t aicc_f2bf(float f)
{
    uint32_t x, r, m;
    memcpy(&x, &f, sizeof x);
    r = (x + 0x7FFFu + ((x >> 16) & 1u)) >> 16;
    m = 0u - (uint32_t)((x & 0x7FFFFFFFu) > 0x7F800000u);
    r = (r & ~m) | (((x >> 16) | 0x40u) & m);
    return (uint16_t)r;
}"""

# float32 -> the nearest half value -> float32 in one function (RoundHalf; the bits of the
# conversion pair above for all 2^32 floats, checked once, exhaustively, in C): 1x64x25x5 on
# generic 15.1 -> 4.9 us
ROUND_H = """/* float32 rounded to the nearest float16 value (nearest even), as a float32: the
 * bits of aicc_h2f(aicc_f2h(f)). Normal halves keep 10 mantissa bits (a carry may reach
 * the next exponent or Inf), half subnormals are multiples of 2^-24 ((|f| + 0.5f) - 0.5f),
 * values that round past 65504 are Inf, NaN stays NaN (quiet, its top 10 payload bits
 * kept). */
static inline AICC_UNUSED float aicc_round_h(float f)
{
    uint32_t x, a, r, sub, m;
    float s;
    memcpy(&x, &f, sizeof x);
    a = x & 0x7FFFFFFFu;
    r = (a + 0xFFFu + ((a >> 13) & 1u)) & 0xFFFFE000u;
    memcpy(&s, &a, sizeof s);
    s = (s + 0.5f) - 0.5f;
    memcpy(&sub, &s, sizeof sub);
    m = 0u - (uint32_t)(a < 0x38800000u);                       /* half subnormal or 0 */
    r = (r & ~m) | (sub & m);
    m = 0u - (uint32_t)(a >= 0x477FF000u);                      /* Inf or rounds to Inf */
    r = (r & ~m) | (0x7F800000u & m);
    m = 0u - (uint32_t)(a > 0x7F800000u);                       /* NaN */
    r = (r & ~m) | ((0x7FC00000u | (a & 0x007FE000u)) & m);
    r |= x & 0x80000000u;
    memcpy(&s, &r, sizeof s);
    return s;
}"""

ROUND_BF = """/* float32 rounded to the nearest bfloat16 value (nearest even), as a float32: the
 * bits of aicc_bf2f(aicc_f2bf(f)) (NaN stays NaN, quiet). */
static inline AICC_UNUSED float aicc_round_bf(float f)
{
    uint32_t x, r, m;
    float y;
    memcpy(&x, &f, sizeof x);
    r = (x + 0x7FFFu + ((x >> 16) & 1u)) & 0xFFFF0000u;
    m = 0u - (uint32_t)((x & 0x7FFFFFFFu) > 0x7F800000u);
    r = (r & ~m) | ((x | 0x00400000u) & 0xFFFF0000u & m);
    memcpy(&y, &r, sizeof y);
    return y;
}"""

HALF_TYPES = {"float16", "bfloat16"}


def to_float(ctx, dtype_name: str) -> str:
    """Name of the C function converting half bits of this dtype to float."""
    if dtype_name == "float16":
        return ctx.helper("aicc_h2f", H2F)
    return ctx.helper("aicc_bf2f", BF2F)


def from_float(ctx, dtype_name: str) -> str:
    """Name of the C function converting a float to half bits of this dtype."""
    if dtype_name == "float16":
        return ctx.helper("aicc_f2h", F2H)
    return ctx.helper("aicc_f2bf", F2BF)


def round_float(ctx, dtype_name: str) -> str:
    """Name of the C function rounding a float to the nearest value of this half dtype."""
    if dtype_name == "float16":
        return ctx.helper("aicc_round_h", ROUND_H)
    return ctx.helper("aicc_round_bf", ROUND_BF)
