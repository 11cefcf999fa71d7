"""How padding along an axis travels through each op (the padding-safety rules).

A tensor axis is *padded* when the bucket's static size is larger than the real length: only
the leading ``Ext`` elements along it are real, the rest are padding whose values do not
matter. A rule gets, per input, ``{axis: Ext}`` for its padded axes and returns a ``Res``:

- ``out``: per output, its padded axes and their extents (position-wise ops carry padding
  through: elementwise maps, MatMul rows, per-position normalization, ...);
- ``fills``: inputs whose padding must first be overwritten with a neutral value so the op
  computes the real region exactly on the bucket's shape: 0 before sums and contractions
  (MatMul over K, convolution and its zero border), -inf before max and softmax, the edge
  value before linear resampling;
- ``scale``: an output to multiply by (bucket count / real count) at run time (means);
- ``seq_lens``: an RNN whose time axis is padded gets ``sequence_lens`` = the real length.

A rule raises ``PadUnsafe`` when padding would change the real region and no run-time size
fixes it (normalization across the padded axis, Concat along it, negative indices, resizes
that depend on the length, ...): the build names the node. Ops without a rule are unsafe.

The rules: rules_compute.py (elementwise, contractions, convolution, pooling, reductions,
normalizations, Resize, RNNs) and rules_layout.py (reshapes and data movement).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ops import lookup


class PadUnsafe(Exception):
    pass


@dataclass
class Res:
    out: list
    fills: list = field(default_factory=list)       # (input index, {axis: Ext}, fill kind)
    scale: tuple | None = None                      # (output index, [Ext...], bucket count)
    seq_lens: tuple | None = None                   # (Ext of the time axis, batch size)
    replace: tuple | None = None                    # (aicc op type, attrs): run that instead


RULES: dict = {}


def rule(*op_types):
    def deco(fn):
        for t in op_types:
            RULES[t] = fn
        return fn
    return deco


def _shape(g, name):
    return tuple(int(d) for d in g.shape(name))


def _attr(node, g, name, default=None):
    if name in node.attrs:
        return node.attrs[name]
    op = lookup(node, g.opset)
    v = op.attrs.get(name) if op is not None else None
    return default if v is None else v


def _all_outputs(node, out):
    return [dict(out) if o else {} for o in node.outputs]


# the rule tables register themselves on import (kept last: they import this module)
from . import rules_compute, rules_layout  # noqa: E402,F401
