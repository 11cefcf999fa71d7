"""upcast-half: run float16/bfloat16 arithmetic in float32.

Ops that only move data (reshape, transpose, gather, ...) handle half types as raw bits;
every other node that reads or writes a float16/bfloat16 tensor is wrapped: its half inputs
are converted to float32 (constants at compile time, run-time tensors by a Cast node), it
computes in float32, and each half output is rounded back by a Cast node (nearest even).
This is how onnxruntime's CPU kernels treat most half-precision ops (compute in float32,
round each op's result), so results agree within half precision.
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto

from ..ir import Node, TensorType
from .registry import graph_pass

HALF = {"float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16}

# ops that handle half types themselves: data movement (copy by bits) and conversions
HALF_NATIVE = {
    "Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Concat", "Split",
    "Slice", "Gather", "GatherElements", "GatherND", "Expand", "Tile", "Where", "Cast",
    "CastLike", "Shape", "Size", "Constant", "ConstantOfShape", "DepthToSpace",
    "SpaceToDepth", "ReverseSequence", "Trilu", "ScatterND", "ScatterElements", "Scatter",
    "EyeLike", "Compress", "Dropout",
}


def _is_half(g, name) -> bool:
    if not name:
        return False
    if name in g.constants:
        return g.constants[name].dtype.name in HALF
    t = g.types.get(name)
    return t is not None and np.dtype(t.dtype).name in HALF


@graph_pass("upcast-half")
def upcast_half(g):
    """Wrap every non-native node touching float16/bfloat16 tensors in Casts to and from
    float32 (see the module docstring). Graph inputs, outputs and names are unchanged."""
    if not any(_is_half(g, t) for n in g.nodes for t in list(n.inputs) + list(n.outputs)):
        return g
    g = g.copy()
    up = {}            # half tensor -> its float32 twin
    nodes = []
    for n in g.nodes:
        if n.domain not in ("", "ai.onnx", "ai.onnx.preview") or n.op_type in HALF_NATIVE:
            nodes.append(n)
            continue
        ins = [i for i in n.inputs if _is_half(g, i)]
        outs = [o for o in n.outputs if _is_half(g, o)]
        if not ins and not outs:
            nodes.append(n)
            continue
        new_inputs = []
        for i in n.inputs:
            if not _is_half(g, i):
                new_inputs.append(i)
                continue
            if i not in up:
                twin = f"{i}__aicc_f32"
                up[i] = twin
                if i in g.constants:
                    g.constants[twin] = g.constants[i].astype(np.float32)
                else:
                    g.types[twin] = TensorType(np.dtype(np.float32), g.types[i].shape)
                    nodes.append(Node("Cast", [i], [twin], {"to": TensorProto.FLOAT},
                                      f"{n.name}__aicc_up{len(up)}"))
            new_inputs.append(up[i])
        downs = []
        new_outputs = []
        for o in n.outputs:
            if not _is_half(g, o):
                new_outputs.append(o)
                continue
            t = g.types[o]
            tmp = f"{o}__aicc_f32out"
            g.types[tmp] = TensorType(np.dtype(np.float32), t.shape)
            new_outputs.append(tmp)
            downs.append(Node("Cast", [tmp], [o], {"to": HALF[np.dtype(t.dtype).name]},
                              f"{n.name}__aicc_down{len(downs)}"))
        m = Node(n.op_type, new_inputs, new_outputs, dict(n.attrs), n.name, n.domain)
        nodes.append(m)
        nodes.extend(downs)
    g.nodes = nodes
    return g
