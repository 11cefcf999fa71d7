"""Det (opset 11/22): determinant of each square matrix of x [*, M, M] -> y [*].

LU factorisation with partial pivoting (largest magnitude in the column, first one on ties),
in double precision on a scratch copy of each matrix, rounded once to the output type (float32
or float64), like numpy.linalg.det (LAPACK getrf). A column without a non-zero pivot gives an
exact 0; M == 0 gives 1. NaN entries propagate (a NaN pivot makes the result NaN); Inf
entries follow IEEE arithmetic (Inf - Inf = NaN).
"""
from __future__ import annotations

from ..emit_c.cwriter import ctype
from ..emit_c.loops import numel
from .base import Op, register

DET = """\
/* Determinants of `batch` n x n matrices x (row-major, consecutive) into y: LU with partial
 * pivoting in double on the scratch a (n * n doubles). */
static void aicc_det_SFX(size_t batch, size_t n, const TYPE *x, TYPE *y, double *a)
{
    for (size_t b = 0; b < batch; ++b) {
        double det = 1.0;
        for (size_t i = 0; i < n * n; ++i)
            a[i] = (double)x[b * n * n + i];
        for (size_t k = 0; k < n; ++k) {
            size_t p = k;
            double best = fabs(a[k * n + k]);
            for (size_t i = k + 1; i < n; ++i)
                if (fabs(a[i * n + k]) > best) {
                    best = fabs(a[i * n + k]);
                    p = i;
                }
            if (best == 0.0) {
                det = 0.0;
                break;
            }
            if (p != k) {
                for (size_t j = 0; j < n; ++j) {
                    const double t = a[k * n + j];
                    a[k * n + j] = a[p * n + j];
                    a[p * n + j] = t;
                }
                det = -det;
            }
            det *= a[k * n + k];
            for (size_t i = k + 1; i < n; ++i) {
                const double f = a[i * n + k] / a[k * n + k];
                for (size_t j = k + 1; j < n; ++j)
                    a[i * n + j] -= f * a[k * n + j];
            }
        }
        y[b] = (TYPE)det;
    }
}"""


@register("Det", since=11)
class Det(Op):
    def check(self, node, g):
        dt = g.dtype(node.inputs[0])
        if dt.name not in ("float32", "float64"):
            return f"dtype {dt.name} not supported (float32, float64)"
        s = tuple(g.shape(node.inputs[0]))
        if len(s) < 2 or s[-1] != s[-2]:
            return f"input of shape {list(s)} is not [*, M, M]"
        return None

    def emit(self, node, ctx):
        s = ctx.in_shape(0)
        dt = ctx.in_dtype(0)
        batch, n = numel(s[:-2]), s[-1]
        if batch == 0:
            ctx(f"(void){ctx.out[0]};  /* empty batch */")
            return
        ct = ctype(dt)
        fn = f"aicc_det_{ct}"
        ctx.helper(fn, DET.replace("_SFX", "_" + ct).replace("TYPE", ct))
        a = ctx.scratch(max(n * n, 1) * 8, "double", "lu")
        ctx(f"/* Det of {batch} {n}x{n} matrices */")
        ctx(f"{fn}({batch}u, {n}u, {ctx.inp[0]}, {ctx.out[0]}, {a});")
