"""RoiAlign (float32, float64; rois of the X dtype, int64 batch_indices): modes avg and max,
coordinate_transformation_mode half_pixel (offset 0.5) and output_half_pixel (no offset; RoI
sizes at least 1), output_height/width, sampling_ratio (0: adaptive ceil(roi size / output
size)), spatial_scale. As onnxruntime and onnx.reference: each bin averages (avg) or takes
the max of (max) its sampling points; a point is bilinear in X, and a point more than one
pixel outside the image counts as 0 (in max mode each point's value is the max of its four
weighted corner values).

Edge cases: a batch index outside [0, N) gives an all-zero RoI output; a non-finite sample
coordinate counts as outside (0); the adaptive sampling grid is capped at 65536 points per
dim (only RoIs that large or NaN are affected; NaN sizes use 1), so no input value causes
undefined behaviour. Run time: the sampling points off the image are not visited one by one
(their contribution, 0 * x[0], enters once, exactly as visiting them would), so a bin costs
at most the points that fall on the image, about (2H + 3) x (2W + 3) with the adaptive grid,
whatever the RoI's size.
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import c_float
from ..emit_c.loops import numel
from ..kernels.conv.base_c import suffix, typed
from .base import Op, register
from .conv import FLOATS

KERNEL = """\
/* Bilinear sampling point (y, x) of an H x W plane: the 4 corner offsets and weights (all 0
 * for a point outside [-1, H] x [-1, W] or non-finite), as onnxruntime's RoiAlign. */
static void aicc_roi_point_SFX(TYPE y, TYPE x, size_t H, size_t W, size_t pos[4], TYPE w[4])
{
    size_t yl, xl, yh, xh;
    TYPE ly, lx;
    if (!(y >= -1 && y <= (TYPE)H && x >= -1 && x <= (TYPE)W)) {
        pos[0] = pos[1] = pos[2] = pos[3] = 0;
        w[0] = w[1] = w[2] = w[3] = 0;
        return;
    }
    y = y <= 0 ? 0 : y;
    x = x <= 0 ? 0 : x;
    yl = (size_t)y;
    xl = (size_t)x;
    if (yl >= H - 1) {
        yh = yl = H - 1;
        y = (TYPE)yl;
    } else {
        yh = yl + 1;
    }
    if (xl >= W - 1) {
        xh = xl = W - 1;
        x = (TYPE)xl;
    } else {
        xh = xl + 1;
    }
    ly = y - (TYPE)yl;
    lx = x - (TYPE)xl;
    pos[0] = yl * W + xl;
    pos[1] = yl * W + xh;
    pos[2] = yh * W + xl;
    pos[3] = yh * W + xh;
    w[0] = (1 - ly) * (1 - lx);
    w[1] = (1 - ly) * lx;
    w[2] = ly * (1 - lx);
    w[3] = ly * lx;
}

/* Sampling points per bin along one dim: sampling_ratio, or ceil(size / bins) capped */
static size_t aicc_roi_grid_SFX(int ratio, TYPE size, size_t bins)
{
    const TYPE g = CEIL(size / (TYPE)bins);
    if (ratio > 0)
        return (size_t)ratio;
    if (!(g >= 1))
        return 1;
    return g > 65536 ? 65536 : (size_t)g;
}

/* The sample coordinate i of a grid of g points over a bin from base, b wide (the one
 * expression every use shares: the spans below rely on its rounding being monotonic) */
static TYPE aicc_roi_at_SFX(TYPE base, TYPE b, size_t i, size_t g)
{
    return base + ((TYPE)i + (TYPE)0.5) * b / (TYPE)g;
}

/* [*lo, *hi): the grid indices whose coordinate lies in [-1, n], the rest being outside the
 * image (weight 0). Binary searches on the monotonic coordinate when b > 0; else all. */
