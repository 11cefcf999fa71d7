"""AffineGrid (2-D and 3-D; float32, float64): grid[n, (d,) h, w] = theta[n] @ (x_w, y_h,
(z_d,) 1) with the base coordinates in [-1, 1]: -1 + i * 2 / (size - 1) with align_corners
(1 for a size-1 dim, as onnxruntime; PyTorch says 0 and onnx.reference -1), else
-1 + (2 * i + 1) / size. The spatial sizes come from the static
output shape (the run-time value of the size input is not read). The base grid and the
products are computed in double and rounded once (as onnx.reference). NaN/Inf in theta
propagate by IEEE arithmetic.
"""
from __future__ import annotations

from ..emit_c.loops import numel
from ..kernels.conv.base_c import suffix, typed
from .base import Op, register
from .conv import FLOATS

BASE = """\
/* Base coordinate i of a dim of n points in [-1, 1] (align: corners at -1 and 1, a single
 * point at 1 as onnxruntime; without align a single point is at 0). */
static double aicc_affine_base(size_t i, size_t n, int align)
{
    if (align)
        return n > 1 ? -1.0 + (double)i * (2.0 / (double)(n - 1)) : 1.0;
    return -1.0 + (2.0 / (double)n) / 2.0 + (double)i * (2.0 / (double)n);
}"""

KERNEL = """\
/* AffineGrid: r = 2 (theta [N][2][3], grid [N][H][W][2]) or 3 (theta [N][3][4], grid
 * [N][D][H][W][3]); sz = (D, H, W) with D = 1 for r = 2. */
static void aicc_affine_grid_SFX(size_t N, size_t r, const size_t sz[3], int align,
                                 const TYPE *restrict theta, TYPE *restrict grid)
{
    size_t q = 0;
    for (size_t n = 0; n < N; ++n) {
        const TYPE *t = theta + n * r * (r + 1);
        for (size_t d = 0; d < sz[0]; ++d)
            for (size_t h = 0; h < sz[1]; ++h)
                for (size_t w = 0; w < sz[2]; ++w) {
                    const double b[4] = {aicc_affine_base(w, sz[2], align),
                                         aicc_affine_base(h, sz[1], align),
                                         r == 3 ? aicc_affine_base(d, sz[0], align) : 1.0, 1.0};
                    for (size_t k = 0; k < r; ++k) {
                        double s = 0;
                        for (size_t j = 0; j <= r; ++j)
                            s += (double)t[k * (r + 1) + j] * b[j];
                        grid[q++] = (TYPE)s;
                    }
                }
    }
}"""


@register("AffineGrid", since=20)
class AffineGrid(Op):
    attrs = {"align_corners": 0}

    def check(self, node, g):
        dt = g.dtype(node.inputs[0])
        if dt.name not in FLOATS:
            return f"dtype {dt.name} not supported (float32, float64)"
        th, y = g.shape(node.inputs[0]), g.shape(node.outputs[0])
        r = len(y) - 2
        if r not in (2, 3) or tuple(th[1:]) != (r, r + 1) or y[-1] != r or y[0] != th[0]:
            return f"theta {list(th)} / grid {list(y)} (need [N,2,3]->[N,H,W,2] or " \
                   "[N,3,4]->[N,D,H,W,3])"
        return None

    def emit(self, node, ctx):
        dt = ctx.in_dtype(0)
        y = ctx.out_shape(0)
        if numel(y) == 0:
            ctx("/* empty output: nothing to compute */")
            return
        r = len(y) - 2
        sz = ([1] + list(y[1:3])) if r == 2 else list(y[1:4])
        ctx.helper("affine_grid.0.base", BASE)
        ctx.helper(f"affine_grid.1{suffix(dt)}", typed(KERNEL, dt))
        ctx(f"/* AffineGrid {r}-D, align_corners {int(self.attr(node, 'align_corners'))} */")
        ctx(f"static const size_t sz[3] = {{ {', '.join(f'{d}u' for d in sz)} }};")
        ctx(f"aicc_affine_grid{suffix(dt)}({y[0]}u, {r}u, sz, "
            f"{int(self.attr(node, 'align_corners'))}, {ctx.inp[0]}, {ctx.out[0]});")
