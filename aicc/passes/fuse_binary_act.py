"""fuse-binary-activation: fuse a unary activation into the float Add / Sub / Mul / Div that
produces its input (e.g. ResNet's residual ``Add -> Relu``), so both run in one loop.

Contract. ``z = Act(y)`` is removed and the producer ``P`` of ``y`` rewritten to output ``z``
itself (graph outputs keep their names), with the attributes of fuse-activation: ``aicc_act``
= the activation's op type and ``aicc_act_params`` = ``activations.act_params(act, g)`` (spec
defaults filled), when:

* Act is an op declaring the ACTIVATION trait (Relu, Clip, LeakyRelu, Sigmoid,
  HardSigmoid, HardSwish, Tanh), standard domain; a Clip's min/max inputs, if given, are
  constant scalars;
* P is a standard-domain Add, Sub, Mul or Div (one output, broadcasting allowed) with no fused
  activation yet, whose output is float32 or float64 (integer arithmetic is left alone);
* ``y`` has Act as its only consumer and is not a graph output.

Rounding: the fused node computes ``act(round(a op b))``: the binary result is rounded to the
dtype (it is passed to the activation as a C function argument of that type), then the
activation is applied with the same expression as the standalone op (activations.ACT), so
the result equals the unfused graph's bit for bit.

Dynamic shapes: the padding rules (dynamic/padrules.py) treat the fused node as the binary op
(position-wise, rule ``broadcast``). Padding values are never assumed to survive an op (every
op that reads padding gets a PadFill first), so an activation that does not map 0 to 0 (Clip
with min > 0, Sigmoid) is safe there too, as for activations fused into Conv.

Runs after fuse-activation (a Conv -> Relu takes the Relu first; fuse-bias has already turned
Conv -> Add(bias) into the Conv's bias). Anything else is left unchanged.
"""
from __future__ import annotations

from ..ops import has_trait
from ..ops.traits import ACTIVATION, ARITHMETIC
from .absorb import absorb_into_producer
from .fuse_activation import _act_ok, fused_attrs
from .registry import graph_pass

FLOAT_TYPES = ("float32", "float64")


@graph_pass("fuse-binary-activation")
def fuse_binary_activation(g):
    """Fuse Relu/Clip/LeakyRelu/Sigmoid/HardSigmoid/HardSwish/Tanh into a producing float
    Add/Sub/Mul/Div (see the module docstring for the exact conditions)."""
    def rewrite(p, act, y):
        if not _act_ok(act, g) or len(p.inputs) != 2:
            return None
        try:
            dts = {g.dtype(i).name for i in (*p.inputs, y, act.outputs[0])}
        except (KeyError, AttributeError, TypeError):      # untyped / non-tensor
            return None
        if len(dts) != 1 or dts.pop() not in FLOAT_TYPES:
            return None
        return list(p.inputs), fused_attrs(p, act, g), {}

    g = g.copy()
    return absorb_into_producer(
        g, lambda n: [n.inputs[0]] if n.inputs and has_trait(n, ACTIVATION) else [],
        rewrite, producer=ARITHMETIC)
