"""fuse-post-affine: an inference BatchNormalization after a MatMul's fused activation (a
channel-last pointwise conv, then its activation, then the norm: ConvMixer's blocks) becomes
the last term of the MatMul's epilogue, applied to each output tile while it is in cache
instead of in a pass of its own over the whole tensor.

Contract. ``z = BatchNormalization(y, scale, B, mean, var)`` is removed and the MatMul
``y = MatMul(A, W[, bias])`` becomes ``z = MatMul(A, W, bias or "", mul, add)`` with the
attribute ``aicc_post_affine = 1``, when:

* the BN is a standard-domain inference BN with constant parameters (fold-batchnorm's
  ``bn_affine``) over the last axis: written channel-last by layout-nhwc
  (``aicc_channels_last``), or of a 2-D input [N, C];
* the MatMul is a standard-domain float32 MatMul with a fused activation (without one,
  fold-batchnorm folds the BN into its weights), no post-affine yet, its output of N = C
  columns read by the BN only and not a graph output.

``mul`` and ``add`` are the BN's own constants in float32 (ops/normalization.py
``bn_mul_add``), and ``act(...) * mul + add`` rounds the product and then the sum as the BN
node does: the fused graph gives the unfused one's values bit for bit.

Runs after layout-nhwc (which makes these BNs channel-last) and fuse-pw-dw, so their choices
are unchanged. Anything else is left unchanged.
"""
from __future__ import annotations

import numpy as np

from ..ir import Node
from ..ops.normalization import bn_mul_add
from .absorb import fresh_name, sole_use, std_domain, taken_names
from .fold_batchnorm import bn_affine
from .registry import graph_pass

POST = "aicc_post_affine"


def _last_axis_bn(n, g) -> bool:
    if n.op_type != "BatchNormalization" or not std_domain(n) or bn_affine(n, g) is None:
        return False
    try:
        shape = g.type_of(n.inputs[0]).shape
    except KeyError:
        return False
    return bool(n.attrs.get("aicc_channels_last", 0)) or len(shape) == 2


def _takes(p, y, bn, g, cons, outs) -> bool:
    if (p is None or p.op_type != "MatMul" or not std_domain(p) or len(p.outputs) != 1
            or "aicc_act" not in p.attrs or p.attrs.get(POST) or len(p.inputs) > 3
            or not sole_use(y, bn, cons, outs)):
        return False
    t = g.type_of(y)
    c = np.asarray(g.const(bn.inputs[1])).size
    return t.is_static and t.dtype == np.float32 and len(t.shape) >= 1 and t.shape[-1] == c


@graph_pass("fuse-post-affine")
def fuse_post_affine(g):
    """Fuse an inference BatchNormalization over the last axis into the MatMul (with a fused
    activation) producing its input (see the module docstring for the exact conditions)."""
    g = g.copy()
    cons, outs = g.consumers(), set(g.outputs)
    producer = {o: n for n in g.nodes for o in n.outputs if o}
    taken = taken_names(g)
    fused, gone = {}, set()          # BN node id -> the fused MatMul; ids of the MatMuls taken
    for bn in g.nodes:
        if not _last_axis_bn(bn, g):
            continue
        y = bn.inputs[0]
        p = producer.get(y)
        if id(p) in gone or not _takes(p, y, bn, g, cons, outs):
            continue
        consts = [g.const(i) for i in bn.inputs[1:5]]
        mul, add = bn_mul_add(consts, float(bn.attrs.get("epsilon", 1e-5)), np.float32)
        names = []
        for base, v in ((f"{bn.name or y}_mul", mul), (f"{bn.name or y}_add", add)):
            name = fresh_name(taken, base)
            g.constants[name] = v
            names.append(name)
        ins = list(p.inputs) + [""] * (3 - len(p.inputs)) + names
        fused[id(bn)] = Node(p.op_type, ins, [bn.outputs[0]], {**p.attrs, POST: 1}, p.name,
                             p.domain)
        gone.add(id(p))
        g.types.pop(y, None)
    if not fused:
        return g
    g.nodes = [fused.get(id(n), n) for n in g.nodes if id(n) not in gone]
    return g
