"""fuse-pw-dw: a channel-last pointwise conv (the MatMul layout-nhwc makes of a 1x1 Conv) and
the depthwise ConvNHWC reading its output become one aicc.PwDwNHWC node (ops/pwdw_nhwc.py),
which computes the expanded tensor by bands of rows into a scratch buffer that stays in
cache, instead of writing all of it to the arena and reading it back (MobileNetV2's expand
convs: 1x112x112x96 floats, 4.8 MB, between two steps).

Contract. ``e = MatMul(x, B[, bias])`` (fused activation or none) followed by
``y = aicc.ConvNHWC(e, Wd[, bd])`` becomes ``y = aicc.PwDwNHWC(x, B, bias or "", Wd,
bd or "")`` with the ConvNHWC's attributes and fused activation, and the MatMul's
activation as ``aicc_pw_act`` / ``aicc_pw_act_params``, when:

* x is a static float32 ``[N, H, W, Cin]``; B a constant ``[Cin, C]``; the bias a constant
  ``[C]`` when present; the MatMul has one output and no residual or kernel / schedule
  override (``keep`` names the nodes of the config's ``nodes:`` section);
* the ConvNHWC is depthwise (group = C) with dilation 1, top and bottom pads below its
  kernel height, and reads ``e`` as its input; ``e`` is read by it only and is not a graph
  output;
* ``e`` is at least ``min_kb`` KiB (smaller tensors stay in cache between the two steps
  anyway).

``mode``: ``off`` (the default) or ``auto``; the x86 targets set ``auto`` (their
pass_options). The fused node gives the two steps' values bit for bit: the same GEMM
driver and epilogue for each band of rows, the same depthwise kernel on each band.
"""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from ..ir import Node
from .absorb import sole_use, std_domain
from .registry import graph_pass

PW_ACT, PW_PARAMS = "aicc_pw_act", "aicc_pw_act_params"


def _static_shape(g, name):
    try:
        t = g.type_of(name)
    except KeyError:
        return None
    return tuple(int(d) for d in t.shape) if t.is_static else None


def _pointwise(g, p, keep) -> bool:
    """p is a MatMul [N, H, W, Cin] @ constant [Cin, C] (+ constant bias [C]) in float32."""
    if (p.op_type != "MatMul" or not std_domain(p) or len(p.outputs) != 1 or p.name in keep
            or "aicc_kernel" in p.attrs or "aicc_schedule" in p.attrs
            or any(k.startswith("aicc_residual") for k in p.attrs)):
        return False
    xs, b = _static_shape(g, p.inputs[0]), g.const(p.inputs[1])
    if xs is None or len(xs) != 4 or b is None or np.asarray(b).ndim != 2:
        return False
    if g.dtype(p.inputs[0]).name != "float32" or np.asarray(b).dtype != np.float32:
        return False
    cin, c = np.asarray(b).shape
    if xs[3] != cin:
        return False
    if len(p.inputs) > 2 and p.inputs[2]:
        bias = g.const(p.inputs[2])
        if bias is None or np.asarray(bias).size != c or np.asarray(bias).dtype != np.float32:
            return False
    return True


def _depthwise(g, n, keep) -> bool:
    if (n.op_type != "ConvNHWC" or n.domain != "aicc" or n.name in keep
            or "aicc_kernel" in n.attrs or "aicc_schedule" in n.attrs
            or g.const(n.inputs[1]) is None):
        return False
    es, ws = _static_shape(g, n.inputs[0]), _static_shape(g, n.inputs[1])
    if es is None or ws is None or len(ws) != 4:
        return False
    c = es[3]
    dil = list(n.attrs.get("dilations") or [1, 1])
    pads = list(n.attrs.get("pads") or [0, 0, 0, 0])
    if (int(n.attrs.get("group", 1)) != c or c < 2 or ws[0] != c or ws[1] != 1 or dil != [1, 1]
            or pads[0] >= ws[2] or pads[2] >= ws[2]):
        return False
    return not (len(n.inputs) > 2 and n.inputs[2] and g.const(n.inputs[2]) is None)


@graph_pass("fuse-pw-dw")
def fuse_pw_dw(g, *, mode: str = "off", min_kb: int = 1024, keep=()):
    """Fuse channel-last pointwise + depthwise pairs into aicc.PwDwNHWC (see the module
    docstring for the exact conditions)."""
    if mode not in ("off", "auto"):
        raise ConfigError(f"pass 'fuse-pw-dw': mode {mode!r} (off or auto)")
    if mode == "off":
        return g
    g = g.copy()
    keep = set(keep)
    cons, outs = g.consumers(), set(g.outputs)
    producer = {o: n for n in g.nodes for o in n.outputs if o}
    fused, gone = {}, set()
    for n in g.nodes:
        if not _depthwise(g, n, keep):
            continue
        e = n.inputs[0]
        p = producer.get(e)
        if (p is None or id(p) in gone or not _pointwise(g, p, keep)
                or not sole_use(e, n, cons, outs)):
            continue
        if int(np.prod(_static_shape(g, e))) * 4 < min_kb * 1024:
            continue
        attrs = {k: v for k, v in n.attrs.items()}
        if "aicc_act" in p.attrs:
            attrs[PW_ACT] = p.attrs["aicc_act"]
            attrs[PW_PARAMS] = dict(p.attrs.get("aicc_act_params") or {})
        pins = list(p.inputs) + [""] * (3 - len(p.inputs))
        dins = list(n.inputs) + [""] * (3 - len(n.inputs))
        fused[id(n)] = Node("PwDwNHWC", pins[:3] + dins[1:3], list(n.outputs), attrs, n.name,
                            "aicc")
        gone.add(id(p))
        g.types.pop(e, None)
    g.nodes = [fused.get(id(n), n) for n in g.nodes if id(n) not in gone]
    return g
