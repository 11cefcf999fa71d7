"""Default numpy reference of a node: onnx.reference on a one-node model."""
from __future__ import annotations

import numpy as np
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator


def _attr_proto(k, v):
    if isinstance(v, tuple):
        v = list(v)
    if hasattr(v, "SerializeToString") and hasattr(v, "name"):
        return v  # raw AttributeProto (subgraph)
    if isinstance(v, np.ndarray):
        return helper.make_attribute(k, numpy_helper.from_array(v))
    return helper.make_attribute(k, v)


def node_proto(node):
    n = helper.make_node(node.op_type, node.inputs, node.outputs, name=node.name or None,
                         domain=node.domain or None)
    for k, v in sorted(node.attrs.items()):
        if k.startswith("aicc_"):
            continue
        n.attribute.append(_attr_proto(k, v))
    return n


def run_onnx_reference(node, g, inputs: list) -> list:
    names = [i for i in node.inputs]
    feeds = {n: v for n, v in zip(names, inputs) if n}
    ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.asarray(v).dtype),
                                         list(np.shape(v))) for n, v in feeds.items()]
    outs = [helper.make_value_info(o, helper.TypeProto()) for o in node.outputs if o]
    graph = helper.make_graph([node_proto(node)], "ref", ins, outs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", g.opset)])
    ev = ReferenceEvaluator(model)
    res = ev.run(None, {k: np.asarray(v) for k, v in feeds.items()})
    return [np.asarray(r) for r in res]
