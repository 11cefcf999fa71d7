"""QLinearConv / ConvInteger with constant weights on the x86 SIMD targets: the integer GEMMs
of qgemm_simd.py (forms, exactness, requantization there) with the weights ``w - wzp`` as
the broadcast operand A ([cout, K] per group, packed at build time) and the input as B.

* 1-D / 2-D (any padding, stride, dilation, groups): an implicit GEMM. The input of a
  (batch, group) is copied once into a padded hp x wp plane per channel group with the g
  channels of a group interleaved (pair form: ``x - xzp`` as int16, zeros in the padding;
  quad form: ``x`` as unsigned bytes, the zero point in the padding). The GEMM's columns are
  the positions of the output grid widened to wp (wp - OW garbage columns per row, computed
  and never stored), and the row of k group (tap, channel group c) is the plane run starting
  at ``c * hp * wp + kh * dh * wp + kw * dw``: B is read in place through a table of these
  offsets, with no im2col. K runs over (tap, channel group). Strided convs split the padded
  input into sh x sw phase planes (hq x wq each) instead; a tap reads the phase of its
  offset modulo the stride, at the offset divided by the stride: still only the real taps.
* 3-D convs: im2col of a block of output positions (a multiple of NR, sized so that its
  panels stay in L2) packed into pair panels at run time.

Depthwise convs run in exact float32 arithmetic (qconv_dw.py); other convs with fewer than
MIN_K products per output keep qlinear.py's tap loops.
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import ctype
from .conv import ConvGeometry
from .conv_kernels import PARAMS, RANGE
from .loops import numel
from . import qconv_dw, qgemm_amx
from .qgemm_simd import (FORMS, ISA, as_elems, const_operand, conv_weights, gemm, isa_for,
                         pair_form, plane_2d, quad_form, typed, zp_expr)
from .qrequant_simd import Requant, channel_terms, output

MIN_K = 16          # convs with fewer products per output (not depthwise) keep the tap loops
PANEL_KB = 128      # im2col panels of one position block (L2)
BLOCK_KB = 96       # implicit GEMM: int32 results of one position block (cout_g x jb)

PACK_B = """\
/* im2col of positions [p0, p0 + jn) of one group (x: its first input channel, zero point
 * subtracted, zeros in the padding and past jn up to jbp) packed into jbp / NR panels of
 * k2 int16 pairs x NR columns. t0, t1: two rows of jbp int16. */
