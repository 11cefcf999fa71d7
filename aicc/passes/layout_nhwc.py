"""layout-nhwc: run chains of 2-D convolutions channel-last (NHWC), with the transposes only
where a chain meets the rest of the graph.

Contract. A Conv is *eligible* when it is 2-D, float32, has static shapes, constant weights,
a constant or absent bias, no per-node kernel/schedule override, and is depthwise (group =
Cin = Cout > 1) or has group 1. An eligible Conv ``y = Conv(x, W, B)`` becomes
``Transpose(x, [0,2,3,1]) -> op -> Transpose([0,3,1,2]) -> y`` where op is

* a 1x1 stride-1 unpadded group-1 Conv: ``MatMul(x_nhwc, W^T [Cin, Cout], B)`` (MatMul's
  fused bias input), the Conv's fused activation kept;
* otherwise ``aicc.ConvNHWC`` (ops/conv_nhwc.py) with the Conv's attributes (auto_pad
  resolved to explicit pads) and fused activation; a group-1 conv of at most NCHW_IN_CIN
  input channels whose input has no NHWC twin (a first conv on the image) reads x itself
  (``aicc_nchw_in``, no Transpose in: MobileNetV2's 3 x 224 x 224 input took 29 us to
  transpose).

Integer chains: a QLinearConv is eligible when it is 2-D with static shapes, every input
but x a constant, x / y scales and zero points per tensor, and pointwise (1x1 stride 1
unpadded group 1) or depthwise; it becomes ``aicc.QConvNHWC`` (ops/qconv_nhwc.py: the
integer GEMM with positions as rows, the channel-vectorized depthwise kernel; QLinearConv's
values bit for bit). DequantizeLinear / QuantizeLinear with per-tensor scales sink like the
other element-wise ops (MobileNetV2 int8's residual DQ -> Add -> Q), a DequantizeLinear also
when its input is a tensor transposed for a conv (the bytes move, not the floats). ``qratio``
is ``ratio`` for them.

Element-wise ops (trait ELEMENTWISE, fused activations included) with at least one input that
is the NCHW side of such a Transpose, and every input of the output's shape or a constant
scalar, run on the NHWC tensors instead (one Transpose after them): the other full-shape
inputs are transposed in (constants at compile time), e.g. MobileNetV2's residual Add whose
shortcut comes from an NCHW conv. Beside a full-shape input that has an NHWC twin, an input
that only broadcasts to the output (4-D, dims equal or 1) may be a constant (transposed at
compile time) or a tensor with its own twin: squeeze-excite's [N, C, 1, 1] scale, computed
channel-last as [N, 1, 1, C], multiplies the conv output without a transpose out and back
(DeepLabV3-MobileNetV3 on x86-avx2: 24 of 30 transposes gone, 0.54 -> 0.10 ms). A Transpose([0,2,3,1]) of a tensor
that has an NHWC twin is that twin (no copy). A GlobalAveragePool or a ReduceMean over axes
2 and 3 of a tensor with a twin averages the twin over axes 1 and 2. An inference
BatchNormalization with constant per-channel parameters (one fold-batchnorm left, after an
activation) joins chains like an element-wise op and maps a twin on its last axis
(``aicc_channels_last``, the same values): ConvMixer's blocks, depthwise conv -> Relu -> BN,
+ x, pointwise conv -> Relu -> BN, were lone convs between BNs and ran NCHW (x86-avx2, thread
CPU time against onnxruntime, interleaved: ConvMixer-768/32 1.105 -> 1.060, the pointwise
convs 12.1 -> 11.5 ms as MatMuls). Transposes nobody reads are dead (eliminate-dead-nodes
removes them), so inside a chain no data moves.

``mode``: ``off`` (nothing), ``auto`` (eligible convs with ``max(Cin, Cout) * ratio >=
OH * OW``, i.e. not large planes of few channels, and, for group-1 convs that are not
pointwise, at least MIN_GEMM_COUT output channels or at most NCHW_IN_CIN input channels
(MobileNetV1-0.25's first conv, 3 -> 8: its NCHW output and Transpose cost 1.5 us more than
ConvNHWC's broadcast kernel writing channel-last); a connected group of them and sinkable
ops is converted when it holds a depthwise conv and another conv (a lone depthwise conv
does not win back its two transposes: 128 x 56 x 56, avx512, 128 us against 105 us NCHW):
the MobileNet / DS-CNN pattern, where the
channel-vectorized depthwise and pointwise-as-GEMM kernels win over per-plane kernels, while
the first layers of few channels on large planes stay with the plane-vectorized NCHW
kernels, and other networks keep theirs, e.g. Winograd for ResNets), ``all`` (every
eligible conv). ``ratio`` 400 measured best on this machine (ratio to onnxruntime;
MobileNetV1-0.25 / MobileNetV2, x86-avx512): 0.61 / 0.91 at 32, 0.61 / 0.91 at 128, 0.60 /
0.87-0.88 at 300, where MobileNetV2's first block (3 -> 32 stride 2, depthwise 32 and 32 ->
16 at 112x112) stayed NCHW: as GEMMs its pointwise conv of 16 output columns filled half of
a 2-vector panel. With 1-vector panels for such narrow GEMMs (gemm_simd.panel_vectors) the
block runs channel-last from ratio 392 on, and MobileNetV2's ratio went 0.808 -> 0.789
(x86-avx512) and 1.078 -> 1.059 (x86-avx2, with its 3-vector panels of 24 columns), 4
alternating rounds each; MobileNetV1 and DS-CNN are the same at 300 and 400. A first conv
of 3 -> 8 channels as im2col + GEMM took 25 us against 11 us NCHW (MobileNetV1), hence
MIN_GEMM_COUT. A group-1 3x3 stride-1 conv of more than NCHW_IN_CIN input channels stays NCHW
in auto too, where Winograd computes it with 2.25x fewer multiplies (Xception-41's 32 -> 64
at 150 x 150, x86-avx2: 8.5 ms as ConvNHWC, 5.6 ms NCHW).
Targets choose the default (``pass_options:`` in configs/targets/*.yaml); a pipeline entry
``- layout-nhwc: {mode: off}`` overrides it. ``keep``: node names left as they are; the build
YAML's ``nodes:`` overrides are added to it (config.py), so a conv given a kernel or schedule
there stays a Conv for it to apply to.

Results: the same arithmetic as the NCHW kernels up to summation order (see
ops/conv_nhwc.py); graph inputs and outputs keep their layouts and names.
"""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from ..ir import Node, TensorType
from ..kernels.conv.geometry import ConvGeometry
from ..kernels.winograd.simd import supports as winograd_shape
from ..ops import has_trait
from ..ops.base import lookup
from ..ops.traits import ELEMENTWISE
from .absorb import fresh_name, std_domain, taken_names
from .fold_batchnorm import bn_affine
from .registry import graph_pass

