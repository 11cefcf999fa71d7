"""ConvTranspose on the x86 SIMD targets (float32, constant weights, groups with at least 4
input channels): per batch item and group, over tiles of nt input positions, the conv tile
GEMM of kernels/conv/simd_gemm.py computes ``col[M * kk, nt] = W^T x`` (row q = m * kk + tap, the
input read in place as a 1x1 conv's B operand: no packing, masked loads past the last
position), then conv_transpose.COL2IM adds each row to the output positions its tap reaches.
The output planes start at the bias; a fused activation runs on the finished planes.

Tiles: col holds ``tile_kb`` KiB (the conv schedule's im2col budget), at least one panel.

Rounding: each W^T x entry is the conv kernels' FMA chain over the input channels in
ascending order; col2im then adds the taps that reach an output position in q order onto the
bias (one contribution per position when kernel == stride, the usual decoder upsampling).
The portable kernel sums in blocks of 64 channels with separate multiplies and adds, so the
two agree to rounding. NaN/Inf: IEEE arithmetic, as the portable kernel.
"""
from __future__ import annotations

import math

from ..gemm.simd import nr_of
from .base_c import AXPY, use
from .schedule import balanced
from .simd_gemm import GEMM_FN, KEY, pack_a, tile_gemm

DRIVER = """\
/* ConvTranspose through the conv tile GEMM (kernels/conv/transpose_simd.py): per batch item, group
 * and tile of nt input positions, col[M][nt] = W^T x (w: [M = cout_g * kk][cin_g] per group,
 * packed by pack_a; the input is B, rows X apart), then aicc_convt_col2im adds the rows to the
 * output planes, which start at the bias; ep (may be NULL) runs on the finished planes. */
static void aicc_convt_ISA(const aicc_conv_params *p, const float *restrict x,
    const float *restrict w, const float *restrict bias, float *restrict y,
    float *restrict col, size_t nt, GEMM_FN, void (*ep)(float *, size_t))
{
    const size_t X = p->in[0] * p->in[1] * p->in[2], P = p->out[0] * p->out[1] * p->out[2];
    const size_t M = p->cout_g * p->k[0] * p->k[1] * p->k[2], C = p->cin_g;
    for (size_t n = 0; n < p->batch; ++n)
        for (size_t g = 0; g < p->group; ++g) {
            const float *restrict xg = x + (n * p->group + g) * C * X;
            float *restrict yg = y + (n * p->group + g) * p->cout_g * P;
            for (size_t m = 0; m < p->cout_g; ++m) {
                const float bv = bias ? bias[g * p->cout_g + m] : 0.0f;
                for (size_t i = 0; i < P; ++i)
                    yg[m * P + i] = bv;
            }
            for (size_t p0 = 0; p0 < X; p0 += nt) {
                const size_t m = X - p0 < nt ? X - p0 : nt;
                gemm(M, m, C, w + g * M * C, 0, xg + p0, NRu, X, col, nt, NULL, -HUGE_VALF,
                     HUGE_VALF, 0, 1);
                aicc_convt_col2im_f32(p, yg, col, nt, 0, M, p0, m);
            }
            if (ep)
                for (size_t m = 0; m < p->cout_g; ++m)
                    ep(yg + m * P, P);
        }
}"""


def supports(ctx, geo) -> bool:
    return geo.cin_g >= 4 and ctx.in_const(1) is not None


def emit(ctx, node, geo, isa: str, sched: dict, bias: str, ep: str, col2im) -> None:
    """Step body; col2im: the (key, text) of conv_transpose's COL2IM."""
    nr = nr_of(isa)
    kk = math.prod(geo.k)
    M, X = geo.cout_g * kk, math.prod(geo.inp)
    sched = balanced(sched, M)
    w = ctx.in_const(1)                       # [C][M/g][k...] -> per group [M/g * kk][C/g]
    wt = w.reshape(geo.group, geo.cin_g, M).transpose(0, 2, 1).reshape(geo.group * M, geo.cin_g)
    wp = ctx.const(pack_a(wt, geo.group, sched["mr"], sched["kc"]), "wpack")
    nt = max(nr, sched["tile_kb"] * 1024 // 4 // M // nr * nr)
    nt = min(nt, -(-X // nr) * nr)
    gemm = tile_gemm(ctx, isa, sched, M, None)
    use(ctx, "float32", AXPY, col2im)
    ctx.helper(f"{KEY}.4.convt_{isa}", DRIVER.replace("GEMM_FN", GEMM_FN)
               .replace("NR", str(nr)).replace("ISA", isa))
    col = ctx.scratch(M * nt * 4, "float", "col")
    ctx.kernel = f"{isa} gemm"
    ctx(f"/* ConvTranspose {'x'.join(map(str, geo.k))} kernel, stride "
        f"{'x'.join(map(str, geo.stride))}, pads {geo.pad + geo.pad_end}, {geo.group} "
        f"group(s): {isa} GEMM [{M} x {geo.cin_g}] @ input [{geo.cin_g} x {X}] per group, "
        f"tiles of {nt} positions, + col2im */")
    ctx(geo.params())
    ctx(f"aicc_convt_{isa}(&prm, {ctx.inp[0]}, {wp}, {bias}, {ctx.out[0]}, {col}, {nt}u, "
        f"{gemm}, {ep});")
