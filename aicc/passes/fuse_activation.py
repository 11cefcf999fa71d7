"""fuse-activation: fuse a unary activation into the Conv / ConvTranspose / Gemm / MatMul that
produces its input, as an epilogue.

Contract. ``z = Act(y)`` is removed and the producer ``P`` of ``y`` rewritten to output ``z``
itself (graph outputs keep their names), with attributes ``aicc_act`` = the activation's op
type and ``aicc_act_params`` = ``activations.act_params(act, g)`` (spec defaults filled), when:

* Act is a standard-domain Relu, Clip, LeakyRelu, Sigmoid, HardSigmoid, HardSwish or Tanh
  (the activations ``activations.act_numpy`` implements); a Clip's min/max inputs, if given,
  are constant scalars;
* P is a standard-domain Conv, ConvTranspose, Gemm or MatMul (one output) with no fused
  activation yet;
* ``y`` has Act as its only consumer and is not a graph output.

The fused node computes ``act(P(...))`` (after P's bias, including a MatMul aicc bias). Graphs
with fused nodes are no longer standard ONNX (infer-shapes skips them). Anything else is left
unchanged.
"""
from __future__ import annotations

import numpy as np

from ..ir import Node
from ..ops.activations import act_params
from .fold_batchnorm import sole_use, std_domain
from .registry import graph_pass

PRODUCERS = {"Conv", "ConvTranspose", "Gemm", "MatMul"}
FUSABLE = {"Relu", "Clip", "LeakyRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh"}


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


@graph_pass("fuse-activation")
def fuse_activation(g):
    """Fuse Relu/Clip/LeakyRelu/Sigmoid/HardSigmoid/HardSwish/Tanh into a producing
    Conv/ConvTranspose/Gemm/MatMul (see the module docstring for the exact conditions)."""
    g = g.copy()
    cons, outs = g.consumers(), set(g.outputs)    # of the copied nodes
    kept, where = [], {}          # where: tensor -> index in kept of its producer
    for n in g.nodes:
        if n.op_type in FUSABLE and std_domain(n) and n.inputs:
            y = n.inputs[0]
            k = where.get(y)
            p = kept[k] if k is not None else None
            if (p is not None and p.op_type in PRODUCERS and std_domain(p) and len(p.outputs) == 1
                    and "aicc_act" not in p.attrs and sole_use(y, n, cons, outs)
                    and _act_ok(n, g)):
                attrs = dict(p.attrs)     # never edit p.attrs: shared with the input graph
                attrs["aicc_act"] = n.op_type
                attrs["aicc_act_params"] = act_params(n, g)
                kept[k] = Node(p.op_type, list(p.inputs), [n.outputs[0]], attrs, p.name,
                               p.domain)
                del where[y]
                where[n.outputs[0]] = k
                g.types.pop(y, None)
                continue
        for o in n.outputs:
            if o:
                where[o] = len(kept)
        kept.append(n)
    g.nodes = kept
    return g