TO_NHWC, TO_NCHW = [0, 2, 3, 1], [0, 3, 1, 2]
MIN_GEMM_COUT = 16      # auto: a non-pointwise group-1 conv needs this many output channels
NCHW_IN_CIN = 4         # ... unless it has at most this many input channels (ConvNHWC runs
#                         those on the broadcast kernel, reading an NCHW input as it is)


def _types(g, names):
    try:
        return [g.type_of(t) for t in names]
    except KeyError:
        return None


def _geometry_kind(n, g, ts):
    """('pointwise' | 'depthwise' | 'general', geometry) of a 2-D conv whose x, w, y types ts
    are static (x, w 4-D), else None."""
    if ts is None or not all(t.is_static for t in ts) or len(ts[0].shape) != 4 \
            or len(ts[1].shape) != 4:
        return None
    try:
        geo = ConvGeometry(lookup(n, g.opset), n, ts[0].shape, ts[1].shape)
    except (ValueError, TypeError):
        return None
    if tuple(ts[2].shape) != (geo.batch, geo.cout, *geo.out):
        return None
    if geo.group > 1 and geo.cin_g == 1 and geo.cout_g == 1:
        return "depthwise", geo
    if geo.group != 1:
        return None
    if geo.k == [1, 1] and geo.stride == [1, 1] and not any(geo.pad + geo.pad_end):
        return "pointwise", geo
    return "general", geo


