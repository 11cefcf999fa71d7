"""Armv8.1-M with the M-profile Vector Extension (Helium, MVE: Cortex-M55): 128-bit vectors of
float32 and integers in eight Q registers, and the FPU's VCVTR (isa/fpv4).

The int8 dot-product kernels have an entry (``qvdot``: kernels/qgemm/vdot.py): VMLADAVA.S8
adds the 16 products of two int8 vectors to a 32-bit general register in one instruction.
Otherwise what the description changes is what it leaves out: FPv4's ``fpu`` entry (scalar
register blocks, kernels/conv/tile_fpu.py), because GCC vectorizes the portable kernels'
arrays of 4 with MVE at -O2 (float32 DS-CNN under qemu: 6.64M instructions portable, 7.37M
with the scalar blocks). QuantizeLinear keeps VCVTR (``qround``, the same spellings as FPv4).
The spellings are ACLE's (arm_mve.h, GCC 12.2 arm-none-eabi with -mcpu=cortex-m55).
"""
from __future__ import annotations

from ..base import Isa
from ..fpv4 import ISA as FPV4

ISA = Isa(
    name="helium", family="arm", header="<arm_mve.h>", vector_bytes=16, registers=8,
    # arm_mve.h does not declare ACLE's __ssat / __usat (qround): arm_acle.h in the prelude
    prelude="#include <arm_acle.h>\n\n" + FPV4.prelude, qround=dict(FPV4.qround),
    # int8 rows dotted into int32 scalars (kernels/qgemm/vdot.py): vtype holds ``lanes`` int8;
    # load reads them from p (no alignment), loadz the first n of them (n <= lanes; zeros in
    # the other lanes, nothing read past p + n: a tail-predicated VLDRB), mac adds the lanes'
    # products of a and b to the int32 c (modulo 2^32: VMLADAVA.S8)
    qvdot=dict(vtype="int8x16_t", lanes=16, load="vld1q_s8({p})",
               loadz="vldrbq_z_s8({p}, vctp8q((uint32_t){n}))",
               mac="vmladavaq_s8({c}, {a}, {b})"),
)
