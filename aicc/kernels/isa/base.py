"""One description per instruction set (ISA): what the kernels need to know of it, as data.

An ``Isa`` names the variant as a target's ``kernels:`` list does, and holds the C spellings
and tuning defaults that the kernel families look up by that name: the float32 vector
vocabulary (``vector``, used by the element-wise, softmax, normalization and pooling
kernels), the integer spellings of the math functions (``integer``, ``int_bits``), the GEMM
micro-kernel spellings and default schedule (``gemm``, ``gemm_mr_max``) and the conv
schedule defaults (``conv``). A kernel family builds its per-ISA table from these fields
(``table(field)``), so a new ISA is a new description (isa/<name>/, listed in
isa/registry.py), a target YAML whose ``kernels:`` list names it, and the kernels that need
spellings of their own.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Isa:
    name: str                   # as in a target's ``kernels:`` list
    family: str                 # "x86", "arm" (later "riscv")
    header: str                 # the intrinsics header its kernels include
    vector_bytes: int           # bytes of one vector register
    registers: int              # vector registers the kernels plan with
    prefix: str = ""            # the intrinsics' name prefix ("_mm256"), for {p} in templates
    masked: bool = False        # per-lane mask registers: a tail is a masked load / store of
                                # n lanes; without them a tail reads a lane-mask table
    prelude: str = ""           # C text after the #include: inline helpers its spellings call
    vector: dict = field(default_factory=dict)     # float32 vector spellings (see isa/x86.py)
    mask: dict = field(default_factory=dict)       # tails: mtype, mask ({n} first lanes),
                                                   # mload ({m}, {p}), mstore ({p}, {m}, {v})
    integer: dict = field(default_factory=dict)    # integer vector spellings of exp / tanh
    int_bits: dict = field(default_factory=dict)   # bit-level spellings of log / expm1 / trig
    gemm: dict = field(default_factory=dict)       # GEMM spellings and default schedule
    gemm_mr_max: dict = field(default_factory=dict)  # vectors per panel -> most rows a tile
    conv: dict = field(default_factory=dict)       # float32 conv schedule defaults
    # the spellings and thresholds of one kernel family each (isa/<name>/<family>.py)
    conv_kernels: dict = field(default_factory=dict)   # kernels/conv
    winograd: dict = field(default_factory=dict)       # kernels/winograd
    qgemm: dict = field(default_factory=dict)          # kernels/qgemm, int8 ops
    qpair: dict = field(default_factory=dict)          # kernels/qgemm/pairs.py: int8 dot
                                                       # products on int16 pair MACs
    qvdot: dict = field(default_factory=dict)          # kernels/qgemm/vdot.py: int8 dot
                                                       # products of vector rows into a
                                                       # scalar (MVE VMLADAVA)
    qround: dict = field(default_factory=dict)         # kernels/qgemm/quantize.py: scalar
                                                       # float -> int rounding (QuantizeLinear)
    fpu: dict = field(default_factory=dict)            # a scalar FPU with fused multiply-add:
                                                       # the portable float GEMMs' register
                                                       # blocks (kernels/conv/tile_fpu.py,
                                                       # kernels/gemm/portable.py)
    pool: dict = field(default_factory=dict)           # kernels/pool
    move: dict = field(default_factory=dict)           # kernels/move
    vmath: dict = field(default_factory=dict)          # kernels/vmath, softmax rows

    @property
    def lanes(self) -> int:
        """float32 lanes of one vector."""
        return self.vector_bytes // 4
