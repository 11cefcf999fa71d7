"""QuantizeLinear of float32 with one scale and zero point to uint8 / int8 / uint16 / int16 on
the x86 SIMD targets: ``y = saturate(rint(x / scale) + zp)`` on whole vectors (quantize.py's
scalar loop called rintf and added in double per element: 15x onnxruntime's time).

The same values as quantize.round_helper, element by element: the division in float32,
round to nearest even (the default rounding mode, as rint), the zero point added in float
(exact while |rint(x / scale)| < 2^24; beyond that both saturate, the ranges being within
+-65535), clamped to [lo, hi], NaN -> the zero point (clamped), +-Inf saturate. The n % L
tail goes through the scalar helper.
"""
from __future__ import annotations

import numpy as np

from ...emit_c.cwriter import ctype
from ..isa.registry import ISAS, include_line, isa_for, table
from ..isa.x86 import include
from .spell import TABLES, fill

ROUND = table("qround")     # ISAs with a scalar rounding conversion (isa/fpv4)

TYPES = {"uint8", "int8", "uint16", "int16"}


def isa_of(ctx):
    """The SIMD ISA of ctx's node whose description has this family's spellings (the qgemm
    table's stores), or None (the scalar loop)."""
    return isa_for(ctx, {k: v for k, v in TABLES.items() if "q_store" in v})


def round_isa(ctx):
    """The ISA of ctx's node with a scalar rounding conversion (``qround``), or None."""
    return isa_for(ctx, ROUND)


def emit_round(ctx, isa: str, ydt: str, n: int, x: str, y: str, s: str, zp: str,
               value=None) -> None:
    """The loop over n elements with the description's rounding conversion: rint(x / s) as
    int32 (saturating, NaN -> 0), saturated to 18 bits (|zp| <= 65535: the sum cannot wrap),
    plus zp, saturated to ydt: round_helper's values (rounding commutes with the clamp to
    the integer bounds; NaN gives the zero point, saturated). value(k): the C of the float
    to round instead of x[k] / s (qadd.py: the sum of two dequantized values over y_scale)."""
    T = ROUND[isa]
    ctx.helper(f"qround.0.include.{isa}", include_line(isa))
    ctx.kernel = isa
    yct = ctype(np.dtype(ydt))
    bits = np.iinfo(np.dtype(ydt)).bits
    sat = T["usat" if ydt.startswith("u") else "ssat"]
    with ctx.block(f"for (size_t k = 0; k < {n}u; ++k)"):
        v = value("k") if value else f"{x}[k] / {s}"
        r = fill(T["ssat"], x=fill(T["rint"], x=v), b=18)
        ctx(f"{y}[k] = ({yct}){fill(sat, x=f'{r} + zp', b=bits)};")


def emit(ctx, isa: str, ydt: str, n: int, x: str, y: str, s: str, zp: str, lo: int, hi: int,
         rnd: str, vec=None, one=None) -> None:
    """The loop over n elements: x, y the arrays; s, zp the C names of the float scale and the
    int32 zero point; rnd: the scalar helper for the tail. vec / one: the C of the float
    vector / value at element k instead of x's (qadd.py: computed from two byte tensors)."""
    I, T = ISAS[isa], TABLES[isa]
    d, i = I.vector, I.integer
    v, L = d["v"], d["L"]
    vec = vec or (lambda k: f"{d['ld']}({x} + {k})")
    one = one or (lambda k: f"{x}[{k}]")
    include(ctx, isa)
    ctx.kernel = isa
    yct = ctype(np.dtype(ydt))
    full = n - n % L
    if full == 0:             # the scalar loop only
        ctx(f"for (size_t k = 0; k < {n}u; ++k)")
        ctx(f"    {y}[k] = ({yct}){rnd}({one('k')} / {s}, zp, {lo}, {hi});")
        return
    ctx(f"const {v} vs = {d['set1']}({s}), vz = {d['set1']}((float)zp);")
    ctx(f"const {v} vlo = {d['set1']}({float(lo)!r}f), vhi = {d['set1']}({float(hi)!r}f);")
    ctx(f"const {v} vzc = {d['set1']}((float)(zp < {lo} ? {lo} : (zp > {hi} ? {hi} : zp)));")
    with ctx.block(f"for (size_t k = 0; k < {full}u; k += {L}u)"):
        ctx(f"const {v} q = {d['div']}({vec('k')}, vs);")
        ctx(f"{v} t = {d['add']}({d['rnd'].format(x='q')}, vz);")
        ctx(f"t = {d['max']}(vlo, {d['min']}(vhi, t));   /* NaN stays (second operand) */")
        nan = d["sel"].format(x="q", y="q", p="_CMP_UNORD_Q", a="t", b="vzc")  # q NaN: vzc
        ctx(f"t = {nan};")
        ctx(f"const {i['vi']} r = {i['cvt']}(t);")
        if "q_narrow" in T:         # no down-converting store: to int16 w first
            ctx(T["q_narrow"][ydt])
        ctx(fill(T["q_store"][ydt], p=f"{y} + k", v="r", w="w") + ";")
    if full < n:
        with ctx.block(f"for (size_t k = {full}u; k < {n}u; ++k)"):
            ctx(f"{y}[k] = ({yct}){rnd}({one('k')} / {s}, zp, {lo}, {hi});")
