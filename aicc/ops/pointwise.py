"""Small pointwise ops: IsNaN, IsInf, PRelu, Shrink.

- IsNaN (x != x) and IsInf (x == +-Inf, per detect_positive/detect_negative) on float32 /
  float64 give bool (uint8_t 0/1). float16/bfloat16 reach them through upcast-half (exact).
- PRelu: ``x < 0 ? slope * x : x`` with slope broadcast to x's shape (numpy rules; the
  output has x's shape). NaN x stays NaN. Floats compute the product, then select its bits
  or x's by the comparison (math_c.sel): GCC 12 kept a branch per element for the
  conditional product and did not vectorize (1x64x56x56: x86-avx2 896 -> 55 us). Integer x
  (int32/int64 and the others): the product wraps modulo 2^bits (uint64_t arithmetic);
  unsigned x is copied (never negative).
- Shrink: ``x < -lambd ? x + bias : (x > lambd ? x - bias : 0)``, as the ONNX reference and
  onnxruntime: NaN compares false both ways and gives 0. Floats compute in their dtype;
  integers compute in double and convert back truncating and saturating (cast.py rules).
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import c_literal
from ..emit_c.loops import emit_broadcast, emit_map, numel
from .base import Op, register
from .cast import cast_expr

FLOATS = ("float32", "float64")
INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
F64, U64 = np.dtype(np.float64), np.dtype(np.uint64)


def _same_shape_inputs(node, g):
    """In-place candidates: inputs with the output's shape (read before overwritten)."""
    out = g.shape(node.outputs[0])
    return [k for k, i in enumerate(node.inputs) if i and g.shape(i) == out]


def _float_reason(g, name):
    dt = g.dtype(name)
    return None if dt.name in FLOATS else f"dtype {dt.name} not supported (float32/float64)"


@register("IsNaN", since=9)
class IsNaN(Op):
    def check(self, node, g):
        return _float_reason(g, node.inputs[0])

    def emit(self, node, ctx):
        ctx("/* IsNaN: NaN is the only value unequal to itself */")
        emit_map(ctx, numel(ctx.out_shape(0)), lambda x: f"(uint8_t)({x} != {x})")


@register("IsInf", since=10)
class IsInf(Op):
    attrs = {"detect_negative": 1, "detect_positive": 1}

    def check(self, node, g):
        return _float_reason(g, node.inputs[0])

    def emit(self, node, ctx):
        dt = ctx.in_dtype(0)
        pos, neg = int(self.attr(node, "detect_positive")), int(self.attr(node, "detect_negative"))
        terms = []
        if pos:
            terms.append(("{x} == " + c_literal(np.inf, dt)))
        if neg:
            terms.append(("{x} == " + c_literal(-np.inf, dt)))
        ctx(f"/* IsInf (detect_positive={pos}, detect_negative={neg}) */")
        if not terms:
            emit_map(ctx, numel(ctx.out_shape(0)), lambda x: "(uint8_t)0")
            return
        emit_map(ctx, numel(ctx.out_shape(0)),
                 lambda x: "(uint8_t)(" + " || ".join(t.format(x=x) for t in terms) + ")")


@register("PRelu", since=6)
class PRelu(Op):
    inplace_inputs = staticmethod(_same_shape_inputs)

    def check(self, node, g):
        dx, ds = g.dtype(node.inputs[0]), g.dtype(node.inputs[1])
        if dx != ds:
            return "x and slope of different dtypes"
        if dx.name not in FLOATS + INTS:
            return f"dtype {dx.name} not supported"
        xs, ss = tuple(g.shape(node.inputs[0])), tuple(g.shape(node.inputs[1]))
        if len(ss) > len(xs) or any(s not in (1, d) for s, d in zip(ss[::-1], xs[::-1])):
            return f"slope shape {list(ss)} does not broadcast to x shape {list(xs)}"
        return None

    def emit(self, node, ctx):
        dt = ctx.in_dtype(0)
        x, s = ctx.inp[0], ctx.inp[1]
        ctx("/* PRelu: x < 0 ? slope * x : x, slope broadcast to x */")
        if dt.kind == "u":
            expr = lambda ix: f"{x}[{ix[0]}]"  # noqa: E731 - never negative
        elif dt.kind == "i":
            expr = lambda ix: (f"({x}[{ix[0]}] < 0 ? " + cast_expr(  # noqa: E731
                ctx, U64, dt, f"((uint64_t){s}[{ix[1]}] * (uint64_t){x}[{ix[0]}])")
                + f" : {x}[{ix[0]}])")
        else:         # the product, then a bit select of it or x (math_c.sel)
            from ..kernels.vmath.portable import sel
            fn, z = sel(ctx, dt), c_literal(0, dt)
            expr = lambda ix: (  # noqa: E731
                f"{fn}({x}[{ix[0]}] < {z}, {s}[{ix[1]}] * {x}[{ix[0]}], {x}[{ix[0]}])")
        emit_broadcast(ctx, ctx.out_shape(0), [ctx.in_shape(0), ctx.in_shape(1)], expr)


@register("Shrink", since=9)
class Shrink(Op):
    attrs = {"bias": 0.0, "lambd": 0.5}
    inplace_inputs = staticmethod(_same_shape_inputs)

    def check(self, node, g):
        dt = g.dtype(node.inputs[0])
        return None if dt.name in FLOATS + INTS else f"dtype {dt.name} not supported"

    def emit(self, node, ctx):
        dt = ctx.in_dtype(0)
        bias, lambd = float(self.attr(node, "bias")), float(self.attr(node, "lambd"))
        n = numel(ctx.out_shape(0))
        ctx(f"/* Shrink (lambd={lambd!r}, bias={bias!r}); NaN gives 0 */")
        if n == 0:
            ctx(f"(void){ctx.out[0]};  /* empty tensor */")
            return
        if dt.kind == "f":
            L = lambda v: c_literal(v, dt)  # noqa: E731
            val = (f"(x < {L(-lambd)} ? x + {L(bias)} : (x > {L(lambd)} ? x - {L(bias)} "
                   f": {L(0)}))")
            ct = "float" if dt == np.float32 else "double"
        else:
            L = lambda v: c_literal(v, F64)  # noqa: E731
            val = cast_expr(ctx, F64, dt, f"(x < {L(-lambd)} ? x + {L(bias)} : "
                            f"(x > {L(lambd)} ? x - {L(bias)} : 0.0))")
            ct = "double"
        with ctx.block(f"for (size_t i = 0; i < {n}u; ++i)"):
            ctx(f"const {ct} x = ({ct}){ctx.inp[0]}[i];")
            ctx(f"{ctx.out[0]}[i] = {val};")
