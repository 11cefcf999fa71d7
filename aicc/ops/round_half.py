"""aicc.RoundHalf: float32 values rounded to a half-precision type and back, in one step.

upcast-half writes it where a rounded op result is read only by ops that compute in float32:
``Cast(to=float16) -> Cast(to=float32)`` with no use of the half tensor itself. The values
are the Cast pair's, bit for bit on each target (x86 SIMD: kernels/vmath/half.py's conversions in
registers; elsewhere kernels/dtype/half.py's aicc_round_h / aicc_round_bf, which round in float32 bits),
with one pass over float32 memory instead of two steps and a half tensor. Attribute ``to``:
the half type, float16 or bfloat16 (nearest even). In place.
"""
from __future__ import annotations

import numpy as np
from onnx import helper

from ..emit_c.loops import emit_map, numel
from ..kernels.dtype.half import round_float
from ..kernels.vmath.half import emit_round
from .base import Op, register
from .traits import ELEMENTWISE


@register("RoundHalf", domain="aicc")
class RoundHalf(Op):
    traits = frozenset({ELEMENTWISE})
    attrs = {"to": None}
    inplace_inputs = staticmethod(lambda node, g: [0])

    @staticmethod
    def _half(node) -> np.dtype:
        return np.dtype(helper.tensor_dtype_to_np_dtype(int(node.attrs["to"])))

    def check(self, node, g):
        if self._half(node).name not in ("float16", "bfloat16"):
            return "to: float16 or bfloat16"
        return None if g.dtype(node.inputs[0]) == np.float32 else "float32 input only"

    def emit(self, node, ctx):
        n = numel(ctx.out_shape(0))
        if n == 0:
            ctx(f"(void){ctx.out[0]};  /* empty tensor */")
            return
        half = self._half(node)
        ctx(f"/* RoundHalf: float32 -> {half.name} -> float32 */")
        if half == np.float16 and emit_round(ctx, n):
            return
        fn = round_float(ctx, half.name)
        emit_map(ctx, n, lambda x: f"{fn}({x})")

    def reference(self, node, g, inputs):
        x = np.asarray(inputs[0], np.float32)
        with np.errstate(over="ignore"):
            return [x.astype(self._half(node)).astype(np.float32)]
