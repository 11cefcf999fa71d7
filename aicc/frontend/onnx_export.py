"""Graph -> ONNX, for re-running onnx shape inference and for the reference oracle.
Fused attributes (``aicc_*``) are dropped, so export only graphs of standard ops."""
from __future__ import annotations

import numpy as np
from onnx import helper, numpy_helper

from ..ops.reference import node_proto
from .infer import shape_only


def _vi(name, t):
    dims = [d if isinstance(d, int) else (d if not str(d).startswith("?") else None)
            for d in t.shape]
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(t.dtype)),
                                         dims)


def to_onnx(g, with_types: bool = True, light: bool = False):
    """The graph as an ONNX model. light: constants whose values shape inference never reads
    (frontend/infer.py shape_only) as typed graph inputs instead of data."""
    big = {k for k, v in g.constants.items() if light and shape_only(
        np.asarray(v).size, np.asarray(v).dtype in (np.int32, np.int64))}
    inits = [numpy_helper.from_array(np.asarray(v), name=k) for k, v in sorted(g.constants.items())
             if k not in big]
    ins = [_vi(i, g.types[i]) for i in g.inputs] + [_vi(k, g.type_of(k)) for k in sorted(big)]
    outs = [_vi(o, g.type_of(o)) if (o in g.types or o in g.constants)
            else helper.make_value_info(o, helper.TypeProto()) for o in g.outputs]
    vis = []
    if with_types:
        io = set(g.inputs) | set(g.outputs)
        vis = [_vi(k, t) for k, t in sorted(g.types.items()) if k not in io and t.is_static]
    graph = helper.make_graph([node_proto(n) for n in g.nodes], g.name or "model", ins, outs,
                              initializer=inits, value_info=vis)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", g.opset)])
