"""fuse-gelu: GELU written out as ONNX arithmetic becomes one Gelu node, the exact (erf) form
and the tanh approximation.

Contract. The erf chain ``a = Div(x, c)`` (c = sqrt 2) or ``Mul(x, c)`` (c = 1 / sqrt 2),
``e = Erf(a)``, ``s = Add(e, 1)``, then ``Mul(Mul(x, s), 0.5)``, ``Mul(Mul(x, 0.5), s)``
or ``Mul(x, Mul(s, 0.5))`` (TorchScript's and the dynamo exporter's exports of ``F.gelu``,
and the usual hand-written forms; either operand order for Add and Mul, standard domain) is
replaced by ``Gelu(x)`` (approximate none; standard domain from opset 20, ``aicc.Gelu``
before) at the chain's last node, keeping its output name. The tanh chain ``c3 = Pow(x, 3)``
(or ``Mul(Mul(x, x), x)``), ``Add(x, Mul(c3, 0.044715))``, ``Mul(., sqrt(2 / pi))``,
``t = Tanh(.)``, ``s = Add(t, 1)`` and the same three products of x, s and 0.5 (GPT-2's
NewGELU, ``F.gelu(approximate="tanh")`` below opset 20) becomes ``Gelu(x, approximate="tanh")``.
Both only when every constant is a one-element float constant within 1e-6 relative of its
value (the Pow exponent: exactly 3, any numeric type), every intermediate is read by the next
node of the chain only and is not a graph output, and the result has x's shape and dtype
(float). Anything else is left unchanged.

Why: five (erf) or eight (tanh) passes over the tensor become one vectorized loop
(kernels/vmath/erf.py, exp.py; transformer encoder of benchmarks/, 128 x 512 GELU on
x86-avx512: 26 -> 20 us per layer; the zoo's GPT-2, 128 x 1024 tanh GELU on x86-avx2:
0.16 -> 0.08 ms per layer, the model 0.99 -> 0.95 of onnxruntime's time).

Rounding: Gelu computes ``(0.5 * x) * (1 + erf(x * (1 / sqrt 2)))`` (activations.ACT).
Multiplying by 0.5 is exact, so the result equals the chain's except that ``x / sqrt 2``
becomes a multiplication by the rounded reciprocal (1 ulp apart for some x) and that the chain
halves after multiplying by ``s`` or halves ``s`` first (different only when ``x * s``
overflows or is subnormal).
The tanh form computes the same function as ``x / (1 + exp(-2 sqrt(2 / pi) * (x + 0.044715 *
x * x * x)))`` (kernels/vmath/act.py ``_gelu``: 0.044715 applied first, the cube as two
multiplications left to right): a few ulp from the chain's value for x >= 0, and closer to the
exact one for x < 0, where the chain's ``1 + tanh(u)`` cancels (relative error up to ~1e-4
there, against 2e-6).
NaN and Inf: as the chain (NaN stays NaN, +Inf -> +Inf, -Inf -> NaN: -Inf * 0 in both).

Runs after fuse-bias, before fuse-activation (neither touches the chain's nodes).
"""
from __future__ import annotations

import math

import numpy as np

from ..ir import Node
from .absorb import float_scalar, sole_consumer, sole_use, std_domain
from .registry import graph_pass

_REL = 1e-6


def _near(v, want) -> bool:
    return v is not None and abs(v - want) <= _REL * abs(want)


def _split(n, g, want, div=False):
    """(the non-constant operand) when ``n`` is a binary node with the constant ``want`` as
    its other operand (the second one for Div), else None."""
    if not std_domain(n) or len(n.inputs) != 2 or len(n.outputs) != 1:
        return None
    a, b = n.inputs
    if _near(float_scalar(g, b), want) and g.const(a) is None:
        return a
    if not div and _near(float_scalar(g, a), want) and g.const(b) is None:
        return b
    return None


def _other(n, name):
    """The operand of a two-input node besides ``name`` (None when both or neither)."""
    if len(n.inputs) != 2 or n.inputs.count(name) != 1:
        return None
    return n.inputs[1] if n.inputs[0] == name else n.inputs[0]


def _erf_chain(e, g, prod, cons, outs):
    """(x, chain nodes in order, result) for the erf GELU around Erf node ``e``, or None."""
    if not std_domain(e) or len(e.inputs) != 1 or len(e.outputs) != 1:
        return None
    pa = prod.get(e.inputs[0])
    if pa is None or not sole_use(e.inputs[0], e, cons, outs):
        return None
    if pa.op_type == "Div":
        x = _split(pa, g, math.sqrt(2.0), div=True)
    elif pa.op_type == "Mul":
        x = _split(pa, g, math.sqrt(0.5))
    else:
        return None
    tail = _half_x_one_plus(e, x, g, prod, cons, outs) if x is not None else None
    return None if tail is None else _typed(x, [pa, e] + tail, g)


def _half_x_one_plus(f, x, g, prod, cons, outs):
    """The nodes after ``f`` (Erf or Tanh) computing 0.5 * x * (1 + f), in order: its Add of
    1, then the product in one of the contract's three forms; or None."""
    add = sole_consumer(cons, outs, f.outputs[0], "Add")
    if add is None or _split(add, g, 1.0) != f.outputs[0]:
        return None
    tail = _product(add.outputs[0], x, g, prod, cons, outs)
    return None if tail is None else [add] + tail


