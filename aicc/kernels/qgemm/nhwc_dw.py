"""The depthwise aicc.QConvNHWC (ops/qconv_nhwc.py) on the x86 SIMD targets:
kernels/conv/nhwc_dw.py's register-blocked channel-last kernel (the float32 one's blocks, taps
and borders) on the bytes: each input vector is widened to int32, converted to float and its
zero point subtracted; the taps' products and sums are integers below 2^24 in magnitude
(MAX_TAPS), so float32 computes them exactly in any order; each output row's sums are
converted to int32 into a row buffer and requantized (requant.py's helper) with the bias as
the per-channel add."""
from __future__ import annotations

import numpy as np

from ...emit_c.cwriter import ctype
from ..conv import nhwc_dw as conv_nhwc_dw
from .requant import requant_helper, sums_fit, wrap_i32
from .round import multipliers
from .simd import zp_const, zp_expr
from .spell import TABLES, fill

MAX_TAPS = 258      # taps * 255 * 255 < 2^24: exact float32 sums (as depthwise.py)


class _QGen(conv_nhwc_dw._Gen):
    """conv_nhwc_dw's channel-last depthwise generator on integer inputs: bytes widened and
    shifted by the zero point, exact float sums stored as int32 into a row buffer that the
    requantization helper ``rq`` turns into the output row."""
    kparams, kargs = "float zp", "zp"
    hkey = "qlinear.5.dwn"       # after the requantization helpers
    pin_flavors: set = set()     # no pinned inputs (PIN was measured on float32 only)

    def __init__(self, isa, fl, geo, ta: str, yc: str, rq: str):
        self.prefix = f"aicc_qdwn_{ta}_{rq.replace('aicc_qreq_', '')}"
        super().__init__(fl, geo)
        self.xt, self.yt, self.ytn, self.ta, self.rq = ctype(np.dtype(ta)), "int32_t", yc, ta, rq
        self.w = TABLES[isa]["widths"][self.L]      # the spellings of this vector width
        self.dparams = (f"int32_t *restrict acc, {yc} *restrict y, float zp,\n"
                        "    const int32_t *restrict add, const float *restrict m, size_t ms, "
                        "int32_t yzp")
        self.sv = self.nv          # one channel strip: each output row is whole, then requantized

    def load(self, ptr: str, masked: bool) -> str:
        w, p, src = self.w, self.w["p"], f"(const void *)({ptr})"
        b = fill(w["mld"], m="m", p=src, n=self.tail) if masked else fill(w["ld"], p=src)
        return f"{p}_sub_ps({p}_cvtepi32_ps({w['widen'][self.ta]}({b})), {p}_set1_ps(zp))"

    def stores(self, acc, masked: bool) -> list:
        w, L, C, o = self.w, self.L, self.C, ["    (void)zp;"]
        for p, row in enumerate(acc):
            for v, a in enumerate(row):
                ptr, val = f"(void *)(y + {p * C + v * L}u)", f"{w['p']}_cvtps_epi32({a})"
                last = masked and v == len(row) - 1
                st = fill(w["mst"], p=ptr, m="m", v=val) if last else fill(w["st"], p=ptr, v=val)
                o.append(f"    {st};")
        return o

    def row_dst(self, off: str) -> str:
        return "acc"

    def row_end(self) -> list:
        g, C = self.g, self.C
        return [f"    {self.rq}({g.ow}u, {C}u, acc, {C}u, add, 1u, m, ms, yzp, "
                f"yn + oy * {g.ow * C}u, {C}u);"]

    def text(self) -> str:
        t = super().text()
        if "tail" in self.w and self.tail != self.L:    # the masked loads' helper
            t = fill(self.w["tail"], n=self.tail) + t
        return t


def usable(geo, isa) -> bool:
    """A depthwise conv of at most MAX_TAPS taps that the channel-last kernel takes."""
    return (any("mld" in w for w in TABLES.get(isa, {}).get("widths", {}).values())
            and geo.depthwise and geo.kh * geo.kw <= MAX_TAPS
            and conv_nhwc_dw.supports(geo, isa))


def emit(ctx, geo, isa, w, bias, rnd, wsn) -> None:
    """The node's driver call: geo the channel-last geometry (ops/conv_nhwc.Geo), w the
    weights minus their zero point [C, 1, taps], bias the int32 values or None, rnd the
    scalar rounding helper, wsn the number of weight scales (1 or C)."""
    ctx.kernel = isa
    ta, ydt = ctx.in_dtype(0), ctx.out_dtype(0)
    C, T = geo.cin, geo.kh * geo.kw
    mc, nt, mcol = multipliers(ctx, wsn > 1, C)
    fits = (wsn == 1 or mcol) and sums_fit(w.reshape(C, T), ta.name, zp_const(ctx, 2), bias)
    rq = requant_helper(ctx, isa, ydt.name, rnd, fits, rform=nt, mcol=mcol)
    gen = _QGen(isa, conv_nhwc_dw.flavor(geo, isa), geo, ta.name, ctype(ydt), rq)
    wt = np.zeros((T, gen.cp), np.float32)
    wt[:, :C] = w.reshape(C, T).T
    wv, bv = ctx.const(wt, "wtap"), ctx.const(np.zeros(gen.cp, np.float32), "bzero")
    add = np.zeros(C, np.int64) if bias is None else bias
    av = ctx.const(wrap_i32(add), "qadd")
    acc = ctx.scratch(geo.ow * C * 4, "int32_t", "qacc")
    name = conv_nhwc_dw.driver(ctx, geo, isa, gen)
    ctx.helper("qlinear.4.0.string", "#include <string.h>")
    ctx(f"{name}({ctx.inp[0]}, {wv}, {bv}, {acc}, {ctx.out[0]}, (float){zp_expr(ctx, 2)}, {av}, "
        f"{mc}, {1 if wsn > 1 else 0}u, yzp);")
