"""float16 and bfloat16: storage as uint16_t bits, conversions to and from float32.

Most ops do not compute on half types themselves: the upcast-half pass wraps them in Cast
nodes (compute in float32, round the result back). The conversions here are exact where
possible and round to nearest even otherwise; NaN stays NaN (quiet), Inf stays Inf, values
beyond the half range become Inf, subnormals are handled.
"""
from __future__ import annotations

H2F = """/* float16 bits -> float32 (exact) */
static AICC_UNUSED float aicc_h2f(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (uint32_t)(h >> 10) & 0x1Fu, m = (uint32_t)h & 0x3FFu, bits;
    float f;
    if (e == 0x1Fu) {
        bits = sign | 0x7F800000u | (m << 13);                 /* Inf, NaN */
    } else if (e != 0u) {
        bits = sign | ((e + 112u) << 23) | (m << 13);          /* normal */
    } else if (m == 0u) {
        bits = sign;                                           /* zero */
    } else {                                                   /* subnormal: normalise */
        e = 113u;
        while ((m & 0x400u) == 0u) {
            m <<= 1;
            e--;
        }
        bits = sign | (e << 23) | ((m & 0x3FFu) << 13);
    }
    memcpy(&f, &bits, sizeof f);
    return f;
}"""

F2H = """/* float32 -> float16 bits, round to nearest even; overflow -> Inf, NaN stays NaN */
static AICC_UNUSED uint16_t aicc_f2h(float f)
{
    uint32_t x, a, sign, h;
    memcpy(&x, &f, sizeof x);
    sign = (x >> 16) & 0x8000u;
    a = x & 0x7FFFFFFFu;
    if (a > 0x7F800000u) {
        return (uint16_t)(sign | 0x7E00u | ((a >> 13) & 0x3FFu));   /* quiet NaN */
    }
    if (a >= 0x477FF000u) {
        return (uint16_t)(sign | 0x7C00u);                          /* Inf or rounds to Inf */
    }
    if (a < 0x38800000u) {                                          /* half subnormal or 0 */
        uint32_t e = a >> 23, m, shift, rem, halfway;
        if (a < 0x33000000u) {
            return (uint16_t)sign;                                  /* below 2^-25: 0 */
        }
        m = (a & 0x7FFFFFu) | 0x800000u;
        shift = 126u - e;
        h = m >> shift;
        rem = m & ((1u << shift) - 1u);
        halfway = 1u << (shift - 1u);
        if (rem > halfway || (rem == halfway && (h & 1u) != 0u)) {
            h++;
        }
        return (uint16_t)(sign | h);
    }
    h = (a - 0x38000000u) >> 13;                                    /* rebias, drop 13 bits */
    if ((a & 0x1FFFu) > 0x1000u || ((a & 0x1FFFu) == 0x1000u && (h & 1u) != 0u)) {
        h++;                                                        /* may carry into Inf */
    }
    return (uint16_t)(sign | h);
}"""

BF2F = """/* bfloat16 bits -> float32 (exact) */
static AICC_UNUSED float aicc_bf2f(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}"""

F2BF = """/* float32 -> bfloat16 bits, round to nearest even; NaN stays NaN */
static AICC_UNUSED uint16_t aicc_f2bf(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) {
        return (uint16_t)((x >> 16) | 0x40u);
    }
    x += 0x7FFFu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
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
