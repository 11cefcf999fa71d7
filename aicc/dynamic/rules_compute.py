"""Padding rules of the computing ops: elementwise, BatchNormalization, MatMul/Gemm, convolution
and pooling, reductions, Softmax, CumSum, normalizations, Resize, RNNs (see padrules.py)."""
from __future__ import annotations

import numpy as np

from .extent import Compound
from .padrules import PadUnsafe, Res, _all_outputs, _attr, _shape, rule


# -- position-wise ops ------------------------------------------------------------------
@rule("Relu", "LeakyRelu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Abs", "Neg", "Erf",
      "Gelu", "Elu", "Selu", "Celu", "HardSigmoid", "HardSwish", "Softplus", "Softsign",
      "Mish", "ThresholdedRelu", "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Sin",
      "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
      "Clip", "Cast", "CastLike", "Not", "IsNaN", "IsInf", "Identity", "Dropout", "Shrink",
      "Swish", "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Equal", "Less", "Greater",
      "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Where", "PRelu", "Sum", "Mean",
      "Max", "Min", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot",
      "QuantizeLinear", "DequantizeLinear", "Trilu", "aicc.Gelu", "aicc.Swish")
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
    """A fused residual (input 3, passes/fuse_residual.py) is added position by position, as
    the Add it replaces: its padded axes are padded in the output too (broadcast's rule)."""
    if any(pads[1:3]):
        raise PadUnsafe("padded weights or bias")
    w = _shape(g, node.inputs[1])
    out, fills = _window(node, g, pads, w[2:], "zero")
    for ax, e in (pads[3] if len(pads) > 3 else {}).items():
        out.setdefault(ax, e)
    return Res(out=[out], fills=fills)


@rule("aicc.ConvNHWC")
def conv_nhwc(node, g, pads):
    """The channel-last conv of layout-nhwc: Conv's rule on the NCHW view of its axes (N, H,
    W, C -> N, C, H, W), the results mapped back (with aicc_nchw_in the input is NCHW
    already: only the output is mapped)."""
    if any(pads[1:]):
        raise PadUnsafe("padded weights or bias")
    to_nchw = {0: 0, 1: 2, 2: 3, 3: 1}
    back = {v: k for k, v in to_nchw.items()}
    xin = {a: a for a in range(4)} if node.attrs.get("aicc_nchw_in") else to_nchw
    xback = {v: k for k, v in xin.items()}
    w = _shape(g, node.inputs[1])
    out, fills = _window(node, g, [{xin[a]: e for a, e in pads[0].items()}], w[2:], "zero")
    return Res(out=[{back[a]: e for a, e in out.items()}],
               fills=[(i, {xback[a]: e for a, e in axes.items()}, f) for i, axes, f in fills])


@rule("aicc.PwDwNHWC", "aicc.QConvNHWC")
def per_sample_nhwc(node, g, pads):
    """The channel-last fused pointwise + depthwise conv and the int8 channel-last conv: each
    sample on its own, so a padded batch axis (0) is a padded output batch; padding along
    the rows, columns or channels of these fused steps is not analysed (refused). The int8
    conv's fused residual (input 8) is added sample by sample: its batch may be padded too."""
    resid = 8 if node.op_type == "QConvNHWC" else None
    if any(p for k, p in enumerate(pads[1:], 1) if k != resid):
        raise PadUnsafe("padded weights, bias or quantization parameters")
    out = dict(pads[0])
    for k in (0, resid):
        if k is not None and k < len(pads):
            if set(pads[k]) - {0}:
                raise PadUnsafe("padded spatial or channel axis of a fused channel-last conv")
            out.update(pads[k])
    return Res(out=[out] + [{} for _ in node.outputs[1:]])


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


@rule("LayerNormalization", "RMSNormalization", "SkipLayerNormalization",
      "aicc.LayerNormalization")
def layer_norm(node, g, pads):
    """Over other axes: position-wise. Across the padded axis it needs parameters that
    broadcast over it: a LayerNormalization whose scale / bias hold one value each (pass
    fuse-layernorm writes a [1] scale for the unscaled ReduceMean chain, which padded fine)
    becomes aicc.NormDyn (statistics over the real elements); other parameters are refused
    (the ops' checks take no other broadcast)."""
    x = _shape(g, node.inputs[0])
    rank = len(x)
    ax = int(_attr(node, g, "axis", -1)) % rank
    if any(a >= ax for a in pads[0]):
        params = [i for i in node.inputs[1:3] if i]
        if node.op_type != "LayerNormalization" or any(pads[1:]) \
                or any(int(np.prod(_shape(g, i), dtype=np.int64)) != 1 for i in params):
            raise PadUnsafe("normalizes across the padded axis (needs the real count)")
        zero = [0] * rank
        return _norm_dyn(node, g, pads, x, list(range(ax, rank)), list(range(rank)), zero, zero)
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
