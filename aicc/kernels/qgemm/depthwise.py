"""Depthwise QLinearConv / ConvInteger (one input and one output channel per group, 1-D / 2-D,
constant weights) on the x86 SIMD targets, in float32 arithmetic that is exact.

Each output is a sum of T = taps products (x - xzp)(w - wzp) of integers in [-255, 255]: every
product and every partial sum is an integer of magnitude at most T * 255 * 255, below 2^24 for
T <= 258, so float32 multiply-adds represent them exactly in any order (no rounding ever
happens) and converting the float sum to int32 gives the integer sum: the portable loops'
value (modulo 2^32, which it never reaches) bit for bit. The bias is added afterwards in
wrapping int32, then the requantization (kernels/qgemm/requant.py).

Per (batch, channel): the input plane minus its zero point as float, zero-padded, split into
``sh x sw`` phases (``P[rh][ph][i][j] = xpad[i * sh + rh][j * sw + ph]``), so that the taps
of output (oh, ow) lie at the same offsets from position ``oh * wq + ow`` in every phase.
Vectors of L positions accumulate the T taps with FMAs on broadcast weights and are converted
to int32, either row by row (OW outputs per call) or, when it takes fewer vectors
(``use_run``: short rows, e.g. 7 of 16 lanes), as one run of ``(OH - 1) * wq + OW``
positions covering every row (the ``wq - OW`` positions between rows are computed and
dropped); the channel's sums are then requantized (or stored, ConvInteger) in one call.
A plane larger than PLANE_KB goes in bands of output rows through one band-sized buffer (the
plane rows those rows' taps read), so that the copy's stores and the kernel's loads stay in L1
(C loop, x86-avx512-vnni: MobileNetV2 int8's 96 channels of 112 x 112 stride 2, a 52 KB plane,
350 -> 199 us; 32 channels of 112 x 112 stride 1 205 -> 186; the model's steps 4450 -> 4190).
The onnxruntime depthwise kernel on this layer class runs 3x faster than qlinear.py's tap loops.
"""
from __future__ import annotations

import numpy as np

from ...emit_c.cwriter import ctype
from ...emit_c.loops import numel
from ..conv.geometry import ConvGeometry
from ..isa.registry import ISAS
from ..isa.x86 import include
from .requant import Requant, channel_terms, output
from .simd import conv_weights, isa_for, plane_2d, typed, zp_expr
from .spell import TABLES, fill

MAX_TAPS = 258      # T * 255 * 255 < 2^24: exact float32 sums
PLANE_KB = 24       # the padded plane (a band of it) per channel, KiB (in L1)

PAD = """\
/* One plane of h x w values x - zp as float, padded and split into sh x sw phases of hq x wq
 * rows: rows i0 .. i0 + hb - 1 of each phase (a band) into d, whose phases are hb rows apart:
 * d[((rh * sw + ph) * hb + i - i0) * wq + j] = xpad[i * sh + rh][j * sw + ph]. Only the
 * values are written: the padding columns are the same for every band and plane of the step,
 * zeroed once before the first (a memset of each plane cost more than the conversion on 112 x
 * 112 planes, and per-row memsets of the padding more than the rows on 7 x 7 ones); padding
 * rows are zeroed when bands reuse d (zrows). Stride 2 along the row: each input row is read
 * once, split into both column phases (DE2). */
static void aicc_qdwpad_ISA_SFX(const TA *restrict x, size_t h, size_t w, int32_t zp,
                                size_t sh, size_t hq, size_t pt, size_t pl, size_t sw,
                                size_t wq, size_t i0, size_t hb, int zrows,
                                float *restrict d)
{
    const size_t i1 = i0 + hb < hq ? i0 + hb : hq;
    for (size_t rh = 0; rh < sh; ++rh)
    for (size_t ph = 0; ph < sw; ++ph) {       /* columns j with (j + pl) % sw == ph */
        const size_t j0 = (ph + sw - pl % sw) % sw, c0 = (j0 + pl) / sw;
        const size_t nq = j0 < w ? (w - j0 + sw - 1u) / sw : 0u;
        for (size_t i = i0; i < i1; ++i) {
            const size_t r = i * sh + rh;       /* the row of xpad */
            float *restrict o = d + ((rh * sw + ph) * hb + i - i0) * wq;
            if (r < pt || r - pt >= h) {        /* a padding row */
                if (zrows)
                    memset(o, 0, wq * sizeof *o);
                continue;
            }
            const TA *restrict rj = x + (r - pt) * w + j0;
            o += c0;
            if (sw == 2u) {          /* even columns j to phase pl % 2, odd ones to the other */
                if (ph == 0u)
                    aicc_qdwde2_ISA_SFX(x + (r - pt) * w, w, zp,
                                        d + ((rh * 2u + pl % 2u) * hb + i - i0) * wq + pl / 2u,
                                        d + ((rh * 2u + (pl + 1u) % 2u) * hb + i - i0) * wq
                                        + (pl + 1u) / 2u);
            } else if (sw == 1u) {   /* contiguous: vectorizes */
                for (size_t q = 0; q < nq; ++q)
                    o[q] = (float)((int32_t)rj[q] - zp);
            } else {
                for (size_t q = 0; q < nq; ++q)
                    o[q] = (float)((int32_t)rj[q * sw] - zp);
            }
        }
    }
}"""


