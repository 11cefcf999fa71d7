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

import numpy as np

from ..ir import Node
from .absorb import fresh_name, std_domain, taken_names
from .fold_batchnorm import bn_affine, opt_const
from .registry import graph_pass


def _ints(node, key, n, default):
    v = node.attrs.get(key)
    return [int(x) for x in v] if v is not None else [default] * n


def _conv(g, n):
    """(x, W, bias or None, pads begin, pads end) of a mergeable Conv, or None."""
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
    r = w.ndim - 2
    if list(w.shape[2:]) != _ints(n, "kernel_shape", r, 0) and "kernel_shape" in n.attrs:
        return None
    pads = _ints(n, "pads", 2 * r, 0)
    return n.inputs[0], w, b, pads[:r], pads[r:]


def _same_frame(g, a, b) -> bool:
    r = g.const(a.inputs[1]).ndim - 2
    return (int(a.attrs.get("group", 1)) == int(b.attrs.get("group", 1))
            and all(_ints(a, k, r, 1) == _ints(b, k, r, 1) for k in ("strides", "dilations"))
            and g.types.get(a.outputs[0]) == g.types.get(b.outputs[0])
            and a.outputs[0] in g.types)


def _place(big, small, off):
    """big + small placed at the spatial offsets off (float64)."""
    out = big.astype(np.float64)
    idx = (slice(None), slice(None)) + tuple(slice(o, o + k) for o, k in zip(off, small.shape[2:]))
    out[idx] += small
    return out


def _identity_tap(g, node, conv, x):
    """The tap index per axis at which ``node`` (a stride-1 Conv of ``x``) reads each output
    position's own input, or None when it has none or the channels do not match."""
    _, w, _, pb, _ = conv
    r = w.ndim - 2
    group = int(node.attrs.get("group", 1))
    if (_ints(node, "strides", r, 1) != [1] * r or x not in g.types
            or node.outputs[0] not in g.types
            or g.types[node.outputs[0]] != g.types[x] or w.shape[0] != w.shape[1] * group):
        return None
    dil = _ints(node, "dilations", r, 1)
    taps = []
    for p, d, k in zip(pb, dil, w.shape[2:]):
        if p % d or not 0 <= p // d < k:
            return None
        taps.append(p // d)
    return taps


def _merge(g, add, prod, cons, outs):
    """(new Conv inputs' arrays, the conv node whose attrs it keeps, nodes removed) or None."""
    if len(add.inputs) != 2 or not std_domain(add) or "aicc_act" in add.attrs:
        return None
    branches = []
    for t in add.inputs:
        p = prod.get(t)
        single = t not in outs and len(cons.get(t, [])) == 1
        conv = _conv(g, p) if p is not None and single else None
        if conv is not None:
            branches.append(("conv", p, conv))
        elif p is not None and single and p.op_type == "BatchNormalization" and std_domain(p) \
                and bn_affine(p, g) is not None:
            branches.append(("bn", p, (p.inputs[0], *bn_affine(p, g))))
        else:
            branches.append(("id", None, (t,)))
    convs = [b for b in branches if b[0] == "conv"]
    if not convs or branches[0][2][0] != branches[1][2][0]:
        return None
    x = branches[0][2][0]
    if len(convs) == 2:
        (_, a, ca), (_, b, cb) = convs
        if not _same_frame(g, a, b):
            return None
        if not all(p >= q for p, q in zip(ca[1].shape[2:], cb[1].shape[2:])):
            (a, ca), (b, cb) = (b, cb), (a, ca)        # a: the bigger kernel
        if ca[1].shape[:2] != cb[1].shape[:2] or ca[1].dtype != cb[1].dtype:
            return None
        off = [p - q for p, q in zip(ca[3], cb[3])]
        if any(o < 0 or o + k > K for o, k, K in zip(off, cb[1].shape[2:], ca[1].shape[2:])):
            return None
        w = _place(ca[1], cb[1].astype(np.float64), off)
        bias = sum((c[2].astype(np.float64) for c in (ca, cb) if c[2] is not None),
                   np.zeros(ca[1].shape[0]))
        return w, bias, a, [a, b]
    (_, a, ca), = convs
    other = next(b for b in branches if b[0] != "conv")
    taps = _identity_tap(g, a, ca, x)
    if taps is None:
        return None
    c = ca[1].shape[0]
    s, t = (other[2][1], other[2][2]) if other[0] == "bn" else (np.ones(c), np.zeros(c))
    if s.shape != (c,):
        return None
    cg = ca[1].shape[1]
    ident = np.zeros(ca[1].shape, np.float64)
    o = np.arange(c)
    ident[(o, o % cg) + tuple(np.full(c, k) for k in taps)] = s
    w = ca[1].astype(np.float64) + ident
    bias = t + (ca[2].astype(np.float64) if ca[2] is not None else 0.0)
    return w, bias, a, [a] + ([other[1]] if other[0] == "bn" else [])


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
            if "kernel_shape" in merged.attrs:
                merged.attrs["kernel_shape"] = list(w.shape[2:])
            drop = {id(n) for n in gone}
            g.nodes = [merged if n is add else n for n in g.nodes if id(n) not in drop]
            break
        else:
            return g
