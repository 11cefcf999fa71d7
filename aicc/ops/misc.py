"""Shape-producing ops that constant folding normally removes: Constant, Shape, Size,
ConstantOfShape, Range. They are registered so support checks pass before folding, and emit
plain C when a node survives (e.g. a folded value above fold-constants' max_bytes).

Shape/Size write the static shape known at compile time. Constant copies its value from the
weights. ConstantOfShape fills with its value (default float 0). Range (start, limit, delta
scalars) accumulates ``v += delta`` like onnxruntime, never stepping past the last element
(no integer overflow).
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import c_literal
from ..emit_c.loops import numel
from ..errors import UnsupportedError
from .base import Op, dtype_reason, register
from .traits import HALF_NATIVE


def _fill_literal(v, dt: np.dtype) -> str:
    if dt.name in ("float16", "bfloat16"):  # stored as its uint16_t bits
        return f"{int(np.asarray(v).astype(dt).view(np.uint16))}u"
    return c_literal(v.item() if hasattr(v, "item") else v, dt)


def _write_values(ctx, arr: np.ndarray) -> None:
    """Write a small compile-time array into out0 (from the weights when large)."""
    n = arr.size
    if n == 0:
        ctx(f"(void){ctx.out[0]};  /* empty tensor */")
    elif n <= 8:
        for i, v in enumerate(arr.reshape(-1)):
            ctx(f"{ctx.out[0]}[{i}] = {_fill_literal(v, arr.dtype)};")
    else:
        k = ctx.const(arr.astype(np.uint8) if arr.dtype == np.bool_ else arr, hint="val")
        ctx(f"memcpy({ctx.out[0]}, {k}, {arr.nbytes}u);")


@register("Constant", since=1)
class Constant(Op):
    traits = frozenset({HALF_NATIVE})
    def emit(self, node, ctx):
        from ..passes.fold_constants import constant_node_value
        v = constant_node_value(node)
        if v is None:
            raise UnsupportedError(f"Constant {node.name}: unsupported value attribute")
        ctx("/* Constant (normally folded away) */")
        _write_values(ctx, np.asarray(v, dtype=ctx.out_dtype(0)))


@register("Shape", since=1)
class Shape(Op):
    traits = frozenset({HALF_NATIVE})
    attrs = {"start": 0, "end": None}

    def emit(self, node, ctx):
        shape = ctx.in_shape(0)
        r = len(shape)
        s = int(self.attr(node, "start"))
        e = self.attr(node, "end")
        s = max(0, min(r, s + r if s < 0 else s))
        e = r if e is None else max(0, min(r, int(e) + r if int(e) < 0 else int(e)))
        ctx("/* Shape: static, written at run time only because it was not folded */")
        _write_values(ctx, np.array(shape[s:e], dtype=np.int64))


@register("Size", since=1)
class Size(Op):
    traits = frozenset({HALF_NATIVE})
    def emit(self, node, ctx):
        ctx("/* Size: static */")
        _write_values(ctx, np.array([numel(ctx.in_shape(0))], dtype=np.int64))


@register("ConstantOfShape", since=9)
class ConstantOfShape(Op):
    traits = frozenset({HALF_NATIVE})
    attrs = {"value": None}

    def check(self, node, g):
        return dtype_reason(g, node.outputs)

    def emit(self, node, ctx):
        v = self.attr(node, "value")
        dt = ctx.out_dtype(0)
        val = 0 if v is None else np.asarray(v).reshape(-1)[0]
        n = numel(ctx.out_shape(0))
        if n == 0:
            ctx(f"(void){ctx.out[0]};  /* empty tensor */")
            return
        ctx("/* ConstantOfShape: fill */")
        with ctx.block(f"for (size_t i = 0; i < {n}u; ++i)"):
            ctx(f"{ctx.out[0]}[i] = {_fill_literal(val, dt)};")


@register("Range", since=11)
class Range(Op):
    def check(self, node, g):
        dt = g.dtype(node.inputs[0])
        if dt.name not in ("float32", "float64", "int16", "int32", "int64"):
            return f"dtype {dt.name} not supported"
        return None

    def emit(self, node, ctx):
        n = numel(ctx.out_shape(0))
        if n == 0:
            ctx(f"(void){ctx.out[0]};  /* empty range */")
            return
        ct = ctx.out_ctype(0)
        ctx("/* Range: out[i] = start + i * delta, accumulated */")
        ctx(f"{ct} v = {ctx.inp[0]}[0];")
        ctx(f"const {ct} d = {ctx.inp[2]}[0];")
        with ctx.block(f"for (size_t i = 0; i < {n}u; ++i)"):
            ctx(f"{ctx.out[0]}[i] = v;")
            ctx(f"if (i + 1u < {n}u) v = ({ct})(v + d);")