def _pad(ctx, isa: str, ta) -> str:
    """The plane copy of activation type ta with its row splitter for isa (the description's
    ``de2``: one row of w values split into its even and odd columns, x - zp as float, read
    once; the loop per column phase read each row twice, strided; C loop, x86-avx512-vnni,
    MobileNetV2 int8's stride-2 depthwise convs: 144 channels at 56 x 56 124 -> 87 us, 192 at
    28 x 28 56 -> 40, 576 at 14 x 14 51 -> 48); returns its name."""
    T = TABLES[isa]
    widen = T["widths"][ISAS[isa].lanes]["widen"][ta.name]
    de2, sfx = typed(fill(T["de2"], isa=isa, widen=widen), ta)
    pad, _ = typed(PAD.replace("ISA", isa), ta)
    ctx.helper(f"qlinear.4.1.dwde2_{isa}{sfx}", de2)
    ctx.helper(f"qlinear.4.1.dwpad_{isa}{sfx}", pad)
    return f"aicc_qdwpad_{isa}{sfx}"


def dw_usable(geo) -> bool:
    """A depthwise geometry this module takes (constant weights: qgemm_conv.usable)."""
    return (geo.cin_g == 1 and geo.cout_g == 1 and len(geo.k) <= 2
            and numel(geo.k) <= MAX_TAPS)


