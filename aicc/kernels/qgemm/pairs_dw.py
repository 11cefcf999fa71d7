"""Depthwise int8 convs on the pair ISAs (kernels/qgemm/pairs.py's ``qpair`` descriptions:
isa/dsp's SXTB16 / SMLAD).

Depthwise (one input channel per group, 1-D / 2-D, at most DW_PAIRS_MAX tap pairs): per
channel, x - x_zp into the stride phases of the padded plane (kernels/conv/planes_c.py's
layout, zeroed once per step), then each output is its flat index plus one offset per tap;
taps whose offsets differ by one share an unaligned 32-bit load and one SMLAD (a tap without a
partner meets a zero weight), the weight pairs widened once per channel and held in registers.
The kernel is generated per geometry (offsets and sizes as constants): a 3x3 output is 6 loads,
6 SMLADs and its store, written straight to the plane's sums (no block buffer, no copy).
"""
from __future__ import annotations

import hashlib

import numpy as np

from ...emit_c.loops import numel
from ..conv.planes_c import PHASE_FILL, extent, geometry
from ..isa.registry import include_line
from .pairs import TABLES, isa_for
from .planes import supports as planes_supports
from .spell import fill

DW_PAIRS_MAX = 8        # tap pairs held in registers (3x3: 6)

DW = """\
/* Depthwise conv of one channel (kernels/qgemm/pairs.py): acc[r * OW + c] = sum over the taps
 * of (w - wzp) (x - xzp), @GEO@. x - xzp is written as int16 into the
 * stride phases of the padded plane xq (kernels/conv/planes_c.py's layout: every output is its
 * flat index r * wq + c plus one offset per tap; the padding stays zero: the caller zeroes xq
 * once per step). Taps whose offsets differ by one are paired (one unaligned 32-bit load, one
 * mac2 for two products); a tap without a partner meets a zero weight. */
static void NAME(const TA *restrict x, int32_t xzp, const TB *restrict w, int32_t wzp,
                 int16_t *restrict xq, uint32_t *restrict acc)
{
    const size_t H = @H@u, W = @W@u, sh = @SH@u, sw = @SW@u, pt = @PT@u, pl = @PL@u;
    const size_t hp = @HP@u, wq = @WQ@u, PQ = @PQ@u, nx = @NX@u;
@FILL@
@WEIGHTS@
    for (size_t r = 0; r < @OH@u; ++r) {
        const int16_t *restrict s = xq + r * wq;
        uint32_t *restrict a = acc + r * @OW@u;
        for (size_t c = 0; c < @OW@u; ++c, ++s) {
            uint32_t v;
            int32_t t = 0;
@TAPS@
            a[c] = (uint32_t)t;
        }
    }
}"""


def dw_pairs(geo):
    """(pairs, off, planes geometry) of a depthwise conv: pairs [(t, t2 or None)] of taps
    whose phase-plane offsets differ by one, greedily in tap order; None when more than
    DW_PAIRS_MAX pairs."""
    g = geometry(geo)
    off = g[4]
    used, pairs = set(), []
    for t in range(len(off)):
        if t in used:
            continue
        used.add(t)
        t2 = next((u for u in range(len(off)) if u not in used and off[u] == off[t] + 1), None)
        if t2 is not None:
            used.add(t2)
        pairs.append((t, t2))
    return (pairs, off, g) if len(pairs) <= DW_PAIRS_MAX else None


def dw_usable(ctx, geo) -> bool:
    """A pair ISA, one input channel per group, at most 2 spatial dims, few tap pairs."""
    return isa_for(ctx) is not None and planes_supports(geo) and dw_pairs(geo) is not None


def _dw_fill(sp: dict, sw: int) -> str:
    """The phase planes' fill of an int8 input whose column stride sw is 1 or 2 (PHASE_FILL's
    values): 4 columns per 32-bit load, lo / hi to the int16 pairs of columns (0, 2) and
    (1, 3), the zero point off both halves (sub2); stride 1 repacks them to (0, 1), (2, 3)
    (PKHBT / PKHTB) for the row, stride 2 stores them as they are to the two column phases;
    the last nx % 4 columns one at a time."""
    lo, hi = fill(sp["lo"], x="v"), fill(sp["hi"], x="v")
    e, o = fill(sp["sub2"], a=lo, b="zz"), fill(sp["sub2"], a=hi, b="zz")
    head = ["const int32_t zz = (int32_t)(((uint32_t)xzp & 0xffffu) * 0x10001u);",
            "for (size_t iy = 0; iy < H && iy + pt < hp; ++iy) {",
            "    const size_t py = iy + pt;",
            "    int16_t *restrict qr = xq + (py % sh) * sw * PQ + py / sh * wq;",
            "    const TA *restrict xr = x + iy * W;",
            "    size_t ix = 0;"]
    if sw == 1:
        body = ["    for (; ix + 4u <= nx; ix += 4u) {",
                "        uint32_t v;",
                "        memcpy(&v, xr + ix, sizeof v);",
                f"        const uint32_t e = (uint32_t){e}, o = (uint32_t){o};",
                "        const uint32_t a = (e & 0xffffu) | o << 16;",
                "        const uint32_t b = e >> 16 | (o & 0xffff0000u);",
                "        memcpy(qr + pl + ix, &a, sizeof a);",
                "        memcpy(qr + pl + ix + 2u, &b, sizeof b);",
                "    }",
                "    for (; ix < nx; ++ix)",
                "        qr[pl + ix] = (int16_t)((int32_t)xr[ix] - xzp);"]
    else:       # even columns to phase pl % 2, odd ones to the other
        body = ["    int16_t *restrict de = qr + pl % 2u * PQ + pl / 2u;",
                "    int16_t *restrict dd = qr + (1u - pl % 2u) * PQ + (1u + pl) / 2u;",
                "    for (; ix + 4u <= nx; ix += 4u) {",
                "        uint32_t v;",
                "        memcpy(&v, xr + ix, sizeof v);",
                f"        const uint32_t e = (uint32_t){e}, o = (uint32_t){o};",
                "        memcpy(de + ix / 2u, &e, sizeof e);",
                "        memcpy(dd + ix / 2u, &o, sizeof o);",
                "    }",
                "    for (; ix < nx; ++ix)",
                "        (ix & 1u ? dd : de)[ix / 2u] = (int16_t)((int32_t)xr[ix] - xzp);"]
    return "\n".join("    " + ln for ln in head + body + ["}"])


