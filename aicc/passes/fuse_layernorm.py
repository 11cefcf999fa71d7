"""fuse-layernorm: LayerNorm written out as ONNX arithmetic (TorchScript exports below opset 17)
becomes one LayerNormalization node.

Contract. The chain (standard domain)

    m = ReduceMean(x, axes, keepdims=1)
    d = Sub(x, m)
    p = Pow(d, 2)  or  Mul(d, d)
    v = ReduceMean(p, the same axes, keepdims=1)
    a = Add(v, eps)  or  Add(eps, v)
    s = Sqrt(a)
    n = Div(d, s)
    optionally Mul(n, gamma) or Mul(gamma, n), then optionally Add(., beta) or Add(beta, .)

is replaced by ``LayerNormalization(x, gamma, beta, axis=<first normalized axis>,
epsilon=eps)`` at the chain's last node, keeping its output name (standard domain from opset
17, ``aicc.LayerNormalization`` below), when: axes (the attribute, or from opset 18 a constant
second input) are a non-empty contiguous range ending at the last axis, in any spelling (-1 or
rank - 1), the same set for both ReduceMeans; the 2 of Pow and eps are one-element float
constants (2 exactly, eps finite); gamma / beta are constants of x's dtype whose shape, leading
1s dropped, is the normalized trailing shape (its leading 1s dropped too) or holds one value;
every node has one output and, but for the ReduceMeans, no attributes; m, p, v, a, s and the
absorbed products are read by the next node of the chain only, d by exactly the Pow / Mul and
the Div, and none is a graph output; x is a typed non-constant tensor of static shape and dtype
float32 / float64, and the Div and each absorbed Mul / Add have x's shape and dtype.

A Mul / Add after the Div whose other operand does not qualify as gamma / beta stays as it is
(the chain before it still fuses). A missing gamma becomes a [1] ones constant under a fresh
name, and a gamma / beta holding one value but not of shape [1], or of the normalized size but
another shape (leading 1s), a new constant of shape [1] / the normalized shape; a missing beta
is omitted. Removed intermediates leave g.types. Anything else is left unchanged. (One-value
parameters stay one value so that a dynamic-shape bucket may normalize across a padded axis:
rules_compute.layer_norm takes such a LayerNormalization there, as it took the chain.)

Why: the mlp_gelu_ln TorchScript fixture (opset 13) writes its LayerNorm as this 9-node chain:
9 steps, each a pass over the tensor (two of them reductions). One LayerNormalization is one helper
call (normalization.py: two sum16 passes and one write pass per row, vectorized).

Rounding: LayerNormalization computes ``(x - mean) * (1 / sqrt(var + eps)) * scale + bias``
with its sums in sum16's order; the chain divides by the square root and reduces in the
ReduceMean's order. Results differ by rounding (a few ulp of the normalized value).
NaN and Inf: as the chain, a NaN or Inf in a row makes that row NaN (its mean or variance is
NaN); a finite row whose squared deviations overflow gives 0 * gamma + beta in both.

Runs before fuse-binary-activation: an activation joined to the chain's last Add / Mul (an
``aicc_act`` attribute) would hide the chain.
"""
from __future__ import annotations

import numpy as np

from ..ir import Node
from .absorb import float_scalar, fresh_name, sole_consumer, std_domain, taken_names
from .registry import graph_pass


def _plain(n, n_in) -> bool:
    """Standard domain, ``n_in`` inputs, one output, no attributes (no fused activation, no
    opset < 7 broadcast attributes)."""
    return std_domain(n) and len(n.inputs) == n_in and len(n.outputs) == 1 and not n.attrs


def _axes(n, g, rank):
    """The first normalized axis of a keepdims ReduceMean over a trailing contiguous range of
    axes, or None."""
    if not std_domain(n) or len(n.outputs) != 1 or int(n.attrs.get("keepdims", 1)) != 1:
        return None
    if len(n.inputs) == 2 and n.inputs[1]:
        c = g.const(n.inputs[1])
        if c is None or "axes" in n.attrs:
            return None
        axes = np.asarray(c).reshape(-1).tolist()
    elif len(n.inputs) == 1 and "axes" in n.attrs:
        axes = np.asarray(n.attrs["axes"]).reshape(-1).tolist()
    else:
        return None
    if not axes or any(not -rank <= int(a) < rank for a in axes):
        return None
    norm = sorted(int(a) % rank for a in axes)
    if norm != list(range(rank - len(norm), rank)):
        return None
    return norm[0]


def _param(g, name, inner, dt):
    """The constant ``name`` as an array of shape ``inner`` (the normalized shape) or [1] (one
    value) when its shape, leading 1s dropped, is ``inner``'s (leading 1s dropped) or it holds
    one value; else None."""
    c = g.const(name)
    if c is None or np.asarray(c).dtype != dt:
        return None
    c = np.asarray(c)

    def strip(s):
        s = tuple(int(v) for v in s)
        while s and s[0] == 1:
            s = s[1:]
        return s
    if c.size == 1:
        return c.reshape(1)
    return c.reshape(inner) if strip(c.shape) == strip(inner) else None


def _same_type(g, name, tx) -> bool:
    t = g.types.get(name)
    return t is not None and t.dtype == tx.dtype and tuple(t.shape) == tuple(tx.shape)


