"""DeformConv (2-D; float32, float64): groups, offset_group, strides, dilations, pads, optional
bias B and mask. Kernel tap (kh, kw) of output (oh, ow) samples input channel c bilinearly at
(oh * sh - pad_top + kh * dh + dy, ow * sw - pad_left + kw * dw + dx), where (dy, dx) are
offset[n, og * 2 * kH * kW + 2 * (kh * kW + kw) + {0, 1}, oh, ow] for c's offset group og;
neighbours outside the input read 0; the sample is scaled by mask[n, og * kH * kW + kh * kW +
kw, oh, ow] (1 without mask). As onnx.reference (its GridSample with align_corners=1) and
onnxruntime.

All inputs may be fed at run time. Per output position the samples of one group form a
column that every output channel of the group takes a dot product with. A NaN sampling
coordinate gives a NaN sample; coordinates are bounded before any integer conversion, so no
input value causes undefined behaviour.
"""
from __future__ import annotations

from ..emit_c.loops import numel
from ..kernels.conv.base_c import suffix, typed
from ..kernels.conv.geometry import ints
from .base import Op, register
from .conv import FLOATS

KERNEL = """\
/* Bilinear sample of an H x W plane at (y, x), neighbours outside reading 0 (NaN: NaN). */
static TYPE aicc_deform_sample_SFX(const TYPE *restrict xp, size_t H, size_t W, TYPE y, TYPE x)
{
    int64_t y0, x0;
    TYPE fy, fx, v = 0;
    if (y != y || x != x)
        return y + x;
    if (!(y > -1 && y < (TYPE)H && x > -1 && x < (TYPE)W))
        return 0;
    fy = FLOOR(y);
    fx = FLOOR(x);
    y0 = (int64_t)fy;
    x0 = (int64_t)fx;
    for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 2; ++b) {
            const int64_t yy = y0 + a, xx = x0 + b;
            const TYPE w = (a ? y - fy : 1 - (y - fy)) * (b ? x - fx : 1 - (x - fx));
            if (yy >= 0 && yy < (int64_t)H && xx >= 0 && xx < (int64_t)W)
                v += w * xp[(size_t)yy * W + (size_t)xx];
        }
    return v;
}

/* DeformConv 2-D. s: N, C, H, W, M (output channels), group, offset_group, kH, kW, OH, OW,
 * stride h/w, dilation h/w, pad top/left. col: scratch of C / group * kH * kW elements. */
static void aicc_deform_conv_SFX(const size_t s[17], const TYPE *restrict x,
                                 const TYPE *restrict w, const TYPE *restrict off,
                                 const TYPE *restrict bias, const TYPE *restrict mask,
                                 TYPE *restrict y, TYPE *restrict col)
{
    const size_t N = s[0], C = s[1], H = s[2], W = s[3], M = s[4], G = s[5], OG = s[6];
    const size_t KH = s[7], KW = s[8], OH = s[9], OW = s[10], KK = KH * KW;
    const size_t Cg = C / G, Mg = M / G, Cog = C / OG, P = OH * OW, K = Cg * KK;
    for (size_t n = 0; n < N; ++n)
        for (size_t g = 0; g < G; ++g)
            for (size_t oh = 0; oh < OH; ++oh)
                for (size_t ow = 0; ow < OW; ++ow) {
                    const size_t q = oh * OW + ow;
                    for (size_t ic = 0; ic < Cg; ++ic) {
                        const size_t c = g * Cg + ic, og = c / Cog;
                        const TYPE *xp = x + (n * C + c) * H * W;
                        for (size_t t = 0; t < KK; ++t) {
                            const size_t kh = t / KW, kw = t % KW;
                            const TYPE *o = off + ((n * OG + og) * KK * 2 + 2 * t) * P + q;
                            const TYPE yy = (TYPE)((int64_t)(oh * s[11] + kh * s[13]) -
                                                   (int64_t)s[15]) + o[0];
                            const TYPE xx = (TYPE)((int64_t)(ow * s[12] + kw * s[14]) -
                                                   (int64_t)s[16]) + o[P];
                            TYPE v = aicc_deform_sample_SFX(xp, H, W, yy, xx);
                            if (mask)
                                v *= mask[((n * OG + og) * KK + t) * P + q];
                            col[ic * KK + t] = v;
                        }
                    }
                    for (size_t m = 0; m < Mg; ++m) {
                        const size_t oc = g * Mg + m;
                        const TYPE *wr = w + oc * K;
                        TYPE acc = bias ? bias[oc] : (TYPE)0;
                        for (size_t k = 0; k < K; ++k)
                            acc += wr[k] * col[k];
                        y[(n * M + oc) * P + q] = acc;
                    }
                }
}"""