static void aicc_qim2col_SFX(const aicc_conv_params *p, const TA *restrict x, int32_t zp,
                             size_t K, size_t p0, size_t jn, size_t jbp, size_t nr,
                             int16_t *restrict t0, int16_t *restrict t1, int16_t *restrict bp)
{
    const size_t taps = p->k[0] * p->k[1] * p->k[2], plane = p->in[0] * p->in[1] * p->in[2];
    const size_t o1n = p->out[1], o2n = p->out[2], k2 = (K + 1u) / 2u;
    for (size_t kp = 0; kp < k2; ++kp) {
        for (size_t h = 0; h < 2u; ++h) {
            int16_t *restrict t = h ? t1 : t0;
            const size_t k = 2u * kp + h;
            if (k >= K) {
                memset(t, 0, jbp * sizeof *t);
                continue;
            }
            const size_t c = k / taps, tap = k % taps;
            const size_t k0 = tap / (p->k[1] * p->k[2]), k1 = tap / p->k[2] % p->k[1],
                         k2_ = tap % p->k[2];
            const int64_t f0 = aicc_tap_off(p, 0, k0), f1 = aicc_tap_off(p, 1, k1),
                          f2 = aicc_tap_off(p, 2, k2_);
            size_t l2, h2;
            aicc_valid_range(f2, p->stride[2], p->in[2], o2n, &l2, &h2);
            const TA *xc = x + c * plane;
            for (size_t q = p0; q < p0 + jn;) {
                const size_t row = q / o2n, o2s = q % o2n;
                const size_t o2e = o2n - o2s < p0 + jn - q ? o2n : o2s + (p0 + jn - q);
                const size_t base = q - p0 - o2s;          /* t[base + o2] is position o2 */
                const int64_t i0 = (int64_t)(row / o1n * p->stride[0]) + f0,
                              i1 = (int64_t)(row % o1n * p->stride[1]) + f1;
                size_t lo = l2 > o2s ? l2 : o2s, hi = h2 < o2e ? h2 : o2e;
                if (i0 < 0 || i0 >= (int64_t)p->in[0] || i1 < 0 || i1 >= (int64_t)p->in[1]
                    || hi < lo)
                    lo = hi = o2e;
                for (size_t o2 = o2s; o2 < lo; ++o2)
                    t[base + o2] = 0;
                if (lo < hi) {
                    const TA *restrict xr = xc + ((size_t)i0 * p->in[1] + (size_t)i1) * p->in[2];
                    if (p->stride[2] == 1u) {
                        const TA *restrict xs = xr + (size_t)((int64_t)lo + f2);
                        int16_t *restrict ts = t + base + lo;
                        for (size_t j = 0; j < hi - lo; ++j)
                            ts[j] = (int16_t)((int32_t)xs[j] - zp);
                    } else {
                        for (size_t o2 = lo; o2 < hi; ++o2)
                            t[base + o2] = (int16_t)((int32_t)
                                xr[(size_t)((int64_t)(o2 * p->stride[2]) + f2)] - zp);
                    }
                }
                for (size_t o2 = hi; o2 < o2e; ++o2)
                    t[base + o2] = 0;
                q += o2e - o2s;
            }
            for (size_t j = jn; j < jbp; ++j)
                t[j] = 0;
        }
        for (size_t pn = 0; pn < jbp / nr; ++pn) {
            int16_t *restrict d = bp + (pn * k2 + kp) * nr * 2u;
            const int16_t *restrict s0 = t0 + pn * nr, *restrict s1 = t1 + pn * nr;
            for (size_t j = 0; j < nr; ++j) {
                d[2u * j] = s0[j];
                d[2u * j + 1u] = s1[j];
            }
        }
    }
}"""


PAD = """\
/* x - zp of cin channels (h x w planes) zero-padded to hp x wp (pt rows above, pl columns on
 * the left) with the channels interleaved in pairs: d[((c2 * hp + i) * wp + j) * 2 + e] =
 * x[2 c2 + e][i - pt][j - pl] - zp (zero in the padding and for a missing odd channel); then
 * slack zeros (the implicit GEMM's last panel reads up to NR positions past the planes). */
static void aicc_qpad_SFX(const TA *restrict x, size_t cin, size_t h, size_t w, int32_t zp,
                          size_t hp, size_t wp, size_t pt, size_t pl, size_t slack,
                          int16_t *restrict d)
{
    const size_t c2n = (cin + 1u) / 2u, plane = h * w;
    for (size_t c2 = 0; c2 < c2n; ++c2) {
        const TA *x0 = x + 2u * c2 * plane;
        const int pair = 2u * c2 + 1u < cin;
        int16_t *dp = d + c2 * hp * wp * 2u;
        for (size_t i = 0; i < hp; ++i) {
            int16_t *restrict dr = dp + i * wp * 2u;
            if (i < pt || i >= pt + h) {
                memset(dr, 0, wp * 2u * sizeof *dr);
                continue;
            }
            memset(dr, 0, pl * 2u * sizeof *dr);
            memset(dr + (pl + w) * 2u, 0, (wp - pl - w) * 2u * sizeof *dr);
            int16_t *restrict o = dr + pl * 2u;
            const TA *restrict r0 = x0 + (i - pt) * w;
            if (pair) {
                const TA *restrict r1 = r0 + plane;
                for (size_t j = 0; j < w; ++j) {
                    o[2u * j] = (int16_t)((int32_t)r0[j] - zp);
                    o[2u * j + 1u] = (int16_t)((int32_t)r1[j] - zp);
                }
            } else {
                for (size_t j = 0; j < w; ++j) {
                    o[2u * j] = (int16_t)((int32_t)r0[j] - zp);
                    o[2u * j + 1u] = 0;
                }
            }
        }
    }
    memset(d + c2n * hp * wp * 2u, 0, slack * sizeof *d);
}"""



PADQ = """\
/* x of cin channels (h x w planes) as unsigned bytes (x + FLIP) padded to hp x wp (pt rows
 * above, pl columns on the left) with the channels interleaved in fours:
 * d[((c4 * hp + i) * wp + j) * 4 + e] = x[4 c4 + e][i - pt][j - pl] + FLIP; zu (the zero
 * point + FLIP) in the padding, for missing channels (zero weights) and in the slack.
 * zrow: w elements of scratch. */