def _rows_kernel(ctx, isa: str) -> str:
    """``aicc_qdw_{isa}``: one output row of n values: acc[j] = sum over taps t of
    w[t] * p[off[t] + j] (float32, exact), stored as int32."""
    I = ISAS[isa]
    d, g = I.vector, I.mask
    v, L = d["v"], d["L"]
    name = f"aicc_qdw_{isa}"
    cvt = I.integer["cvt"]

    def st(val: str, o: int) -> str:        # the int32 vector val at y + j + o
        return fill(TABLES[isa]["st"], p=f"y + j + {o}u", v=val)
    mst = TABLES[isa]["widths"][L]["mst"] if I.masked else ""
    tail = (f"""    if (j < n) {{               /* the last n - j < {L} outputs under a lane mask */
        const {g['mtype']} k = {fill(g['mask'], n='n - j')};
        {v} a = {d['zero']};
        for (size_t t = 0; t < nt; ++t)
            a = {d['fma']}({d['set1']}(w[t]), {fill(g['mload'], m='k', p='p + off[t] + j')}, a);
        {fill(mst, p='y + j', m='k', v=f'{cvt}(a)')};
    }}""" if I.masked else """    for (; j < n; ++j) {
        float a = 0.0f;
        for (size_t t = 0; t < nt; ++t)
            a += w[t] * p[off[t] + j];
        y[j] = (int32_t)a;
    }""")
    acc4 = "\n".join(f"            a{c} = {d['fma']}(wv, {d['ld']}(q + {c * L}u), a{c});"
                      for c in range(4))
    st4 = "\n".join(f"        {st(f'{cvt}(a{c})', c * L)};" for c in range(4))
    code = f"""\
/* acc[j] = sum over t < nt of w[t] * p[off[t] + j], j < n: integer-valued float32 sums
 * (exact in any order, module doc), converted to int32 ({isa}): 4 vectors of {L} outputs at
 * a time (independent FMA chains), then single vectors, then the rest. */
static void {name}(size_t n, size_t nt, const float *restrict p, const int64_t *restrict off,
                   const float *restrict w, int32_t *restrict y)
{{
    size_t j = 0;
    for (; j + {4 * L}u <= n; j += {4 * L}u) {{
        {v} a0 = {d['zero']}, a1 = {d['zero']}, a2 = {d['zero']}, a3 = {d['zero']};
        for (size_t t = 0; t < nt; ++t) {{
            const {v} wv = {d['set1']}(w[t]);
            const float *restrict q = p + off[t] + j;
{acc4}
        }}
{st4}
    }}
    for (; j + {L}u <= n; j += {L}u) {{
        {v} a0 = {d['zero']}, a1 = {d['zero']};
        size_t t = 0;
        for (; t + 2u <= nt; t += 2u) {{
            a0 = {d['fma']}({d['set1']}(w[t]), {d['ld']}(p + off[t] + j), a0);
            a1 = {d['fma']}({d['set1']}(w[t + 1u]), {d['ld']}(p + off[t + 1u] + j), a1);
        }}
        if (t < nt)
            a0 = {d['fma']}({d['set1']}(w[t]), {d['ld']}(p + off[t] + j), a0);
        {st(f'{cvt}({d["add"]}(a0, a1))', 0)};
    }}
{tail}
}}"""
    include(ctx, isa)
    ctx.helper("qlinear.4.0.string", "#include <string.h>")
    ctx.helper(f"qlinear.4.1.dw_{isa}", code)
    return name


