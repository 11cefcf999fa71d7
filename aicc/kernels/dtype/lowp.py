"""Low-precision types: 8-bit and 4-bit floats, 4-bit and 2-bit integers.

Storage (as numpy/ml_dtypes and the bundle's tensors): ONE BYTE PER ELEMENT.

- float8_e4m3fn, float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz: the 8-bit code in a uint8_t.
- float4_e2m1fn: the 4-bit code in the low 4 bits of a uint8_t (the high bits are ignored
  on reading and written as 0).
- int4, int2: an int8_t whose low 4 (2) bits are the two's complement code; readers ignore
  the high bits and sign-extend (ml_dtypes stores -1 as 0x0F but also reads 0xFF as -1),
  writers write the canonical code (high bits 0, as ml_dtypes).
- uint4, uint2: a uint8_t, low 4 (2) bits.

Decoding (code -> float32) is exact for every code. Encoding from a double (float32 and
float16/bfloat16 values are converted to double exactly) rounds to nearest even, then:

============  =====================  ==================================  ==============
format        NaN                    |x| > max (or +-Inf), saturate=1    saturate=0
============  =====================  ==================================  ==============
e4m3fn        S.1111.111 (sign kept)  +-448                              NaN (sign kept)
e4m3fnuz      0x80 (the only NaN)     +-240                              0x80
e5m2          S.11111.10 (quiet)      +-57344                            +-Inf
e5m2fnuz      0x80                    +-57344                            0x80
e2m1fn        +0 (no NaN code)        +-6 (always: no Inf/NaN codes)     +-6
============  =====================  ==================================  ==============

This is onnx.numpy_helper.saturate_cast (clip, then round) for saturate=1 and the ml_dtypes
conversion for saturate=0. The fnuz formats have no -0: values rounding to zero give +0.
ml_dtypes maps NaN to a zero of float4 (with a flipped sign); we give +0 (equal as a float).

float8_e8m0fnu (Cast only, not a quantized type): 2^(c - 127), 0xFF = NaN; encoding takes
the float32 exponent rounded per Cast's ``round_mode`` (onnx.numpy_helper.to_float8e8m0).

Integer targets (int4/uint4/int2/uint2) wrap modulo 2^bits like numpy/ml_dtypes' astype: from
integers by the low bits, from floats by truncation toward zero then the low bits of the
integer part (exact, via fmod); NaN and +-Inf give 0. (ml_dtypes 0.7 gives 0 for floats out of
range and rounds float64 to float8 once; pyproject.toml keeps ml_dtypes below 0.7.)
"""
from __future__ import annotations

import numpy as np

# name -> (exponent bits, mantissa bits, bias, style, max finite)
FLOAT_FORMATS = {
    "float8_e4m3fn": (4, 3, 7, "fn", 448.0),
    "float8_e4m3fnuz": (4, 3, 8, "fnuz", 240.0),
    "float8_e5m2": (5, 2, 15, "ieee", 57344.0),
    "float8_e5m2fnuz": (5, 2, 16, "fnuz", 57344.0),
    "float4_e2m1fn": (2, 1, 1, "fn4", 6.0),
}
# name -> (bits, signed)
INT_FORMATS = {"int4": (4, True), "uint4": (4, False), "int2": (2, True), "uint2": (2, False)}
E8M0 = "float8_e8m0fnu"            # exponent only: 2^(c - 127), 0xFF = NaN, no sign or zero
LOWP_FLOAT = set(FLOAT_FORMATS) | {E8M0}
LOWP_INT = set(INT_FORMATS)
LOWP = LOWP_FLOAT | LOWP_INT


def _tag(name: str) -> str:
    return name.replace("float8_", "f8").replace("float4_", "f4")


