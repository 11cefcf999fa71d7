"""Depthwise QLinearConv / ConvInteger (one input and one output channel per group, 1-D / 2-D,
constant weights) on the x86 SIMD targets, in float32 arithmetic that is exact.

Each output is a sum of T = taps products (x - xzp)(w - wzp) of integers in [-255, 255]: every
product and every partial sum is an integer of magnitude at most T * 255 * 255, below 2^24 for
T <= 258, so float32 multiply-adds represent them exactly in any order (no rounding ever
happens) and converting the float sum to int32 gives the integer sum: the portable loops'
value (modulo 2^32, which it never reaches) bit for bit. The bias is added afterwards in
wrapping int32, then the requantization (qrequant_simd.py).

Per (batch, channel): the input plane minus its zero point as float, zero-padded, split into
``sh x sw`` phases (``P[rh][ph][i][j] = xpad[i * sh + rh][j * sw + ph]``), so that the taps
of output (oh, ow) lie at the same offsets from position ``oh * wq + ow`` in every phase.
Vectors of L positions accumulate the T taps with FMAs on broadcast weights and are converted
to int32, either row by row (OW outputs per call) or, when it takes fewer vectors
(``use_run``: short rows, e.g. 7 of 16 lanes), as one run of ``(OH - 1) * wq + OW``
positions covering every row (the ``wq - OW`` positions between rows are computed and
dropped); the channel's sums are then requantized (or stored, ConvInteger) in one call.
The onnxruntime depthwise kernel on this layer class runs 3x faster than qlinear.py's tap loops.
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import ctype
from .conv import ConvGeometry
from .loops import numel
from .qgemm_simd import conv_weights, isa_for, plane_2d, typed, zp_expr
from .qrequant_simd import Requant, channel_terms, output
from .simd import SIMD, include

MAX_TAPS = 258      # T * 255 * 255 < 2^24: exact float32 sums

PAD = """\
/* One plane of h x w values x - zp as float, placed in the padded plane split into sh x sw
 * phases of hq x wq: d[((rh * sw + ph) * hq + i) * wq + j] = xpad[i * sh + rh][j * sw + ph].
 * Only the values are written: the padding is the same for every plane of the step, zeroed
 * once before the first (a memset of each plane cost more than the conversion on 112 x 112
 * planes, and per-row memsets of the padding more than the rows on 7 x 7 ones). */
