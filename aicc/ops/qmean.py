"""aicc.QMean: ``QuantizeLinear(mean over the trailing axes of DequantizeLinear(x))`` in
integers, made by fuse-qmean (passes/fuse_qmean.py): a QDQ model's global average pooling.

Inputs: x, x_scale, x_zero_point, y_scale, y_zero_point; x and y uint8 / int8, the scales
float32 and the zero points constant scalars. Attribute ``axis``: the mean runs over x's axes
axis..rank-1 (n values per output; y has the leading axes' element count, n <= 2^21).

Values: ``y = saturate(rint(a * m) + y_zero_point)`` with a = sum(x - x_zero_point) over the
n values, exact in int32, and the multiplier m = x_scale / (y_scale * n) rounded once to
float32 at build time; ``a * m`` in float64 (exact: |a| < 2^29), rint half to even, the
requantization of ops/qlinear.py: a NaN m (both scales zero) gives the zero point, an infinite
one (y_scale zero) saturates, a = 0 giving the zero point; targets with ``requant: integer``
(the Cortex-M targets) compute it in 32-bit integers (kernels/qgemm/fixed.py, the same values).
The float chain (each value dequantized to float32, a float32 mean, QuantizeLinear's division
and rounding) rounds several times on the way; the two differ by one step where those
roundings cross a half-integer (onnxruntime: the chain, run in float).
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import c_float, ctype
from ..emit_c.loops import numel
from ..kernels.qgemm import fixed
from ..kernels.qgemm.requant import WRAP
from .base import Op, empty_body, register
from .qlinear import INT8
from .quantize import QTYPES, round_helper

MAX_N = 1 << 21             # |a| <= 255 n < 2^29: the float64 product and fixed.py exact


def multiplier(sx, sy, n: int) -> np.float32:
    """x_scale / (y_scale * n), rounded once to float32 (NaN / Inf for zero scales)."""
    with np.errstate(all="ignore"):
        return np.float32(np.float64(np.float32(sx)) / (np.float64(np.float32(sy)) * n))


@register("QMean", domain="aicc")
class QMean(Op):
    attrs = {"axis": 2}

    def check(self, node, g):
        if len(node.inputs) != 5 or not all(node.inputs):
            return "QMean takes five inputs"
        x, y = node.inputs[0], node.outputs[0]
        if g.dtype(x).name not in INT8 or g.dtype(y).name not in INT8:
            return "x and y must be uint8 or int8"
        for k in range(1, 5):
            c = g.const(node.inputs[k])
            if c is None or np.asarray(c).size != 1:
                return f"input {k} must be a constant scalar"
        shape, axis = tuple(g.shape(x)), int(self.attr(node, "axis"))
        if not 0 <= axis <= len(shape) or numel(shape[:axis]) != numel(tuple(g.shape(y))):
            return f"axis {axis}: y must hold one value per index of x's leading axes"
        if numel(shape[axis:]) > MAX_N:
            return f"{numel(shape[axis:])} values per output (at most {MAX_N})"
        return None

    def reference(self, node, g, inputs):
        x, sx, zx, sy, zy = (np.asarray(v) for v in inputs)
        axis = int(self.attr(node, "axis"))
        n = numel(x.shape[axis:])
        a = (x.astype(np.int64) - int(zx)).reshape(numel(x.shape[:axis]), n).sum(axis=1)
        with np.errstate(all="ignore"):
            q = np.rint(a.astype(np.float64) * np.float64(multiplier(sx, sy, n)))
        lo, hi = QTYPES[zy.dtype.name]
        y = np.clip(np.where(np.isnan(q), float(zy), q + float(zy)), lo, hi)
        return [y.astype(zy.dtype).reshape(g.shape(node.outputs[0]))]

    def emit(self, node, ctx):
        axis = int(self.attr(node, "axis"))
        xs = tuple(ctx.in_shape(0))
        outer, n = numel(xs[:axis]), numel(xs[axis:])
        if outer == 0:
            empty_body(ctx)
            return
        ydt = ctx.out_dtype(0)
        lo, hi = QTYPES[ydt.name]
        zx = int(np.asarray(ctx.in_const(2)).reshape(-1)[0])
        zy = int(np.asarray(ctx.in_const(4)).reshape(-1)[0])
        m = multiplier(ctx.in_const(1), ctx.in_const(3), n)
        mc = c_float(m)
        ctx(f"/* QMean: y = saturate(rint(a * m) + {zy}), a = sum(x - {zx}) over {n} values in "
            f"int32, m = x_scale / (y_scale * {n}) as float32 */")
        ctx.helper("qlinear.0.wrap", WRAP)
        if fixed.usable(ctx):       # one output at a time: a few per model (global pooling)
            one = fixed.one(ctx, ydt)

            def out(a):
                return f"{one}({a}, {mc}, {zy})"
        else:
            rnd = round_helper(ctx, np.dtype(np.float64))

            def out(a):
                return f"{rnd}((double)aicc_u32_i32({a}) * (double){mc}, {zy}, {lo}, {hi})"
        xct = ctype(ctx.in_dtype(0))
        with ctx.block(f"for (size_t o = 0; o < {outer}u; ++o)"):
            ctx(f"const {xct} *p = {ctx.inp[0]} + o * {n}u;")
            ctx("int32_t s = 0;")
            with ctx.block(f"for (size_t i = 0; i < {n}u; ++i)"):
                ctx("s += p[i];")
            ctx(f"{ctx.out[0]}[o] = ({ctype(ydt)}){out(f'(uint32_t)(s - ({zx * n}))')};")
