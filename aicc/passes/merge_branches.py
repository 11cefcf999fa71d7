"""merge-branches: parallel conv branches summed by an Add become one Conv (the structural
re-parameterization of RepVGG / MobileOne / FastVIT blocks exported in their training form).

Contract. ``z = Add(u, v)`` is replaced by one Conv ``z = Conv(x, W, B)`` when both operands
are branches over the same tensor ``x``, at least one of them a Conv, and each operand is
read by this Add only and is not a graph output. A branch is:

* ``Conv(x, W, b)``: standard domain, no fused activation (``aicc_act``), explicit pads
  (``auto_pad`` absent or NOTSET), a constant float ``W`` of rank >= 3 and a constant bias
  (or none);
* ``BatchNormalization(x, ...)``, an inference BN (fold-batchnorm's ``bn_affine``):
  ``x * s + t`` per channel;
* ``x`` itself (s = 1, t = 0).

Two Convs merge when they have the same group, strides and dilations, the same output shape
and dtype, and one kernel holds the other at the offset of their begin pads (a 1x1 conv with
pads 0 inside a 3x3 with pads 1: ``off = pad_big - pad_small`` per axis, within the bigger
kernel); the sum's weight is the bigger ``W`` plus the smaller one placed at ``off``, its bias
the sum of the biases (a missing bias is zero), its attributes the bigger conv's. A BN or
identity branch merges into a Conv with stride 1 whose output shape is ``x``'s, whose input
and output channel counts are equal and whose kernel has a tap on each position's own input
(``pad_begin`` inside the kernel on every axis): it adds ``s`` at that tap of each channel's
own input channel (within its group) and ``t`` to the bias. Sums are taken in float64 and
cast once to the weight dtype. The pass repeats until no Add merges (a MobileOne block's
chain of Adds over k conv branches and a BN becomes one Conv).

Rounding: the merged conv multiplies each input by the summed weight, ``(w1 + w2) * x``
(one rounding of the weight sum, then the conv's own) instead of summing the branches'
products; the difference is of the order of the conv's own rounding (tests compare against
onnxruntime on the unmerged graph). NaN / Inf: an Inf or NaN input gives NaN / Inf in the
outputs it reaches either way; weights that are opposite infinities in two branches would
become NaN in the sum, so non-finite weights are left alone.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..ir import Node
from .absorb import fresh_name, std_domain, taken_names
from .fold_batchnorm import bn_affine, opt_const
from .registry import graph_pass


def _ints(node, key, n, default):
    v = node.attrs.get(key)
    return [int(x) for x in v] if v is not None else [default] * n


class _Conv(NamedTuple):
    node: Node
    x: str
    w: np.ndarray
    b: np.ndarray | None      # constant bias, None when absent
    pb: list                  # pads at the start of each spatial axis


def _conv(g, n):
    """The mergeable Conv n as a _Conv, or None."""
    if n.op_type != "Conv" or not std_domain(n) or "aicc_act" in n.attrs or len(n.outputs) != 1:
        return None
    if n.attrs.get("auto_pad", "NOTSET") not in ("NOTSET", b"NOTSET"):
        return None
    w = g.const(n.inputs[1]) if len(n.inputs) > 1 else None
    if w is None or w.dtype.kind != "f" or w.ndim < 3 or not np.all(np.isfinite(w)):
        return None
    has_b, b = opt_const(g, n, 2)
    if has_b and (b is None or b.shape != (w.shape[0],) or not np.all(np.isfinite(b))):
        return None
    kernel = n.attrs.get("kernel_shape")
    if kernel is not None and list(kernel) != list(w.shape[2:]):
        return None
    r = w.ndim - 2
    return _Conv(n, n.inputs[0], w, b, _ints(n, "pads", 2 * r, 0)[:r])


def _branch(g, t, prod, cons, outs):
    """(x, _Conv or None, BN node or None, (s, t) or None) of Add operand t: a mergeable Conv
    of x, an inference BN of x (x * s + t per channel), else t itself. A Conv or BN read by
    the Add only and not a graph output."""
    p = prod.get(t)
    if p is None or t in outs or len(cons.get(t, [])) != 1:
        return t, None, None, None
    conv = _conv(g, p)
    if conv is not None:
        return conv.x, conv, None, None
    st = bn_affine(p, g) if p.op_type == "BatchNormalization" and std_domain(p) else None
    return (p.inputs[0], None, p, st) if st is not None else (t, None, None, None)


def _same_frame(g, a, b) -> bool:
    r = a.w.ndim - 2
    return (int(a.node.attrs.get("group", 1)) == int(b.node.attrs.get("group", 1))
            and all(_ints(a.node, k, r, 1) == _ints(b.node, k, r, 1)
                    for k in ("strides", "dilations"))
            and a.node.outputs[0] in g.types
            and g.types.get(a.node.outputs[0]) == g.types.get(b.node.outputs[0]))


def _merge_convs(g, a, b):
    """(W, bias, the conv kept, nodes removed) of two convs of one input, or None."""
    if not _same_frame(g, a, b):
        return None
    if not all(p >= q for p, q in zip(a.w.shape[2:], b.w.shape[2:])):
        a, b = b, a                                  # a: the bigger kernel
    if a.w.shape[:2] != b.w.shape[:2] or a.w.dtype != b.w.dtype:
        return None
    off = [p - q for p, q in zip(a.pb, b.pb)]
    if any(o < 0 or o + k > K for o, k, K in zip(off, b.w.shape[2:], a.w.shape[2:])):
        return None
    w = a.w.astype(np.float64)
    w[(slice(None), slice(None)) + tuple(slice(o, o + k) for o, k in zip(off, b.w.shape[2:]))] \
        += b.w
    bias = sum((c.b.astype(np.float64) for c in (a, b) if c.b is not None),
               np.zeros(a.w.shape[0]))
    return w, bias, a.node, [a.node, b.node]


def _merge_identity(g, a, x, bn, st):
    """(W, bias, the conv kept, nodes removed) of conv a plus x * s + t (st; None: x
    itself), x a's input, or None when a has no tap on each position's own input (a
    stride-1 conv whose output has x's type, equal channel counts per group; the tap at
    pads_begin / dilation on every axis)."""
    r = a.w.ndim - 2
    c, cg = a.w.shape[0], a.w.shape[1]
    node = a.node
    if (_ints(node, "strides", r, 1) != [1] * r or x not in g.types
            or g.types.get(node.outputs[0]) != g.types[x]
            or c != cg * int(node.attrs.get("group", 1))):
        return None
    taps = []
    for p, d, k in zip(a.pb, _ints(node, "dilations", r, 1), a.w.shape[2:]):
        if p % d or not 0 <= p // d < k:
            return None
        taps.append(p // d)
    s, t = st if st is not None else (np.ones(c), np.zeros(c))
    if s.shape != (c,):
        return None
    w = a.w.astype(np.float64)
    o = np.arange(c)
    w[(o, o % cg) + tuple(np.full(c, k) for k in taps)] += s
    bias = t + (a.b.astype(np.float64) if a.b is not None else 0.0)
    return w, bias, node, [node] + ([bn] if bn is not None else [])


def _merge(g, add, prod, cons, outs):
    """(W, bias, the conv whose attributes the merged one keeps, nodes removed) or None."""
    if len(add.inputs) != 2 or not std_domain(add) or "aicc_act" in add.attrs:
        return None
    (xa, ca, na, sa), (xb, cb, nb, sb) = (_branch(g, t, prod, cons, outs) for t in add.inputs)
    if xa != xb or (ca is None and cb is None):
        return None
    if ca is not None and cb is not None:
        return _merge_convs(g, ca, cb)
    return _merge_identity(g, ca, xa, nb, sb) if ca is not None else \
        _merge_identity(g, cb, xa, na, sa)


@graph_pass("merge-branches")
def merge_branches(g):
    """Add(branch, branch) over one input -> one Conv (see the module docstring)."""
    g = g.copy()
    taken = taken_names(g)
    while True:
        prod, cons, outs = g.producers(), g.consumers(), set(g.outputs)
        for add in g.nodes:
            if add.op_type != "Add":
                continue
            res = _merge(g, add, prod, cons, outs)
            if res is None:
                continue
            w, bias, keep, gone = res
            dt = g.const(keep.inputs[1]).dtype
            wn = fresh_name(taken, f"{keep.inputs[1]}_merged")
            bn = fresh_name(taken, f"{keep.name or keep.outputs[0]}_bias_merged")
            g.constants[wn], g.constants[bn] = w.astype(dt), np.asarray(bias, np.float64).astype(dt)
            merged = Node("Conv", [keep.inputs[0], wn, bn], list(add.outputs), dict(keep.attrs),
                          name=keep.name, domain=keep.domain)
            for n in gone:
                g.types.pop(n.outputs[0], None)
            drop = {id(n) for n in gone}
            g.nodes = [merged if n is add else n for n in g.nodes if id(n) not in drop]
            break
        else:
            return g
