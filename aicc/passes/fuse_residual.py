"""fuse-residual: fuse the float Add that sums a Conv's output with a tensor of the same shape
(ResNet's residual ``Conv -> Add(shortcut) [-> Relu]``) into the Conv, as the last term of its
epilogue.

Contract. ``z = Add(y, r)`` or ``Add(r, y)``, carrying a fused activation or not
(fuse-binary-activation puts the block's Relu there), is removed and the Conv
``y = Conv(x, W[, B])`` becomes ``z = Conv(x, W, B or "", r)`` with the attribute
``aicc_residual = 1`` and the Add's ``aicc_act`` / ``aicc_act_params``, when:

* the Conv is a standard-domain Conv with one output and no fused activation (an activation
  between the conv and the Add comes first, the epilogue cannot reorder it);
* ``y`` is read by the Add only and is not a graph output;
* ``y``, ``r`` and ``z`` have one static shape (no broadcasting) and one dtype, float32 or
  float64, and ``r`` is not ``y``.

When both Add inputs qualify (a downsampling block: main branch and projection shortcut),
the first is fused. The fused Conv takes the Add's place in the node order (after the
producer of ``r``; the Conv's own inputs come earlier still).

Result: ``act(round(conv + bias) + r)``: the conv output is rounded to the dtype before
the residual is added, as the separate Add does, so the fused node gives the unfused graph's
values bit for bit on every kernel path (ops/conv.py, kernels/conv/residual.py).

Runs after layout-nhwc and its dead-node sweep: convs that went channel-last (aicc.ConvNHWC,
MatMul) are not fused here, and a dead Transpose no longer counts as a second reader.
Anything else is left unchanged.
"""
from __future__ import annotations

from ..ir import Node
from ..kernels.conv.residual import RESIDUAL
from .absorb import sole_use, std_domain
from .registry import graph_pass

FLOAT_TYPES = ("float32", "float64")


def _static(g, name):
    try:
        t = g.type_of(name)
    except KeyError:
        return None
    return (tuple(int(d) for d in t.shape), t.dtype.name) if t.is_static else None


def _fusable(g, add, y, r, producer, cons, outs) -> bool:
    p = producer.get(y)
    if (p is None or p.op_type != "Conv" or not std_domain(p) or len(p.outputs) != 1
            or "aicc_act" in p.attrs or RESIDUAL in p.attrs or r == y
            or not sole_use(y, add, cons, outs)):
        return False
    ty, tr, tz = (_static(g, n) for n in (y, r, add.outputs[0]))
    return ty is not None and ty == tr == tz and ty[1] in FLOAT_TYPES


@graph_pass("fuse-residual")
def fuse_residual(g):
    """Fuse a same-shape float Add (and its fused activation) into the Conv producing one of
    its inputs (see the module docstring for the exact conditions)."""
    g = g.copy()
    cons, outs = g.consumers(), set(g.outputs)
    producer = {o: n for n in g.nodes for o in n.outputs if o}
    fused, gone = {}, set()          # Add node id -> the fused Conv; ids of the Convs taken
    for add in g.nodes:
        if (add.op_type != "Add" or not std_domain(add) or len(add.inputs) != 2
                or len(add.outputs) != 1):
            continue
        for y, r in (add.inputs, add.inputs[::-1]):
            if not _fusable(g, add, y, r, producer, cons, outs):
                continue
            p = producer[y]
            ins = list(p.inputs) + [""] * (3 - len(p.inputs))
            attrs = {**p.attrs, RESIDUAL: 1}
            for k in ("aicc_act", "aicc_act_params"):
                if k in add.attrs:
                    attrs[k] = add.attrs[k]
            fused[id(add)] = Node("Conv", ins + [r], [add.outputs[0]], attrs, p.name, p.domain)
            gone.add(id(p))
            g.types.pop(y, None)
            break
    g.nodes = [fused.get(id(n), n) for n in g.nodes if id(n) not in gone]
    return g
