"""ConvTranspose (1-D, 2-D, 3-D; float32 and float64): groups, strides, dilations, pads,
output_padding, output_shape, auto_pad, optional bias, fused activation epilogue.

Weights and bias may be compile-time constants or run-time tensors (run-time weights are
packed into step scratch for the GEMM path, see conv.py). Kernels (C text below, built from
the pieces in kernels/conv/base_c.py): groups with at least 4 input channels run as GEMM (W^T x,
weights packed) + col2im; fewer input channels per group (depthwise) scatter each weighted
input row into the output (weights in their ONNX layout).

Padding follows the ONNX spec and onnxruntime 1.32 (older onnxruntime releases split it the
other way round): when output_shape is given, or auto_pad is SAME_UPPER/SAME_LOWER (target
output in * stride), the total padding is
max(0, (in - 1) * stride + output_padding + (k - 1) * dilation + 1 - out); SAME_UPPER puts the
odd element at the end, every other mode at the beginning. With output_shape the pads
attribute is ignored (as onnxruntime does); a target larger than the full output leaves the
extra trailing positions at the bias.

NaN/Inf: IEEE arithmetic (no -ffast-math); NaN/Inf in the input propagate to every output
they reach. Summation order differs from onnxruntime (agreement to rounding).
"""
from __future__ import annotations

from ..emit_c.loops import numel
from ..kernels.conv import simd as conv_simd
from ..kernels.conv import transpose_simd as conv_transpose_simd
from ..kernels.conv.base_c import (AXPY, PACK8, TILE, epilogue, pack_weights, packed_weights,
                                   params_c, suffix, tile_size, use)
from ..kernels.conv.geometry import AUTO_PADS, ints
from ..kernels.vmath.act import apply_epilogue, unfused
from .base import register
from .conv import ConvLike
from .reference import run_onnx_reference
from .traits import EPILOGUE

CONVT = """\
/* ConvTranspose by scattering: every input row, scaled by one kernel tap, is added to the
 * output positions it reaches (o = i * stride + tap * dilation - pad); the range of input
 * positions landing inside the output is computed per tap, so inner loops have no bounds
 * tests. p->in/out: input/output spatial sizes, cin_g = C/group, cout_g = M/group; w: ONNX
 * layout [C][M/group][kD][kH][kW]. Each output plane starts at the bias; the fused epilogue
 * (ep, may be NULL) runs on the finished plane. */
static void aicc_convt_SFX(const aicc_conv_params *p, const TYPE *restrict x,
                           const TYPE *restrict w, const TYPE *restrict bias,
                           TYPE *restrict y, void (*ep)(TYPE *, size_t))
{
    const size_t X = p->in[0] * p->in[1] * p->in[2], P = p->out[0] * p->out[1] * p->out[2];
    const size_t KK = p->k[0] * p->k[1] * p->k[2], IW = p->in[2], OW = p->out[2];
    for (size_t n = 0; n < p->batch; ++n)
        for (size_t g = 0; g < p->group; ++g)
            for (size_t m = 0; m < p->cout_g; ++m) {
                const size_t oc = g * p->cout_g + m;
                const TYPE bv = bias ? bias[oc] : (TYPE)0;
                TYPE *yc = y + (n * p->group * p->cout_g + oc) * P;
                for (size_t i = 0; i < P; ++i)
                    yc[i] = bv;
                for (size_t ic = 0; ic < p->cin_g; ++ic) {
                    const TYPE *xc = x + ((n * p->group + g) * p->cin_g + ic) * X;
                    const TYPE *wk = w + ((g * p->cin_g + ic) * p->cout_g + m) * KK;
                    for (size_t t = 0; t < KK; ++t) {
                        const size_t kz = t / (p->k[1] * p->k[2]), ky = t / p->k[2] % p->k[1];
                        const size_t kx = t % p->k[2];
                        size_t zlo, zhi, ylo, yhi, lo, hi;
                        aicc_valid_range(aicc_tap_off(p, 0, kz), p->stride[0], p->out[0],
                                         p->in[0], &zlo, &zhi);
                        aicc_valid_range(aicc_tap_off(p, 1, ky), p->stride[1], p->out[1],
                                         p->in[1], &ylo, &yhi);
                        aicc_valid_range(aicc_tap_off(p, 2, kx), p->stride[2], OW, IW, &lo, &hi);
                        if (lo == hi)
                            continue;
                        for (size_t z = zlo; z < zhi; ++z)
                            for (size_t r = ylo; r < yhi; ++r) {
                                const size_t tz = (size_t)aicc_pos(p, 0, z, kz);
                                const size_t ty = (size_t)aicc_pos(p, 1, r, ky);
                                TYPE *yr = yc + (tz * p->out[1] + ty) * OW;
                                aicc_axpy_SFX(hi - lo, wk[t], xc + (z * p->in[1] + r) * IW + lo, 1,
                                              yr + aicc_pos(p, 2, lo, kx), p->stride[2]);
                            }
                    }
                }
                if (ep)
                    ep(yc, P);
            }
}"""


