"""The ISA descriptions the kernels know, and the one rule that picks a node's ISA."""
from __future__ import annotations

from . import avx2, avx512, dsp, fpv4, helium, neon

# in the order the per-ISA tables list them
ISAS = {i.name: i for i in (avx2.ISA, avx512.ISA, neon.ISA, dsp.ISA, fpv4.ISA, helium.ISA)}


def table(field: str) -> dict:
    """{ISA name: that ISA's ``field``} for every description that has one."""
    return {name: getattr(i, field) for name, i in ISAS.items() if getattr(i, field)}


def isa_for(ctx, among=ISAS):
    """The ISA ctx's node runs on: the first of the target's ``kernels:`` list (only the
    node's ``aicc_kernel`` when set) that is one of ``among``; None when the portable C
    ("generic") comes first or none is listed."""
    forced = ctx.node.attrs.get("aicc_kernel")
    for name in ctx.target.kernels:
        if forced and name != forced:
            continue
        if name in among:
            return name
        if name == "generic":
            break
    return None


def fpu_isa(ctx, dt) -> str | None:
    """The ISA whose ``fpu`` entry (a scalar FPU with fused multiply-add: isa/fpv4) the
    node's float32 portable GEMMs use (the conv tile, the planes kernel, Gemm / MatMul), or
    None."""
    return isa_for(ctx, table("fpu")) if str(dt) == "float32" else None


def include_line(isa: str) -> str:
    """The #include of the intrinsics header of ``isa``'s description, and its prelude (once
    per bundle: several families register the include under keys of their own)."""
    i = ISAS[isa]
    if not i.prelude:
        return f"#include {i.header}"
    guard = f"AICC_{isa.upper()}_PRELUDE"
    return f"#include {i.header}\n\n#ifndef {guard}\n#define {guard}\n\n{i.prelude}\n\n#endif"