static void aicc_qdwpad_SFX(const TA *restrict x, size_t h, size_t w, int32_t zp, size_t sh,
                            size_t hq, size_t pt, size_t pl, size_t sw, size_t wq,
                            float *restrict d)
{
    for (size_t rh = 0; rh < sh; ++rh)
    for (size_t ph = 0; ph < sw; ++ph) {       /* columns j with (j + pl) % sw == ph */
        const size_t j0 = (ph + sw - pl % sw) % sw, c0 = (j0 + pl) / sw;
        const size_t nq = j0 < w ? (w - j0 + sw - 1u) / sw : 0u;
        for (size_t i = 0; i < hq; ++i) {
            const size_t r = i * sh + rh;       /* the row of xpad */
            if (r < pt || r - pt >= h)          /* a padding row */
                continue;
            float *restrict o = d + ((rh * sw + ph) * hq + i) * wq + c0;
            const TA *restrict rj = x + (r - pt) * w + j0;
            if (sw == 1u) {          /* contiguous: vectorizes */
                for (size_t q = 0; q < nq; ++q)
                    o[q] = (float)((int32_t)rj[q] - zp);
            } else if (sw == 2u) {   /* constant stride: vectorizes */
                for (size_t q = 0; q < nq; ++q)
                    o[q] = (float)((int32_t)rj[2u * q] - zp);
            } else {
                for (size_t q = 0; q < nq; ++q)
                    o[q] = (float)((int32_t)rj[q * sw] - zp);
            }
        }
    }
}"""


def dw_usable(geo) -> bool:
    """A depthwise geometry this module takes (constant weights: qgemm_conv.usable)."""
    return (geo.cin_g == 1 and geo.cout_g == 1 and len(geo.k) <= 2
            and numel(geo.k) <= MAX_TAPS)


def _rows_kernel(ctx, isa: str) -> str:
    """``aicc_qdw_{isa}``: one output row of n values: acc[j] = sum over taps t of
    w[t] * p[off[t] + j] (float32, exact), stored as int32."""
    d = SIMD[isa]
    v, L = d["v"], d["L"]
    name = f"aicc_qdw_{isa}"
    cvt = "_mm512_cvtps_epi32" if isa == "avx512" else "_mm256_cvtps_epi32"
    st = ("_mm512_storeu_si512((void *)(y + j + {o}u), {})" if isa == "avx512"
          else "_mm256_storeu_si256((__m256i *)(y + j + {o}u), {})")
    masked = isa == "avx512"
    tail = (f"""    if (j < n) {{               /* the last n - j < {L} outputs under a lane mask */
        const __mmask16 k = (__mmask16)((1u << (n - j)) - 1u);
        {v} a = {d['zero']};
        for (size_t t = 0; t < nt; ++t)
            a = {d['fma']}({d['set1']}(w[t]), _mm512_maskz_loadu_ps(k, p + off[t] + j), a);
        _mm512_mask_storeu_epi32(y + j, k, {cvt}(a));
    }}""" if masked else """    for (; j < n; ++j) {
        float a = 0.0f;
        for (size_t t = 0; t < nt; ++t)
            a += w[t] * p[off[t] + j];
        y[j] = (int32_t)a;
    }""")
    acc4 = "\n".join(f"            a{c} = {d['fma']}(wv, {d['ld']}(q + {c * L}u), a{c});"
                      for c in range(4))
    st4 = "\n".join(f"        {st.format(f'{cvt}(a{c})', o=c * L)};" for c in range(4))
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
        {st.format(f'{cvt}({d["add"]}(a0, a1))', o=0)};
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
    n = (OH - 1) * wq + OW           # the run of grid positions: OW outputs of every wq
    run = use_run(n, OH, OW, SIMD[isa]["L"])
    wf = ctx.const(conv_weights(ctx, op, geo).reshape(C, taps).astype(np.float32), "qdw")
    # tap (a, b) of output (oh, ow): xpad[oh sh + a dh][ow sw + b dw] = phase ((a dh) % sh,
    # (b dw) % sw), row oh + (a dh) / sh, column ow + (b dw) / sw: output oh's row of taps
    # starts oh * wq after output 0's in every phase
    off = np.array([((((a * dh) % sh) * sw + (b * dw) % sw) * hq + (a * dh) // sh) * wq
                    + (b * dw) // sw for a in range(kh) for b in range(kw)], np.int64)
    offs = ctx.const(off, "qdwoff")
    plane = ctx.scratch(sh * sw * hq * wq * 4, "float", "qdwp")
    acc = ctx.scratch((n if run else P) * 4, "int32_t", "qdwr")
    yc = ctype(ctx.out_dtype(0))
    ytmp = ctx.scratch(n, yc, "qdwy") if run and rq is not None else None
    code, sfx = typed(PAD, ta)
    ctx.helper(f"qlinear.4.1.dwpad{sfx}", code)
    k = _rows_kernel(ctx, isa)
    how = f"one run of {n} positions" if run else f"{OH} rows of {OW}"
    ctx(f"/* depthwise {geo.describe()}: exact float32 sums ({isa}, qconv_dw.py) on the padded "
        f"plane in {sh} x {sw} phases of {hq} x {wq}, {how} */")
    ctx(f"const int32_t xzp = {zp_expr(ctx, op.XZ)};")
    ctx(f"memset({plane}, 0, {sh * sw * hq * wq}u * sizeof *{plane});   /* the padding */")
    with ctx.block(f"for (size_t nb = 0; nb < {geo.batch}u; ++nb)"):
        with ctx.block(f"for (size_t oc = 0; oc < {C}u; ++oc)"):
            ctx(f"aicc_qdwpad{sfx}({ctx.inp[op.X]} + (nb * {C}u + oc) * {H * W}u, {H}u, {W}u, xzp, "
                f"{sh}u, {hq}u, {pt}u, {pl}u, {sw}u, {wq}u, {plane});")
            channel_terms(ctx, rq)
            dst = f"{ctx.out[0]} + (nb * {C}u + oc) * {P}u"
            if not run:
                with ctx.block(f"for (size_t oh = 0; oh < {OH}u; ++oh)"):
                    ctx(f"{k}({OW}u, {taps}u, {plane} + oh * {wq}u, {offs}, "
                        f"{wf} + oc * {taps}u, {acc} + oh * {OW}u);")
                output(ctx, isa, rq, f"{P}u", acc, dst)
            else:
                ctx(f"{k}({n}u, {taps}u, {plane}, {offs}, {wf} + oc * {taps}u, {acc});")
                if rq is None:
                    output(ctx, isa, rq, f"{OW}u", acc, dst,
                           rows=(f"{OH}u", f"{wq}u", f"{OW}u"))
                else:   # the whole run at once (a call per short row costs more), then rows
                    output(ctx, isa, rq, f"{n}u", acc, ytmp)
                    with ctx.block(f"for (size_t oh = 0; oh < {OH}u; ++oh)"):
                        ctx(f"memcpy(({yc} *)({dst}) + oh * {OW}u, {ytmp} + oh * {wq}u, "
                            f"{OW}u * sizeof(*{ytmp}));")


def use_run(n: int, OH: int, OW: int, L: int) -> bool:
    """One run of n grid positions (rows wq apart, the positions between them dropped) when
    it takes fewer vectors than the OH rows of OW outputs one by one (C loop, x86-avx512-vnni,
    uint8 3 x 3 depthwise: 960 channels at 7 x 7 74 -> 55 us, 576 at 14 x 14 s2 75 -> 56, 192
    at 28 x 28 85 -> 78; 384 at 14 x 14, 15 vectors against 14, 47 -> 56 us as a run)."""
    return -(-n // L) < OH * -(-OW // L)