COL2IM = """\
/* col2im of rows [q0, q1) of W^T x for the input positions [p0, p0 + nt) of one group: row
 * q = m * kk + tap (at buf + (q - q0) * ldb) is added to output plane m (yg, P floats per plane)
 * at the positions its tap reaches (o = i * stride + tap * dilation - pad), over the valid
 * range, one input row segment at a time. */
static void aicc_convt_col2im_SFX(const aicc_conv_params *p, TYPE *yg, const TYPE *buf,
                                  size_t ldb, size_t q0, size_t q1, size_t p0, size_t nt)
{
    const size_t KK = p->k[0] * p->k[1] * p->k[2], P = p->out[0] * p->out[1] * p->out[2];
    const size_t IW = p->in[2], IHW = p->in[1] * IW, OW = p->out[2];
    for (size_t q = q0; q < q1; ++q) {
        const size_t t = q % KK, kx = t % p->k[2];
        const size_t kz = t / (p->k[1] * p->k[2]), ky = t / p->k[2] % p->k[1];
        TYPE *ym = yg + q / KK * P;
        size_t lo, hi, s = p0;
        aicc_valid_range(aicc_tap_off(p, 2, kx), p->stride[2], OW, IW, &lo, &hi);
        while (s < p0 + nt) {   /* one input row segment [x0, x1) per pass */
            const size_t x0 = s % IW;
            const size_t x1 = IW - x0 < p0 + nt - s ? IW : x0 + (p0 + nt - s);
            const int64_t tz = aicc_pos(p, 0, s / IHW, kz);
            const int64_t ty = aicc_pos(p, 1, s / IW % p->in[1], ky);
            const size_t a = lo > x0 ? lo : x0, e = hi < x1 ? hi : x1;
            const TYPE *br = buf + (q - q0) * ldb + (s - p0);
            if (aicc_inside(tz, p->out[0]) && aicc_inside(ty, p->out[1]) && a < e)
                aicc_axpy_SFX(e - a, (TYPE)1, br + (a - x0), 1,
                              ym + ((size_t)tz * p->out[1] + (size_t)ty) * OW +
                                  aicc_pos(p, 2, a, kx),
                              p->stride[2]);
            s += x1 - x0;
        }
    }
}"""


CONVT_GEMM = """\
/* ConvTranspose as GEMM + col2im, for groups with several input channels: per tile of input
 * positions the input channels are packed (aicc_pack8), every block of 4 rows q = m * kk + tap
 * of W^T x is computed as 4x8 register tiles into buf ([4][tile]) and added to the output
 * (aicc_convt_col2im). wp: W as [group][q][c], packed like the conv weights. Output planes
 * start at the bias; the fused epilogue (ep, may be NULL) runs on the finished planes. */
static void aicc_convt_gemm_SFX(const aicc_conv_params *p, const TYPE *restrict x,
                                const TYPE *restrict wp, const TYPE *restrict bias,
                                TYPE *restrict y, TYPE *restrict col, TYPE *restrict buf,
                                void (*ep)(TYPE *, size_t))
{
    const size_t X = p->in[0] * p->in[1] * p->in[2], P = p->out[0] * p->out[1] * p->out[2];
    const size_t KK = p->k[0] * p->k[1] * p->k[2], M = p->cout_g * KK, nb = (M + 3) / 4;
    const size_t C = p->cin_g;
    for (size_t n = 0; n < p->batch; ++n)
        for (size_t g = 0; g < p->group; ++g) {
            const TYPE *xg = x + (n * p->group + g) * C * X;
            TYPE *yg = y + (n * p->group + g) * p->cout_g * P;
            for (size_t m = 0; m < p->cout_g; ++m)
                for (size_t i = 0; i < P; ++i)
                    yg[m * P + i] = bias ? bias[g * p->cout_g + m] : (TYPE)0;
            for (size_t p0 = 0; p0 < X; p0 += p->tile) {
                const size_t nt = X - p0 < p->tile ? X - p0 : p->tile;
                aicc_pack8_SFX(xg, C, X, p0, nt, col);
                for (size_t b = 0; b < nb; ++b) {
                    const size_t rows = M - 4 * b < 4 ? M - 4 * b : 4;
                    for (size_t j = 0; j < nt; j += 8) {
                        const size_t cols = nt - j < 8 ? nt - j : 8;
                        TYPE acc[4][8];
                        aicc_tile4x8_SFX(C, wp + (g * nb + b) * C * 4, col + j * C, acc);
                        for (size_t r = 0; r < rows; ++r)
                            for (size_t u = 0; u < cols; ++u)
                                buf[r * p->tile + j + u] = acc[r][u];
                    }
                    aicc_convt_col2im_SFX(p, yg, buf, p->tile, 4 * b, 4 * b + rows, p0, nt);
                }
            }
            if (ep)
                for (size_t m = 0; m < p->cout_g; ++m)
                    ep(yg + m * P, P);
        }
}"""


