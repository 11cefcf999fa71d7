"""float32 <-> float16 Casts on the x86 SIMD targets with the F16C / AVX-512 conversions
(vcvtps2ph rounding to nearest even, vcvtph2ps), 8 or 16 values per instruction and the tail
through the same instructions (x86-avx2: one value at a time; x86-avx512: a masked vector).
The upcast-half pass puts two such Casts around every op of a float16 model. Before: the
portable bit-manipulation functions of kernels/dtype/half.py per element, 1x64x56x56 on x86-avx512 (us,
onnxruntime in brackets): float32 -> float16 1000 (58), float16 -> float32 219 (70).

The values are kernels/dtype/half.py's: rounding to nearest even, overflow to +-Inf, subnormal halves, NaN
stays NaN with its payload's top bits. One difference in bits: a signaling NaN float16 becomes
a quiet NaN float32 here (the hardware sets the quiet bit), where kernels/dtype/half.py (and numpy) keep
the payload as it is.
"""
from __future__ import annotations

from ..isa.registry import ISAS, include_line
from ..isa.x86 import simd_isa

RNE = "_MM_FROUND_TO_NEAREST_INT"
# per ISA (its vmath table's ``half``): one vector down / up / round (down and up in
# registers) at x, y; the tail: one value at a time (a loop over m) without mask registers,
# else one masked vector of the m values left
_V = {name: i.vmath["half"] for name, i in ISAS.items() if "half" in i.vmath}


def emit(ctx, src, dst, n: int) -> bool:
    """Emit the Cast of n values src -> dst when it is float32 <-> float16 on an x86 SIMD
    target (True), else nothing (False)."""
    isa = simd_isa(ctx)
    pair = (src.name, dst.name)
    if isa not in _V or pair not in (("float32", "float16"), ("float16", "float32")):
        return False
    _emit(ctx, isa, "down" if pair[0] == "float32" else "up", n)
    return True


def emit_round(ctx, n: int) -> bool:
    """Emit float32 values rounded to float16 and back (the Cast pair's values) when on an
    x86 SIMD target (True), else nothing (False)."""
    isa = simd_isa(ctx)
    if isa not in _V:
        return False
    _emit(ctx, isa, "round", n)
    return True


def _emit(ctx, isa, way, n):
    v = _V[isa]
    x, y, L = ctx.inp[0], ctx.out[0], ISAS[isa].lanes
    ctx.kernel = isa
    ctx.helper(f"0.{isa}.0.include", include_line(isa))
    full = n - n % L
    if full:
        with ctx.block(f"for (size_t i = 0; i < {full}u; i += {L}u)"):
            ctx(v[way].format(x=f"{x} + i", y=f"{y} + i").replace("RNE", RNE))
    if full == n:
        return
    m, tx, ty = n - full, f"({x} + {full}u)", f"({y} + {full}u)"
    mask = v.get("mask", "").format(m=m)
    tail = v[f"tail_{way}"].format(x=tx, y=ty, mask=mask).replace("RNE", RNE)
    if not ISAS[isa].masked:
        with ctx.block(f"for (size_t i = 0; i < {m}u; ++i)"):
            ctx(tail)
    else:
        ctx(tail)
