"""fold-constants: evaluate nodes whose inputs are all constants, and shape queries
(Shape, Size) of statically shaped tensors, so shape subgraphs become constants. Constant
nodes (including ``sparse_value``) become constants; a Shape folds when the dims its
start/end slice reads are static, even if other dims are symbolic."""
from __future__ import annotations

import math

import numpy as np
from onnx import numpy_helper

from ..errors import ModelError
from ..ops import load_all, lookup
from ..ops.reference import run_onnx_reference
from .registry import graph_pass



def constant_node_value(node, max_bytes: int = (1 << 31) - 1):
    """The value of a Constant node; a sparse value's dense form above ``max_bytes`` is
    refused (a few bytes of indices can name a dense tensor of any size)."""
    a = node.attrs
    if "value" in a:
        return np.asarray(a["value"])
    if "value_float" in a:
        return np.array(a["value_float"], dtype=np.float32)
    if "value_floats" in a:
        return np.array(a["value_floats"], dtype=np.float32)
    if "value_int" in a:
        return np.array(a["value_int"], dtype=np.int64)
    if "value_ints" in a:
        return np.array(a["value_ints"], dtype=np.int64)
    if "sparse_value" in a:
        v = a["sparse_value"]
        return v if isinstance(v, np.ndarray) else _sparse_to_dense(v, node.name, max_bytes)
    return None


def _sparse_to_dense(sp, name: str, max_bytes: int) -> np.ndarray:
    """Dense array of a SparseTensorProto (indices [NNZ] linear or [NNZ, rank])."""
    what = f"Constant '{name}': sparse value"
    try:
        values = numpy_helper.to_array(sp.values).reshape(-1)
        idx = numpy_helper.to_array(sp.indices).astype(np.int64)
    except Exception as e:  # noqa: BLE001 - data that does not match its dims or dtype
        raise ModelError(f"{what}: {' '.join(str(e).split())}") from None
    dims = tuple(int(d) for d in sp.dims)
    size = math.prod(dims)
    if any(d < 0 for d in dims):
        raise ModelError(f"{what} has the negative dims {list(dims)}")
    if size * values.itemsize > max_bytes:
        raise ModelError(f"{what} of dims {list(dims)} would take {size * values.itemsize} "
                         f"bytes dense, above fold-constants' max_bytes ({max_bytes})")
    out = np.zeros(size, dtype=values.dtype)
    try:
        if idx.ndim not in (1, 2) or len(idx) != len(values) or (idx < 0).any():
            raise ValueError("expected one index >= 0 per value")
        out[np.ravel_multi_index(tuple(idx.T), dims) if idx.ndim == 2 else idx] = values
    except (ValueError, IndexError) as e:
        raise ModelError(f"{what}: indices {list(idx.shape)} for {len(values)} values in dims "
                         f"{list(dims)}: {e}") from None
    return out.reshape(dims)


def _shape_value(node, g):
    """Value of Shape/Size when the dims it reads are static (a Shape slice may skip
    symbolic dims outside [start, end)), else None."""
    t = g.type_of(node.inputs[0])
    shape = list(t.shape)
    if node.op_type == "Size":
        if not t.is_static:
            return None
        return np.array(int(np.prod(shape, dtype=np.int64)), dtype=np.int64)
    r = len(shape)
    start = int(node.attrs.get("start", 0))
    end = node.attrs.get("end", None)
    start = max(0, min(r, start + r if start < 0 else start))
    end = r if end is None else int(end)
    end = max(0, min(r, end + r if end < 0 else end))
    dims = shape[start:end]
    if not all(isinstance(d, int) for d in dims):
        return None
    return np.array(dims, dtype=np.int64)


def _too_big(g, n, max_bytes: int) -> bool:
    """n's outputs, by their inferred types, exceed max_bytes: not evaluated at all (a
    Range or ConstantOfShape of 3e9 elements would take its 24 GB before the size check)."""
    total = 0
    for o in n.outputs:
        t = g.types.get(o) if o else None
        if t is not None and t.is_static:
            total += max(t.nbytes, 0)
    return total > max_bytes


@graph_pass("fold-constants")
def fold_constants(g, *, max_bytes: int = 256 << 20):
    """Replace every foldable node by constants. A node folds when all its (present)
    inputs are constants and it is deterministic; Shape/Size fold when their input has a
    static shape. Outputs larger than ``max_bytes`` are not folded. Never changes values."""
    load_all()
    g = g.copy()
    kept = []
    for n in g.nodes:
        vals = None
        if n.domain in ("", "ai.onnx"):
            if n.op_type == "Constant":
                v = constant_node_value(n, max_bytes)
                vals = None if v is None else [v]
            elif n.op_type in ("Shape", "Size") and (n.inputs[0] in g.types or n.inputs[0] in g.constants):
                v = _shape_value(n, g)
                vals = None if v is None else [v]
            elif (n.inputs and not _too_big(g, n, max_bytes) and
                  all(i in g.constants for i in n.inputs if i) and
                  not any(isinstance(v, object) and hasattr(v, "SerializeToString")
                          for v in n.attrs.values())):
                op = lookup(n, g.opset)
                try:
                    ins = [g.constants[i] if i else None for i in n.inputs]
                    vals = (op.reference(n, g, ins) if op is not None and op.folds
                            else run_onnx_reference(n, g, ins) if op is None else None)
                except Exception:  # noqa: BLE001 - leave the node for the compiler to judge
                    vals = None
        if vals is not None and sum(np.asarray(v).nbytes for v in vals) <= max_bytes:
            for o, v in zip(n.outputs, vals):
                if o:
                    g.constants[o] = np.asarray(v)
                    g.types.pop(o, None)
            continue
        kept.append(n)
    g.nodes = kept
    return g
