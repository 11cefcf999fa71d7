"""QLinearConv / ConvInteger with constant weights on the x86 SIMD targets: the integer GEMMs
of kernels/qgemm/simd.py (forms, exactness, requantization there) with the weights ``w - wzp`` as
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

The copies are kernels/qgemm/copy.py's; on x86-avx512-amx the quad form's implicit GEMM runs on AMX
tiles (kernels/qgemm/amx.py) when a tap's channel groups split into k tiles of 4 to 16 groups.

Depthwise convs run in exact float32 arithmetic (kernels/qgemm/depthwise.py); other convs with fewer than
MIN_K products per output keep qlinear.py's tap loops.
"""
from __future__ import annotations

import numpy as np

from . import amx as qgemm_amx
from . import copy as qconv_copy
from . import depthwise as qconv_dw
from ...emit_c.loops import numel
from ..conv.base_c import PARAMS, RANGE
from ..conv.geometry import ConvGeometry
from .requant import Requant, add_expr, channel_terms, output
from .simd import (FORMS, as_elems, const_operand, conv_weights, flip, gemm, isa_for,
                   pair_form, plane_2d, quad_form, typed, zp_expr)
from .spell import TABLES

MIN_K = 16          # convs with fewer products per output (not depthwise) keep the tap loops
PANEL_KB = 128      # im2col panels of one position block (L2)
BLOCK_KB = 96       # implicit GEMM: int32 results of one position block (cout_g x jb)

