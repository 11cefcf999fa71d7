"""Backward shape propagation through shape-preserving unary ops.

onnx shape inference cannot type the output of a node whose shape depends on a run-time
value (e.g. ReduceSum with a run-time ``axes`` input): that tensor keeps only its element
type. When such a tensor feeds a chain of elementwise unary ops (Cast, CastLike, Log, Sqrt,
...) that ends in a tensor of known static shape (typically a graph output, whose shape the
model declares), every tensor in the chain has that shape. This fills those shapes in; the
element types come from onnx (value_info with elem_type but no shape).
"""
from __future__ import annotations

from ..ir import TensorType

# ops whose output 0 has exactly the shape of input 0
SAME_SHAPE = {
    "Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "Cast", "CastLike", "Ceil",
    "Celu", "Cos", "Cosh", "Elu", "Erf", "Exp", "Floor", "Gelu", "HardSigmoid", "HardSwish",
    "Identity", "IsInf", "IsNaN", "LeakyRelu", "Log", "Mish", "Neg", "Not", "Reciprocal",
    "Relu", "Round", "Selu", "Sigmoid", "Sign", "Sin", "Sinh", "Softplus", "Softsign", "Sqrt",
    "Tan", "Tanh", "ThresholdedRelu",
}


def backprop_shapes(nodes, types: dict, elem_types: dict) -> None:
    """nodes: objects with op_type/domain/inputs/outputs in topological order; types: name
    -> TensorType (updated in place); elem_types: name -> numpy dtype of untyped tensors."""
    changed = True
    while changed:
        changed = False
        for n in reversed(nodes):
            if n.op_type not in SAME_SHAPE or (n.domain or "") not in ("", "ai.onnx"):
                continue
            if not n.inputs or not n.outputs:
                continue
            x, y = n.inputs[0], n.outputs[0]
            if not x or x in types or x not in elem_types or y not in types:
                continue
            t = types[y]
            if not t.is_static:
                continue
            types[x] = TensorType(elem_types[x], tuple(t.shape))
            changed = True