def to_float(ctx, name: str) -> str:
    """Name of a C function: code of float format ``name`` -> float (exact)."""
    if name == E8M0:
        return ctx.helper("aicc_f8e8m0_to_f", (
            "/* float8_e8m0fnu code -> float32: 2^(c - 127) (exact), 0xFF -> NaN */\n"
            "static AICC_UNUSED float aicc_f8e8m0_to_f(uint8_t c)\n{\n"
            "    if (c == 0xFFu) return NAN;\n"
            "    return ldexpf(1.0f, (int)c - 127);\n}"))
    eb, mb, bias, style, _ = FLOAT_FORMATS[name]
    nbits = 1 + eb + mb
    sign = 1 << (nbits - 1)
    emask, mmask = (1 << eb) - 1, (1 << mb) - 1
    fn = f"aicc_{_tag(name)}_to_f"
    if style == "fn":
        special = "    if ((c & 0x7Fu) == 0x7Fu) return NAN;   /* S.1111.111 */\n"
    elif style == "fnuz":
        special = "    if (c == 0x80u) return NAN;   /* the only NaN; no -0 */\n"
    elif style == "ieee":
        special = (f"    if (e == {emask}u) {{\n"
                   f"        if (m != 0u) return NAN;\n"
                   f"        return (c & 0x80u) ? -INFINITY : INFINITY;\n    }}\n")
    else:
        special = ""
    code = (f"/* {name} code -> float32, exact (one code per byte"
            f"{', low 4 bits' if nbits == 4 else ''}) */\n"
            f"static AICC_UNUSED float {fn}(uint8_t c8)\n{{\n"
            f"    const uint32_t c = (uint32_t)c8 & {(1 << nbits) - 1}u;\n"
            f"    const uint32_t e = (c >> {mb}) & {emask}u, m = c & {mmask}u;\n"
            f"    float v;\n{special}"
            f"    if (e == 0u) v = ldexpf((float)m, {1 - bias - mb});\n"
            f"    else v = ldexpf((float)(m | {1 << mb}u), (int)e - {bias + mb});\n"
            f"    return (c & {sign}u) ? -v : v;\n}}")
    return ctx.helper(fn, code)


def from_double(ctx, name: str, saturate: bool = True) -> str:
    """Name of a C function: double -> code of float format ``name`` (see module doc)."""
    eb, mb, bias, style, mx = FLOAT_FORMATS[name]
    nbits = 1 + eb + mb
    sign = 1 << (nbits - 1)
    if style == "fn4":
        saturate = True
    fn = f"aicc_f_to_{_tag(name)}{'_sat' if saturate else ''}"
    maxcode = int(np.array([mx], dtype=_ml(name)).view(np.uint8)[0]) & ((1 << nbits) - 1)
    nan = {"fn": "s | 0x7Fu", "fnuz": "0x80u", "ieee": "s | 0x7Eu", "fn4": "0u"}[style]
    ovf = {"fn": "s | 0x7Fu", "fnuz": "0x80u", "ieee": "s | 0x7Cu", "fn4": f"s | {maxcode}u"}[style]
    big = f"s | {maxcode}u" if saturate else ovf
    zero_sign = "    if (code == 0u) s = 0u;   /* no -0 */\n" if style == "fnuz" else ""
    # saturate: clip first (as saturate_cast); else only Inf here, finite values that round
    # beyond the max overflow below (values just above the max may round down to it)
    over = f"a > {mx!r}" if saturate else "a == INFINITY"
    min_normal = f"{2.0 ** (1 - bias)!r}"
    code = (f"/* double -> {name} code: round to nearest even; NaN -> {nan}; beyond the max\n"
            f" * finite {mx:g} (or +-Inf) -> {big} "
            f"({'saturate' if saturate else 'no saturation'}) */\n"
            f"static AICC_UNUSED uint8_t {fn}(double x)\n{{\n"
            f"    uint32_t s = signbit(x) ? {sign}u : 0u, code;\n"
            f"    double a = fabs(x), q, r;\n"
            f"    int e;\n"
            f"    if (x != x) return (uint8_t)({nan});\n"
            f"    if ({over}) return (uint8_t)({big});\n"
            f"    if (a < {min_normal}) {{   /* subnormal; a carry gives the min normal */\n"
            f"        r = rint(a / {2.0 ** (1 - bias - mb)!r});\n"
            f"        code = (uint32_t)r;\n"
            f"    }} else {{\n"
            f"        (void)frexp(a, &e);   /* a in [2^(e-1), 2^e) */\n"
            f"        q = ldexp(1.0, e - 1 - {mb});\n"
            f"        r = rint(a / q);      /* in [2^{mb}, 2^{mb + 1}], exact scaling */\n"
            f"        if (r * q > {mx!r}) return (uint8_t)({big});\n"
            f"        code = ((uint32_t)(e - 1 + {bias}) << {mb}) + ((uint32_t)r - {1 << mb}u);\n"
            f"    }}\n"
            f"{zero_sign}"
            f"    return (uint8_t)(s | code);\n}}")
    return ctx.helper(fn, code)


def _ml(name: str):
    import ml_dtypes
    return getattr(ml_dtypes, name)