static void aicc_roi_span_SFX(TYPE base, TYPE b, size_t g, size_t n, size_t *lo, size_t *hi)
{
    size_t a = 0, z = g;
    *lo = 0;
    *hi = g;
    if (!(b > 0))
        return;
    while (a < z) {                     /* the first index at or above -1 */
        const size_t m = a + (z - a) / 2;
        if (aicc_roi_at_SFX(base, b, m, g) >= (TYPE)-1)
            z = m;
        else
            a = m + 1;
    }
    *lo = a;
    z = g;
    while (a < z) {                     /* the first index above n */
        const size_t m = a + (z - a) / 2;
        if (aicc_roi_at_SFX(base, b, m, g) > (TYPE)n)
            z = m;
        else
            a = m + 1;
    }
    *hi = a;
}

/* RoiAlign: rois [R][4] (x1, y1, x2, y2), bidx [R], y [R][C][OH][OW]. Points outside the
 * image (weight 0, value 0 * x[0]) are not visited one by one: the sum adds their value
 * once, the max takes it once where a run of them would come (both exact: adding 0 again
 * or taking the same max again changes nothing), so a bin costs the points on the image. */
static void aicc_roi_align_SFX(size_t N, size_t C, size_t H, size_t W, size_t R, size_t OH,
                               size_t OW, int ratio, TYPE scale, int half_pixel, int max_mode,
                               const TYPE *restrict x, const TYPE *restrict rois,
                               const int64_t *restrict bidx, TYPE *restrict y)
{
    const TYPE off = half_pixel ? (TYPE)0.5 : (TYPE)0;
    for (size_t r = 0; r < R; ++r) {
        const TYPE *roi = rois + r * 4;
        const TYPE x0 = roi[0] * scale - off, y0 = roi[1] * scale - off;
        TYPE rw = roi[2] * scale - off - x0, rh = roi[3] * scale - off - y0;
        TYPE *yr = y + r * C * OH * OW;
        size_t gh, gw;
        TYPE bh, bw, cnt;
        if (bidx[r] < 0 || (uint64_t)bidx[r] >= (uint64_t)N) {
            for (size_t i = 0; i < C * OH * OW; ++i)
                yr[i] = 0;
            continue;
        }
        if (!half_pixel) {
            rw = rw > 1 ? rw : (TYPE)1;
            rh = rh > 1 ? rh : (TYPE)1;
        }
        bh = rh / (TYPE)OH;
        bw = rw / (TYPE)OW;
        gh = aicc_roi_grid_SFX(ratio, rh, OH);
        gw = aicc_roi_grid_SFX(ratio, rw, OW);
        cnt = (TYPE)(gh * gw > 0 ? gh * gw : 1);
        for (size_t ph = 0; ph < OH; ++ph)
            for (size_t pw = 0; pw < OW; ++pw) {
                const TYPE by = y0 + (TYPE)ph * bh, bx = x0 + (TYPE)pw * bw;
                size_t ylo, yhi, xlo, xhi;
                aicc_roi_span_SFX(by, bh, gh, H, &ylo, &yhi);
                aicc_roi_span_SFX(bx, bw, gw, W, &xlo, &xhi);
                if (xlo >= xhi)
                    ylo = yhi = gh;
                for (size_t c = 0; c < C; ++c) {
                    const TYPE *xc = x + ((size_t)bidx[r] * C + c) * H * W;
                    const TYPE z = (TYPE)0 * xc[0];      /* an outside point's weighted value */
                    TYPE acc = 0;
                    int first = 1;
#define AICC_ROI_OUTSIDE() do { \
        if (!max_mode) acc += z + z + z + z; \
        else { acc = first || z > acc ? z : acc; first = 0; } } while (0)
                    if (ylo > 0)
                        AICC_ROI_OUTSIDE();
                    for (size_t iy = ylo; iy < yhi; ++iy) {
                        const TYPE sy = aicc_roi_at_SFX(by, bh, iy, gh);
                        if (xlo > 0)
                            AICC_ROI_OUTSIDE();
                        for (size_t ix = xlo; ix < xhi; ++ix) {
                            const TYPE sx = aicc_roi_at_SFX(bx, bw, ix, gw);
                            size_t pos[4];
                            TYPE wt[4], v;
                            aicc_roi_point_SFX(sy, sx, H, W, pos, wt);
                            if (!max_mode) {
                                acc += wt[0] * xc[pos[0]] + wt[1] * xc[pos[1]] +
                                       wt[2] * xc[pos[2]] + wt[3] * xc[pos[3]];
                                continue;
                            }
                            v = wt[0] * xc[pos[0]];
                            for (int k = 1; k < 4; ++k)
                                v = wt[k] * xc[pos[k]] > v ? wt[k] * xc[pos[k]] : v;
                            acc = first || v > acc ? v : acc;
                            first = 0;
                        }
                        if (xhi < gw)
                            AICC_ROI_OUTSIDE();
                    }
                    if (yhi < gh)
                        AICC_ROI_OUTSIDE();
#undef AICC_ROI_OUTSIDE
                    yr[(c * OH + ph) * OW + pw] = max_mode ? acc : acc / cnt;
                }
            }
    }
}"""


class _RoiAlign(Op):
    def check(self, node, g):
        dt = g.dtype(node.inputs[0])
        if dt.name not in FLOATS:
            return f"dtype {dt.name} not supported (float32, float64)"
        if g.dtype(node.inputs[1]) != dt:
            return "rois dtype differs from X"
        if g.dtype(node.inputs[2]) != np.int64:
            return "batch_indices must be int64"
        x, rois = g.shape(node.inputs[0]), g.shape(node.inputs[1])
        if len(x) != 4 or len(rois) != 2 or rois[1] != 4:
            return f"X {list(x)} / rois {list(rois)} (need rank 4 and [R, 4])"
        if self.attr(node, "mode") not in ("avg", "max"):
            return f"mode {self.attr(node, 'mode')!r}"
        if self.attr(node, "coordinate_transformation_mode") not in ("half_pixel",
                                                                     "output_half_pixel"):
            ctm = self.attr(node, "coordinate_transformation_mode")
            return f"coordinate_transformation_mode {ctm!r}"
        if int(self.attr(node, "output_height")) < 1 or int(self.attr(node, "output_width")) < 1:
            return "output_height and output_width must be positive"
        return None

    def emit(self, node, ctx):
        dt = ctx.in_dtype(0)
        sfx = suffix(dt)
        N, C, H, W = ctx.in_shape(0)
        R = ctx.in_shape(1)[0]
        OH, OW = int(self.attr(node, "output_height")), int(self.attr(node, "output_width"))
        if numel(ctx.out_shape(0)) == 0:
            ctx("/* empty output: nothing to compute */")
            return
        if H * W == 0:
            ctx("/* empty image: every sampling point is outside */")
            with ctx.block(f"for (size_t i = 0; i < {numel(ctx.out_shape(0))}u; ++i)"):
                ctx(f"{ctx.out[0]}[i] = 0;")
            return
        f = "f" if dt.name == "float32" else ""
        ctx.helper(f"roi_align{sfx}", typed(KERNEL, dt).replace("CEIL(", f"ceil{f}("))
        mode, ctm = self.attr(node, "mode"), self.attr(node, "coordinate_transformation_mode")
        ctx(f"/* RoiAlign {mode}, {ctm}, {R} RoIs -> {OH}x{OW} */")
        ctx(f"aicc_roi_align{sfx}({N}u, {C}u, {H}u, {W}u, {R}u, {OH}u, {OW}u, "
            f"{int(self.attr(node, 'sampling_ratio'))}, "
            f"{c_float(float(self.attr(node, 'spatial_scale')), dt)}, "
            f"{1 if ctm == 'half_pixel' else 0}, {1 if mode == 'max' else 0}, "
            f"{ctx.inp[0]}, {ctx.inp[1]}, {ctx.inp[2]}, {ctx.out[0]});")


@register("RoiAlign", since=10)
class RoiAlign10(_RoiAlign):
    attrs = {"coordinate_transformation_mode": "output_half_pixel", "mode": "avg",
             "output_height": 1, "output_width": 1, "sampling_ratio": 0, "spatial_scale": 1.0}


@register("RoiAlign", since=16)
class RoiAlign16(_RoiAlign):
    attrs = {**RoiAlign10.attrs, "coordinate_transformation_mode": "half_pixel"}