def _split(total, mode) -> tuple:
    """(begin, end) of a total padding: the odd element at the end for SAME_UPPER, at the
    beginning otherwise (ONNX spec; onnxruntime 1.32 agrees)."""
    if mode == "SAME_UPPER":
        return total // 2, total - total // 2
    return total - total // 2, total // 2


class ConvTGeometry:
    def __init__(self, op, node, x_shape, w_shape):
        r = len(x_shape) - 2
        if r < 1 or r > 3:
            raise ValueError(f"rank {len(x_shape)} input (1-D, 2-D and 3-D only)")
        if len(w_shape) != r + 2:
            raise ValueError(f"weights of rank {len(w_shape)} for a rank {r + 2} input")
        self.group = int(op.attr(node, "group"))
        self.batch, self.cin = int(x_shape[0]), int(x_shape[1])
        if self.group < 1 or self.cin % self.group or int(w_shape[0]) != self.cin:
            raise ValueError(f"weights {list(w_shape)} do not fit {self.cin} input channels "
                             f"in {self.group} groups")
        self.cin_g, self.cout_g = self.cin // self.group, int(w_shape[1])
        self.cout = self.cout_g * self.group
        self.k = [int(d) for d in w_shape[2:]]
        ks = op.attr(node, "kernel_shape")
        if ks is not None and len(ks) and [int(v) for v in ks] != self.k:
            raise ValueError(f"kernel_shape {list(ks)} does not match weights {self.k}")
        self.stride = ints(op.attr(node, "strides"), r, 1)
        self.dil = ints(op.attr(node, "dilations"), r, 1)
        adj = ints(op.attr(node, "output_padding"), r, 0)
        self.inp = [int(d) for d in x_shape[2:]]
        if min(self.stride + self.dil + self.k) < 1 or min(adj) < 0:
            raise ValueError("strides, dilations, kernel sizes must be positive, "
                             "output_padding non-negative")
        mode = op.attr(node, "auto_pad") or "NOTSET"
        if mode not in AUTO_PADS:
            raise ValueError(f"auto_pad {mode!r}")
        full = [(i - 1) * s + a + (k - 1) * d + 1
                for i, s, a, k, d in zip(self.inp, self.stride, adj, self.k, self.dil)]
        self.out = None
        oshape = op.attr(node, "output_shape")
        if oshape is not None and len(oshape):
            oshape = [int(v) for v in oshape]
            if len(oshape) not in (r, r + 2):
                raise ValueError(f"output_shape {oshape} (need {r} or {r + 2} values)")
            target = oshape[-r:]
            if any(t >= f + s for t, f, s in zip(target, full, self.stride)):
                raise ValueError(f"output_shape {target} is larger than the input reaches "
                                 f"({full}, plus less than a stride)")
            be = [_split(max(0, f - t), mode) for f, t in zip(full, target)]
            self.out = target
        elif mode in ("SAME_UPPER", "SAME_LOWER"):
            be = [_split(max(0, f - i * s), mode) for f, i, s in zip(full, self.inp, self.stride)]
        elif mode == "VALID":
            be = [(0, 0)] * r
        else:
            pads = ints(op.attr(node, "pads"), 2 * r, 0)
            if len(pads) != 2 * r or min(pads) < 0:
                raise ValueError(f"pads {pads} (need {2 * r} non-negative values)")
            be = list(zip(pads[:r], pads[r:]))
        self.pad, self.pad_end = [b for b, _ in be], [e for _, e in be]
        if self.out is None:
            self.out = [f - b - e for f, (b, e) in zip(full, be)]
        if min(self.out) < 1:
            raise ValueError(f"empty output (spatial size {self.out})")

    def params(self, tile=0) -> str:
        return params_c(batch=self.batch, group=self.group, cin_g=self.cin_g,
                        cout_g=self.cout_g, inp=self.inp, out=self.out, k=self.k,
                        stride=self.stride, dil=self.dil, pad=self.pad, pad_end=self.pad_end,
                        tile=tile)