def int_value(ctx, name: str) -> str:
    """Name of a C function: stored int4/uint4/int2/uint2 byte -> its value (int8_t/uint8_t)."""
    bits, signed = INT_FORMATS[name]
    mask, half = (1 << bits) - 1, 1 << (bits - 1)
    fn = f"aicc_{name}_val"
    if signed:
        code = (f"/* {name}: low {bits} bits, two's complement, sign-extended */\n"
                f"static AICC_UNUSED int8_t {fn}(int8_t c)\n{{\n"
                f"    const int32_t u = (int32_t)((uint8_t)c & {mask}u);\n"
                f"    return (int8_t)(u >= {half} ? u - {1 << bits} : u);\n}}")
    else:
        code = (f"/* {name}: low {bits} bits */\n"
                f"static AICC_UNUSED uint8_t {fn}(uint8_t c)\n{{\n"
                f"    return (uint8_t)(c & {mask}u);\n}}")
    return ctx.helper(fn, code)


def int_from_bits(ctx, name: str) -> str:
    """Name of a C function: uint64 two's complement pattern -> canonical code (wraps)."""
    bits, signed = INT_FORMATS[name]
    ct = "int8_t" if signed else "uint8_t"
    fn = f"aicc_{name}_wrap"
    code = (f"/* integer -> {name}: modulo 2^{bits} (canonical code: high bits 0) */\n"
            f"static AICC_UNUSED {ct} {fn}(uint64_t u)\n{{\n"
            f"    return ({ct})(u & {(1 << bits) - 1}u);\n}}")
    return ctx.helper(fn, code)


def int_from_double(ctx, name: str) -> str:
    """Name of a C function: double -> code of int format ``name``: truncate, wrap; NaN/Inf -> 0."""
    bits, signed = INT_FORMATS[name]
    ct = "int8_t" if signed else "uint8_t"
    m = float(1 << bits)
    fn = f"aicc_f_to_{name}"
    code = (f"/* double -> {name}: truncate toward zero, wrap modulo 2^{bits} (as numpy astype);\n"
            f" * NaN and +-Inf -> 0 */\n"
            f"static AICC_UNUSED {ct} {fn}(double x)\n{{\n"
            f"    double t;\n"
            f"    if (x != x || x == INFINITY || x == -INFINITY) return 0;\n"
            f"    t = fmod(trunc(x), {m!r});   /* exact, in (-2^{bits}, 2^{bits}) */\n"
            f"    if (t < 0.0) t += {m!r};\n"
            f"    return ({ct})(uint32_t)t;\n}}")
    return ctx.helper(fn, code)


def e8m0_from_float(ctx, saturate: bool = True, round_mode: str = "up") -> str:
    """Name of a C function: float -> float8_e8m0fnu code, as onnx.numpy_helper.to_float8e8m0:
    the float32 exponent field, rounded per ``round_mode`` (up: any fraction bumps it; down:
    truncate; nearest: guard/round/sticky), NaN/Inf -> 0xFF (NaN), the sign ignored, zero and
    float32 subnormals -> 2^-127 (or 2^-126 when rounded up); saturate keeps 2^127 from
    rounding up to the NaN code."""
    if round_mode not in ("up", "down", "nearest"):
        raise ValueError(f"round_mode {round_mode!r}")
    fn = f"aicc_f_to_f8e8m0_{round_mode}{'_sat' if saturate else ''}"
    cap = " && e != 0xFEu" if saturate else ""
    rnd = {"up": f"    if ((b & 0x7FFFFFu) != 0u{cap}) e++;\n",
           "down": "",
           "nearest": ("    if ((b & 0x400000u) != 0u && ((b & 0x200000u) != 0u || "
                       f"(b & 0x1FFFFFu) != 0u || e > 0u){cap}) e++;\n")}[round_mode]
    code = (f"/* float32 -> float8_e8m0fnu, round {round_mode}"
            f"{', saturating' if saturate else ''}; NaN/Inf -> 0xFF; sign ignored */\n"
            f"static AICC_UNUSED uint8_t {fn}(float f)\n{{\n"
            f"    uint32_t b, e;\n"
            f"    memcpy(&b, &f, sizeof b);\n"
            f"    e = (b >> 23) & 0xFFu;\n"
            f"    if (e == 0xFFu) return 0xFFu;\n{rnd}"
            f"    return (uint8_t)e;\n}}")
    return ctx.helper(fn, code)
