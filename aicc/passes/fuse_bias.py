"""fuse-bias: fold ``Add(P(...), const)`` into the bias of the producer P.

Contract. ``z = Add(y, c)`` (or ``Add(c, y)``) with ``c`` a constant is removed and the producer
``P`` of ``y`` rewritten to output ``z`` itself (graph outputs keep their names) when ``y`` has
this Add as its only consumer, is not a graph output, P (standard domain, one output) carries no
fused activation (``aicc_act``: the bias would land after it), ``c`` has P's dtype, and adding
``c`` changes neither the shape nor the dtype of ``y`` (``c`` has at most y's rank and, aligned
right, is 1 on every axis but the one named below). Then:

* Conv / ConvTranspose (output ``[N, C, ...]``): ``c`` is a scalar or per-channel (``[C,1,1]``,
  ``[1,C,1,1]``, ``[1]`` ...): the bias input becomes ``bias + c`` (created when absent; an
  existing bias must be a constant ``[C]``).
* MatMul (``B`` of rank >= 2, constant or not; output ``[..., N]``): ``c`` is a scalar or
  ``[N]``, ``[1,N]``, ``[1,1,N]`` ...: MatMul gets (or updates) its aicc 3rd input, a bias
  ``[N]`` added on the last axis.
* Gemm (output ``[M, N]``): ``c`` is any constant broadcastable to ``[M, N]`` without growing
  it; the new C is ``beta * C + c`` (``c`` when absent) and ``beta`` becomes 1.

New constants get fresh names; existing arrays are never modified. Anything else is left alone.
Folding the bias changes float rounding only (``(y + b) + c`` vs ``y + (b + c)``).
"""
from __future__ import annotations

import numpy as np

from .absorb import absorb_into_producer, fresh_name, taken_names
from .fold_batchnorm import opt_const
from .registry import graph_pass


def _other_operand(add, y):
    if len(add.inputs) != 2:
        return None
    a, b = add.inputs
    if a == y and b != y:
        return b
    if b == y and a != y:
        return a
    return None


def _channel_vector(c, shape, axis, n):
    """``c`` as a vector [n] when it broadcasts against ``shape`` only along ``axis`` (an index
    into shape, n its size), else None."""
    r = len(shape)
    if c.ndim > r or not isinstance(n, int):
        return None
    padded = (1,) * (r - c.ndim) + tuple(c.shape)
    if any(d != 1 for k, d in enumerate(padded) if k != axis) or padded[axis] not in (1, n):
        return None
    return np.broadcast_to(c.reshape(padded[axis]), (n,))


def _conv_channels(p, g):
    shape = g.shape(p.outputs[0])
    if len(shape) >= 2 and isinstance(shape[1], int):
        return shape[1]
    try:
        ws = g.shape(p.inputs[1])
    except KeyError:
        return None
    if p.op_type == "Conv":
        return ws[0] if isinstance(ws[0], int) else None
    k = ws[1]
    return int(p.attrs.get("group", 1)) * k if isinstance(k, int) else None


def _fuse(p, c, g, add_const):
    """(inputs, attrs) of P with ``+ c`` folded in, or None."""
    y = p.outputs[0]
    if y not in g.types:
        return None
    shape, dt = g.types[y].shape, np.dtype(g.types[y].dtype)
    if c.dtype != dt:
        return None
    if p.op_type in ("Conv", "ConvTranspose"):
        n = _conv_channels(p, g)
        vec = _channel_vector(c, shape, 1, n) if len(shape) >= 3 else None
        k = 2
    elif p.op_type == "MatMul":
        try:
            b_rank = len(g.shape(p.inputs[1]))
        except KeyError:
            return None
        vec = _channel_vector(c, shape, len(shape) - 1, shape[-1]) if shape and b_rank >= 2 \
            else None
        k = 2
    else:  # Gemm
        return _fuse_gemm(p, c, g, shape, add_const)
    if vec is None:
        return None
    has_b, b = opt_const(g, p, k)
    if has_b and (b is None or b.shape != vec.shape or b.dtype != dt):
        return None
    bias = (b + vec).astype(dt) if has_b else np.array(vec, dtype=dt)
    name = add_const(f"{p.inputs[k] if has_b else p.name + '_bias'}_fused", bias)
    ins = list(p.inputs[:k]) + [""] * (k - len(p.inputs[:k])) + [name] + list(p.inputs[k + 1:])
    return ins, dict(p.attrs)


def _fuse_gemm(p, c, g, shape, add_const):
    if len(shape) != 2 or c.ndim > 2:
        return None
    padded = (1,) * (2 - c.ndim) + tuple(c.shape)
    if any(d != 1 and d != s for d, s in zip(padded, shape)):
        return None
    has_c, cval = opt_const(g, p, 2)
    if has_c and (cval is None or cval.dtype != c.dtype):
        return None
    beta = float(p.attrs.get("beta", 1.0))
    if has_c and beta != 1 and c.dtype.kind != "f":
        return None
    if has_c and beta == 0 and not np.all(np.isfinite(cval)):
        return None
    if has_c and beta != 0:
        new = (np.asarray(beta, dtype=c.dtype) * cval + c) if beta != 1 else cval + c
    else:
        new = c
    name = add_const(f"{p.inputs[2] if has_c else p.name + '_C'}_fused",
                     np.array(new, dtype=c.dtype))
    attrs = dict(p.attrs)
    attrs["beta"] = 1.0
    return [p.inputs[0], p.inputs[1], name], attrs


@graph_pass("fuse-bias")
def fuse_bias(g):
    """Fold a constant Add after Conv/ConvTranspose/MatMul/Gemm into the producer's bias (see
    the module docstring for the exact conditions)."""
    taken = taken_names(g)

    def rewrite(p, add, y):
        other = _other_operand(add, y)
        c = g.const(other) if other else None
        if c is None:
            return None
        new: dict = {}

        def add_const(base, value):
            name = fresh_name(taken, base)
            new[name] = value
            return name

        res = _fuse(p, np.asarray(c), g, add_const)
        return None if res is None else (*res, new)

    g = g.copy()
    return absorb_into_producer(
        g, lambda n: list(dict.fromkeys(n.inputs)) if n.op_type == "Add" else [], rewrite)
