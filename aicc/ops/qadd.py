"""aicc.QAdd: ``QuantizeLinear(Add(DequantizeLinear(a), DequantizeLinear(b)))`` in one step,
made by fuse-qadd (passes/fuse_qadd.py): the residual Add of QDQ models (MobileNetV2 int8),
which onnxruntime runs as one QLinearAdd.

Inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point; a, b and
y uint8 / int8 of one shape, the six scales and zero points float32 / integer scalar
constants. The values are the chain's, element for element: each dequantized value
``(float)(x - zp) * scale`` rounded to float32, their float32 sum, then QuantizeLinear's
``saturate(rint(sum / y_scale) + y_zero_point)`` (quantize.py / kernels/qgemm/quantize.py: the same
division and rounding; NaN -> the zero point, +-Inf saturate). On the x86 SIMD targets one
vector loop (kernels/qgemm/qadd.py): bytes widened, shifted, converted, multiplied, added,
then kernels/qgemm/quantize.py's rounding and store; on targets whose FPU description has a
rounding conversion (cortex-m4: isa/fpv4's VCVTR) that conversion and SSAT / USAT per element
(kernels/qgemm/quantize.py emit_round); elsewhere quantize.emit_blocks: blocks of 16 that
GCC -O2 vectorizes (the clamp to [lo - zp, hi - zp] first, which rounding commutes with, NaN to
the zero point by a bit select, then rint as the 1.5 * 2^23 shift), and the n % 16 rest
through the scalar rounding.
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import ctype
from ..emit_c.loops import numel
from ..kernels.isa.x86 import simd_isa
from ..kernels.qgemm import qadd as qadd_simd
from ..kernels.qgemm import quantize as quantize_simd
from ..kernels.qgemm.simd import scalar
from .base import Op, register
from .qlinear import INT8
from .quantize import QTYPES, emit_blocks, round_helper

ONE = """\
/* The sum of two dequantized values, each product and the sum rounded to float32. */
static AICC_UNUSED float aicc_qadd_one(int32_t a, int32_t b, int32_t za, int32_t zb, float sa,
                                       float sb)
{
    const float da = (float)(a - za) * sa;
    const float db = (float)(b - zb) * sb;
    return da + db;
}"""


@register("QAdd", domain="aicc")
class QAdd(Op):
    def check(self, node, g):
        if len(node.inputs) != 8 or not all(node.inputs):
            return "QAdd takes eight inputs"
        a, b, y = node.inputs[0], node.inputs[3], node.outputs[0]
        if any(g.dtype(t).name not in INT8 for t in (a, b, y)):
            return "a, b and y must be uint8 or int8"
        if not (tuple(g.shape(a)) == tuple(g.shape(b)) == tuple(g.shape(y))):
            return "a, b and y must have one shape"
        for k in (1, 2, 4, 5, 6, 7):
            c = g.const(node.inputs[k])
            if c is None or np.asarray(c).size != 1:
                return f"input {k} must be a constant scalar"
        return None

    def reference(self, node, g, inputs):
        a, sa, za, b, sb, zb, sy, zy = (np.asarray(v) for v in inputs)

        def dq(x, s, z):
            return ((x.astype(np.int32) - z.astype(np.int32)).astype(np.float32)
                    * np.float32(s)).astype(np.float32)
        v = (dq(a, sa, za) + dq(b, sb, zb)).astype(np.float32)
        with np.errstate(all="ignore"):
            q = np.rint((v / np.float32(sy)).astype(np.float32)).astype(np.float64)
        lo, hi = QTYPES[zy.dtype.name]
        y = np.clip(np.where(np.isnan(q), float(zy), q + float(zy)), lo, hi)
        return [y.astype(zy.dtype)]

    def emit(self, node, ctx):
        n = numel(ctx.out_shape(0))
        ydt = ctx.out_dtype(0)
        if n == 0:
            ctx(f"(void){ctx.out[0]};  /* empty tensor */")
            return
        lo, hi = QTYPES[ydt.name]
        rnd = round_helper(ctx, np.dtype(np.float32))
        ctx("/* QAdd: y = saturate(rint(((a - za) * sa + (b - zb) * sb) / sy) + zp), each "
            "product and the sum rounded to float32 (the DQ -> Add -> Q chain's values) */")
        ctx(f"const float sa = (float){scalar(ctx, 1)}, sb = (float){scalar(ctx, 4)}, "
            f"sy = (float){scalar(ctx, 6)};")
        ctx(f"const int32_t za = (int32_t){scalar(ctx, 2)}, zb = (int32_t){scalar(ctx, 5)}, "
            f"zp = (int32_t){scalar(ctx, 7)};")
        isa, a, b = simd_isa(ctx), ctx.inp[0], ctx.inp[3]

        def one(k):         # the float sum of element k
            return f"aicc_qadd_one({a}[{k}], {b}[{k}], za, zb, sa, sb)"
        if qadd_simd.usable(isa, ydt.name, n):
            qadd_simd.emit(ctx, isa, ydt.name, n, (a, ctx.in_dtype(0).name),
                           (b, ctx.in_dtype(3).name), ctx.out[0], lo, hi, rnd, one)
        elif risa := quantize_simd.round_isa(ctx):      # the FPU's rounding conversion (isa/fpv4)
            quantize_simd.emit_round(ctx, risa, ydt.name, n, "",
                                     ctx.out[0], "sy", "zp", value=lambda k: f"{one(k)} / sy")
        else:
            ctx.kernel = "generic"
            yct = ctype(ydt)
            emit_blocks(ctx, n, lambda k: f"{one(k)} / sy", ctx.out[0], yct, lo, hi, rnd)
        ctx.helper("qadd.one", ONE)
