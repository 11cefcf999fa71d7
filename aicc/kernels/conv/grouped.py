"""Grouped conv with few channels per group (float32; x86-avx2 / x86-avx512): the variant
``grouped`` of kernels/conv/simd.py, the input-broadcast kernels of kernels/conv/bcast.py run
group by group (RegNet's 3x3 convs of 8-64 channels per group; ResNeXt-style blocks).

Per group, a register block is R consecutive output positions of one output row x V vectors
of the group's output channels (16 channels: two AVX2 vectors, one AVX-512 vector), each
``acc[r][v] += x(c, ky, kx) * W[c][ky][kx][v's channels]`` for k = (c, ky, kx) ascending over
the group's input channels, each x broadcast from the (zero-padded) input rows, the weights
packed at compile time per group as ``[group][channel block][c][ky][kx][V lanes]`` (zero past
the group's channels). The block kernels (kernels/conv/bcast_k.py) are the group-1 conv's with
the group's channel counts: one set of kernels serves every group (the group's input, weights,
bias and output are pointers). The GEMM forms leave such convs short: K = 9 * 16 = 144 and 16
output channels per group fill neither an im2col tile nor a transposed panel (regnet_x_400mf's
3x3 convs of 16 channels per group ran at ~16-58 GFLOP/s as ``transposed`` / ``im2col``, at
60-100 here; AMD Zen 4, x86-avx2).

Loop order: batch item, group, band of whole output rows (about BAND_POS positions): the
group's input rows of the band copied zero-padded into a small buffer (or read in place when
every tap is inside the input), the band's blocks into a tile ``t[position][the group's
channels rounded up to vectors]``, then transposed into the group's output planes (bcast.py's
transposes) and the scalar activation pass (activations other than none / Relu / Clip).

Auto (``prefer``): constant weights, 1-D / 2-D, several input channels per group (one is
``depthwise``), output channels per group within the ISA description's ``grouped`` rule
(cout_min .. cout_max) and filling the lanes (fill). x86-avx512 takes 8-lane vectors where
the last 16-lane one would be at most half full (bcast.vector_isa: 8 and 24 channels).

Rounding: each output is one FMA chain over k = (c, ky, kx) ascending from +0, then + bias,
then the activation (as ``bcast``; the same bits as the im2col variant when K fits one K
block). NaN/Inf: IEEE; padding zeros meet the weights (0 * Inf = NaN for an Inf weight, as
im2col's zero patches); lanes past the group's channels multiply zero weights and are never
stored.
"""
from __future__ import annotations

import hashlib

import numpy as np

from . import bcast
from . import bcast_edges as edges
from ..gemm.simd import ISA, _header
from ..gemm.clamp import clamp_sides
from ..isa.registry import ISAS
from ..isa.x86 import include, vcopy
from ..move.transpose import transpose_c
from .base_c import epilogue, use
from .bcast_k import MAX_UNROLL, kernel
from .schedule import node_schedule, padded_extents
from .simd_gemm import KEY, clamp_of
from .transposed import lanes


def supports(geo) -> bool:
    """1-D / 2-D, several groups of several input channels."""
    return len(geo.k) <= 2 and geo.group > 1 and geo.cin_g > 1


def prefer(ctx, geo, isa: str) -> bool:
    """Constant weights and the ISA's rule (its conv description's ``grouped``): output
    channels per group in cout_min .. cout_max, filling at least ``fill`` of the lanes of the
    vectors they take."""
    a = ISAS[isa].conv_kernels.get("grouped")
    if a is None or not supports(geo) or ctx.in_const(1) is None:
        return False
    L = ISA[bcast.vector_isa(ctx, geo, isa, geo.cout_g)]["lanes"]
    return (a["cout_min"] <= geo.cout_g <= a["cout_max"]
            and lanes(geo.cout_g, L) >= a["fill"])


def positions(ow: int, v: int, rmax: int, chains: int) -> int:
    """Positions per block for an output row of ow: the r <= rmax whose blocks (ow // r of r,
    then one of the rest) cost least, a block of r costing max(r * v, chains) FMA steps per
    tap (fewer than ``chains`` independent accumulators wait on the FMA latency); ties to
    the larger r. Zen 4, x86-avx2, 16 channels per group (v = 2, rmax = 5): 56 positions as
    14 x 4 rather than 11 x 5 + 1, 32 -> 32 channels stride 2 onto 56 x 56 0.44 -> 0.35 ms."""
    def cost(r):
        return ow // r * max(r * v, chains) + (max(ow % r * v, chains) if ow % r else 0)
    return min(range(min(rmax, ow), 0, -1), key=cost)


