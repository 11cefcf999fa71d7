"""fold-constants: evaluate nodes whose inputs are all constants, and shape queries
(Shape, Size) of statically shaped tensors, so shape subgraphs become constants."""
from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from ..ops import load_all, lookup
from ..ops.reference import run_onnx_reference
from .registry import graph_pass

NEVER_FOLD = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
              "Multinomial", "Bernoulli"}


def constant_node_value(node):
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
        return numpy_helper.to_array(v) if not isinstance(v, np.ndarray) else v
    return None


def _shape_value(node, g):
    t = g.type_of(node.inputs[0])
    if not t.is_static:
        return None
    shape = list(t.shape)
    if node.op_type == "Size":
        return np.array(int(np.prod(shape, dtype=np.int64)), dtype=np.int64)
    r = len(shape)
    start = int(node.attrs.get("start", 0))
    end = node.attrs.get("end", None)
    start = max(0, min(r, start + r if start < 0 else start))
    end = r if end is None else int(end)
    end = max(0, min(r, end + r if end < 0 else end))
    return np.array(shape[start:end], dtype=np.int64)


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
                v = constant_node_value(n)
                vals = None if v is None else [v]
            elif n.op_type in ("Shape", "Size") and (n.inputs[0] in g.types or n.inputs[0] in g.constants):
                v = _shape_value(n, g)
                vals = None if v is None else [v]
            elif (n.op_type not in NEVER_FOLD and n.inputs and
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
