"""fuse-silu: ``Mul(x, Sigmoid(x))`` (SiLU / Swish, as PyTorch exports ``F.silu``) becomes one
Swish node.

Contract. ``s = Sigmoid(x)`` and ``y = Mul(x, s)`` (or ``Mul(s, x)``), standard domain, are
replaced by ``Swish(x)`` (alpha 1; standard domain from opset 24, ``aicc.Swish`` before) at the
Mul, keeping its output name, when ``s`` is read by that Mul only and is not a graph output,
x is not a constant, and y has x's shape and float dtype (float32 / float64). Anything else is
left unchanged.

Why: one pass over the tensor instead of two (1 x 64 x 56 x 56 on x86-avx512: 60 -> 35 us).

Rounding: Swish computes ``x * (1 / (1 + exp(-x)))`` (ops/swish.py), the chain's operations
in the chain's order: the same bits as Sigmoid then Mul on every target (exp from exp_simd on
the SIMD targets, the C library's on generic, for both forms). NaN and Inf as the chain
(-Inf * 0 = NaN).
"""
from __future__ import annotations

import numpy as np

from ..ir import Node
from .absorb import sole_use, std_domain
from .registry import graph_pass


@graph_pass("fuse-silu")
def fuse_silu(g):
    """Sigmoid(x) * x -> Swish(x) (see the module docstring for the exact conditions)."""
    g = g.copy()
    prod, cons, outs = g.producers(), g.consumers(), set(g.outputs)
    drop, replace = set(), {}
    domain = "" if g.opset >= 24 else "aicc"
    for m in g.nodes:
        if m.op_type != "Mul" or not std_domain(m) or len(m.inputs) != 2 or len(m.outputs) != 1:
            continue
        for s in m.inputs:
            sig = prod.get(s)
            if sig is None or sig.op_type != "Sigmoid" or not std_domain(sig) or id(sig) in drop:
                continue
            x = sig.inputs[0] if len(sig.inputs) == 1 else None
            others = [i for i in m.inputs if i != s]
            if x is None or others != [x] or g.const(x) is not None \
                    or not sole_use(s, m, cons, outs):
                continue
            y = m.outputs[0]
            tx, ty = g.types.get(x), g.types.get(y)
            if tx is None or ty is None or tx.shape != ty.shape or tx.dtype != ty.dtype \
                    or np.dtype(tx.dtype) not in (np.float32, np.float64):
                continue
            replace[id(m)] = Node("Swish", [x], [y], {}, m.name, domain)
            drop.add(id(sig))
            g.types.pop(s, None)
            break
    g.nodes = [replace.get(id(n), n) for n in g.nodes if id(n) not in drop]
    return g
