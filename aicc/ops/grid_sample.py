"""GridSample (1-D, 2-D and 3-D spatial input; float32 and float64, X and grid of one dtype):
modes nearest / linear / cubic (opset 16 names bilinear / bicubic too), padding modes zeros /
border / reflection, align_corners. Semantics as onnx.reference and onnxruntime (PyTorch's
grid_sample):

* grid[..., k] is the normalized coordinate of spatial dim r-1-k (x = width first);
  denormalized to x = (g + 1) / 2 * (size - 1) (align_corners) or ((g + 1) * size - 1) / 2.
* nearest rounds half to even (rint) first. A coordinate outside [0, size-1] (align_corners)
  or [-0.5, size-0.5] is then clamped to [0, size-1] (border) or reflected into that range
  (reflection); cubic with border padding leaves the coordinate alone and clamps only its
  taps (PyTorch and onnxruntime; onnx.reference clamps the coordinate too).
* linear: the 2 neighbours floor(x), floor(x)+1; cubic: the 4 neighbours floor(x)-1 ..
  floor(x)+2 with Keys' coefficients (A = -0.75); taps outside the input read 0 (zeros), the
  clamped index (border) or the reflected index (reflection). N-D weights are the product
  of the per-dim weights.

Edge cases: a NaN grid coordinate gives NaN outputs at that position (all channels); +-Inf
coordinates act as +-1e7 pixels (far outside: zeros gives 0, border the edge value). A
reflection over a size-1 dim with align_corners maps to index 0. All index math is int64_t
with the coordinate bounded first, so no input value causes undefined behaviour.
"""
from __future__ import annotations

from ..emit_c.loops import numel
from ..kernels.conv.base_c import suffix, typed
from .base import Op, register

MODES = {"bilinear": 1, "linear": 1, "nearest": 0, "bicubic": 2, "cubic": 2}
PADS = {"zeros": 0, "border": 1, "reflection": 2}

PARAMS = """\
/* Geometry of one GridSample node: spatial rank r (1..3), input sizes, output positions per
 * image, mode (0 nearest, 1 linear, 2 cubic), padding (0 zeros, 1 border, 2 reflection). */
typedef struct {
    size_t batch, chans, r, in[3], outp;
    int mode, pad, align;
} aicc_gs_params;"""

