"""fold-batchnorm: fold an inference BatchNormalization into the Conv / ConvTranspose / Gemm
(or MatMul) that produces its input.

Contract. A node ``y = BatchNormalization(x, scale, B, mean, var)`` is removed, and the
producer ``P`` of ``x`` rewritten to compute ``y`` directly (it takes over the name ``y``, so
graph outputs keep their names), when all of these hold:

* the BN is an inference BN: ``training_mode`` is 0, ``spatial`` is 1 (opset < 9), its
  optional outputs (running mean/var) are unused, and scale, B, mean, var are constant 1-D
  tensors of the channel count C, with ``scale / sqrt(var + epsilon)`` finite;
* ``x`` has this BN as its only consumer and is not a graph output;
* ``P`` is a standard-domain Conv, ConvTranspose, Gemm or MatMul without a fused activation
  (``aicc_act``), with a constant float weight (and a constant bias/C if it has one):
  - Conv: weight ``[C, C_in/group, k...]``, scaled along axis 0;
  - ConvTranspose: weight ``[C_in, C/group, k...]``; output channel ``o`` of group ``gi``
    is ``gi * C/group + j``, so the weight is scaled per (group, j);
  - Gemm: scaled per output column (rows of B when ``transB``); ``alpha`` stays, the new
    C is ``beta * s * C + t`` (``t`` when there was no C) and ``beta`` becomes 1. When
    ``beta`` is 0 and C holds non-finite values the node is left alone (0 * Inf);
  - MatMul: only a 2-D output with a constant 2-D B ``[K, C]``: B is scaled per column and
    the aicc bias input (3rd input, added on the last axis) is created or updated.

With ``s = scale / sqrt(var + eps)`` and ``t = B - mean * s`` the new weight is ``W * s`` and
the new bias ``bias * s + t`` (a bias is created when there was none). Arithmetic is done in
float64 and cast to the weight dtype. New constants get fresh names; existing arrays are never
modified (constants may be shared); the old ones become dead (eliminate-dead-nodes drops them).
Anything else leaves the graph unchanged.
"""
from __future__ import annotations

import numpy as np

from .absorb import absorb_into_producer, fresh_name, taken_names
from .registry import graph_pass

def bn_affine(bn, g):
    """(s, t) float64 [C] with ``BN(x) = x * s + t`` per channel, or None when the BN is not a
    foldable inference BN."""
    if len(bn.inputs) < 5 or any(o for o in bn.outputs[1:]):
        return None
    if int(bn.attrs.get("training_mode", 0)) or int(bn.attrs.get("spatial", 1)) != 1:
        return None
    stats = [g.const(i) for i in bn.inputs[1:5]]
    if any(v is None for v in stats):
        return None
    stats = [np.asarray(v) for v in stats]
    c = stats[0].size
    if any(v.ndim != 1 or v.size != c or v.dtype.kind != "f" for v in stats) or c == 0:
        return None
    scale, b, mean, var = (v.astype(np.float64) for v in stats)
    eps = float(bn.attrs.get("epsilon", 1e-5))
    with np.errstate(all="ignore"):
        s = scale / np.sqrt(var + eps)
        t = b - mean * s
    if not (np.all(np.isfinite(s)) and np.all(np.isfinite(t))):
        return None
    return s, t


def opt_const(g, node, k):
    """(present, value) of optional input k: present=False when omitted."""
    if len(node.inputs) <= k or not node.inputs[k]:
        return False, None
    return True, g.const(node.inputs[k])


