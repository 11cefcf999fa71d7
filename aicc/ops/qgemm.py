"""aicc.QGemm: QLinearMatMul with an int32 bias, made by fuse-qdq (passes/fuse_qdq.py) from
``QuantizeLinear(Gemm(DequantizeLinear(a), DequantizeLinear(b), DequantizeLinear(bias)))``:
a QDQ model's fully connected layer, which onnxruntime runs as one QGemm.

Inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point, bias; as
QLinearMatMul's (b constant [K, N], its scale and zero point per tensor or per column), bias
a constant int32 [N]. Values: ``acc = (a - azp) @ (b - bzp) + bias`` modulo 2^32, then
QLinearMatMul's requantization ``saturate(rint(acc * (a_scale * b_scale / y_scale)) + yzp)``
(ops/qlinear.py; in integers on ``requant: integer`` targets). The Gemm chain rounds every
dequantized product, the float sum and the bias add to float32: the two differ by at most one
quantization step where that rounding crosses a half-integer, as onnxruntime's QGemm does.
"""
from __future__ import annotations

import numpy as np

from .base import register
from .qlinear import QLinearMatMul, column_multipliers
from .quantize import QTYPES


@register("QGemm", domain="aicc")
class QGemm(QLinearMatMul):
    BIAS = 8

    def check(self, node, g):
        if len(node.inputs) != 9 or not all(node.inputs):
            return "QGemm takes nine inputs"
        bias, b = g.const(node.inputs[8]), g.const(node.inputs[3])
        if b is None or np.asarray(b).ndim != 2:
            return "b must be a constant matrix"
        n = np.asarray(b).shape[1]
        if bias is None or np.asarray(bias).dtype != np.int32 or np.asarray(bias).shape != (n,):
            return f"bias must be a constant int32 [{n}]"
        return super().check(node, g)

    def reference(self, node, g, inputs):
        a, sa, za, b, sb, zb, sy, zy, bias = (np.asarray(v) for v in inputs)
        n = b.shape[1]
        acc = (a.astype(np.int64) - za.astype(np.int64)) @ \
            (b.astype(np.int64) - np.broadcast_to(zb.astype(np.int64).reshape(-1), (n,)))
        acc = ((acc + bias.astype(np.int64)) + 2**31) % 2**32 - 2**31     # modulo 2^32
        m = column_multipliers(sa, sb, sy, n)
        with np.errstate(all="ignore"):
            q = np.rint(acc.astype(np.float64) * m.astype(np.float64))
        lo, hi = QTYPES[zy.dtype.name]
        zp = float(zy.reshape(-1)[0])
        y = np.clip(np.where(np.isnan(q), zp, q + zp), lo, hi)
        return [y.astype(zy.dtype)]
