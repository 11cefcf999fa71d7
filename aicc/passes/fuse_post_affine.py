"""fuse-post-affine: an inference BatchNormalization after a MatMul's or a channel-last
depthwise conv's fused activation (ConvMixer's blocks: pointwise conv, activation, norm;
depthwise conv, activation, norm, residual Add) becomes the last terms of that node's
epilogue, applied to each output tile while it is in cache instead of in passes of their own
over the whole tensor.

Contract. ``z = BatchNormalization(y, scale, B, mean, var)`` is removed and the producer
``y = MatMul(A, W[, bias])`` / ``aicc.ConvNHWC(X, W[, bias])`` becomes ``z = P(..., bias or
"", mul, add)`` with the attribute ``aicc_post_affine = 1``, when:

* the BN is a standard-domain inference BN with constant parameters (fold-batchnorm's
  ``bn_affine``) over the last axis: written channel-last by layout-nhwc
  (``aicc_channels_last``), or of a 2-D input [N, C];
* the producer is a standard-domain float32 MatMul, or a depthwise aicc.ConvNHWC, with a
  fused activation (without one, fold-batchnorm folds the BN into its weights), no
  post-affine yet, its output of C channels (columns) read by the BN only and not a graph
  output.

Then a same-shape Add of such a ConvNHWC's output (read by the Add only) and another tensor
r, without a fused activation, is removed and r becomes the conv's input 5: ``act(conv) *
mul + add + r``, in the Add's place in the node order.

``mul`` and ``add`` are the BN's own constants in float32 (ops/normalization.py
``bn_mul_add``), and ``act(...) * mul + add (+ r)`` rounds the product, the sum and the
residual sum as the BN and Add nodes do: the fused graph gives the unfused one's values bit
for bit.

Runs after layout-nhwc (which makes these BNs channel-last) and fuse-pw-dw, so their choices
are unchanged. Anything else is left unchanged.
"""
from __future__ import annotations

import numpy as np

from ..ir import Node
from ..ops.normalization import POST_AFFINE as POST, bn_mul_add
from .absorb import fresh_name, sole_use, std_domain, taken_names
from .fold_batchnorm import bn_affine
from .registry import graph_pass


def _last_axis_bn(n, g) -> bool:
    if n.op_type != "BatchNormalization" or not std_domain(n) or bn_affine(n, g) is None:
        return False
    try:
        shape = g.type_of(n.inputs[0]).shape
    except KeyError:
        return False
    return bool(n.attrs.get("aicc_channels_last", 0)) or len(shape) == 2


def _depthwise_nhwc(p, g) -> bool:
    """An aicc.ConvNHWC depthwise conv (group = channels) on a channel-last input."""
    if p.op_type != "ConvNHWC" or p.domain != "aicc" or p.attrs.get("aicc_nchw_in"):
        return False
    c = g.type_of(p.inputs[0]).shape[-1]
    return int(p.attrs.get("group", 1)) == c > 1 and g.type_of(p.outputs[0]).shape[-1] == c


def _takes(p, y, bn, g, cons, outs) -> bool:
    if (p is None or not (p.op_type == "MatMul" and std_domain(p) or _depthwise_nhwc(p, g))
            or len(p.outputs) != 1 or "aicc_act" not in p.attrs or p.attrs.get(POST)
            or len(p.inputs) > 3 or not sole_use(y, bn, cons, outs)):
        return False
    t = g.type_of(y)
    c = np.asarray(g.const(bn.inputs[1])).size
    return t.is_static and t.dtype == np.float32 and len(t.shape) >= 1 and t.shape[-1] == c


@graph_pass("fuse-post-affine")
def fuse_post_affine(g):
    """Fuse an inference BatchNormalization over the last axis into the MatMul or depthwise
    ConvNHWC (with a fused activation) producing its input, then a residual Add into such a
    ConvNHWC (see the module docstring for the exact conditions)."""
    g = g.copy()
    cons, outs = g.consumers(), set(g.outputs)
    producer = {o: n for n in g.nodes for o in n.outputs if o}
    taken = taken_names(g)
    fused, gone = {}, set()          # BN node id -> the fused node; ids of the producers taken
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
    return _residuals(g)


def _residuals(g):
    """A same-shape Add of a post-affine depthwise ConvNHWC's output (read by the Add only)
    and another tensor becomes the conv's input 5, the last term of its epilogue, in the
    Add's place (ConvMixer's ``x + BN(act(dwconv(x)))``)."""
    cons, outs = g.consumers(), set(g.outputs)
    producer = {o: n for n in g.nodes for o in n.outputs if o}
    fused, gone = {}, set()
    for add in g.nodes:
        if (add.op_type != "Add" or not std_domain(add) or len(add.inputs) != 2
                or "aicc_act" in add.attrs):
            continue
        for y, r in (add.inputs, add.inputs[::-1]):
            p = producer.get(y)
            if (p is None or id(p) in gone or not p.attrs.get(POST) or p.op_type != "ConvNHWC"
                    or len(p.inputs) > 5 or r == y or not sole_use(y, add, cons, outs)):
                continue
            ty, tr, tz = (g.type_of(n) for n in (y, r, add.outputs[0]))
            if not (ty.is_static and ty.shape == tr.shape == tz.shape
                    and ty.dtype == tr.dtype == tz.dtype):
                continue
            fused[id(add)] = Node(p.op_type, list(p.inputs) + [r], [add.outputs[0]],
                                  dict(p.attrs), p.name, p.domain)
            gone.add(id(p))
            g.types.pop(y, None)
            break
    if fused:
        g.nodes = [fused.get(id(n), n) for n in g.nodes if id(n) not in gone]
    return g
