"""fuse-activation: fuse a unary activation into the Conv / ConvTranspose / Gemm / MatMul that
produces its input, as an epilogue.

Contract. ``z = Act(y)`` is removed and the producer ``P`` of ``y`` rewritten to output ``z``
itself (graph outputs keep their names), with attributes ``aicc_act`` = the activation's op
type and ``aicc_act_params`` = ``activations.act_params(act, g)`` (spec defaults filled), when:

* Act is a standard-domain Relu, Clip, LeakyRelu, Sigmoid, HardSigmoid, HardSwish, Tanh or
  Swish, or an aicc.Swish (the ops with the ACTIVATION trait; kernels/vmath/act.py's
  ``act_numpy`` implements them); a Clip's min/max inputs, if given, are constant scalars;
* P is a standard-domain Conv, ConvTranspose, Gemm or MatMul (one output) with no fused
  activation yet;
* ``y`` has Act as its only consumer and is not a graph output.

The fused node computes ``act(P(...))`` (after P's bias, including a MatMul aicc bias). Graphs
with fused nodes are no longer standard ONNX (infer-shapes skips them). Anything else is left
unchanged.
"""
from __future__ import annotations

import numpy as np

from ..kernels.vmath.act import act_params
from ..ops import has_trait
from ..ops.traits import ACTIVATION
from .absorb import absorb_into_producer
from .registry import graph_pass


def _act_ok(act, g) -> bool:
    if not act.inputs or len(act.outputs) != 1:
        return False
    if act.op_type == "Clip":
        for i in act.inputs[1:3]:
            if not i:
                continue
            v = g.const(i)
            if v is None or np.asarray(v).size != 1:
                return False
    elif len(act.inputs) != 1:
        return False
    return True


def fused_attrs(p, act, g) -> dict:
    """p's attributes with the activation ``act`` fused in (a new dict: p.attrs is shared
    with the input graph)."""
    attrs = dict(p.attrs)
    attrs["aicc_act"] = act.op_type
    attrs["aicc_act_params"] = act_params(act, g)
    return attrs


@graph_pass("fuse-activation")
def fuse_activation(g):
    """Fuse Relu/Clip/LeakyRelu/Sigmoid/HardSigmoid/HardSwish/Tanh/Swish into a producing
    Conv/ConvTranspose/Gemm/MatMul (see the module docstring for the exact conditions)."""
    def rewrite(p, act, y):
        if not _act_ok(act, g):
            return None
        return list(p.inputs), fused_attrs(p, act, g), {}

    g = g.copy()
    return absorb_into_producer(
        g, lambda n: [n.inputs[0]] if n.inputs and has_trait(n, ACTIVATION) else [], rewrite,
        aicc_consumers=True)
