"""The Arm DSP extension (Armv7E-M: Cortex-M4, M7; Armv8-M Mainline with DSP: M33, M55): SIMD within
one 32-bit general register, no vector registers. The kernels use its 16-bit pair
multiply-accumulate: SMLAD adds the two products of the halves of two registers to an int32
(two MACs per instruction), and SXTB16 sign-extends bytes 0 and 2 of a register (with ROR #8:
bytes 1 and 3) to those halves, so one 32-bit load of four int8 values feeds two SMLADs.

Only the int8 dot-product kernels have an entry (``qpair``: kernels/qgemm/pairs.py); every
other family finds nothing here and stays portable C (isa_for picks only ISAs whose
description has the family's entry). The spellings are ACLE's (arm_acle.h, GCC 12
arm-none-eabi with -mcpu=cortex-m4); GCC 12 has no ``__ror`` and does not fold a rotate into
SXTB16's operand, hence the prelude's one-instruction helper.
"""
from __future__ import annotations

from ..base import Isa

PRELUDE = """\
/* SXTB16 of x rotated right by 8: bytes 1 and 3 of x sign-extended to the low and high halves
 * (one instruction; ACLE's __sxtb16(__ror(x, 8)), which GCC 12 lacks). */
static inline int32_t aicc_dsp_sxtb16_ror8(uint32_t x)
{
    int32_t r;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(x));
    return r;
}"""

ISA = Isa(
    name="dsp", family="arm", header="<arm_acle.h>", vector_bytes=4, registers=13,
    prelude=PRELUDE,
    # int8 dot products on int16 pairs (kernels/qgemm/pairs.py): lo / hi widen bytes (0, 2) /
    # (1, 3) of a word to two int16 halves (the weights; the int8 inputs of a 1x1 conv's
    # gather, sub2 then taking the zero point off both halves); mac2 adds both products of
    # the halves of a and b to c (exact: |products| <= 2 * 128 * 255 never overflow the int32
    # sum the build bounds)
    qpair=dict(lo="__sxtb16({x})", hi="aicc_dsp_sxtb16_ror8({x})",
               mac2="__smlad({a}, {b}, {c})",
               # both int16 halves of a minus those of b (SSUB16; no saturation, modulo 2^16)
               sub2="__ssub16({a}, {b})"),
)
