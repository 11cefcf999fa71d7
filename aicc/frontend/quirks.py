"""Work-arounds for onnx library quirks, applied to a model before shape inference.

``bind_function_defaults``: onnx's shape inference expands function-defined ops with their
function body, but does not bind an attribute's schema default when the body refers to it
(``Constant <value_ints = @axes>``) and the node leaves it unset: the Constant then has no
value and strict inference fails (MeanVarianceNormalization with its default axes, onnx
1.23). Writing the default explicitly on such nodes is a no-op semantically.
"""
from __future__ import annotations

import onnx
from onnx import helper

# ops known to hit the quirk (a function body referring to a defaulted attribute)
FUNCTION_DEFAULT_OPS = {"MeanVarianceNormalization"}


def bind_function_defaults(model: onnx.ModelProto, opset: int) -> None:
    """Write the schema default of every unset attribute of the FUNCTION_DEFAULT_OPS nodes
    of the main graph (in place)."""
    for node in model.graph.node:
        if node.op_type not in FUNCTION_DEFAULT_OPS or node.domain not in ("", "ai.onnx"):
            continue
        try:
            schema = onnx.defs.get_schema(node.op_type, opset, "")
        except Exception:  # noqa: BLE001 - unknown op/version: leave it to the checker
            continue
        have = {a.name for a in node.attribute}
        for name, a in schema.attributes.items():
            if name not in have and a.default_value.name:
                d = helper.get_attribute_value(a.default_value)
                node.attribute.append(helper.make_attribute(name, d))