def _fold_conv(p, g, s, t, add_const):
    w = g.const(p.inputs[1])
    if w is None or w.dtype.kind != "f" or w.ndim < 3:
        return None
    c = s.size
    if p.op_type == "Conv":
        if w.shape[0] != c:
            return None
        w2 = w.astype(np.float64) * s.reshape((c,) + (1,) * (w.ndim - 1))
    else:  # ConvTranspose: [C_in, C_out/group, k...]
        group = int(p.attrs.get("group", 1))
        cin, cog = w.shape[0], w.shape[1]
        if group < 1 or cin % group or group * cog != c:
            return None
        rest = tuple(w.shape[2:])
        sg = s.reshape((group, 1, cog) + (1,) * len(rest))
        w2 = (w.astype(np.float64).reshape((group, cin // group, cog) + rest) * sg).reshape(w.shape)
    has_b, b = opt_const(g, p, 2)
    if has_b and (b is None or b.shape != (c,)):
        return None
    b0 = b.astype(np.float64) if has_b else np.zeros(c)
    b2 = b0 * s + t
    wn = add_const(f"{p.inputs[1]}_bnfold", w2.astype(w.dtype))
    bn_ = add_const(f"{p.inputs[2] if has_b else p.name + '_bias'}_bnfold", b2.astype(w.dtype))
    return [p.inputs[0], wn, bn_], dict(p.attrs)


def _fold_gemm(p, g, s, t, add_const):
    b = g.const(p.inputs[1])
    if b is None or b.dtype.kind != "f" or b.ndim != 2:
        return None
    trans_b = int(p.attrs.get("transB", 0))
    n = b.shape[0] if trans_b else b.shape[1]
    if n != s.size:
        return None
    beta = float(p.attrs.get("beta", 1.0))
    has_c, cval = opt_const(g, p, 2)
    if has_c and cval is None:
        return None
    b2 = b.astype(np.float64) * (s[:, None] if trans_b else s[None, :])
    if has_c and beta != 0:
        c2 = beta * cval.astype(np.float64) * s + t
    elif has_c and not np.all(np.isfinite(cval)):
        return None              # 0 * Inf/NaN: keep the original behaviour
    else:
        c2 = t
    bn = add_const(f"{p.inputs[1]}_bnfold", b2.astype(b.dtype))
    cn = add_const(f"{p.inputs[2] if has_c else p.name + '_C'}_bnfold", c2.astype(b.dtype))
    attrs = dict(p.attrs)
    attrs["beta"] = 1.0
    return [p.inputs[0], bn, cn], attrs


def _fold_matmul(p, g, s, t, add_const):
    b = g.const(p.inputs[1])
    y = p.outputs[0]
    if b is None or b.dtype.kind != "f" or b.ndim != 2 or b.shape[1] != s.size:
        return None
    if y not in g.types or len(g.types[y].shape) != 2:
        return None
    has_bias, bias = opt_const(g, p, 2)
    if has_bias and (bias is None or bias.shape != (s.size,)):
        return None
    b0 = bias.astype(np.float64) if has_bias else np.zeros(s.size)
    bn = add_const(f"{p.inputs[1]}_bnfold", (b.astype(np.float64) * s[None, :]).astype(b.dtype))
    cn = add_const(f"{p.inputs[2] if has_bias else p.name + '_bias'}_bnfold",
                   (b0 * s + t).astype(b.dtype))
    return [p.inputs[0], bn, cn], dict(p.attrs)


_FOLDERS = {"Conv": _fold_conv, "ConvTranspose": _fold_conv, "Gemm": _fold_gemm,
            "MatMul": _fold_matmul}


@graph_pass("fold-batchnorm")
def fold_batchnorm(g):
    """Fold inference BatchNormalization into a producing Conv/ConvTranspose/Gemm/MatMul with
    constant weights (see the module docstring for the exact conditions)."""
    taken = taken_names(g)

    def rewrite(p, bn, x):
        st = bn_affine(bn, g)
        if st is None:
            return None
        new: dict = {}

        def add_const(base, value):
            name = fresh_name(taken, base)
            new[name] = value
            return name

        res = _FOLDERS[p.op_type](p, g, *st, add_const)
        return None if res is None else (*res, new)

    g = g.copy()
    return absorb_into_producer(
        g, lambda n: [n.inputs[0]] if n.op_type == "BatchNormalization" and n.inputs else [],
        rewrite)