static void aicc_qpadq_SFX(const TA *restrict x, size_t cin, size_t h, size_t w, uint8_t zu,
                           size_t hp, size_t wp, size_t pt, size_t pl, size_t slack,
                           uint8_t *restrict d, TA *restrict zrow)
{
    const size_t c4n = (cin + 3u) / 4u, plane = h * w;
    memset(d, zu, c4n * hp * wp * 4u + slack);
    for (size_t j = 0; j < w; ++j)
        zrow[j] = (TA)((int32_t)zu - FLIP);
    for (size_t c4 = 0; c4 < c4n; ++c4) {
        const TA *r[4];
        size_t rs[4];
        for (size_t e = 0; e < 4u; ++e) {
            const int real = 4u * c4 + e < cin;
            r[e] = real ? x + (4u * c4 + e) * plane : zrow;
            rs[e] = real ? w : 0u;
        }
        for (size_t i = 0; i < h; ++i) {
            uint8_t *restrict o = d + ((c4 * hp + i + pt) * wp + pl) * 4u;
            const TA *restrict r0 = r[0] + i * rs[0], *restrict r1 = r[1] + i * rs[1];
            const TA *restrict r2 = r[2] + i * rs[2], *restrict r3 = r[3] + i * rs[3];
            for (size_t j = 0; j < w; ++j) {
                o[4u * j] = (uint8_t)((int32_t)r0[j] + FLIP);
                o[4u * j + 1u] = (uint8_t)((int32_t)r1[j] + FLIP);
                o[4u * j + 2u] = (uint8_t)((int32_t)r2[j] + FLIP);
                o[4u * j + 3u] = (uint8_t)((int32_t)r3[j] + FLIP);
            }
        }
    }
}"""


PADS = """\
/* Strided convs: the padded input of cin channels split into sh x sw phases, each phase a
 * set of hq x wq planes with G channels interleaved: for phase (py, px) = ph,
 * d[(((ph * cgn + c / G) * hq + i) * wq + j) * G + c % G] = xpad[c][i sh + py][j sw + px]
 * as ET (VAL); FILL in the padding, past the input and for missing channels. */
