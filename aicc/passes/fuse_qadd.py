"""fuse-qadd: ``QuantizeLinear(Add(DequantizeLinear(a), DequantizeLinear(b)))`` becomes one
``aicc.QAdd`` (ops/qadd.py): QDQ models' residual Add (MobileNetV2 int8) in one pass over
bytes instead of three over floats.

Contract. A standard-domain QuantizeLinear with constant scalar float32 scale and zero point
(uint8 / int8 output) whose input is an Add read by it only (not a graph output), both of
whose inputs are standard-domain DequantizeLinear outputs of uint8 / int8 tensors with
constant scalar float32 scales and zero points, the two tensors and the output of one shape.
The DequantizeLinear nodes stay for other readers (eliminate-dead-nodes removes the rest).
Values: the chain's, bit for bit (ops/qadd.py).
"""
from __future__ import annotations

import numpy as np

from ..ir import Node
from .absorb import sole_use, std_domain
from .fuse_qdq import INT8
from .registry import graph_pass


def _scalar_consts(g, n, ks) -> list | None:
    """The names of the node's inputs ks when each is present and a constant scalar, else
    None."""
    out = []
    for k in ks:
        t = n.inputs[k] if k < len(n.inputs) else ""
        c = g.const(t) if t else None
        if c is None or np.asarray(c).size != 1:
            return None
        out.append(t)
    return out


def _dq(g, prod, t):
    """(x, scale, zero point) of a DequantizeLinear producing t, with scalar constants."""
    d = prod.get(t)
    if d is None or d.op_type != "DequantizeLinear" or not std_domain(d) or len(d.inputs) < 3:
        return None
    sz = _scalar_consts(g, d, (1, 2))
    if sz is None or g.dtype(d.inputs[0]).name not in INT8 or \
            np.asarray(g.const(sz[0])).dtype != np.float32:
        return None
    return d.inputs[0], sz[0], sz[1]


def _q(g, q):
    """[scale, zero point] of a standard-domain QuantizeLinear q with scalar float32 constants
    and a uint8 / int8 output, else None."""
    if q.op_type != "QuantizeLinear" or not std_domain(q) or len(q.inputs) < 3:
        return None
    sz = _scalar_consts(g, q, (1, 2))
    if sz is None or g.dtype(q.outputs[0]).name not in INT8 or \
            np.asarray(g.const(sz[0])).dtype != np.float32:
        return None
    return sz


@graph_pass("fuse-qadd")
def fuse_qadd(g, *, mode: str = "on"):
    """DQ -> Add -> Q into aicc.QAdd (see the module docstring)."""
    if mode == "off":
        return g
    g = g.copy()
    prod, cons, outs = g.producers(), g.consumers(), set(g.outputs)
    replace, drop = {}, set()
    for q in g.nodes:
        sz = _q(g, q)
        add = prod.get(q.inputs[0]) if sz else None
        if add is None or add.op_type != "Add" or not std_domain(add) or len(add.inputs) != 2 \
                or not sole_use(q.inputs[0], q, cons, outs) or add.attrs:
            continue
        da, db = (_dq(g, prod, t) for t in add.inputs)
        y = q.outputs[0]
        if da is None or db is None:
            continue
        if not (tuple(g.shape(da[0])) == tuple(g.shape(db[0])) == tuple(g.shape(y))):
            continue
        replace[id(q)] = Node("QAdd", [*da, *db, *sz], [y], {}, q.name, "aicc")
        drop.add(id(add))
        g.types.pop(q.inputs[0], None)
    g.nodes = [replace.get(id(n), n) for n in g.nodes if id(n) not in drop]
    return g