@register("ConvTranspose", since=1)
class ConvTranspose(ConvLike):
    traits = frozenset({EPILOGUE})
    attrs = {"auto_pad": "NOTSET", "dilations": None, "group": 1, "kernel_shape": None,
             "output_padding": None, "output_shape": None, "pads": None, "strides": None}
    geometry = ConvTGeometry

    def reference(self, node, g, inputs):
        # onnx.reference on explicit pads (its auto_pad/output_shape rules differ from
        # onnxruntime's, which the C kernel follows)
        geo = ConvTGeometry(self, node, inputs[0].shape, inputs[1].shape)
        n = unfused(node)
        r = len(geo.k)
        adj = ints(self.attr(node, "output_padding"), r, 0)
        full = [(i - 1) * s + a + (k - 1) * d + 1 - b - e for i, s, a, k, d, b, e in
                zip(geo.inp, geo.stride, adj, geo.k, geo.dil, geo.pad, geo.pad_end)]
        adj = [a + max(0, o - f) for a, o, f in zip(adj, geo.out, full)]
        n.attrs = {k: v for k, v in n.attrs.items() if k not in ("auto_pad", "output_shape")}
        n.attrs.update(pads=list(geo.pad + geo.pad_end), output_padding=adj)
        y = run_onnx_reference(n, g, inputs)[0]
        return [apply_epilogue(node, y)]

    def emit(self, node, ctx):
        geo = ConvTGeometry(self, node, ctx.in_shape(0), ctx.in_shape(1))
        dt = ctx.out_dtype(0)
        if numel(ctx.out_shape(0)) == 0:
            ctx("/* empty output: nothing to compute */")
            return
        ep = epilogue(ctx, node, dt)
        bias = ctx.inp[2] if self._has_bias(node) else "NULL"
        k = "x".join(map(str, geo.k))
        what = (f"ConvTranspose {k} kernel, stride {'x'.join(map(str, geo.stride))}, "
                f"pads {geo.pad + geo.pad_end}, {geo.group} group(s)")
        x, y, sfx = ctx.inp[0], ctx.out[0], suffix(dt)
        simd = conv_simd.plan(ctx, dt)
        if simd is not None and conv_transpose_simd.supports(ctx, geo):
            conv_transpose_simd.emit(ctx, node, geo, *simd, bias, ep, ("8.col2im", COL2IM))
            return
        if geo.cin_g < 4:
            use(ctx, dt, AXPY, ("8.convt", CONVT))
            ctx(f"/* {what}: scatter rows (few input channels per group) */")
            ctx(geo.params())
            ctx(f"aicc_convt{sfx}(&prm, {x}, {ctx.inp[1]}, {bias}, {y}, {ep});")
            return
        use(ctx, dt, AXPY, PACK8, TILE, ("8.col2im", COL2IM), ("8.convt_gemm", CONVT_GEMM))
        w = ctx.in_const(1)                     # [C][M/g][k...] -> per group [M/g * kk][C/g]
        kk = numel(geo.k)
        M = geo.cout_g * kk

        def pack():
            a = w.reshape(geo.group, geo.cin_g, M).transpose(0, 2, 1)
            return pack_weights(a.reshape(geo.group * M, geo.cin_g), geo.group)
        wp = packed_weights(ctx, dt, w, pack, geo.group, M, geo.cin_g, (geo.cin_g * M, 1, M))
        tile = tile_size(geo.cin_g + 4, numel(geo.inp))
        col = ctx.scratch(tile * geo.cin_g * dt.itemsize, ctx.out_ctype(0), "col")
        buf = ctx.scratch(tile * 4 * dt.itemsize, ctx.out_ctype(0), "rows")
        ctx(f"/* {what}: GEMM over tiles of {tile} input positions + col2im */")
        ctx(geo.params(tile))
        ctx(f"aicc_convt_gemm{sfx}(&prm, {x}, {wp}, {bias}, {y}, {col}, {buf}, {ep});")
