"""How padding along an axis travels through each op (the padding-safety rules).

A tensor axis is *padded* when the bucket's static size is larger than the real length: only
the leading ``Ext`` elements along it are real, the rest are padding whose values do not
matter. A rule gets, per input, ``{axis: Ext}`` for its padded axes and returns a ``Res``:

- ``out``: per output, its padded axes and their extents (position-wise ops carry padding
  through: elementwise maps, MatMul rows, per-position normalization, ...);
- ``fills``: inputs whose padding must first be overwritten with a neutral value so the op
  computes the real region exactly on the bucket's shape: 0 before sums and contractions
  (MatMul over K, convolution and its zero border), -inf before max and softmax, the edge
  value before linear resampling;
- ``scale``: an output to multiply by (bucket count / real count) at run time (means);
- ``seq_lens``: an RNN whose time axis is padded gets ``sequence_lens`` = the real length.

A rule raises ``PadUnsafe`` when padding would change the real region and no run-time size
fixes it (normalization across the padded axis, Concat along it, negative indices, resizes
that depend on the length, ...): the build names the node. Ops without a rule are unsafe.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..ops import lookup
from .extent import Compound


class PadUnsafe(Exception):
    pass


@dataclass
class Res:
    out: list
    fills: list = field(default_factory=list)       # (input index, {axis: Ext}, fill kind)
    scale: tuple | None = None                      # (output index, [Ext...], bucket count)
    seq_lens: tuple | None = None                   # (Ext of the time axis, batch size)
    replace: tuple | None = None                    # (aicc op type, attrs): run that instead


RULES: dict = {}


def rule(*op_types):
    def deco(fn):
        for t in op_types:
            RULES[t] = fn
        return fn
    return deco


def _shape(g, name):
    return tuple(int(d) for d in g.shape(name))


def _attr(node, g, name, default=None):
    if name in node.attrs:
        return node.attrs[name]
    op = lookup(node, g.opset)
    v = op.attrs.get(name) if op is not None else None
    return default if v is None else v


def _all_outputs(node, out):
    return [dict(out) if o else {} for o in node.outputs]


# -- position-wise ops ------------------------------------------------------------------
@rule("Relu", "LeakyRelu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Abs", "Neg", "Erf",
      "Gelu", "Elu", "Selu", "Celu", "HardSigmoid", "HardSwish", "Softplus", "Softsign",
      "Mish", "ThresholdedRelu", "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Sin",
      "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
      "Clip", "Cast", "CastLike", "Not", "IsNaN", "IsInf", "Identity", "Dropout", "Shrink",
      "Swish", "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Equal", "Less", "Greater",
      "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Where", "PRelu", "Sum", "Mean",
      "Max", "Min", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot",
      "QuantizeLinear", "DequantizeLinear", "Trilu")
def broadcast(node, g, pads):
    """Elementwise with numpy broadcasting: output axis j is padded when an input's aligned
    axis is padded and not broadcast (Trilu's diagonal is position-based too)."""
    oshape = _shape(g, node.outputs[0])
    r = len(oshape)
    out: dict = {}
    for k, p in enumerate(pads):
        if not p:
            continue
        ish = _shape(g, node.inputs[k])
        off = r - len(ish)
        for ax, e in p.items():
            if off + ax >= 0 and ish[ax] == oshape[off + ax] and ish[ax] > 1:
                out.setdefault(off + ax, e)
    return Res(out=[dict(out) if o and _shape(g, o) == oshape else {} for o in node.outputs])


@rule("BatchNormalization")
def per_channel(node, g, pads):
    if any(pads[1:]):
        raise PadUnsafe("padded scale/bias/mean/var")
    return Res(out=_all_outputs(node, pads[0]))


@rule("Transpose")
def transpose(node, g, pads):
    rank = len(_shape(g, node.inputs[0]))
    perm = _attr(node, g, "perm") or tuple(reversed(range(rank)))
    return Res(out=[{j: pads[0][p] for j, p in enumerate(perm) if p in pads[0]}])


@rule("Reshape", "Flatten", "Squeeze", "Unsqueeze")
def reshape(node, g, pads):
    """An axis keeps its padding when the axes before it hold the same number of elements
    on both sides and it survives whole, merged with axes after it (unpadded: the real part
    is a prefix; padded too: a Compound axis), or split back at a Compound's parts."""
    if any(pads[1:]):
        raise PadUnsafe("padded shape/axes input")
    ish, osh = _shape(g, node.inputs[0]), _shape(g, node.outputs[0])
    out, consumed = {}, set()
    for ax in sorted(pads[0]):
        if ax in consumed:
            continue
        e = pads[0][ax]
        pre = int(np.prod(ish[:ax], dtype=np.int64))
        b, acc = 0, 1
        while b < len(osh) and acc < pre:
            acc *= osh[b]
            b += 1
        while b < len(osh) and osh[b] == 1 and ish[ax] != 1:
            b += 1                       # size-1 axes inserted before it
        if acc != pre or b >= len(osh):
            raise PadUnsafe(f"reshape {list(ish)} -> {list(osh)} moves padded axis {ax}")
        if isinstance(e, Compound):
            out.update(_split_compound(e, osh, b, ish, osh))
            continue
        if osh[b] < ish[ax] and ish[ax] % osh[b] == 0 and e.op == "mul" \
                and e.b % (ish[ax] // osh[b]) == 0:
            # an axis padded as (real) * m split back into [size / m', m']: e.g. the batch of
            # a [batch * heads, ...] tensor when the heads come apart again
            out[b] = e.a * (e.b // (ish[ax] // osh[b]))
            continue
        if osh[b] % ish[ax]:
            raise PadUnsafe(f"reshape {list(ish)} -> {list(osh)} splits padded axis {ax}")
        # the output axis holds the padded axis outermost, times m elements of the axes after
        # it (whole or split): real elements are the prefix e * m; another padded axis among
        # those m makes it a Compound
        inner = osh[b] // ish[ax]
        parts, span, c = [(ish[ax], e)], 1, ax + 1
        while span < inner:
            if c >= len(ish):
                raise PadUnsafe(f"reshape {list(ish)} -> {list(osh)} moves padded axis {ax}")
            take = ish[c] if span * ish[c] <= inner else inner // span
            if take != ish[c] and c in pads[0]:
                raise PadUnsafe(f"reshape splits padded axis {c} inside a merge")
            # (a padded axis of size 1 in this bucket holds only real elements)
            parts.append((take, pads[0].get(c) if take == ish[c] and take > 1 else None))
            consumed.add(c)
            span *= take
            c += 1
        if span != inner:
            raise PadUnsafe(f"reshape {list(ish)} -> {list(osh)} moves padded axis {ax}")
        if any(p is not None for _, p in parts[1:]):
            out[b] = Compound(tuple((s, p) for s, p in _merge_unpadded(parts)))
        else:
            out[b] = e * inner
    return Res(out=[out])


def _merge_unpadded(parts):
    """Adjacent unpadded parts as one (sizes multiply)."""
    res = []
    for s, p in parts:
        if p is None and res and res[-1][1] is None:
            res[-1] = (res[-1][0] * s, None)
        else:
            res.append((s, p))
    return res


def _split_compound(c, osh, b, ish, oshape):
    """Output axes b, b+1, ... taking a Compound's parts back (at part boundaries)."""
    parts, out, j = list(c.parts), {}, b
    while parts:
        if j >= len(osh):
            raise PadUnsafe(f"reshape {list(ish)} -> {list(oshape)} splits a merged padded axis")
        size, acc, k = osh[j], 1, 0
        while k < len(parts) and acc < size:
            acc *= parts[k][0]
            k += 1
        if acc != size:
            raise PadUnsafe(f"reshape {list(ish)} -> {list(oshape)} splits a merged padded "
                            "axis inside one of its parts")
        group = parts[:k]
        padded = [p for p in group if p[1] is not None]
        if len(group) == 1 or not padded:
            if padded:
                out[j] = padded[0][1]
        elif len(padded) == 1 and group[0][1] is not None:
            out[j] = group[0][1] * int(np.prod([s for s, _ in group[1:]], dtype=np.int64))
        else:
            out[j] = Compound(tuple(group))
        parts = parts[k:]
        j += 1
    return out


# -- contractions ---------------------------------------------------------------------------
@rule("MatMul")
def matmul(node, g, pads):
    a, b = _shape(g, node.inputs[0]), _shape(g, node.inputs[1])
    o = _shape(g, node.outputs[0])
    if len(a) < 2 or len(b) < 2:
        raise PadUnsafe("1-D MatMul operand")
    if len(node.inputs) > 2 and node.inputs[2] and pads[2]:
        raise PadUnsafe("padded bias")
    out, fills = {}, []
    ka, kb = len(a) - 1, len(b) - 2
    pa, pb = dict(pads[0]), dict(pads[1])
    kext = pa.get(ka) or pb.get(kb)
    if kext is not None:                           # contraction over padding: zeros add nothing
        if pads[0]:
            fills.append((0, {ka: kext}, "zero"))
        if pads[1]:
            fills.append((1, {kb: kext}, "zero"))
    for ax, e in pa.items():
        if ax == ka:
            continue
        j = len(o) - len(a) + ax
        if ax == len(a) - 2 or a[ax] == o[j]:
            out.setdefault(j, e)
    for ax, e in pb.items():
        if ax == kb:
            continue
        j = len(o) - len(b) + ax
        if ax == len(b) - 1 or b[ax] == o[j]:
            out.setdefault(j, e)
    return Res(out=[out], fills=fills)


@rule("Gemm")
def gemm(node, g, pads):
    ta, tb = int(_attr(node, g, "transA", 0)), int(_attr(node, g, "transB", 0))
    if len(pads) > 2 and pads[2]:
        raise PadUnsafe("padded C input")
    m_ax, ka = (1, 0) if ta else (0, 1)
    kb, n_ax = (1, 0) if tb else (0, 1)
    out, fills = {}, []
    kext = pads[0].get(ka) or pads[1].get(kb)
    if kext is not None:
        if pads[0]:
            fills.append((0, {ka: kext}, "zero"))
        if pads[1]:
            fills.append((1, {kb: kext}, "zero"))
    if m_ax in pads[0]:
        out[0] = pads[0][m_ax]
    if n_ax in pads[1]:
        out[1] = pads[1][n_ax]
    return Res(out=[out], fills=fills)


def _window(node, g, pads, kernel, fill, pad_end_ok=True):
    """Conv/pool geometry over padded spatial axes: the fill value replaces the padding so
    the window sees what the op's own border would give; output extent by the size formula."""
    x = _shape(g, node.inputs[0])
    nsp = len(x) - 2
    strides = list(_attr(node, g, "strides", None) or [1] * nsp)
    dil = list(_attr(node, g, "dilations", None) or [1] * nsp)
    pads_attr = list(_attr(node, g, "pads", None) or [0] * (2 * nsp))
    auto = _attr(node, g, "auto_pad", "NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    ceil = int(_attr(node, g, "ceil_mode", 0) or 0)
    out, sp = {}, {}
    for ax, e in pads[0].items():
        if ax == 0:
            out[0] = e                              # batch: per sample
            continue
        if ax == 1:
            raise PadUnsafe("padded channel axis")
        i = ax - 2
        s, d, k = int(strides[i]), int(dil[i]), int(kernel[i])
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            if s != 1:
                raise PadUnsafe(f"auto_pad {auto} with stride {s}: the border depends on the length")
            total = d * (k - 1)
            pb = total // 2 if auto == "SAME_UPPER" else total - total // 2
            pe = total - pb
        elif auto == "VALID":
            pb = pe = 0
        else:
            pb, pe = int(pads_attr[i]), int(pads_attr[i + nsp])
        if pe and not pad_end_ok:
            raise PadUnsafe("end padding excluded from the average: the divisor depends on the length")
        span = e + (pb + pe - d * (k - 1) - 1)
        out[ax] = (span + (s - 1 if ceil else 0)) // s + 1
        sp[ax] = e
    fills = [(0, sp, fill)] if sp and fill else []
    return out, fills


@rule("Conv")
def conv(node, g, pads):
    if any(pads[1:]):
        raise PadUnsafe("padded weights or bias")
    w = _shape(g, node.inputs[1])
    out, fills = _window(node, g, pads, w[2:], "zero")
    return Res(out=[out], fills=fills)


@rule("ConvTranspose")
def conv_transpose(node, g, pads):
    if any(pads[1:]):
        raise PadUnsafe("padded weights or bias")
    if _attr(node, g, "output_shape", None):
        raise PadUnsafe("explicit output_shape")
    x, w = _shape(g, node.inputs[0]), _shape(g, node.inputs[1])
    nsp = len(x) - 2
    strides = list(_attr(node, g, "strides", None) or [1] * nsp)
    dil = list(_attr(node, g, "dilations", None) or [1] * nsp)
    pads_attr = list(_attr(node, g, "pads", None) or [0] * (2 * nsp))
    opad = list(_attr(node, g, "output_padding", None) or [0] * nsp)
    auto = _attr(node, g, "auto_pad", "NOTSET")
    if auto not in ("NOTSET", b"NOTSET"):
        raise PadUnsafe(f"auto_pad {auto}")
    out, sp = {}, {}
    for ax, e in pads[0].items():
        if ax == 0:
            out[0] = e
            continue
        if ax == 1:
            raise PadUnsafe("padded channel axis")
        i = ax - 2
        k = int(w[2 + i])
        out[ax] = (e - 1) * int(strides[i]) + (int(dil[i]) * (k - 1) + int(opad[i]) + 1
                                               - int(pads_attr[i]) - int(pads_attr[i + nsp]))
        sp[ax] = e
    return Res(out=[out], fills=[(0, sp, "zero")] if sp else [])


@rule("MaxPool", "AveragePool", "LpPool")
def pool(node, g, pads):
    kernel = _attr(node, g, "kernel_shape")
    if node.op_type == "MaxPool":
        fill = "neg_inf"
        if len(node.outputs) > 1 and node.outputs[1]:
            raise PadUnsafe("MaxPool indices depend on the padded shape")
    elif node.op_type == "AveragePool":
        fill = "zero" if int(_attr(node, g, "count_include_pad", 0) or 0) else None
    else:
        fill = "zero"
    out, fills = _window(node, g, pads, kernel, fill, pad_end_ok=fill is not None)
    return Res(out=[out], fills=fills)


# -- reductions over padded axes ---------------------------------------------------------------
_NEUTRAL = {"ReduceSum": "zero", "ReduceMean": "zero", "ReduceL1": "zero", "ReduceL2": "zero",
            "ReduceSumSquare": "zero", "ReduceMax": "neg_inf", "ReduceMin": "pos_inf",
            "ReduceProd": "one", "ReduceLogSumExp": "neg_inf", "ArgMax": "neg_inf",
            "ArgMin": "pos_inf"}


def _reduce(node, g, pads, axes, keep):
    """Reduce ``axes`` of input 0: padded reduced axes get the op's neutral fill (means are
    rescaled by bucket count / real count); other padded axes stay padded in the output."""
    rank = len(_shape(g, node.inputs[0]))
    axes = sorted({a % rank for a in axes}) if rank else []
    red = {a: e for a, e in pads[0].items() if a in axes}
    out = {}
    for ax, e in pads[0].items():
        if ax in axes:
            continue
        out[ax if keep else ax - sum(1 for a in axes if a < ax)] = e
    fills = [(0, red, _NEUTRAL[node.op_type])] if red else []
    scale = None
    if red and node.op_type in ("ReduceMean", "GlobalAveragePool"):
        ish = _shape(g, node.inputs[0])
        scale = (0, list(red.values()), int(np.prod([ish[a] for a in red], dtype=np.int64)))
    return Res(out=[out] + [{}] * (len(node.outputs) - 1), fills=fills, scale=scale)


@rule(*[k for k in _NEUTRAL if k.startswith("Reduce")])
def reduce(node, g, pads):
    if len(node.inputs) > 1 and node.inputs[1]:
        c = g.const(node.inputs[1])
        if c is None:
            raise PadUnsafe("reduction axes given at run time")
        axes = [int(a) for a in np.asarray(c).reshape(-1)]
    else:
        axes = list(_attr(node, g, "axes", None) or [])
    rank = len(_shape(g, node.inputs[0]))
    if not axes:
        if int(_attr(node, g, "noop_with_empty_axes", 0) or 0):
            return Res(out=[dict(pads[0])])
        axes = list(range(rank))
    return _reduce(node, g, pads, axes, int(_attr(node, g, "keepdims", 1)))


@rule("ArgMax", "ArgMin")
def argmax(node, g, pads):
    if int(_attr(node, g, "select_last_index", 0) or 0):
        ax = int(_attr(node, g, "axis", 0))
        if ax % len(_shape(g, node.inputs[0])) in pads[0]:
            raise PadUnsafe("select_last_index over a padded axis")
    return _reduce(node, g, pads, [int(_attr(node, g, "axis", 0))],
                   int(_attr(node, g, "keepdims", 1)))


@rule("GlobalAveragePool", "GlobalMaxPool")
def global_pool(node, g, pads):
    rank = len(_shape(g, node.inputs[0]))
    if 1 in pads[0]:
        raise PadUnsafe("padded channel axis")
    node_kind = "ReduceMean" if node.op_type == "GlobalAveragePool" else "ReduceMax"
    res = _reduce(_as(node, node_kind), g, pads, list(range(2, rank)), 1)
    if node.op_type == "GlobalAveragePool" and res.scale is None and res.fills:
        pass
    return res


def _as(node, op_type):
    from ..ir import Node
    return Node(op_type, node.inputs, node.outputs, dict(node.attrs), node.name, node.domain)


@rule("Softmax", "LogSoftmax")
def softmax(node, g, pads):
    rank = len(_shape(g, node.inputs[0]))
    ax = int(_attr(node, g, "axis", -1 if g.opset >= 13 else 1)) % rank
    red = [a for a in pads[0] if (a >= ax if g.opset < 13 else a == ax)]
    fills = [(0, {a: pads[0][a] for a in red}, "neg_inf")] if red else []
    return Res(out=[dict(pads[0])], fills=fills)


@rule("CumSum")
def cumsum(node, g, pads):
    return Res(out=[dict(pads[0])], fills=[(0, dict(pads[0]), "zero")] if pads[0] else [])


def _norm_dyn(node, g, pads, view, axes, ax_of, scale_strides, bias_strides):
    """Replace a normalization across padded axes by aicc.NormDyn (statistics over the real
    box only). ax_of: view axis -> input axis (None for a split-off axis)."""
    if any(isinstance(e, Compound) for e in pads[0].values()):
        raise PadUnsafe("normalizes across an axis merged from two padded axes")
    if any(o for o in node.outputs[1:]):
        raise PadUnsafe("its mean/inverse-deviation outputs depend on the padded length")
    exts = [pads[0][ax_of[a]].to_json() if ax_of[a] in pads[0] else None for a in axes]
    return Res(out=[dict(pads[0])] + [{}] * (len(node.outputs) - 1), replace=("NormDyn", {
        "view": list(view), "axes": list(axes), "exts": exts,
        "epsilon": float(_attr(node, g, "epsilon", 1e-5)),
        "scale_strides": list(scale_strides), "bias_strides": list(bias_strides)}))


@rule("LayerNormalization", "RMSNormalization", "SkipLayerNormalization")
def layer_norm(node, g, pads):
    """Over other axes: position-wise. Across the padded axis it would need parameters that
    broadcast over it, which these ops' checks do not take: refused."""
    rank = len(_shape(g, node.inputs[0]))
    ax = int(_attr(node, g, "axis", -1)) % rank
    if any(a >= ax for a in pads[0]):
        raise PadUnsafe("normalizes across the padded axis (needs the real count)")
    if any(pads[1:]):
        raise PadUnsafe("padded scale/bias")
    return Res(out=_all_outputs(node, pads[0]))


@rule("InstanceNormalization", "GroupNormalization")
def instance_group_norm(node, g, pads):
    x = _shape(g, node.inputs[0])
    rank = len(x)
    if 1 in pads[0]:
        raise PadUnsafe("padded channel axis")
    if any(pads[1:]):
        raise PadUnsafe("padded scale/bias")
    if not any(a >= 2 for a in pads[0]):
        return Res(out=[dict(pads[0])])
    c = x[1]
    scale_n = int(np.prod(_shape(g, node.inputs[1]), dtype=np.int64))
    bias_n = int(np.prod(_shape(g, node.inputs[2]), dtype=np.int64)) if len(node.inputs) > 2 else 0
    if node.op_type == "InstanceNormalization":
        view, axes, ax_of = x, list(range(2, rank)), list(range(rank))
        ss = [0, 1] + [0] * (rank - 2)
        bs = list(ss)
    else:
        groups = int(_attr(node, g, "num_groups"))
        if groups <= 0 or c % groups:
            raise PadUnsafe("channels not divisible by num_groups")
        view = [x[0], groups, c // groups, *x[2:]]
        axes = list(range(2, rank + 1))
        ax_of = [0, None, None] + list(range(2, rank))

        def per(n):
            return [0, c // groups, 1] + [0] * (rank - 2) if n == c else [0, 1, 0] + [0] * (rank - 2)
        ss, bs = per(scale_n), per(bias_n)
    return _norm_dyn(node, g, pads, view, axes, ax_of, ss, bs)


@rule("LpNormalization", "LRN", "MeanVarianceNormalization")
def norm_across(node, g, pads):
    if node.op_type in ("LRN",) and 1 not in pads[0]:
        return Res(out=[dict(pads[0])])
    if list(pads[0]) == [0] and node.op_type != "MeanVarianceNormalization":
        return Res(out=[dict(pads[0])])
    raise PadUnsafe("normalizes across the padded axis (needs the real count)")


# -- data movement ----------------------------------------------------------------------------
@rule("Concat")
def concat(node, g, pads):
    rank = len(_shape(g, node.outputs[0]))
    ax = int(_attr(node, g, "axis")) % rank
    out = {}
    for p in pads:
        for a, e in p.items():
            if a == ax:
                raise PadUnsafe("concatenates along the padded axis")
            out.setdefault(a, e)
    return Res(out=[out])


@rule("Split")
def split(node, g, pads):
    rank = len(_shape(g, node.inputs[0]))
    ax = int(_attr(node, g, "axis", 0)) % rank
    if ax in pads[0]:
        raise PadUnsafe("splits along the padded axis")
    return Res(out=_all_outputs(node, pads[0]))


@rule("Slice")
def slice_(node, g, pads):
    if any(pads[1:]):
        raise PadUnsafe("padded starts/ends")
    ish = _shape(g, node.inputs[0])
    consts = [g.const(n) if k < len(node.inputs) and n else None
              for k, n in enumerate(node.inputs)]
    out = dict(pads[0])
    if g.opset < 10:
        starts, ends = _attr(node, g, "starts"), _attr(node, g, "ends")
        axes, steps = _attr(node, g, "axes", None), None
    else:
        if any(c is None for c in consts[1:3]) or (len(consts) > 3 and node.inputs[3] and consts[3] is None):
            raise PadUnsafe("slice bounds given at run time")
        starts, ends = consts[1].reshape(-1), consts[2].reshape(-1)
        axes = consts[3].reshape(-1) if len(consts) > 3 and consts[3] is not None else None
        steps = consts[4].reshape(-1) if len(consts) > 4 and consts[4] is not None else None
    axes = list(range(len(starts))) if axes is None else [int(a) % len(ish) for a in axes]
    for i, a in enumerate(axes):
        if a not in pads[0]:
            continue
        st, en = int(starts[i]), int(ends[i])
        step = int(steps[i]) if steps is not None else 1
        if step == 1 and -ish[a] <= st < 0 and en >= ish[a] and len(axes) == 1:
            # x[..., -k:]: the last k real elements, found at run time
            out.pop(a)
            return Res(out=[out], replace=("TakeFromEnd", {
                "axis": a, "ext": pads[0][a].to_json(), "offset": st, "count": -st}))
        if step != 1 or st < 0 or en < ish[a]:
            raise PadUnsafe(f"slices the padded axis {a} [{st}:{en}:{step}] relative to its end")
        out[a] = pads[0][a] - min(st, ish[a])
    return Res(out=[out])


@rule("Gather")
def gather(node, g, pads):
    data, idx = _shape(g, node.inputs[0]), _shape(g, node.inputs[1])
    ax = int(_attr(node, g, "axis", 0)) % len(data)
    out = {}
    if ax in pads[0]:
        c = g.const(node.inputs[1])
        if c is None:
            raise PadUnsafe("gathers along the padded axis with run-time indices")
        c = np.asarray(c)
        if (c < 0).any():
            if c.size != 1:
                raise PadUnsafe("gathers several indices from the end of the padded axis")
            # x[..., -k, ...]: the element k before the real end, found at run time
            out = {(a if a < ax else a + len(idx) - 1): e for a, e in pads[0].items() if a != ax}
            return Res(out=[out], replace=("TakeFromEnd", {
                "axis": ax, "ext": pads[0][ax].to_json(), "offset": int(c.reshape(-1)[0]),
                "count": 1}))
        # constant non-negative indices select real rows for every length that holds them
    for a, e in pads[0].items():
        if a < ax:
            out[a] = e
        elif a > ax:
            out[a + len(idx) - 1] = e
    for a, e in pads[1].items():
        out[ax + a] = e
    return Res(out=[out])


@rule("Expand", "Tile")
def expand(node, g, pads):
    if any(pads[1:]):
        raise PadUnsafe("padded shape/repeats")
    ish, osh = _shape(g, node.inputs[0]), _shape(g, node.outputs[0])
    off = len(osh) - len(ish)
    out = {}
    for a, e in pads[0].items():
        if osh[a + off] != ish[a]:
            raise PadUnsafe(f"repeats the padded axis {a}")
        out[a + off] = e
    return Res(out=[out])


@rule("Pad")
def pad(node, g, pads):
    mode = _attr(node, g, "mode", "constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode != "constant":
        raise PadUnsafe(f"mode {mode} reflects/repeats at the real end")
    ish = _shape(g, node.inputs[0])
    p = _attr(node, g, "pads", None) if g.opset < 11 else g.const(node.inputs[1])
    if p is None:
        raise PadUnsafe("pads given at run time")
    p = [int(v) for v in np.asarray(p).reshape(-1)]
    axes = list(range(len(ish)))
    if len(node.inputs) > 3 and node.inputs[3]:
        c = g.const(node.inputs[3])
        if c is None:
            raise PadUnsafe("axes given at run time")
        axes = [int(a) % len(ish) for a in np.asarray(c).reshape(-1)]
    cval = 0.0
    if g.opset >= 11 and len(node.inputs) > 2 and node.inputs[2]:
        c = g.const(node.inputs[2])
        if c is None:
            raise PadUnsafe("pad value given at run time")
        cval = float(np.asarray(c).reshape(-1)[0]) if np.asarray(c).size else 0.0
    elif g.opset < 11:
        cval = float(_attr(node, g, "value", 0.0))
    n = len(axes)
    out, sp = {}, {}
    for a, e in pads[0].items():
        if a in axes:
            i = axes.index(a)
            out[a] = e + (p[i] + p[i + n])
            sp[a] = e
        else:
            out[a] = e
    return Res(out=[out], fills=[(0, sp, ("value", cval))] if sp else [])


@rule("Resize", "Upsample")
def resize(node, g, pads):
    ish, osh = _shape(g, node.inputs[0]), _shape(g, node.outputs[0])
    mode = _attr(node, g, "mode", "nearest")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    ctm = _attr(node, g, "coordinate_transformation_mode", "half_pixel")
    ctm = ctm.decode() if isinstance(ctm, bytes) else ctm
    out, sp = {}, {}
    for a, e in pads[0].items():
        if osh[a] == ish[a]:
            out[a] = e
            continue
        if osh[a] % ish[a]:
            raise PadUnsafe(f"non-integer scale on padded axis {a}")
        f = osh[a] // ish[a]
        if mode == "nearest" and ctm in ("asymmetric", "half_pixel", "pytorch_half_pixel",
                                         "tf_half_pixel_for_nn"):
            pass
        elif mode == "linear" and ctm in ("half_pixel", "pytorch_half_pixel"):
            sp[a] = e                       # the border clamps to the last real element
        else:
            raise PadUnsafe(f"{mode} resize with {ctm} coordinates depends on the length")
        out[a] = e * f
    return Res(out=[out], fills=[(0, sp, "edge")] if sp else [])


@rule("LSTM", "GRU", "RNN")
def rnn(node, g, pads):
    layout = int(_attr(node, g, "layout", 0) or 0)
    t_ax, b_ax = (1, 0) if layout else (0, 1)
    if any(pads[k] for k in (1, 2, 3) if k < len(pads)):
        raise PadUnsafe("padded weights")
    seq = pads[0].get(t_ax)
    bext = pads[0].get(b_ax)
    if len(node.inputs) > 4 and node.inputs[4] and seq is not None:
        raise PadUnsafe("has its own sequence_lens and a padded time axis")
    for k in range(4, len(pads)):
        for a, e in pads[k].items():
            bext = bext or e
    batch = _shape(g, node.inputs[0])[b_ax]
    outs = []
    for k, o in enumerate(node.outputs):
        d = {}
        if o:
            if k == 0:
                if seq is not None:
                    d[1 if layout else 0] = seq
                if bext is not None:
                    d[0 if layout else 2] = bext
            elif bext is not None:
                d[0 if layout else 1] = bext
        outs.append(d)
    return Res(out=outs, seq_lens=(seq, batch) if seq is not None else None)


@rule("DepthToSpace", "SpaceToDepth")
def depth_space(node, g, pads):
    """Blocks of the spatial axes: real extents scale by the block size (SpaceToDepth needs
    real sizes that are multiples of it, as the op itself does)."""
    b = int(_attr(node, g, "blocksize"))
    out = {}
    for ax, e in pads[0].items():
        if ax == 1:
            raise PadUnsafe("padded channel axis")
        if isinstance(e, Compound):
            raise PadUnsafe("merged padded axis")
        out[ax] = e if ax == 0 else (e * b if node.op_type == "DepthToSpace" else e // b)
    return Res(out=[out])
