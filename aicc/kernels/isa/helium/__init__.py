"""Armv8.1-M with the M-profile Vector Extension (Helium, MVE: Cortex-M55): 128-bit vectors of
float32 and integers in eight Q registers, and the FPU's VCVTR (isa/fpv4).

No kernel family has Helium spellings yet. What the description changes is what it leaves
out: FPv4's ``fpu`` entry (scalar register blocks, kernels/conv/tile_fpu.py), because GCC
vectorizes the portable kernels' arrays of 4 with MVE at -O2 (float32 DS-CNN under qemu: 6.64M
instructions portable, 7.37M with the scalar blocks). QuantizeLinear keeps VCVTR
(``qround``, the same spellings as FPv4).
"""
from __future__ import annotations

from ..base import Isa
from ..fpv4 import ISA as FPV4

ISA = Isa(
    name="helium", family="arm", header="<arm_mve.h>", vector_bytes=16, registers=8,
    prelude=FPV4.prelude, qround=dict(FPV4.qround),
)