KERNEL = """\
/* Reflects x into [lo, hi] by the near border until inside (onnx.reference's rule). */
static TYPE aicc_gs_reflect_SFX(TYPE x, TYPE lo, TYPE hi)
{
    const TYPE rng = hi - lo;
    if (!(rng > 0))
        return lo;
    if (x < lo) {
        const TYPE dx = lo - x;
        const int64_t n = (int64_t)(dx / rng);
        const TYPE rem = dx - (TYPE)n * rng;
        return n % 2 == 0 ? lo + rem : hi - rem;
    }
    if (x > hi) {
        const TYPE dx = x - hi;
        const int64_t n = (int64_t)(dx / rng);
        const TYPE rem = dx - (TYPE)n * rng;
        return n % 2 == 0 ? hi - rem : lo + rem;
    }
    return x;
}

/* Keys cubic coefficients (A = -0.75) of the 4 taps around a point at fraction t. */
static void aicc_gs_cubic_SFX(TYPE t, TYPE c[4])
{
    const TYPE A = (TYPE)-0.75, x1 = t + 1, x2 = 1 - t, x3 = 2 - t;
    c[0] = ((A * x1 - 5 * A) * x1 + 8 * A) * x1 - 4 * A;
    c[1] = ((A + 2) * t - (A + 3)) * t * t + 1;
    c[2] = ((A + 2) * x2 - (A + 3)) * x2 * x2 + 1;
    c[3] = ((A * x3 - 5 * A) * x3 + 8 * A) * x3 - 4 * A;
}

/* The taps of one output position (grid point g): per spatial dim the index (-1 for a zero
 * padding tap) and weight of each tap, cnt taps per dim; unused leading dims (r < 3) have one
 * tap at index 0 with weight 1. Returns 1 for a NaN coordinate (the position's outputs are
 * NaN). */
static int aicc_gs_taps_SFX(const aicc_gs_params *p, const TYPE *g, int64_t idx[3][4],
                            TYPE w[3][4], int cnt[3])
{
    const int nt = p->mode == 0 ? 1 : (p->mode == 1 ? 2 : 4);
    const TYPE big = (TYPE)1e7;
    int isnan_ = 0;
    for (size_t d = 0; d < 3; ++d) {
        const TYPE sz = (TYPE)p->in[d];
        const TYPE lo = p->align ? (TYPE)0 : (TYPE)-0.5;
        const TYPE hi = p->align ? sz - 1 : sz - (TYPE)0.5;
        TYPE v, f;
        int64_t i0;
        if (d < 3 - p->r) {
            idx[d][0] = 0;
            w[d][0] = 1;
            cnt[d] = 1;
            continue;
        }
        v = g[2 - d];                       /* grid is (x, y, z): reversed dims */
        if (v != v) {
            isnan_ = 1;
            v = 0;
        }
        v = p->align ? (v + 1) / 2 * (sz - 1) : ((v + 1) * sz - 1) / 2;
        if (p->mode == 0)
            v = RINT(v);
        v = v < -big ? -big : (v > big ? big : v);
        if (v < lo || v > hi) {
            if (p->pad == 1 && p->mode != 2)
                v = v < 0 ? 0 : (v > sz - 1 ? sz - 1 : v);
            else if (p->pad == 2)
                v = aicc_gs_reflect_SFX(v, lo, hi);
        }
        f = FLOOR(v);
        i0 = (int64_t)f - (p->mode == 2 ? 1 : 0);
        if (p->mode == 0) {
            i0 = (int64_t)v;                /* rounded already; truncation as reference */
            w[d][0] = 1;
        } else if (p->mode == 1) {
            w[d][0] = 1 - (v - f);
            w[d][1] = v - f;
        } else {
            aicc_gs_cubic_SFX(v - f, w[d]);
        }
        cnt[d] = nt;
        for (int t = 0; t < nt; ++t) {
            int64_t i = i0 + t;
            const int64_t last = (int64_t)p->in[d] - 1;
            if (i < 0 || i > last) {
                if (p->pad == 0)
                    i = -1;
                else if (p->pad == 1)
                    i = i < 0 ? 0 : last;
                else
                    i = (int64_t)aicc_gs_reflect_SFX((TYPE)i, lo, hi);
            }
            idx[d][t] = i;
        }
    }
    return isnan_;
}

/* GridSample by blocks of 64 output positions: their taps computed once, then every channel
 * sums the products of the tap weights times the input values for the block and stores 64
 * contiguous outputs (one position at a time across all channels, stored 16 KB apart, and
 * the tap loops not unrolled for 2-D linear: 1x32x64x64, x86-avx512, 442-458 -> 337-352 us;
 * onnxruntime 285-420 in the same runs, depending on what ran before it). */
static void aicc_grid_sample_SFX(const aicc_gs_params *p, const TYPE *restrict x,
                                 const TYPE *restrict grid, TYPE *restrict y)
{
    const size_t X = p->in[0] * p->in[1] * p->in[2];
    for (size_t n = 0; n < p->batch; ++n)
        for (size_t o0 = 0; o0 < p->outp; o0 += 64u) {
            const size_t nb = p->outp - o0 < 64u ? p->outp - o0 : 64u;
            int64_t idx[64][3][4];
            TYPE w[64][3][4];
            int cnt[3], isnan_[64];
            for (size_t b = 0; b < nb; ++b)
                isnan_[b] = aicc_gs_taps_SFX(p, grid + (n * p->outp + o0 + b) * p->r, idx[b],
                                             w[b], cnt);
            for (size_t c = 0; c < p->chans; ++c) {
                const TYPE *xc = x + (n * p->chans + c) * X;
                TYPE *yc = y + (n * p->chans + c) * p->outp + o0;
                if (p->r == 2 && p->mode == 1) {        /* 2-D linear: the loops below, unrolled */
                    for (size_t b = 0; b < nb; ++b) {
                        const int64_t *iy = idx[b][1], *ix = idx[b][2];
                        const TYPE *wy = w[b][1], *wx = w[b][2];
                        TYPE s = 0;
                        for (int e1 = 0; e1 < 2; ++e1) {
                            TYPE sb = 0;
                            const TYPE *row;
                            if (iy[e1] < 0)
                                continue;
                            row = xc + (size_t)iy[e1] * p->in[2];
                            if (ix[0] >= 0)
                                sb += wx[0] * row[ix[0]];
                            if (ix[1] >= 0)
                                sb += wx[1] * row[ix[1]];
                            s += w[b][0][0] * wy[e1] * sb;
                        }
                        yc[b] = isnan_[b] ? (TYPE)NAN : s;
                    }
                    continue;
                }
                for (size_t b = 0; b < nb; ++b) {
                    TYPE s = 0;
                    for (int a = 0; a < cnt[0]; ++a) {
                        if (idx[b][0][a] < 0)
                            continue;
                        for (int e1 = 0; e1 < cnt[1]; ++e1) {
                            TYPE sb = 0;
                            const TYPE *row;
                            if (idx[b][1][e1] < 0)
                                continue;
                            row = xc + ((size_t)idx[b][0][a] * p->in[1] + (size_t)idx[b][1][e1])
                                  * p->in[2];
                            for (int e = 0; e < cnt[2]; ++e)
                                if (idx[b][2][e] >= 0)
                                    sb += w[b][2][e] * row[idx[b][2][e]];
                            s += w[b][0][a] * w[b][1][e1] * sb;
                        }
                    }
                    yc[b] = isnan_[b] ? (TYPE)NAN : s;
                }
            }
        }
}"""