def emit_dw(ctx, typed, geo, x: str, w: str, wz: str, acc: str, post, xdt=None) -> None:
    """Per batch item and output channel: the channel kernel, then ``post`` (qlinear's) on its
    plane. typed: qlinear._typed bound to the operand types; x, w: input / weight pointers;
    wz: the C of the channel's weight zero point (``oc``); acc: numel(out) uint32 of scratch;
    xdt: the input's dtype (int8: the packed fill); xzp declared by the caller."""
    isa = isa_for(ctx)
    pairs, off, (hp, wp, hq, wq, _, nxq, nf) = dw_pairs(geo)
    k, s, d, o, _, _ = extent(geo)
    pad = [0] * (2 - len(geo.k)) + list(geo.pad)
    inp = [1] * (2 - len(geo.k)) + list(geo.inp)
    H, W = inp
    pt, pl = pad[0], pad[1]
    nx = max(0, min(W, wp - pl)) if wp > pl else 0
    sp = TABLES[isa]
    if xdt is not None and np.dtype(xdt) == np.int8 and s[1] in (1, 2) and "sub2" in sp:
        fill_c = _dw_fill(sp, s[1])
    else:
        fill_c = "".join("    " + ln for ln in PHASE_FILL.replace("DST", "int16_t")
                         .replace("SRC", "TA")
                         .replace("VALUE", "(int16_t)((int32_t)xr[ix] - xzp)")
                         .replace("X + iy", "x + iy").splitlines(True)).rstrip("\n")

    def wv(t):
        return "0" if t is None else f"((int32_t)w[{t}] - wzp)"
    weights = "\n".join(
        f"    const int32_t w{i} = (int32_t)((uint32_t)(uint16_t){wv(a)} | "
        f"(uint32_t){wv(b)} << 16);" for i, (a, b) in enumerate(pairs))
    taps = "\n".join(
        f"            memcpy(&v, s + {off[a]}u, sizeof v);\n"
        f"            t = {fill(sp['mac2'], a=f'w{i}', b='(int32_t)v', c='t')};"
        for i, (a, b) in enumerate(pairs))
    kdesc = "x".join(str(v) for v in geo.k)
    text = (DW.replace("@GEO@", f"{kdesc} taps, output [{o[0]}][{o[1]}], stride "
                       f"{s[0]}x{s[1]}, phases [{hq}][{wq}]")
            .replace("@FILL@", fill_c).replace("@WEIGHTS@", weights).replace("@TAPS@", taps)
            .replace("@H@", str(H)).replace("@W@", str(W)).replace("@SH@", str(s[0]))
            .replace("@SW@", str(s[1])).replace("@PT@", str(pt)).replace("@PL@", str(pl))
            .replace("@HP@", str(hp)).replace("@WQ@", str(wq)).replace("@PQ@", str(hq * wq))
            .replace("@NX@", str(nx)).replace("@OH@", str(o[0])).replace("@OW@", str(o[1])))
    text = typed(text)
    name = f"aicc_qpdw_{hashlib.sha1(text.encode()).hexdigest()[:8]}_{isa}"
    ctx.helper(f"qpair.0.include.{isa}", include_line(isa))
    ctx.helper(f"qpair.3.dw.{name}", text.replace("NAME", name))
    ctx.kernel = f"{isa} qpdw"
    xq = ctx.scratch((nxq + 2) * 2, "int16_t", "xq")
    P = numel(geo.out)
    in_p = numel(geo.inp)
    ctx(f"/* {geo.describe()}: int16 pair sums over the stride phases [{hq}][{wq}] of the "
        f"padded plane, {len(pairs)} tap pairs */")
    with ctx.block(f"for (size_t i = 0; i < {nxq + 2}u; ++i)"):
        ctx(f"{xq}[i] = 0;")
    with ctx.block(f"for (size_t nb = 0; nb < {geo.batch}u; ++nb)"):
        with ctx.block(f"for (size_t oc = 0; oc < {geo.cout}u; ++oc)"):
            ctx(f"const size_t gi = oc / {geo.cout_g}u;")
            ctx(f"{name}({x} + (nb * {geo.cin}u + gi) * {in_p}u, xzp, {w} + oc * {len(off)}u, "
                f"{wz}, {xq}, {acc});")
            post("oc", acc, f"{P}u", f"(nb * {geo.cout}u + oc) * {P}u")
