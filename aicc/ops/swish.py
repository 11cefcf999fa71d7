"""Swish (opset 24) and SwiGLU (opset 28): gated sigmoid activations.

``Swish(x) = x * sigmoid(alpha * x)``, computed as ``x * (1 / (1 + exp(-alpha * x)))`` in
the tensor dtype (onnx.reference's formula). ``SwiGLU(a, b) = Swish_alpha(a) * b`` with A
and B of identical shape (no broadcasting).

On the x86 SIMD targets float32 Swish runs on exp_simd's vector exp (the tail through its
lane-0 form), the same bits as the Sigmoid -> Mul chain there (pass fuse-silu writes Swish,
``aicc.Swish`` below opset 24); elsewhere on math_c's portable exp, as Sigmoid there. SwiGLU
uses the same exp functions (lane 0 on the SIMD targets).

NaN propagates. ``x = -inf`` gives ``-inf * 0 = NaN`` (as numpy); large negative x gives -0
(exp overflows to +inf, the sigmoid to 0). float16/bfloat16 run in float32 (upcast-half
pass).
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import c_literal, ctype
from ..emit_c.loops import numel
from ..kernels.isa.x86 import SIMD, simd_isa
from ..kernels.vmath.mathlib import math_override, scalar
from ..kernels.vmath.vector import swish_vector
from .base import Op, register
from .traits import ACTIVATION


def swish_expr(x: str, alpha: float, dt, exp: str | None = None) -> str:
    """C expression of x * sigmoid(alpha * x) for a C variable x of dtype dt (``exp``: the
    exp function's name, default the C library's)."""
    L = lambda v: c_literal(v, dt)  # noqa: E731
    e = exp or ("expf" if np.dtype(dt) == np.float32 else "exp")
    ax = x if alpha == 1.0 else f"{L(alpha)} * {x}"
    return f"{x} * ({L(1)} / ({L(1)} + {e}(-({ax}))))"


def _exp(ctx, dt) -> str | None:
    """The float32 exp of ctx's node (math_override: the lane-0 vector exp on a SIMD
    target, math_c's portable exp, whose loops vectorize, elsewhere); None: the C library's."""
    if np.dtype(dt) != np.float32:
        return None
    return math_override(ctx, lambda f: f + "f")("exp")


def _float_reason(g, names) -> str | None:
    dts = {g.dtype(n).name for n in names}
    if len(dts) != 1 or next(iter(dts)) not in ("float32", "float64"):
        return f"dtype {'/'.join(sorted(dts))} not supported (float32/float64)"
    return None


@register("Swish", since=24)
class Swish(Op):
    attrs = {"alpha": 1.0}
    # fuse-activation puts it into a producing Conv / Gemm / MatMul as the epilogue
    # (kernels/vmath/act.py's Swish: this op's expression, the same bits)
    traits = frozenset({ACTIVATION})

    def check(self, node, g):
        return _float_reason(g, node.inputs[:1])

    def emit(self, node, ctx):
        dt = ctx.in_dtype(0)
        n = numel(ctx.out_shape(0))
        if n == 0:
            ctx("/* empty tensor */")
            return
        alpha = float(self.attr(node, "alpha"))
        isa = simd_isa(ctx) if dt == np.float32 else None
        exp = None
        if isa:       # exp_simd's exp: vectors, the tail through lane 0 (the same bits)
            d = SIMD[isa]
            full, exp = n - n % d["L"], scalar(ctx, isa, "exp")
            ctx.kernel = isa
            if full:
                with ctx.block(f"for (size_t i = 0; i < {full}u; i += {d['L']}u)"):
                    ctx(f"const {d['v']} xv = {d['ld']}({ctx.inp[0]} + i);")
                    val = swish_vector(ctx, isa, "xv", alpha)
                    ctx(f"{d['st']}({ctx.out[0]} + i, {val});")
            if full == n:
                return
        else:
            full, exp = 0, _exp(ctx, dt)
        with ctx.block(f"for (size_t i = {full}u; i < {n}u; ++i)"):
            ctx(f"const {ctype(dt)} x = {ctx.inp[0]}[i];")
            ctx(f"{ctx.out[0]}[i] = {swish_expr('x', alpha, dt, exp)};")


@register("Swish", domain="aicc")
class AiccSwish(Swish):
    """aicc.Swish: Swish for graphs below opset 24 (pass fuse-silu writes it for Sigmoid(x) *
    x); numpy reference, as onnx.reference cannot run the aicc domain."""

    def reference(self, node, g, inputs):
        x = np.asarray(inputs[0])
        a = x.dtype.type(float(self.attr(node, "alpha")))
        with np.errstate(over="ignore"):
            return [(x * (x.dtype.type(1) / (x.dtype.type(1) + np.exp(-(a * x))))).astype(x.dtype)]


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
            ctx(f"{ctx.out[0]}[i] = ({swish_expr('a', alpha, dt, _exp(ctx, dt))}) * "
                f"{ctx.inp[1]}[i];")