def _opts(op, node):
    mode = op.attr(node, "mode")
    pad = op.attr(node, "padding_mode")
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}")
    if pad not in PADS:
        raise ValueError(f"padding_mode {pad!r}")
    return MODES[mode], PADS[pad], int(op.attr(node, "align_corners") or 0)


class _GridSample(Op):
    def check(self, node, g):
        dt, gt = g.dtype(node.inputs[0]), g.dtype(node.inputs[1])
        if dt.name not in ("float32", "float64"):
            return f"dtype {dt.name} not supported (float32, float64)"
        if gt != dt:
            return f"grid dtype {gt.name} differs from X dtype {dt.name}"
        try:
            mode, _, _ = _opts(self, node)
        except ValueError as e:
            return str(e)
        x, gs = g.shape(node.inputs[0]), g.shape(node.inputs[1])
        r = len(x) - 2
        if r < 1 or r > 3:
            return f"input rank {len(x)} (1 to 3 spatial dims)"
        if len(gs) != r + 2 or gs[-1] != r or gs[0] != x[0]:
            return f"grid shape {list(gs)} does not fit input {list(x)}"
        return None

    def emit(self, node, ctx):
        x, gs = ctx.in_shape(0), ctx.in_shape(1)
        dt = ctx.in_dtype(0)
        sfx = suffix(dt)
        mode, pad, align = _opts(self, node)
        if numel(ctx.out_shape(0)) == 0:
            ctx("/* empty output: nothing to compute */")
            return
        f = "f" if dt.name == "float32" else ""
        code = typed(KERNEL, dt).replace("RINT(", f"rint{f}(").replace("FLOOR(", f"floor{f}(")
        ctx.helper("grid_sample.0.params", PARAMS)
        ctx.helper(f"grid_sample.1{sfx}", code)
        r = len(x) - 2
        sp = [1] * (3 - r) + list(x[2:])
        ctx(f"/* GridSample {self.attr(node, 'mode')}, padding {self.attr(node, 'padding_mode')}"
            f", align_corners {align} */")
        sizes = ", ".join(f"{d}u" for d in sp)
        ctx(f"static const aicc_gs_params prm = {{ {x[0]}u, {x[1]}u, {r}u, {{ {sizes} }}, "
            f"{numel(gs[1:-1])}u, {mode}, {pad}, {align} }};")
        ctx(f"aicc_grid_sample{sfx}(&prm, {ctx.inp[0]}, {ctx.inp[1]}, {ctx.out[0]});")


@register("GridSample", since=16)
class GridSample16(_GridSample):
    attrs = {"align_corners": 0, "mode": "bilinear", "padding_mode": "zeros"}


@register("GridSample", since=20)
class GridSample20(_GridSample):
    attrs = {"align_corners": 0, "mode": "linear", "padding_mode": "zeros"}