def _qconv_kind(n, g):
    """('qpointwise' | 'qdepthwise', geometry) for an eligible QLinearConv: 2-D, static
    shapes, every input but x a compile-time constant, x / y scales and zero points per
    tensor; else None."""
    if len(n.inputs) < 8 or any(t and g.const(t) is None for t in n.inputs[1:]):
        return None
    if any(g.const(n.inputs[k]).size != 1 for k in (1, 2, 6, 7) if n.inputs[k]):
        return None
    k = _geometry_kind(n, g, _types(g, (n.inputs[0], n.inputs[3], n.outputs[0])))
    return None if k is None or k[0] == "general" else ("q" + k[0], k[1])


def _conv_kind(n, g):
    """'pointwise' / 'depthwise' / 'general' for an eligible Conv, else None (QLinearConv:
    _qconv_kind)."""
    if not std_domain(n) or n.attrs.get("aicc_kernel") or n.attrs.get("aicc_schedule"):
        return None
    if n.op_type == "QLinearConv":
        return _qconv_kind(n, g)
    if n.op_type != "Conv" or len(n.inputs) < 2:
        return None
    x, w = n.inputs[0], n.inputs[1]
    b = n.inputs[2] if len(n.inputs) > 2 else ""
    if g.const(w) is None or (b and g.const(b) is None):
        return None
    ts = _types(g, (x, w, n.outputs[0]))
    if ts is None or any(np.dtype(t.dtype) != np.float32 for t in ts):
        return None
    return _geometry_kind(n, g, ts)


def _spatial_mean(n, g) -> bool:
    """GlobalAveragePool, or ReduceMean over exactly axes 2 and 3 of a 4-D tensor (its axes
    as the op reads them: attribute or constant input by opset)."""
    if n.op_type == "GlobalAveragePool":
        return True
    if n.op_type != "ReduceMean" or len(g.shape(n.inputs[0])) != 4:
        return False
    return lookup(n, g.opset).axes(n, g) == {2, 3}


def _broadcasts(s, ys) -> bool:
    """A 4-D shape s that broadcasts to ys dim by dim (a squeeze-excite scale [N, C, 1, 1])."""
    return len(s) == 4 and all(a == b or a == 1 for a, b in zip(s, ys))


def _sinkable(n, g) -> bool:
    return (std_domain(n) or n.domain == "aicc") and has_trait(n, ELEMENTWISE) \
        and len(n.outputs) == 1


def _channel_bn(n, g) -> bool:
    """A BatchNormalization of a float32 4-D tensor that fold-batchnorm could fold (bn_affine:
    inference, constant per-channel parameters, a finite map) but left, having no producer to
    fold into (after an activation: ConvMixer's); it runs channel-last as the same
    per-channel map (ops/normalization.py aicc_channels_last)."""
    if n.op_type != "BatchNormalization" or not std_domain(n):
        return False
    ts = _types(g, n.inputs[:1])
    if ts is None or len(ts[0].shape) != 4 or np.dtype(ts[0].dtype) != np.float32:
        return False
    st = bn_affine(n, g)
    return st is not None and st[0].size == ts[0].shape[1]


def _components(g, kinds) -> dict:
    """node index -> component root over eligible convs and sinkable ops joined by tensors."""
    idx = {id(n): i for i, n in enumerate(g.nodes)}
    member = {i for i, n in enumerate(g.nodes)
              if i in kinds or _sinkable(n, g) or _channel_bn(n, g)}
    parent = {i: i for i in member}

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i
    prod = g.producers()
    for i in member:
        for t in g.nodes[i].inputs:
            p = prod.get(t)
            if p is not None and idx[id(p)] in member:
                parent[find(i)] = find(idx[id(p)])
    return {i: find(i) for i in member}