def pack(w: np.ndarray, group: int, v: int, lanes_: int) -> np.ndarray:
    """[Cout, Cin/g, kh, kw] -> per group bcast.pack's [blocks][Cin/g][kh][kw][v * lanes]."""
    wg = w.reshape((group, w.shape[0] // group) + w.shape[1:])
    return np.stack([bcast.pack(m, v, lanes_) for m in wg])


def emit(ctx, node, geo, isa: str, bias: str) -> None:
    """Step body (NCHW in and out)."""
    if not supports(geo):
        raise ValueError("conv algo 'grouped' needs a 1-D/2-D conv with several groups of "
                         "several input channels")
    w = ctx.in_const(1)
    if w is None:
        raise ValueError("conv algo 'grouped' needs constant weights")
    kmax = node_schedule(ctx, isa)["edge_kernels"]
    isa = bcast.vector_isa(ctx, geo, isa, geo.cout_g)
    L = ISA[isa]["lanes"]
    g = bcast.Geo2(geo, padded_extents(geo), False)
    g.cin, g.cout = geo.cin_g, geo.cout_g        # the kernels see one group
    v, rmax = bcast.blocking(isa, g.cout, g.ow, bcast.regs(ctx))
    r = positions(g.ow, v, rmax, ISAS[isa].conv_kernels["grouped"]["chains"])
    wb = v * L                                   # channels per block
    nb = -(-g.cout // wb)                        # blocks per group
    lo, hi, act = clamp_of(node)
    clamp = clamp_sides(lo, hi)
    has_b = bias != "NULL"
    ctx.kernel = f"{isa} grouped"
    wp = ctx.const(pack(np.asarray(w, np.float32), geo.group, v, L), "wgc")
    # the kernels' text depends on the geometry, bias and clamp, and differs from a group-1
    # bcast conv's of the same per-group shape (kept as calls): its own names
    tag = hashlib.sha1(repr((sorted(g.__dict__.items()), isa, has_b, clamp, "grouped")
                            ).encode()).hexdigest()[:8]
    use(ctx, "float32")
    include(ctx, isa)
    vcopy(ctx)
    ctx.helper(f"{KEY}.5.tr_{isa}", transpose_c(isa))
    full = g.ow // r * r
    runs = [(0, full, r)] + ([(full, g.ow, g.ow - full)] if full < g.ow else [])
    runs, classes = edges.plan(g, runs, len(g.taps) <= MAX_UNROLL,
                               bool(np.isfinite(np.asarray(w)).all()), kmax)
    calls = {}
    for rows in [frozenset()] + [rows for rows, _oys in classes]:
        calls[rows] = []
        for cb in range(nb):
            nch = min(wb, g.cout - cb * wb)
            nv, mask = -(-nch // L), nch % L
            if mask and has_b:
                _header(ctx, isa)                # the lane-mask table (no mask registers)
            for x0, x1, rr, cols in runs:
                name, text = kernel(isa, g, rr, nv, wb, tag, has_b, clamp, mask, False,
                                    bcast.regs(ctx), (rows, cols), call=True)
                ctx.helper(f"{KEY}.5.{name}", text)
                calls[rows].append((cb, x0, x1, rr, name))
    P, ldt = g.oh * g.ow, nb * wb
    G, ci, co = geo.group, geo.cin_g, geo.cout_g
    ctx(f"/* Conv {geo.describe()}: {isa} grouped direct, input broadcast: per group blocks "
        f"of {r} positions x {wb} output channels, {ci} x {len(g.taps)} taps each; bands of "
        f"{g.band} output rows */")
    x, y = ctx.inp[0], ctx.out[0]
    xb = ctx.scratch(ci * g.rb * g.rs * 4, "float", "xband") if g.padded else None
    tb = ctx.scratch(g.band * g.ow * ldt * 4, "float", "ytile")
    ep = epilogue(ctx, node, "float32") if act else "NULL"
    wgs = nb * ci * len(g.taps) * wb             # packed weight floats per group
    with ctx.block(f"for (size_t n = 0; n < {g.batch}u; ++n)"):
        with ctx.block(f"for (size_t grp = 0; grp < {G}u; ++grp)"):
            ctx(f"const float *restrict xn = {x} + (n * {G}u + grp) * {ci * g.h * g.w}u;")
            ctx(f"const float *restrict wg = {wp} + grp * {wgs}u;")
            if has_b:
                ctx(f"const float *restrict bg = {bias} + grp * {co}u;")
            ctx(f"float *restrict yg = {y} + (n * {G}u + grp) * {co * P}u;")
            with ctx.block(f"for (size_t oy0 = 0; oy0 < {g.oh}u; oy0 += {g.band}u)"):
                ctx(f"const size_t nrow = {g.oh}u - oy0 < {g.band}u ? {g.oh}u - oy0 : "
                    f"{g.band}u;")
                if g.padded:
                    bcast.pad_band(ctx, g, "xn", xb, False)
                    ctx(f"const float *restrict xv = {xb} + {g.lead}u;")
                else:
                    ctx(f"const float *restrict xv = xn + oy0 * {g.sy * g.rs}u;")
                with ctx.block("for (size_t oy = oy0; oy < oy0 + nrow; ++oy)"):
                    ctx(f"const float *restrict xr = xv + (oy - oy0) * {g.sy * g.rs}u;")
                    ctx(f"float *restrict yr = {tb} + (oy - oy0) * {g.ow * ldt}u;")
                    args = ("wg", wb, "bg", has_b, ldt, lo, hi)
                    for k, (rows, oys) in enumerate(classes):
                        cond = " || ".join(f"oy == {oy}u" for oy in oys)
                        with ctx.block(f"{'else ' if k else ''}if ({cond})"):
                            bcast.row_calls(ctx, g, calls[rows], *args)
                    if classes:
                        with ctx.block("else"):
                            bcast.row_calls(ctx, g, calls[frozenset()], *args)
                    else:
                        bcast.row_calls(ctx, g, calls[frozenset()], *args)
                ctx(f"aicc_cb_tr_{isa}({tb}, nrow * {g.ow}u, {ldt}u, {co}u, "
                    f"yg + oy0 * {g.ow}u, {P}u);")
                if ep != "NULL":
                    with ctx.block(f"for (size_t c = 0; c < {co}u; ++c)"):
                        ctx(f"{ep}(yg + c * {P}u + oy0 * {g.ow}u, nrow * {g.ow}u);")
