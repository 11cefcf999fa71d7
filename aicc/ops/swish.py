"""Swish (opset 24) and SwiGLU (opset 28): gated sigmoid activations.

``Swish(x) = x * sigmoid(alpha * x)``, computed as ``x * (1 / (1 + exp(-alpha * x)))`` in
the tensor dtype (onnx.reference's formula). ``SwiGLU(a, b) = Swish_alpha(a) * b`` with A
and B of identical shape (no broadcasting).

NaN propagates. ``x = -inf`` gives ``-inf * 0 = NaN`` (as numpy); large negative x gives
-0 (exp overflows to +inf, the sigmoid to 0). float16/bfloat16 run in float32 (upcast-half
pass).
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import c_literal, ctype
from .base import Op, register
from .loops import numel


def swish_expr(x: str, alpha: float, dt) -> str:
    """C expression of x * sigmoid(alpha * x) for a C variable x of dtype dt."""
    L = lambda v: c_literal(v, dt)  # noqa: E731
    e = "expf" if np.dtype(dt) == np.float32 else "exp"
    ax = x if alpha == 1.0 else f"{L(alpha)} * {x}"
    return f"{x} * ({L(1)} / ({L(1)} + {e}(-({ax}))))"


def _float_reason(g, names) -> str | None:
    dts = {g.dtype(n).name for n in names}
    if len(dts) != 1 or next(iter(dts)) not in ("float32", "float64"):
        return f"dtype {'/'.join(sorted(dts))} not supported (float32/float64)"
    return None


@register("Swish", since=24)
class Swish(Op):
    attrs = {"alpha": 1.0}

    def check(self, node, g):
        return _float_reason(g, node.inputs[:1])

    def emit(self, node, ctx):
        dt = ctx.in_dtype(0)
        n = numel(ctx.out_shape(0))
        if n == 0:
            ctx("/* empty tensor */")
            return
        alpha = float(self.attr(node, "alpha"))
        with ctx.block(f"for (size_t i = 0; i < {n}u; ++i)"):
            ctx(f"const {ctype(dt)} x = {ctx.inp[0]}[i];")
            ctx(f"{ctx.out[0]}[i] = {swish_expr('x', alpha, dt)};")


@register("SwiGLU", since=28)
class SwiGLU(Op):
    attrs = {"alpha": 1.0}

    def check(self, node, g):
        if tuple(g.shape(node.inputs[0])) != tuple(g.shape(node.inputs[1])):
            return "A and B must have identical shapes"
        return _float_reason(g, node.inputs[:2])

    def emit(self, node, ctx):
        dt = ctx.in_dtype(0)
        n = numel(ctx.out_shape(0))
        if n == 0:
            ctx("/* empty tensor */")
            return
        alpha = float(self.attr(node, "alpha"))
        with ctx.block(f"for (size_t i = 0; i < {n}u; ++i)"):
            ctx(f"const {ctype(dt)} a = {ctx.inp[0]}[i];")
            ctx(f"{ctx.out[0]}[i] = ({swish_expr('a', alpha, dt)}) * {ctx.inp[1]}[i];")