def _product(s, x, g, prod, cons, outs):
    """The nodes of 0.5 * x * s after s, in order, in the three forms of the contract, or
    None."""
    m1 = sole_consumer(cons, outs, s, "Mul")
    if m1 is None or len(m1.outputs) != 1:
        return None
    h = _other(m1, s)
    if _split(m1, g, 0.5) == s:                  # Mul(x, Mul(s, 0.5)): torch.onnx dynamo
        m2 = sole_consumer(cons, outs, m1.outputs[0], "Mul")
        if m2 is None or _other(m2, m1.outputs[0]) != x:
            return None
        return [m1, m2]
    if h == x:                                   # Mul(Mul(x, s), 0.5)
        m2 = sole_consumer(cons, outs, m1.outputs[0], "Mul")
        if m2 is None or _split(m2, g, 0.5) != m1.outputs[0]:
            return None
        return [m1, m2]
    half = prod.get(h)                           # Mul(Mul(x, 0.5), s)
    if half is None or half.op_type != "Mul" or _split(half, g, 0.5) != x \
            or not sole_use(h, m1, cons, outs):
        return None
    return [half, m1]


def _typed(x, nodes, g):
    """(x, nodes, result) when the result is a float tensor of x's shape and dtype."""
    y = nodes[-1].outputs[0]
    if g.types.get(y) is None or g.types.get(x) is None:
        return None
    tx, ty = g.types[x], g.types[y]
    if np.dtype(tx.dtype).kind != "f" or tx.dtype != ty.dtype or tx.shape != ty.shape:
        return None
    return x, nodes, y


def _cube_of(c, g, prod, cons, outs, user):
    """(x, nodes) when ``c`` = Pow(x, 3) or Mul(Mul(x, x), x) (either order) read only by
    ``user``, else None."""
    n = prod.get(c)
    if n is None or not std_domain(n) or not sole_use(c, user, cons, outs) or len(n.inputs) != 2:
        return None
    a, b = n.inputs
    if n.op_type == "Pow":
        e = g.const(b)
        if e is None or np.asarray(e).size != 1 or float(np.asarray(e).reshape(())) != 3.0 \
                or g.const(a) is not None:
            return None
        return a, [n]
    if n.op_type != "Mul":
        return None
    for sq, x in ((a, b), (b, a)):
        m = prod.get(sq)
        if m is not None and m.op_type == "Mul" and std_domain(m) and m.inputs == [x, x] \
                and g.const(x) is None and sole_use(sq, n, cons, outs):
            return x, [m, n]
    return None


def _tanh_chain(t, g, prod, cons, outs):
    """(x, chain nodes in order, result) for the tanh GELU around Tanh node ``t``, or None."""
    if not std_domain(t) or len(t.inputs) != 1 or len(t.outputs) != 1:
        return None
    pb = prod.get(t.inputs[0])
    if pb is None or pb.op_type != "Mul" or not sole_use(t.inputs[0], t, cons, outs):
        return None
    a = _split(pb, g, math.sqrt(2.0 / math.pi))
    pa = prod.get(a) if a is not None else None
    if pa is None or pa.op_type != "Add" or not std_domain(pa) or len(pa.inputs) != 2 \
            or not sole_use(a, pb, cons, outs):
        return None
    found = None
    for q, x in (pa.inputs, pa.inputs[::-1]):
        pq = prod.get(q)
        if pq is None or pq.op_type != "Mul" or not sole_use(q, pa, cons, outs):
            continue
        c3 = _split(pq, g, 0.044715)
        cube = _cube_of(c3, g, prod, cons, outs, pq) if c3 is not None else None
        if cube is not None and cube[0] == x:
            found = x, cube[1] + [pq]
            break
    if found is None:
        return None
    x, head = found
    tail = _half_x_one_plus(t, x, g, prod, cons, outs)
    return None if tail is None else _typed(x, head + [pa, pb, t] + tail, g)


@graph_pass("fuse-gelu")
def fuse_gelu(g):
    """Erf- and tanh-GELU chains -> one Gelu node each (see the module docstring for the
    exact conditions)."""
    g = g.copy()
    prod, cons, outs = g.producers(), g.consumers(), set(g.outputs)
    drop, replace = set(), {}                # node ids; last node id -> its Gelu
    domain = "" if g.opset >= 20 else "aicc"
    for n in g.nodes:
        if n.op_type not in ("Erf", "Tanh") or id(n) in drop:
            continue
        erf = n.op_type == "Erf"
        found = (_erf_chain if erf else _tanh_chain)(n, g, prod, cons, outs)
        if found is None:
            continue
        x, site, y = found
        attrs = {} if erf else {"approximate": "tanh"}
        replace[id(site[-1])] = Node("Gelu", [x], [y], attrs, site[-1].name, domain)
        drop.update(id(m) for m in site[:-1])
        for m in site[:-1]:
            g.types.pop(m.outputs[0], None)
    g.nodes = [replace.get(id(n), n) for n in g.nodes if id(n) not in drop]
    return g