@register("DeformConv", since=19)
class DeformConv(Op):
    attrs = {"dilations": None, "group": 1, "kernel_shape": None, "offset_group": 1,
             "pads": None, "strides": None}

    def geometry(self, node, x, w, off):
        if len(x) != 4 or len(w) != 4:
            raise ValueError(f"X {list(x)} / W {list(w)} (2-D DeformConv only)")
        N, C, H, W = x
        M, cg, KH, KW = w
        G, OG = int(self.attr(node, "group")), int(self.attr(node, "offset_group"))
        if G < 1 or OG < 1 or C % G or M % G or cg * G != C or C % OG:
            raise ValueError(f"group {G} / offset_group {OG} do not fit {C} -> {M} channels")
        ks = self.attr(node, "kernel_shape")
        if ks and [int(v) for v in ks] != [KH, KW]:
            raise ValueError(f"kernel_shape {list(ks)} does not match W")
        st, dil = ints(self.attr(node, "strides"), 2, 1), ints(self.attr(node, "dilations"), 2, 1)
        pads = ints(self.attr(node, "pads"), 4, 0)
        if min(st + dil) < 1 or min(pads) < 0:
            raise ValueError("strides/dilations must be positive, pads non-negative")
        OH = (H + pads[0] + pads[2] - (KH - 1) * dil[0] - 1) // st[0] + 1
        OW = (W + pads[1] + pads[3] - (KW - 1) * dil[1] - 1) // st[1] + 1
        if tuple(off) != (N, OG * 2 * KH * KW, OH, OW):
            raise ValueError(f"offset shape {list(off)}, expected "
                             f"{[N, OG * 2 * KH * KW, OH, OW]}")
        return [N, C, H, W, M, G, OG, KH, KW, OH, OW, st[0], st[1], dil[0], dil[1],
                pads[0], pads[1]]

    def check(self, node, g):
        dt = g.dtype(node.inputs[0])
        if dt.name not in FLOATS:
            return f"dtype {dt.name} not supported (float32, float64)"
        shp = [tuple(g.shape(n)) if n else None for n in node.inputs]
        try:
            s = self.geometry(node, shp[0], shp[1], shp[2])
        except ValueError as e:
            return str(e)
        if len(shp) > 3 and shp[3] is not None and shp[3] != (s[4],):
            return f"bias shape {list(shp[3])}, expected [{s[4]}]"
        if len(shp) > 4 and shp[4] is not None and shp[4] != (s[0], s[6] * s[7] * s[8], s[9],
                                                              s[10]):
            return f"mask shape {list(shp[4])} does not fit"
        if tuple(g.shape(node.outputs[0])) != (s[0], s[4], s[9], s[10]):
            return f"output shape {list(g.shape(node.outputs[0]))} disagrees with the attributes"
        return None

    def emit(self, node, ctx):
        dt = ctx.in_dtype(0)
        sfx = suffix(dt)
        s = self.geometry(node, ctx.in_shape(0), ctx.in_shape(1), ctx.in_shape(2))
        if numel(ctx.out_shape(0)) == 0:
            ctx("/* empty output: nothing to compute */")
            return
        f = "f" if dt.name == "float32" else ""
        ctx.helper(f"deform_conv{sfx}", typed(KERNEL, dt).replace("FLOOR(", f"floor{f}("))
        K = s[1] // s[5] * s[7] * s[8]
        col = ctx.scratch(max(K, 1) * dt.itemsize, ctx.out_ctype(0), "col")

        def opt(k):
            return ctx.inp[k] if k < len(ctx.inp) and ctx.inp[k] else "NULL"
        ctx(f"/* DeformConv {s[7]}x{s[8]} kernel, {s[5]} group(s), {s[6]} offset group(s) */")
        ctx(f"static const size_t geo[17] = {{ {', '.join(f'{v}u' for v in s)} }};")
        ctx(f"aicc_deform_conv{sfx}(geo, {ctx.inp[0]}, {ctx.inp[1]}, {ctx.inp[2]}, {opt(3)}, "
            f"{opt(4)}, {ctx.out[0]}, {col});")