def block_positions(P: int, k2: int, nr: int) -> int:
    """Output positions per im2col block: a multiple of NR whose panels fit PANEL_KB."""
    jb = max(nr, (PANEL_KB * 1024 // (k2 * 4)) // nr * nr)
    return min(jb, -(-P // nr) * nr)


def implicit_ok(geo) -> bool:
    """1-D / 2-D convs read the padded, interleaved input (phase-split when strided) in place."""
    return len(geo.k) <= 2


def _dw(ctx, geo) -> bool:
    """Depthwise on kernels/qgemm/depthwise.py: where the ISA spells its row splitter
    (``de2``); elsewhere depthwise convs keep qlinear.py's loops."""
    return qconv_dw.dw_usable(geo) and "de2" in TABLES[isa_for(ctx)]


def usable(ctx, geo, op) -> bool:
    """Whether emit_conv takes a conv with this geometry: a SIMD target, constant weights and
    weight zero point, and enough products per output (or depthwise, kernels/qgemm/depthwise.py)."""
    if not (geo.batch * geo.cout * numel(geo.out) > 0 and const_operand(ctx, op.W, op.WZ)):
        return False
    if qconv_dw.dw_usable(geo):
        return _dw(ctx, geo)
    return geo.cin_g * numel(geo.k) >= MIN_K


def emit_conv_implicit(op, node, ctx, rq: Requant | None) -> None:
    """The implicit GEMM on the padded, channel-interleaved input (module doc). Strides: the
    input is split into sh x sw phases (planes of hq x wq), tap (a, b) reads phase
    ((a dh) % sh, (b dw) % sw) at row / column offset ((a dh) / sh, (b dw) / sw) of the output
    position: K runs over the real taps, nothing is wasted."""
    isa = isa_for(ctx)
    ctx.kernel = isa
    nr = TABLES[isa]["nr"]
    ta = ctx.in_dtype(op.X)
    geo = ConvGeometry(op, node, ctx.in_shape(op.X), ctx.in_shape(op.W))
    H, W, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, OH, OW = plane_2d(geo)
    hp, wp = H + pt + pb, W + pl + pr
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
    # with garbage columns, blocks of R whole grid rows when a row fits a block: each output
    # channel's rows are then requantized in one call (the helper's setup dominated 7-wide rows)
    R = jb // wq
    rows_mode = wq != OW and R >= 1
    slack = g * nr + 64
    xp = ctx.scratch((sh * sw * cgn * hq * wq * g + slack) * FORMS[form]["size"], et, "qx")
    cb = ctx.scratch(mp * jb * 4, "int32_t", "qc")
    ctx.helper("qlinear.4.0.string", "#include <string.h>")
    gm = gemm(ctx, isa, form, geo.cout_g, implicit=True)
    amx = f", AMX tiles of {kr} channel groups" if kr else ""
    blocks = f"{R} grid rows" if rows_mode else f"{jb} of the {Q} grid positions"
    ctx(f"/* {geo.describe()}: implicit integer GEMM ({isa}{amx}, form {form}) on the padded "
        f"input ({sh * sw} phase(s) of {hq} x {wq}, {g} channels interleaved), weights - wzp "
        f"packed at build time; blocks of {blocks} */")
    ctx(f"const int32_t xzp = {zp_expr(ctx, op.XZ)};")
    xin = f"{ctx.inp[op.X]} + (nb * {geo.cin}u + gi * {geo.cin_g}u) * {numel(geo.inp)}u"
    corr = None
    if g == 4:
        corr = ctx.const(w.sum(axis=(1, 2)).astype(np.int32), "qsum")
        ctx(f"const uint32_t zu = (uint32_t)(xzp + {flip(ctx, ta)});")
    pad = qconv_copy.pad_call(ctx, ta, g, (H, W), (sh, sw), (hq, wq), (hp, wp), (pt, pl),
                              slack, xin, xp, geo.cin_g)
    # contiguous blocks (no garbage columns) of one multiplier: every channel's row of the
    # block requantized in one call, each with its own add (a call per channel cost ~40% of
    # 320 -> 1280 channels at 7 x 7)
    batched = not rows_mode and wq == OW and rq is not None and not rq.chan_mult
    qa = ctx.scratch(geo.cout * 4, "int32_t", "qadd") if batched else None
    if batched:         # once per step, every group's
        ctx(f"const float mlt = {rq.mult};")
        with ctx.block(f"for (size_t oc = 0; oc < {geo.cout}u; ++oc)"):
            ctx(f"{qa}[oc] = {add_expr(ctx, rq, corr)};")
    with ctx.block(f"for (size_t nb = 0; nb < {geo.batch}u; ++nb)"):
        with ctx.block(f"for (size_t gi = 0; gi < {geo.group}u; ++gi)"):
            ctx(pad)
            if rows_mode:       # blocks of whole grid rows
                head = f"for (size_t row0 = 0; row0 < {OH}u; row0 += {R}u)"
                first = [f"const size_t nrow = {OH}u - row0 < {R}u ? {OH}u - row0 : {R}u;",
                         f"const size_t q0 = row0 * {wq}u, jn = (nrow - 1u) * {wq}u + {OW}u;"]
            else:
                head = f"for (size_t q0 = 0; q0 < {Q}u; q0 += {jb}u)"
                first = [f"const size_t jn = {Q}u - q0 < {jb}u ? {Q}u - q0 : {jb}u;"]
            with ctx.block(head):
                for line in first:
                    ctx(line)
                vec = (f"{gm}({kgn}u, (jn + {nr - 1}u) / {nr}u, {wpk} + gi * {mp * g * kgn}u, "
                       f"{xp} + q0 * {g}u, {offs}, {cb}, {jb}u);")
                if kr:
                    ctx(f"if (aicc_amx_ready()) {qgemm_amx.conv(ctx, kr)}({geo.cout_g}u, {kgn}u, "
                        f"(jn + 31u) / 32u, {wpk} + gi * {mp * g * kgn}u, {xp} + q0 * {g}u, "
                        f"{offs}, {hq * wq * g}u, {cb}, {jb}u);")
                    ctx(f"else {vec}")
                else:
                    ctx(vec)
                if batched:
                    output(ctx, isa, rq, "jn", cb, f"{ctx.out[0]} + (nb * {geo.cout}u + gi * "
                           f"{geo.cout_g}u) * {P}u + q0", add=f"{qa} + gi * {geo.cout_g}u, 0u", add_row="1u",
                           rows=(f"{geo.cout_g}u", f"{jb}u", f"{P}u"))
                else:
                    _output_channels(ctx, isa, rq, corr, (geo, P, OW, wq, jb, cb, rows_mode))


def _output_channels(ctx, isa, rq, corr, dims) -> None:
    """The block's outputs channel by channel (a multiplier per channel, or garbage columns)."""
    geo, P, OW, wq, jb, cb, rows_mode = dims
    with ctx.block(f"for (size_t og = 0; og < {geo.cout_g}u; ++og)"):
        ctx(f"const size_t oc = gi * {geo.cout_g}u + og;")
        channel_terms(ctx, rq, corr)
        dst = f"{ctx.out[0]} + (nb * {geo.cout}u + oc) * {P}u"
        if rows_mode:   # OW outputs of each wq positions: one call for the rows
            output(ctx, isa, rq, f"{OW}u", f"{cb} + og * {jb}u",
                   f"{dst} + row0 * {OW}u", rows=("nrow", f"{wq}u", f"{OW}u"))
        elif wq == OW:  # no garbage columns: the block is contiguous output
            output(ctx, isa, rq, "jn", f"{cb} + og * {jb}u", f"{dst} + q0")
        else:
            _output_rows(ctx, isa, rq, cb, jb, wq, OW, dst)


def _output_rows(ctx, isa, rq, cb, jb, wq, OW, dst) -> None:
    """Output channel oc of the position block [q0, q0 + jn) (rows wider than a block), one
    grid row (wq positions) at a time: its first OW positions are outputs, the rest garbage
    columns."""
    with ctx.block(f"for (size_t row = q0 / {wq}u; row * {wq}u < q0 + jn; ++row)"):
        ctx(f"const size_t s = row * {wq}u > q0 ? row * {wq}u : q0;")
        ctx(f"const size_t e = row * {wq}u + {OW}u < q0 + jn ? row * {wq}u + {OW}u : q0 + jn;")
        with ctx.block("if (s < e)"):
            output(ctx, isa, rq, "e - s", f"{cb} + og * {jb}u + (s - q0)",
                   f"{dst} + row * {OW}u + (s - row * {wq}u)")


def emit_conv(op, node, ctx, rq: Requant | None) -> None:
    """A conv ``usable`` takes. ``rq``: None (int32 output) or the requantization (its mult
    and bias: of output channel ``oc``)."""
    geo = ConvGeometry(op, node, ctx.in_shape(op.X), ctx.in_shape(op.W))
    if _dw(ctx, geo):
        qconv_dw.emit(op, node, ctx, rq)
        return
    if implicit_ok(geo):
        emit_conv_implicit(op, node, ctx, rq)
        return
    isa = isa_for(ctx)
    ctx.kernel = isa
    nr = TABLES[isa]["nr"]
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
    code, sfx = typed(qconv_copy.PACK_B, ta)
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