@graph_pass("layout-nhwc")
def layout_nhwc(g, *, mode: str = "off", ratio: float = 400.0, qratio: float = 400.0, keep=()):
    """Run chains of eligible 2-D convs (and the element-wise ops between them) channel-last;
    see the module docstring."""
    if mode not in ("off", "auto", "all"):
        raise ConfigError(f"pass 'layout-nhwc': mode {mode!r} (off, auto or all)")
    if mode == "off":
        return g
    kinds = {}
    keep = set(keep or ())
    for i, n in enumerate(g.nodes):
        k = _conv_kind(n, g) if n.name not in keep else None
        if k is None:
            continue
        kind, geo = k
        r = qratio if kind.startswith("q") else ratio
        if mode == "auto" and max(geo.cin, geo.cout) * r < geo.out[0] * geo.out[1]:
            continue            # a large plane of few channels: the NCHW kernels are faster
        if mode == "auto" and kind == "general" and geo.cout < MIN_GEMM_COUT \
                and geo.cin > NCHW_IN_CIN:
            continue            # im2col + GEMM with a few output channels fills few lanes
        if mode == "auto" and kind == "general" and winograd_shape(geo) \
                and geo.cin > NCHW_IN_CIN:
            continue            # NCHW takes Winograd: fewer multiplies than any channel-last kernel
        kinds[i] = k
    if not kinds:
        return g
    comp = _components(g, kinds)
    if mode == "auto":
        convs: dict = {}
        for i in kinds:
            convs[comp[i]] = convs.get(comp[i], 0) + 1
        keep = {comp[i] for i, (k, _) in kinds.items()
                if k.endswith("depthwise") and convs[comp[i]] > 1}
        kinds = {i: k for i, k in kinds.items() if comp[i] in keep}
        if not kinds:
            return g
    g = g.copy()
    taken = taken_names(g)
    twin: dict = {}           # NCHW tensor name -> its NHWC twin
    to_nhwc: dict = {}        # NCHW tensor name -> the Transpose output made for it
    nodes = []

    def nhwc_type(name):
        t = g.type_of(name)
        s = t.shape
        return TensorType(t.dtype, (s[0], s[2], s[3], s[1]))

    def nhwc_of(x):
        if x in twin:
            return twin[x]
        if x not in to_nhwc:
            t = fresh_name(taken, f"{x}_nhwc")
            g.types[t] = nhwc_type(x)
            nodes.append(Node("Transpose", [x], [t], {"perm": TO_NHWC},
                              name=fresh_name(taken, f"{x}_to_nhwc")))
            to_nhwc[x] = t
        return to_nhwc[x]

    def back(n, y):
        """n computes y's NHWC twin; a Transpose gives the NCHW tensor y."""
        t = fresh_name(taken, f"{y}_nhwc")
        g.types[t] = nhwc_type(y)
        n.outputs = [t]
        nodes.append(n)
        nodes.append(Node("Transpose", [t], [y], {"perm": TO_NCHW},
                          name=fresh_name(taken, f"{n.name or y}_to_nchw")))
        twin[y] = t

    for i, n in enumerate(g.nodes):
        if i in kinds:
            kind, geo = kinds[i]
            nchw_in = kind == "general" and geo.cin <= NCHW_IN_CIN and n.inputs[0] not in twin
            x = n.inputs[0] if nchw_in else nhwc_of(n.inputs[0])
            b = n.inputs[2] if len(n.inputs) > 2 else ""
            act = {k: v for k, v in n.attrs.items() if k in ("aicc_act", "aicc_act_params")}
            attrs = {"kernel_shape": list(geo.k), "strides": list(geo.stride),
                     "dilations": list(geo.dil), "pads": list(geo.pad + geo.pad_end),
                     "group": geo.group}
            if kind.startswith("q"):
                new = Node("QConvNHWC", [x] + list(n.inputs[1:]), [], attrs, name=n.name,
                           domain="aicc")
            elif kind == "pointwise":
                w = np.asarray(g.constants[n.inputs[1]], np.float32)
                wt = fresh_name(taken, f"{n.inputs[1]}_t")
                g.constants[wt] = np.ascontiguousarray(w.reshape(geo.cout, geo.cin).T)
                new = Node("MatMul", [x, wt] + ([b] if b else []), [], dict(act), name=n.name)
            else:
                attrs.update(act)
                if nchw_in:              # reads the NCHW tensor as it is: no transpose of it
                    attrs["aicc_nchw_in"] = 1
                new = Node("ConvNHWC", [x, n.inputs[1]] + ([b] if b else []), [], attrs,
                           name=n.name, domain="aicc")
            back(new, n.outputs[0])
            continue
        if n.inputs and n.inputs[0] in twin and _channel_bn(n, g):
            new = Node(n.op_type, [twin[n.inputs[0]]] + list(n.inputs[1:5]), [],
                       {**n.attrs, "aicc_channels_last": 1}, name=n.name, domain=n.domain)
            back(new, n.outputs[0])
            continue
        # (a DequantizeLinear also of a tensor transposed for a conv: bytes move, not floats)
        if _sinkable(n, g) and n.inputs and any(
                t in twin or (t in to_nhwc and n.op_type == "DequantizeLinear")
                for t in n.inputs):
            y = n.outputs[0]
            ys = g.type_of(y).shape if y in g.types else None
            ok = ys is not None and len(ys) == 4
            bcast = False       # a broadcast input needs a full-shape twin beside it
            for t in n.inputs:
                if not ok or not t:
                    continue
                c = g.const(t)
                ok = (c is not None and c.size == 1 and c.ndim <= 4) or \
                    tuple(g.shape(t)) == tuple(ys)
                if not ok and (t in twin or c is not None) and _broadcasts(g.shape(t), ys):
                    ok = bcast = True
            if ok and bcast:
                ok = any(t in twin and tuple(g.shape(t)) == tuple(ys) for t in n.inputs)
            if ok:
                ins = []
                for t in n.inputs:
                    c = g.const(t)
                    if t in twin:
                        ins.append(twin[t])
                    elif not t or (c is not None and c.ndim == 0):
                        ins.append(t)
                    elif c is not None and c.size == 1:     # a [1,1,1,1]-like scalar: flatten
                        s = fresh_name(taken, f"{t}_scalar")
                        g.constants[s] = np.asarray(c).reshape(())
                        ins.append(s)
                    elif c is not None:                     # a 4-D constant
                        s = fresh_name(taken, f"{t}_nhwc")
                        g.constants[s] = np.ascontiguousarray(np.transpose(c, TO_NHWC))
                        ins.append(s)
                    else:       # a full-shape NCHW tensor (e.g. a residual from NCHW code):
                        ins.append(nhwc_of(t))  # one transpose in, not the result out and back
                new = Node(n.op_type, ins, [], dict(n.attrs), name=n.name, domain=n.domain)
                back(new, y)
                continue
        if std_domain(n) and n.inputs and n.inputs[0] in twin and _spatial_mean(n, g):
            # mean over H, W of the NHWC twin: axes 1, 2; with keepdims the [N,1,1,C] result
            # is moved to [N,C,1,1] (a plain copy), else it is already [N, C]
            keep = int(n.attrs.get("keepdims", 1)) if n.op_type == "ReduceMean" else 1
            attrs, ins = {"keepdims": keep}, [twin[n.inputs[0]]]
            if g.opset >= 18:
                ax = fresh_name(taken, f"{n.name or 'mean'}_axes_nhwc")
                g.constants[ax] = np.array([1, 2], np.int64)
                ins.append(ax)
            else:
                attrs["axes"] = [1, 2]
            new = Node("ReduceMean", ins, [], attrs, name=n.name)
            if keep:
                back(new, n.outputs[0])
            else:
                new.outputs = list(n.outputs)
                nodes.append(new)
            continue
        if n.op_type == "Transpose" and std_domain(n) and n.inputs[0] in twin \
                and list(n.attrs.get("perm") or []) == TO_NHWC:
            nodes.append(Node("Identity", [twin[n.inputs[0]]], list(n.outputs), name=n.name))
            continue
        nodes.append(n)
    g.nodes = nodes
    return g
