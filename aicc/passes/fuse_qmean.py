"""fuse-qmean: ``QuantizeLinear(Mean(DequantizeLinear(x)))`` over the trailing axes becomes one
``aicc.QMean`` (ops/qmean.py): a QDQ model's global average pooling (GlobalAveragePool, a
ReduceMean over the spatial axes, an AveragePool whose window is the whole plane) summed in
integers instead of dequantized, pooled and quantized again in float.

Contract. A standard-domain QuantizeLinear with a constant scalar float32 scale and zero point
(uint8 / int8 output) whose input is read by it only (not a graph output) and made, through
any Reshape / Flatten / Squeeze / Unsqueeze nodes each read only by the next, by

* GlobalAveragePool,
* ReduceMean whose axes (attribute, or constant input from opset 18; none: all axes) are the
  trailing axes k..rank-1 (negative axes counted from the end), or
* AveragePool whose kernel_shape is the input's spatial dims, no padding (pads 0, auto_pad
  NOTSET or VALID), dilations 1 (one window: strides and ceil_mode do not matter),

of a standard-domain DequantizeLinear of a uint8 / int8 tensor with a constant scalar float32
scale and zero point, the output's element count the product of the leading axes, at most
2^21 values per output. The
DequantizeLinear stays for other readers (eliminate-dead-nodes removes it otherwise).
Values: the float chain's within one quantization step (ops/qmean.py).
"""
from __future__ import annotations

import numpy as np

from ..emit_c.loops import numel
from ..ir import Node
from ..ops.qmean import MAX_N
from .absorb import sole_use, std_domain
from .fuse_qadd import _dq, _q
from .registry import graph_pass

POOLS = ("GlobalAveragePool", "ReduceMean", "AveragePool")
VIEWS = ("Reshape", "Flatten", "Squeeze", "Unsqueeze")     # same values, another shape


def _first_axis(g, pool) -> int | None:
    """The first reduced axis when ``pool`` averages x over its trailing axes, else None."""
    shape = tuple(g.shape(pool.inputs[0]))
    rank = len(shape)
    if pool.op_type == "GlobalAveragePool":
        return 2 if rank > 2 else None
    if pool.op_type == "AveragePool":
        a = pool.attrs
        k = [int(v) for v in a.get("kernel_shape", [])]
        if rank < 3 or k != list(shape[2:]) or any(int(p) for p in a.get("pads", [])) \
                or a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID") \
                or any(int(d) != 1 for d in a.get("dilations", [])):
            return None
        return 2
    if int(pool.attrs.get("noop_with_empty_axes", 0)):
        return None
    axes = pool.attrs.get("axes")
    if axes is None and len(pool.inputs) > 1 and pool.inputs[1]:
        axes = g.const(pool.inputs[1])
        if axes is None:
            return None
    if axes is None or np.asarray(axes).size == 0:
        return 0 if rank else None
    ax = sorted({int(v) % rank for v in np.asarray(axes).reshape(-1)})
    return ax[0] if ax == list(range(ax[0], rank)) else None


@graph_pass("fuse-qmean")
def fuse_qmean(g, *, mode: str = "on"):
    """DQ -> global mean -> Q into aicc.QMean (see the module docstring)."""
    if mode == "off":
        return g
    g = g.copy()
    prod, cons, outs = g.producers(), g.consumers(), set(g.outputs)
    replace, drop = {}, set()
    for q in g.nodes:
        sz = _q(g, q)
        if sz is None:
            continue
        views, t, reader = [], q.inputs[0], q        # reshapes between the mean and q
        while (p := prod.get(t)) is not None and p.op_type in VIEWS and std_domain(p) \
                and sole_use(t, reader, cons, outs):
            views.append(p)
            t, reader = p.inputs[0], p
        pool = prod.get(t)
        if pool is None or pool.op_type not in POOLS or not std_domain(pool) \
                or not sole_use(t, reader, cons, outs):
            continue
        dq = _dq(g, prod, pool.inputs[0])
        y = q.outputs[0]
        if dq is None:
            continue
        axis = _first_axis(g, pool)
        shape = tuple(g.shape(dq[0]))
        if axis is None or numel(shape[:axis]) != numel(tuple(g.shape(y))) \
                or numel(shape[axis:]) > MAX_N:
            continue
        replace[id(q)] = Node("QMean", [*dq, *sz], [y], {"axis": axis}, q.name, "aicc")
        for n in [pool, *views]:
            drop.add(id(n))
            g.types.pop(n.outputs[0], None)
    g.nodes = [replace.get(id(n), n) for n in g.nodes if id(n) not in drop]
    return g
