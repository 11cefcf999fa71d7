"""Variadic elementwise Sum, Mean, Max, Min: 1..N inputs of one dtype, numpy broadcasting of
all of them (loops.emit_broadcast), one fused loop nest (no intermediate tensors).

- float32/float64: Sum adds left to right in the dtype, Mean is that sum divided by N. Max and
  Min propagate NaN (a NaN in any input gives NaN, as numpy and onnxruntime); -0 and +0
  compare equal (the earlier input wins).
- integers (all widths, signed and unsigned): Max/Min exact; Sum wraps modulo 2^bits
  (computed in uint64_t, no signed overflow); Mean is float-only (the spec's types).
- one input: a copy (broadcast to the output shape).
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import c_literal, ctype
from ..emit_c.loops import emit_broadcast
from .base import Op, register_many
from .cast import cast_expr
from .traits import ELEMENTWISE, ROUNDING_COMMUTES

INT_TYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def _same_shape_inputs(node, g):
    """In-place candidates: inputs with the output's shape (read before overwritten)."""
    out = g.shape(node.outputs[0])
    return [k for k, i in enumerate(node.inputs) if i and g.shape(i) == out]


def _maxmin_helper(ctx, op, dt) -> str:
    ct = ctype(dt)
    sfx = {"f": "f", "i": "i", "u": "u"}[dt.kind] + str(dt.itemsize * 8)
    name = f"aicc_{op.lower()}_{sfx}"
    c = ">" if op == "Max" else "<"
    if dt.kind == "f":
        body, note = f"(a != a || a {c} b) ? a : b", "NaN in either operand gives NaN"
    else:
        body, note = f"a {c} b ? a : b", "exact"
    return ctx.helper(name, f"/* {op} of two {ct} ({note}) */\n"
                      f"static {ct} {name}({ct} a, {ct} b)\n{{\n    return {body};\n}}")


@register_many(["Sum", "Mean", "Max", "Min"], since=1, traits={"Max": {ELEMENTWISE, ROUNDING_COMMUTES}, "Min": {ELEMENTWISE, ROUNDING_COMMUTES}})
class Variadic(Op):
    inplace_inputs = staticmethod(_same_shape_inputs)

    def check(self, node, g):
        ins = [i for i in node.inputs if i]
        if not ins:
            return "no inputs"
        if len(ins) != len(node.inputs):
            return "omitted inputs"
        dts = {g.dtype(i) for i in ins}
        if len(dts) != 1:
            return "inputs of different dtypes"
        dt = dts.pop()
        if dt.name in ("float32", "float64"):
            return None
        if dt.name in INT_TYPES and self.op_type != "Mean":
            return None
        return f"dtype {dt.name} not supported"

    def emit(self, node, ctx):
        dt = ctx.in_dtype(0)
        op = self.op_type
        k = len(node.inputs)
        names = ctx.inp[:k]
        shapes = [ctx.in_shape(i) for i in range(k)]
        ctx(f"/* {op} of {k} input{'s' if k > 1 else ''}, broadcast */")
        if k == 1:
            expr = lambda ix: f"{names[0]}[{ix[0]}]"  # noqa: E731
        elif op in ("Max", "Min"):
            fn = _maxmin_helper(ctx, op, dt)

            def expr(ix):
                e = f"{names[0]}[{ix[0]}]"
                for i in range(1, k):
                    e = f"{fn}({e}, {names[i]}[{ix[i]}])"
                return e
        elif dt.kind == "f":
            def expr(ix):
                e = " + ".join(f"{names[i]}[{ix[i]}]" for i in range(k))
                return f"({e}) / {c_literal(k, dt)}" if op == "Mean" else e
        else:
            def expr(ix):
                e = " + ".join(f"(uint64_t){names[i]}[{ix[i]}]" for i in range(k))
                return cast_expr(ctx, np.dtype(np.uint64), dt, f"({e})")
        emit_broadcast(ctx, ctx.out_shape(0), shapes, expr)
