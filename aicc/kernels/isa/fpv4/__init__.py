"""The Armv7-M single-precision FPU (FPv4-SP: Cortex-M4F) and the FPUs that keep its
instructions: FPv5 on the Cortex-M7 and the Armv8.1-M FPU of the Cortex-M55 (both have VCVTR;
they add VCVTN, nearest even whatever FPSCR says, which FPv4 lacks). No vector registers, but
VCVTR converts a float to int32 with the FPSCR rounding mode (round to nearest even, the reset
value, which aicc's runtime never changes), saturating, NaN giving 0: rint and the conversion
in one instruction, where portable C clamps and rounds with compares (each a VCMP and a VMRS
on this FPU) or calls libm's rintf.

QuantizeLinear's scalar loop has an entry (``qround``: kernels/qgemm/quantize.py): SSAT / USAT
(Armv7-M, ACLE's __ssat / __usat) saturate the result. ``fpu``: the float GEMMs of the
portable conv (its register tile, kernels/conv/tile_fpu.py) and of Gemm / MatMul
(kernels/gemm/portable.py) in blocks of scalars that fit the 32 single-precision registers,
each product a VFMA (fmaf, which GCC expands inline for this FPU). Every other family finds
nothing here and stays portable C.
"""
from __future__ import annotations

from ..base import Isa

PRELUDE = """\
/* rint(v) as int32 by VCVTR (FPSCR rounding: nearest even), saturated to the int32 range,
 * NaN -> 0 (isa/fpv4). */
static inline int32_t aicc_fpv4_cvtr(float v)
{
    float r;
    int32_t i;
    __asm__("vcvtr.s32.f32 %0, %1" : "=t"(r) : "t"(v));
    memcpy(&i, &r, sizeof i);
    return i;
}"""

ISA = Isa(
    name="fpv4", family="arm", header="<arm_acle.h>", vector_bytes=4, registers=0,
    prelude=PRELUDE,
    # rint of a float as int32 (saturating, NaN -> 0); sat: r saturated to a signed / unsigned
    # range of b bits; fma: c + a * b rounded once (the requantization of one-row products,
    # kernels/qgemm/fixed.py one_fma)
    qround=dict(rint="aicc_fpv4_cvtr({x})", ssat="__ssat({x}, {b})", usat="__usat({x}, {b})",
                fma="fmaf({a}, {b}, {c})"),
    # registers: 32 single-precision; fma: c + a * b rounded once; a GEMM block of rows x
    # cols scalar sums (4 x 4: 16 sums, 4 values of A, 4 of B: 24 registers) and the width of
    # a one-row block (1 x 16: 16 sums, 1 of A, 16 of B loaded one by one)
    fpu=dict(registers=32, fma="fmaf({a}, {b}, {c})", rows=4, cols=4, row1_cols=16),
)