def _affine(n, g, prod_out, op, inner, tx):
    """(param name, param value) when ``n`` is ``op(prod_out, const)`` in either order with a
    parameter constant and x's result type, else None."""
    if n is None or not _plain(n, 2) or n.inputs.count(prod_out) != 1:
        return None
    other = n.inputs[1] if n.inputs[0] == prod_out else n.inputs[0]
    val = _param(g, other, inner, tx.dtype)
    if val is None or not _same_type(g, n.outputs[0], tx):
        return None
    return other, val


def _chain(r1, g, cons, outs):
    """(x, axis, eps, chain nodes in order, gamma, beta) for the LayerNorm chain starting at
    ReduceMean ``r1``, or None; gamma / beta are (name, value) or None."""
    x = r1.inputs[0] if r1.inputs else ""
    tx = g.types.get(x)
    if not x or g.const(x) is not None or tx is None or not tx.is_static \
            or np.dtype(tx.dtype) not in (np.float32, np.float64):
        return None
    rank = len(tx.shape)
    ax = _axes(r1, g, rank)
    m = r1.outputs[0]
    sub = sole_consumer(cons, outs, m, "Sub")
    if ax is None or sub is None or not _plain(sub, 2) or sub.inputs != [x, m]:
        return None
    d = sub.outputs[0]
    users = cons.get(d, [])
    if d in outs or len(users) not in (2, 3):
        return None
    div = next((u for u in users if u.op_type == "Div"), None)
    sq = next((u for u in users if u.op_type in ("Pow", "Mul")), None)
    if div is None or sq is None or not _plain(div, 2) or not _plain(sq, 2) \
            or any(u is not div and u is not sq for u in users):
        return None
    if sq.op_type == "Pow":
        if len(users) != 2 or sq.inputs[0] != d or float_scalar(g, sq.inputs[1]) != 2.0:
            return None
    elif len(users) != 3 or sq.inputs != [d, d]:
        return None
    r2 = sole_consumer(cons, outs, sq.outputs[0], "ReduceMean")
    if r2 is None or r2.inputs[0] != sq.outputs[0] or _axes(r2, g, rank) != ax:
        return None
    add = sole_consumer(cons, outs, r2.outputs[0], "Add")
    if add is None or not _plain(add, 2) or r2.outputs[0] not in add.inputs:
        return None
    e = add.inputs[1] if add.inputs[0] == r2.outputs[0] else add.inputs[0]
    eps = float_scalar(g, e)
    if eps is None or not np.isfinite(eps):
        return None
    sqrt = sole_consumer(cons, outs, add.outputs[0], "Sqrt")
    if sqrt is None or not _plain(sqrt, 1) or div.inputs != [d, sqrt.outputs[0]] or \
            sole_consumer(cons, outs, sqrt.outputs[0], "Div") is not div:
        return None
    if not _same_type(g, div.outputs[0], tx):
        return None
    nodes = [r1, sub, sq, r2, add, sqrt, div]
    inner = tuple(int(v) for v in tx.shape[ax:])
    last = div.outputs[0]
    mul = sole_consumer(cons, outs, last, "Mul")
    gamma = _affine(mul, g, last, "Mul", inner, tx)
    if gamma is not None:
        nodes.append(mul)
        last = mul.outputs[0]
    badd = sole_consumer(cons, outs, last, "Add")
    beta = _affine(badd, g, last, "Add", inner, tx)
    if beta is not None:
        nodes.append(badd)
    return x, ax, eps, nodes, gamma, beta


def _param_input(g, taken, param, dt, base):
    """The LayerNormalization input for (name, value), or for None a [1] ones constant: the
    constant itself when it already has the value's shape, else a new constant under a fresh
    name."""
    if param is not None and np.asarray(g.const(param[0])).shape == param[1].shape:
        return param[0]
    val = np.ones(1, dt) if param is None else np.ascontiguousarray(param[1], dtype=dt)
    name = fresh_name(taken, base)
    g.constants[name] = val
    return name


@graph_pass("fuse-layernorm")
def fuse_layernorm(g):
    """LayerNorm chains -> one LayerNormalization node (see the module docstring for the
    exact conditions)."""
    g = g.copy()
    cons, outs = g.consumers(), set(g.outputs)
    drop, replace = set(), {}                # node ids; last node id -> its LayerNormalization
    domain = "" if g.opset >= 17 else "aicc"
    taken = None
    for n in list(g.nodes):
        if n.op_type != "ReduceMean" or id(n) in drop:
            continue
        found = _chain(n, g, cons, outs)
        if found is None:
            continue
        x, ax, eps, site, gamma, beta = found
        if taken is None:
            taken = taken_names(g)
        y, dt = site[-1].outputs[0], np.dtype(g.types[x].dtype)
        ins = [x, _param_input(g, taken, gamma, dt, f"{y}_ln_scale")]
        if beta is not None:
            ins.append(_param_input(g, taken, beta, dt, f"{y}_ln_bias"))
        replace[id(site[-1])] = Node("LayerNormalization", ins, [y],
                                     {"axis": ax, "epsilon": eps}, site[-1].name, domain)
        drop.update(id(m) for m in site[:-1])
        for m in site[:-1]:
            g.types.pop(m.outputs[0], None)
    g.nodes = [replace.get(id(n), n) for n in g.nodes if id(n) not in drop]
    return g
