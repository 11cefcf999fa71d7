"""The portable float Conv (generic target, float64, and float32 convs off the SIMD paths): in
order, portable Winograd when its schedule chooses it (kernels/winograd/portable.py), the
phase-plane kernel for one input channel per group (planes_c.py), the direct row kernel for
one input or one output channel per group, else im2col tiles + the 4 x 8 GEMM tile
(gemm_c.py; on a scalar FPU with an ``fpu`` description, tile_fpu.py's tile). Rounding and
NaN/Inf: see ops/conv.py.
"""
from __future__ import annotations

from . import planes_c as conv_planes
from . import tile_fpu
from ..isa.registry import fpu_isa
from ...emit_c.loops import numel
from ..winograd import portable as conv_winograd_p
from .base_c import AXPY, DIRECT, PACK8, TILE, epilogue, pack_weights, packed_weights, suffix, use
from .gemm_c import GEMM, IM2COL, gemm_tiles


def emit(ctx, node, geo, dt, bias: str) -> None:
    """Step body of a conv on the portable kernels (bias: its C pointer or NULL)."""
    sfx = suffix(dt)
    ep = epilogue(ctx, node, dt)
    K = geo.cin_g * numel(geo.k)
    wino = conv_winograd_p.chosen(ctx, geo, dt)
    if wino is not None:
        conv_winograd_p.emit(ctx, geo, wino, bias, ep)
        return
    if conv_planes.supports(geo):
        ctx.kernel = f"{fpu_isa(ctx, dt) or 'generic'} planes"
        conv_planes.emit(ctx, geo, dt, bias, ep)
        return
    if geo.cin_g == 1 or geo.cout_g == 1:
        use(ctx, dt, AXPY, DIRECT)
        ctx.kernel = "generic direct"
        kind = "depthwise" if geo.cin_g == 1 else "one output channel per group"
        ctx(f"/* Conv {geo.describe()} ({kind}): direct row kernel */")
        ctx(geo.params())
        ctx(f"aicc_conv_direct{sfx}(&prm, {ctx.inp[0]}, {ctx.inp[1]}, {bias}, "
            f"{ctx.out[0]}, {ep});")
        return
    fpu = fpu_isa(ctx, dt)
    if fpu:
        use(ctx, dt, PACK8, ("4.im2col", IM2COL), ("5.tile", tile_fpu.tile(fpu)),
            ("6.gemm", GEMM), isa=fpu)
        sfx = f"_{fpu}{sfx}"
    else:
        use(ctx, dt, PACK8, ("4.im2col", IM2COL), TILE, ("6.gemm", GEMM))
    ctx.kernel = f"{fpu or 'generic'} im2col"
    P = numel(geo.out)
    tile, kt = gemm_tiles(K, P)
    wp = packed_weights(ctx, dt, ctx.in_const(1),
                        lambda: pack_weights(ctx.in_const(1), geo.group),
                        geo.group, geo.cout_g, K, (geo.cout_g * K, K, 1))
    col = ctx.scratch(tile * kt * dt.itemsize, ctx.out_ctype(0), "col")
    blocks = f"blocks of {kt} of K={K}" if kt < K else f"K={K}"
    ctx(f"/* Conv {geo.describe()}: im2col tiles of {tile} positions x {blocks} + GEMM */")
    ctx(geo.params(tile))
    ctx(f"aicc_conv_gemm{sfx}(&prm, {ctx.inp[0]}, {wp}, {bias}, {ctx.out[0]}, {col}, "
        f"{kt}u, {ep});")