static void aicc_qpadsG_SFX(const TA *restrict x, size_t cin, size_t h, size_t w, int32_t zp,
                           size_t sh, size_t sw, size_t hq, size_t wq, size_t pt, size_t pl,
                            size_t slack, ET *restrict d)
{
    const size_t cgn = (cin + G - 1u) / G, plane = h * w;
    const size_t n = sh * sw * cgn * hq * wq * G + slack;
    for (size_t k = 0; k < n; ++k)
        d[k] = (ET)(FILL);
    for (size_t py = 0; py < sh; ++py)
        for (size_t px = 0; px < sw; ++px)
            for (size_t c = 0; c < cin; ++c) {
                ET *restrict dp = d + ((py * sw + px) * cgn + c / G) * hq * wq * G + c % G;
                const size_t j0 = px >= pl ? 0u : (pl - px + sw - 1u) / sw;  /* j sw + px >= pl */
                for (size_t i = 0; i < hq; ++i) {
                    const size_t r = i * sh + py;
                    if (r < pt || r - pt >= h)
                        continue;
                    const TA *restrict xr = x + c * plane + (r - pt) * w;
                    for (size_t j = j0; j < wq && j * sw + px - pl < w; ++j)
                        dp[(i * wq + j) * G] = (ET)(VAL);
                }
            }
}"""

STRIDED = {  # per group size: element type, value of x, padding fill
    2: dict(ET="int16_t", VAL="(int32_t)xr[j * sw + px - pl] - zp", FILL="0"),
    4: dict(ET="uint8_t", VAL="(int32_t)xr[j * sw + px - pl] + FLIP", FILL="zp + FLIP"),
}


def block_positions(P: int, k2: int, nr: int) -> int:
    """Output positions per im2col block: a multiple of NR whose panels fit PANEL_KB."""
    jb = max(nr, (PANEL_KB * 1024 // (k2 * 4)) // nr * nr)
    return min(jb, -(-P // nr) * nr)


def implicit_ok(geo) -> bool:
    """1-D / 2-D convs read the padded, interleaved input (phase-split when strided) in place."""
    return len(geo.k) <= 2


def usable(ctx, geo, op) -> bool:
    """Whether emit_conv takes a conv with this geometry: a SIMD target, constant weights and
    weight zero point, and enough products per output (or depthwise, qconv_dw.py)."""
    return geo.batch * geo.cout * numel(geo.out) > 0 and const_operand(ctx, op.W, op.WZ) and (
        geo.cin_g * numel(geo.k) >= MIN_K or qconv_dw.dw_usable(geo))


def emit_conv_implicit(op, node, ctx, rq: Requant | None) -> None:
    """The implicit GEMM on the padded, channel-interleaved input (module doc). Strides: the
    input is split into sh x sw phases (planes of hq x wq), tap (a, b) reads phase
    ((a dh) % sh, (b dw) % sw) at row / column offset ((a dh) / sh, (b dw) / sw) of the output
    position: K runs over the real taps, nothing is wasted."""
    isa = isa_for(ctx)
    ctx.kernel = isa
    nr = ISA[isa]["nr"]
    ta = ctx.in_dtype(op.X)
    geo = ConvGeometry(op, node, ctx.in_shape(op.X), ctx.in_shape(op.W))
    H, W, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, OH, OW = plane_2d(geo)
    hp, wp = H + pt + pb, W + pl + pr
    strided = sh * sw > 1
    hq = max(-(-hp // sh), OH + (kh - 1) * dh // sh)
    wq = max(-(-wp // sw), OW + (kw - 1) * dw // sw)
    Q, P, taps = (OH - 1) * wq + OW, OH * OW, kh * kw
    w = conv_weights(ctx, op, geo)
    form = quad_form(ctx, isa, w, True) or pair_form(ctx, isa)
    g, et = FORMS[form]["g"], FORMS[form]["et"]
    cgn = -(-geo.cin_g // g)                    # channel groups
    kgn = taps * cgn
    kr = qgemm_amx.conv_chunk(cgn) if form == "qb" and qgemm_amx.available(ctx) else 0
    mp = qgemm_amx.rows_padded(geo.cout_g) if kr else geo.cout_g    # weight rows per group
    a = np.zeros((geo.group, mp, taps, g * cgn), np.int64)
    a[:, :geo.cout_g, :, :geo.cin_g] = w.reshape(geo.group, geo.cout_g, geo.cin_g,
                                                 taps).transpose(0, 1, 3, 2)
    wpk = ctx.const(as_elems(a.reshape(geo.group * mp, g * kgn), form), "qw")
    def tap_off(t, c):
        (py, ro), (px, co) = ((t // kw * dh) % sh, t // kw * dh // sh), ((t % kw * dw) % sw,
                                                                       t % kw * dw // sw)
        return ((((py * sw + px) * cgn + c) * hq + ro) * wq + co) * g
    off = np.array([tap_off(t, c) for t in range(taps) for c in range(cgn)], np.int32)
    offs = ctx.const(off, "qoff")
    jb = max(nr, (BLOCK_KB * 1024 // (geo.cout_g * 4)) // nr * nr)
    jb = min(jb, -(-Q // nr) * nr)
    slack = g * nr + 64
    xp = ctx.scratch((sh * sw * cgn * hq * wq * g + slack) * FORMS[form]["size"], et, "qx")
    cb = ctx.scratch(mp * jb * 4, "int32_t", "qc")
    ctx.helper("qlinear.4.0.string", "#include <string.h>")
    gm = gemm(ctx, isa, form, geo.cout_g, implicit=True)
    ctx(f"/* {geo.describe()}: implicit integer GEMM ({isa}{f', AMX tiles of {kr} channel groups' if kr else ''}, form {form}) on the padded input "
        f"({sh * sw} phase(s) of {hq} x {wq}, {g} channels interleaved), weights - wzp packed "
        "at build time; "
        f"blocks of {jb} of the {Q} grid positions */")
    ctx(f"const int32_t xzp = {zp_expr(ctx, op.XZ)};")
    xin = f"{ctx.inp[op.X]} + (nb * {geo.cin}u + gi * {geo.cin_g}u) * {numel(geo.inp)}u"
    corr = None
    if g == 4:
        corr = ctx.const(w.sum(axis=(1, 2)).astype(np.int32), "qsum")
        ctx(f"const uint32_t zu = (uint32_t)(xzp + {0 if ta.name == 'uint8' else 128});")
    if strided:
        code = PADS
        for k_, v_ in {**STRIDED[g], "G": f"{g}u"}.items():
            code = code.replace(k_, v_)
        code, sfx = typed(code, ta)
        ctx.helper(f"qlinear.4.1.pads{g}{sfx}", code)
        pad = (f"aicc_qpads{g}u{sfx}({xin}, {geo.cin_g}u, {H}u, {W}u, xzp, {sh}u, {sw}u, {hq}u, "
               f"{wq}u, {pt}u, {pl}u, {slack}u, {xp});")
    elif g == 4:
        code, sfx = typed(PADQ, ta)
        ctx.helper(f"qlinear.4.1.padq{sfx}", code)
        zrow = ctx.scratch(W * ta.itemsize, ctype(ta), "qz")
        pad = (f"aicc_qpadq{sfx}({xin}, {geo.cin_g}u, {H}u, {W}u, (uint8_t)zu, {hp}u, {wp}u, "
               f"{pt}u, {pl}u, {slack}u, {xp}, {zrow});")
    else:
        code, sfx = typed(PAD, ta)
        ctx.helper(f"qlinear.4.1.pad{sfx}", code)
        pad = (f"aicc_qpad{sfx}({xin}, {geo.cin_g}u, {H}u, {W}u, xzp, {hp}u, {wp}u, {pt}u, "
               f"{pl}u, {slack}u, {xp});")
    with ctx.block(f"for (size_t nb = 0; nb < {geo.batch}u; ++nb)"):
        with ctx.block(f"for (size_t gi = 0; gi < {geo.group}u; ++gi)"):
            ctx(pad)
            with ctx.block(f"for (size_t q0 = 0; q0 < {Q}u; q0 += {jb}u)"):
                ctx(f"const size_t jn = {Q}u - q0 < {jb}u ? {Q}u - q0 : {jb}u;")
                vec = (f"{gm}({kgn}u, (jn + {nr - 1}u) / {nr}u, {wpk} + gi * {mp * g * kgn}u, "
                       f"{xp} + q0 * {g}u, {offs}, {cb}, {jb}u);")
                if kr:
                    ctx(f"if (aicc_amx_ready()) {qgemm_amx.conv(ctx, kr)}({mp}u, {taps}u, {cgn}u, "
                        f"(jn + 31u) / 32u, {wpk} + gi * {mp * g * kgn}u, {xp} + q0 * {g}u, "
                        f"{offs}, {hq * wq * g}u, {cb}, {jb}u);")
                    ctx(f"else {vec}")
                else:
                    ctx(vec)
                with ctx.block(f"for (size_t og = 0; og < {geo.cout_g}u; ++og)"):
                    ctx(f"const size_t oc = gi * {geo.cout_g}u + og;")
                    channel_terms(ctx, rq, corr)
                    if wq == OW:        # no garbage columns: the block is contiguous output
                        output(ctx, isa, rq, "jn", f"{cb} + og * {jb}u",
                               f"{ctx.out[0]} + (nb * {geo.cout}u + oc) * {P}u + q0")
                    else:
                        _output_rows(ctx, isa, rq, geo, cb, jb, wq, OW, P)


def _output_rows(ctx, isa, rq, geo, cb, jb, wq, OW, P) -> None:
    """Output channel oc of the position block [q0, q0 + jn), one grid row (wq positions) at a
    time: its first OW positions are outputs, the rest garbage columns."""
    with ctx.block(f"for (size_t row = q0 / {wq}u; row * {wq}u < q0 + jn; ++row)"):
        ctx(f"const size_t s = row * {wq}u > q0 ? row * {wq}u : q0;")
        ctx(f"const size_t e = row * {wq}u + {OW}u < q0 + jn ? row * {wq}u + {OW}u : q0 + jn;")
        with ctx.block("if (s < e)"):
            output(ctx, isa, rq, "e - s", f"{cb} + og * {jb}u + (s - q0)",
                   f"{ctx.out[0]} + (nb * {geo.cout}u + oc) * {P}u + row * {OW}u + "
                   f"(s - row * {wq}u)")


def emit_conv(op, node, ctx, rq: Requant | None) -> None:
    """A conv ``usable`` takes. ``rq``: None (int32 output) or the requantization (its mult
    and bias: of output channel ``oc``)."""
    geo = ConvGeometry(op, node, ctx.in_shape(op.X), ctx.in_shape(op.W))
    if qconv_dw.dw_usable(geo):
        qconv_dw.emit(op, node, ctx, rq)
        return
    if implicit_ok(geo):
        emit_conv_implicit(op, node, ctx, rq)
        return
    isa = isa_for(ctx)
    ctx.kernel = isa
    nr = ISA[isa]["nr"]
    form = pair_form(ctx, isa)
    ta = ctx.in_dtype(op.X)
    P, K = numel(geo.out), geo.cin_g * numel(geo.k)
    k2 = (K + 1) // 2
    w = conv_weights(ctx, op, geo).reshape(geo.cout, K)
    a = np.zeros((geo.cout, 2 * k2), np.int64)
    a[:, :K] = w
    wp = ctx.const(as_elems(a, form), "qw")
    jb = block_positions(P, k2, nr)
    ctx.helper("conv.0.params", PARAMS)
    ctx.helper("conv.1.range", RANGE)
    ctx.helper("qlinear.4.0.string", "#include <string.h>")
    code, sfx = typed(PACK_B, ta)
    ctx.helper(f"qlinear.4.1.im2col{sfx}", code)
    t = ctx.scratch(2 * jb * 2, "int16_t", "qt")
    bp = ctx.scratch(k2 * jb * 2 * 2, "int16_t", "qb")
    cb = ctx.scratch(geo.cout_g * jb * 4, "int32_t", "qc")
    gm = gemm(ctx, isa, form, geo.cout_g)
    ctx(f"/* {geo.describe()}: integer GEMM ({isa}, form {form}), weights - wzp packed at "
        f"build time, im2col blocks of {jb} positions */")
    ctx(geo.params())
    ctx(f"const int32_t xzp = {zp_expr(ctx, op.XZ)};")
    with ctx.block(f"for (size_t nb = 0; nb < {geo.batch}u; ++nb)"):
        with ctx.block(f"for (size_t gi = 0; gi < {geo.group}u; ++gi)"):
            with ctx.block(f"for (size_t p0 = 0; p0 < {P}u; p0 += {jb}u)"):
                ctx(f"const size_t jn = {P}u - p0 < {jb}u ? {P}u - p0 : {jb}u;")
                ctx(f"const size_t jbp = (jn + {nr - 1}u) / {nr}u * {nr}u;")
                ctx(f"aicc_qim2col{sfx}(&prm, {ctx.inp[op.X]} + (nb * {geo.cin}u + gi * "
                    f"{geo.cin_g}u) * {numel(geo.inp)}u, xzp, {K}u, p0, jn, jbp, {nr}u, {t}, "
                    f"{t} + {jb}u, {bp});")
                ctx(f"{gm}({k2}u, jbp / {nr}u, {wp} + gi * {geo.cout_g * 2 * k2}u, {bp}, {cb}, "
                    "jbp);")
                with ctx.block(f"for (size_t og = 0; og < {geo.cout_g}u; ++og)"):
                    ctx(f"const size_t oc = gi * {geo.cout_g}u + og;")
                    channel_terms(ctx, rq)
                    output(ctx, isa, rq, "jn", f"{cb} + og * jbp",
                           f"{ctx.out[0]} + (nb * {geo.cout}u + oc) * {P}u + p0")
