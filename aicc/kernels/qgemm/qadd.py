"""The vector loop of aicc.QAdd (ops/qadd.py) on the x86 SIMD targets: per vector of L
elements, each input's L bytes widened to int32, their zero point subtracted, converted to
float and multiplied by their scale, the two products added (separate multiply and add
intrinsics: no contraction in C99 mode), then quantize.emit's division, rounding and store;
the n % L rest through the op's scalar sum ``one``."""
from __future__ import annotations

from ..isa.registry import ISAS
from . import quantize
from .spell import TABLES, fill


def usable(isa, ydt: str, n: int) -> bool:
    """A SIMD ISA (isa/x86.simd_isa) with this family's spellings, an output type of
    quantize.emit's and at least one whole vector."""
    return "q_store" in TABLES.get(isa, {}) and ydt in quantize.TYPES and n >= ISAS[isa].lanes


def emit(ctx, isa: str, ydt: str, n: int, a: tuple, b: tuple, y: str, lo: int, hi: int,
         rnd: str, one) -> None:
    """y[k] = saturate(rint(((a - za) * sa + (b - zb) * sb) / sy) + zp) for k < n: a, b
    (C name, dtype name) of the inputs; the C scalars sa, sb, sy, za, zb, zp declared by the
    caller; rnd: the scalar rounding helper; one(k): the C of the float sum of element k."""
    I = ISAS[isa]
    d, W = I.vector, TABLES[isa]["widths"][I.lanes]
    set1 = I.int_bits["set1"]
    ctx(f"const {I.integer['vi']} vza = {set1}(za), vzb = {set1}(zb);")
    ctx(f"const {d['v']} vsa = {d['set1']}(sa), vsb = {d['set1']}(sb);")

    def dq(k, x, t, z, sc):     # (x[k..] - z) * sc as floats
        raw = fill(W["ld"], p=f"(const void *)({x} + {k})")
        return (f"{d['mul']}({I.int_bits['cvt']}({I.integer['sub']}({W['widen'][t]}({raw}), "
                f"{z})), {sc})")

    def vec(k):
        return f"{d['add']}({dq(k, *a, 'vza', 'vsa')}, {dq(k, *b, 'vzb', 'vsb')})"
    quantize.emit(ctx, isa, ydt, n, "", y, "sy", "zp", lo, hi, rnd, vec=vec, one=one)
