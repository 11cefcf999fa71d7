"""ai.onnx.ml: Binarizer, ArrayFeatureExtractor, LabelEncoder (numeric keys and values).

- Binarizer: ``y = x > threshold ? 1 : 0`` in x's dtype (compared in double); NaN -> 0.
- ArrayFeatureExtractor: ``z[..., j] = x[..., y[j]]`` (a 1-D x gives [1, len(y)], as
  onnxruntime). Indices count from the end when negative (numpy, as onnx.reference);
  an index outside [-N, N) gives 0 (onnxruntime raises an error).
- LabelEncoder (opset 1-4, numeric only; string keys or values are unsupported): keys and
  values from keys_int64s / keys_floats / keys_tensor and values_*; a duplicated key keeps
  its first value (onnxruntime; onnx.reference's dict keeps the last). The keys are sorted
  at compile time and looked up by binary search; an input equal to no key gives the
  default (default_int64 -1, default_float -0.0, default_tensor). A NaN input matches a
  NaN key when there is one.
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import c_float, c_literal, ctype
from ..emit_c.loops import emit_map, numel
from .base import Op, register

ML = "ai.onnx.ml"
NUMERIC = ("float32", "float64", "int64", "int32", "int16")


@register("Binarizer", since=1, domain=ML)
class Binarizer(Op):
    attrs = {"threshold": 0.0}

    def check(self, node, g):
        dt = g.dtype(node.inputs[0])
        return None if dt.name in ("float32", "float64", "int64", "int32") else \
            f"dtype {dt.name} not supported"

    def emit(self, node, ctx):
        t = c_float(float(self.attr(node, "threshold")), "float64")
        ct = ctx.in_ctype(0)
        ctx(f"/* Binarizer: x > {t} */")
        emit_map(ctx, numel(ctx.in_shape(0)), lambda x: f"({ct})((double){x} > {t} ? 1 : 0)")


@register("ArrayFeatureExtractor", since=1, domain=ML)
class ArrayFeatureExtractor(Op):
    def check(self, node, g):
        dt = g.dtype(node.inputs[0])
        if dt.name not in NUMERIC:
            return f"dtype {dt.name} not supported (numeric only)"
        if g.dtype(node.inputs[1]).name != "int64":
            return "indices must be int64"
        if len(g.shape(node.inputs[0])) == 0:
            return "scalar input"
        return None

    def emit(self, node, ctx):
        xs = ctx.in_shape(0)
        n, rows, k = xs[-1], numel(xs[:-1]), numel(ctx.in_shape(1))
        ct, x, idx, z = ctx.out_ctype(0), ctx.inp[0], ctx.inp[1], ctx.out[0]
        if rows * k == 0:
            ctx(f"(void){z};  /* empty output */")
            return
        ctx(f"/* ArrayFeatureExtractor: z[r, j] = x[r, idx[j]]; indices outside [-{n}, {n}) "
            "give 0 */")
        with ctx.block(f"for (size_t j = 0; j < {k}u; ++j)"):
            ctx(f"int64_t c = {idx}[j];")
            ctx(f"if (c < 0) c += {n};")
            with ctx.block(f"for (size_t r = 0; r < {rows}u; ++r)"):
                ctx(f"{z}[r * {k}u + j] = (c >= 0 && c < {n}) ? {x}[r * {n}u + (size_t)c] "
                    f": ({ct})0;")


def _table(op, node, kdt, vdt):
    """(sorted keys, values, default, nan value or None) as numpy arrays of kdt / vdt."""
    a = node.attrs
    keys = next((a[k] for k in ("keys_int64s", "keys_floats", "keys_tensor") if k in a), None)
    vals = next((a[k] for k in ("values_int64s", "values_floats", "values_tensor") if k in a),
                None)
    if keys is None or vals is None:
        raise ValueError("string keys or values are not supported (numeric only)")
    keys, vals = np.asarray(keys).reshape(-1), np.asarray(vals).reshape(-1)
    if keys.dtype.kind not in "fiu" or vals.dtype.kind not in "fiu":
        raise ValueError("string keys or values are not supported (numeric only)")
    isf = lambda dt: dt.kind == "f"  # noqa: E731
    if isf(keys.dtype) != isf(kdt) or isf(vals.dtype) != isf(vdt):
        raise ValueError(f"keys/values of type {keys.dtype.name}/{vals.dtype.name} for "
                         f"{kdt.name} -> {vdt.name}")
    if len(keys) != len(vals):
        raise ValueError(f"{len(keys)} keys for {len(vals)} values")
    if "default_tensor" in a:
        default = np.asarray(a["default_tensor"]).reshape(-1)[0]
    elif "values_floats" in a:
        default = a.get("default_float", -0.0)
    else:
        default = a.get("default_int64", -1)
    table, nan_val = {}, None
    for kv, vv in zip(keys.tolist(), vals.tolist()):
        if isinstance(kv, float) and kv != kv:
            nan_val = vv if nan_val is None else nan_val
        else:
            table.setdefault(kdt.type(kv).item(), vv)
    ks = sorted(table)
    return (np.array(ks, kdt), np.array([table[k] for k in ks], vdt), default, nan_val)


@register("LabelEncoder", since=1, domain=ML)
class LabelEncoder(Op):
    attrs = {}

    def check(self, node, g):
        kdt, vdt = g.dtype(node.inputs[0]), g.dtype(node.outputs[0])
        for dt in (kdt, vdt):
            if dt.kind in "OSU":
                return "string keys or values are not supported (numeric only)"
            if dt.name not in NUMERIC:
                return f"dtype {dt.name} not supported (numeric keys and values only)"
        try:
            _table(self, node, kdt, vdt)
        except (ValueError, OverflowError) as e:
            return str(e)
        return None

    def emit(self, node, ctx):
        kdt, vdt = ctx.in_dtype(0), ctx.out_dtype(0)
        keys, vals, default, nan_val = _table(self, node, kdt, vdt)
        n = numel(ctx.in_shape(0))
        x, y = ctx.inp[0], ctx.out[0]
        if n == 0:
            ctx(f"(void){y};  /* empty tensor */")
            return
        kct, vct = ctype(kdt), ctype(vdt)
        dflt = c_literal(default, vdt)
        ctx(f"/* LabelEncoder: {len(keys)} sorted keys, binary search; default {dflt} */")
        kv = ctx.const(keys, "keys") if len(keys) else None
        vv = ctx.const(vals, "vals") if len(keys) else None
        with ctx.block(f"for (size_t i = 0; i < {n}u; ++i)"):
            ctx(f"const {kct} v = {x}[i];")
            if kdt.kind == "f":
                nv = dflt if nan_val is None else c_literal(nan_val, vdt)
                with ctx.block("if (v != v)"):
                    ctx(f"{y}[i] = {nv};   /* NaN */")
                    ctx("continue;")
            if kv is None:
                ctx(f"{y}[i] = {dflt};")
            else:
                ctx(f"size_t lo = 0, hi = {len(keys)}u;")
                with ctx.block("while (lo < hi)"):
                    ctx("const size_t mid = lo + (hi - lo) / 2;")
                    ctx(f"if ({kv}[mid] < v) lo = mid + 1; else hi = mid;")
                ctx(f"{y}[i] = (lo < {len(keys)}u && {kv}[lo] == v) ? ({vct}){vv}[lo] : {dflt};")