def emit(op, node, ctx, rq: Requant | None) -> None:
    """``rq`` as qgemm_conv.emit_conv's."""
    isa = isa_for(ctx)
    ctx.kernel = isa
    ta = ctx.in_dtype(op.X)
    geo = ConvGeometry(op, node, ctx.in_shape(op.X), ctx.in_shape(op.W))
    H, W, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, OH, OW = plane_2d(geo)
    hp, wp = H + pt + pb, W + pl + pr
    hq, wq = -(-hp // sh), -(-wp // sw) + 1
    taps, C, P = kh * kw, geo.cout, OH * OW
    B, hb = band(sh, sw, hq, wq, OH, ((kh - 1) * dh) // sh)
    banded = B < OH
    n = (B - 1) * wq + OW            # the run of grid positions: OW outputs of every wq
    run = use_run(n, B, OW, ISAS[isa].lanes)
    wf = ctx.const(conv_weights(ctx, op, geo).reshape(C, taps).astype(np.float32), "qdw")
    # tap (a, b) of output (oh, ow): xpad[oh sh + a dh][ow sw + b dw] = phase ((a dh) % sh,
    # (b dw) % sw), row oh + (a dh) / sh, column ow + (b dw) / sw: output oh's row of taps
    # starts oh * wq after output 0's in every phase (phases hb rows apart)
    off = np.array([((((a * dh) % sh) * sw + (b * dw) % sw) * hb + (a * dh) // sh) * wq
                    + (b * dw) // sw for a in range(kh) for b in range(kw)], np.int64)
    offs = ctx.const(off, "qdwoff")
    plane = ctx.scratch(sh * sw * hb * wq * 4, "float", "qdwp")
    acc = ctx.scratch((n if run else B * OW) * 4, "int32_t", "qdwr")
    yc = ctype(ctx.out_dtype(0))
    ytmp = ctx.scratch(n, yc, "qdwy") if run and rq is not None else None
    k = _rows_kernel(ctx, isa)
    pad = _pad(ctx, isa, ta)
    how = f"one run of {n} positions" if run else f"rows of {OW}"
    bands = f"bands of {B} output rows ({hb} x {wq} per phase)" if banded else f"{hq} x {wq}"
    ctx(f"/* depthwise {geo.describe()}: exact float32 sums ({isa}, kernels/qgemm/depthwise.py) on the padded "
        f"plane in {sh} x {sw} phases of {bands}, {how} */")
    ctx(f"const int32_t xzp = {zp_expr(ctx, op.XZ)};")
    ctx(f"memset({plane}, 0, {sh * sw * hb * wq}u * sizeof *{plane});   /* the padding */")
    with ctx.block(f"for (size_t nb = 0; nb < {geo.batch}u; ++nb)"):
        with ctx.block(f"for (size_t oc = 0; oc < {C}u; ++oc)"):
            channel_terms(ctx, rq)
            with ctx.block(f"for (size_t o0 = 0; o0 < {OH}u; o0 += {B}u)"):
                ctx(f"const size_t nr = {OH}u - o0 < {B}u ? {OH}u - o0 : {B}u;")
                ctx(f"{pad}({ctx.inp[op.X]} + (nb * {C}u + oc) * {H * W}u, {H}u, {W}u, xzp, "
                    f"{sh}u, {hq}u, {pt}u, {pl}u, {sw}u, {wq}u, o0, {hb}u, {int(banded)}, "
                    f"{plane});")
                dst = f"{ctx.out[0]} + (nb * {C}u + oc) * {P}u + o0 * {OW}u"
                if not run:
                    with ctx.block("for (size_t oh = 0; oh < nr; ++oh)"):
                        ctx(f"{k}({OW}u, {taps}u, {plane} + oh * {wq}u, {offs}, "
                            f"{wf} + oc * {taps}u, {acc} + oh * {OW}u);")
                    output(ctx, isa, rq, f"nr * {OW}u", acc, dst)
                else:
                    _run(ctx, isa, rq, k, (taps, wq, OW), (plane, offs, f"{wf} + oc * {taps}u",
                                                           acc, ytmp, dst), yc)


def _run(ctx, isa, rq, k, dims, bufs, yc) -> None:
    """The band's rows as one run of grid positions, then its outputs row by row."""
    taps, wq, OW = dims
    plane, offs, w, acc, ytmp, dst = bufs
    ctx(f"const size_t n = (nr - 1u) * {wq}u + {OW}u;")
    ctx(f"{k}(n, {taps}u, {plane}, {offs}, {w}, {acc});")
    if rq is None:
        output(ctx, isa, rq, f"{OW}u", acc, dst, rows=("nr", f"{wq}u", f"{OW}u"))
        return
    output(ctx, isa, rq, "n", acc, ytmp)   # the whole run at once (a call per short row
    with ctx.block("for (size_t oh = 0; oh < nr; ++oh)"):     # costs more), then rows
        ctx(f"memcpy(({yc} *)({dst}) + oh * {OW}u, {ytmp} + oh * {wq}u, "
            f"{OW}u * sizeof(*{ytmp}));")


def band(sh: int, sw: int, hq: int, wq: int, OH: int, e: int) -> tuple:
    """(B output rows per band, hb plane rows per phase): all OH rows when the padded plane
    fits PLANE_KB, else equal bands of output rows whose plane rows (B + e per phase, e the
    rows the taps reach below) fit it, so that the plane the copy writes and the kernel reads
    stays in L1 (MobileNetV2's 96 channels of 112 x 112, stride 2: a 52 KB plane per
    channel, its stores 190 of the step's ~350 us)."""
    row = sh * sw * wq * 4
    if hq * row <= PLANE_KB * 1024:
        return OH, hq
    b = max(1, PLANE_KB * 1024 // row - e)
    b = -(-OH // -(-OH // b))
    return b, min(hq, b + e)


def use_run(n: int, OH: int, OW: int, L: int) -> bool:
    """One run of n grid positions (rows wq apart, the positions between them dropped) when
    it takes fewer vectors than the OH rows of OW outputs one by one (C loop, x86-avx512-vnni,
    uint8 3 x 3 depthwise: 960 channels at 7 x 7 74 -> 55 us, 576 at 14 x 14 s2 75 -> 56, 192
    at 28 x 28 85 -> 78; 384 at 14 x 14, 15 vectors against 14, 47 -> 56 us as a run)."""
    return -(-n // L) < OH * -(-OW // L)
