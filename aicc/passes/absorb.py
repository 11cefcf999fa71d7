"""The walk shared by the fusion passes: a node is absorbed into the Conv/ConvTranspose/Gemm/
MatMul that produces one of its inputs, and the rewritten producer takes over its output.

``absorb_into_producer(g, candidates, rewrite, producer=EPILOGUE)`` visits the nodes in
order. For a node ``n``, ``candidates(n)`` names the inputs it could be absorbed through. An
input ``y`` qualifies when its producer ``p`` is a standard-domain node whose op declares
the trait ``producer`` (EPILOGUE; fuse-binary-activation passes ARITHMETIC: Add/Sub/Mul/Div)
with one output and no fused activation yet, ``y`` is read by ``n`` only and is not a graph output. ``rewrite(p, n, y)``
then returns ``(inputs, attrs, new_constants)`` for ``p`` computing ``n``'s output, or None
to leave both alone. ``g`` is edited in place (pass a copy).
"""
from __future__ import annotations

import numpy as np

from ..ir import Node
from ..ops import has_trait
from ..ops.traits import EPILOGUE



def std_domain(n) -> bool:
    return n.domain in ("", "ai.onnx")


def float_scalar(g, name):
    """The value of a one-element float constant, or None (the chain-matching passes)."""
    c = g.const(name)
    if c is None or np.asarray(c).size != 1 or np.asarray(c).dtype.kind != "f":
        return None
    return float(np.asarray(c).reshape(()))


def sole_consumer(cons, outs, name, op):
    """The single consumer of ``name`` when it is a standard-domain ``op`` node and ``name``
    is not a graph output, else None."""
    users = cons.get(name, [])
    if name in outs or len(users) != 1 or users[0].op_type != op or not std_domain(users[0]):
        return None
    return users[0]


def taken_names(g) -> set:
    names = set(g.constants) | set(g.types) | set(g.inputs) | set(g.outputs)
    for n in g.nodes:
        names.update(n.inputs)
        names.update(n.outputs)
    return names


def fresh_name(taken: set, base: str) -> str:
    name, k = base, 1
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    taken.add(name)
    return name


def sole_use(name, node, cons, outs) -> bool:
    """``name`` is read once, by ``node`` only, and is not a graph output."""
    users = cons.get(name, [])
    return name not in outs and len(users) == 1 and users[0] is node


def absorb_into_producer(g, candidates, rewrite, producer=EPILOGUE, aicc_consumers=False):
    """aicc_consumers: consumers in the aicc domain are candidates too (fuse-activation:
    aicc.Swish, which fuse-silu writes below opset 24)."""
    cons, outs = g.consumers(), set(g.outputs)
    kept, where = [], {}          # where: tensor -> index in kept of its producer
    for n in g.nodes:
        absorbed = False
        ok = std_domain(n) or (aicc_consumers and n.domain == "aicc")
        for y in (candidates(n) if ok else ()):
            k = where.get(y)
            p = kept[k] if k is not None else None
            if (p is None or not std_domain(p) or not has_trait(p, producer)
                    or len(p.outputs) != 1 or "aicc_act" in p.attrs
                    or not sole_use(y, n, cons, outs)):
                continue
            res = rewrite(p, n, y)
            if res is None:
                continue
            ins, attrs, consts = res
            g.constants.update(consts)
            kept[k] = Node(p.op_type, ins, [n.outputs[0]], attrs, p.name, p.domain)
            del where[y]
            where[n.outputs[0]] = k
            g.types.pop(y, None)
            absorbed = True
            break
        if absorbed:
            continue
        for o in n.outputs:
            if o:
                where[o] = len(kept)
        kept.append(n)
    g.nodes = kept
    return g
