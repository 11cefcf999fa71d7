"""fuse-pw-dw: a channel-last pointwise conv (the MatMul layout-nhwc makes of a 1x1 Conv) and
the depthwise ConvNHWC reading its output become one aicc.PwDwNHWC node (ops/pwdw_nhwc.py),
which computes the expanded tensor by bands of rows into a scratch buffer that stays in
cache, instead of writing all of it to the arena and reading it back (MobileNetV2's expand
convs: 1x112x112x96 floats, 4.8 MB, between two steps).

Contract. ``e = MatMul(x, B[, bias])`` (fused activation or none) followed by
``y = aicc.ConvNHWC(e, Wd[, bd])`` becomes ``y = aicc.PwDwNHWC(x, B, bias or "", Wd,
bd or "")`` with the ConvNHWC's attributes and fused activation, and the MatMul's
activation as ``aicc_pw_act`` / ``aicc_pw_act_params``, when:

* the fused node passes PwDwNHWC's check() (ops/pwdw_nhwc.py: a static float32 x
  ``[N, H, W, Cin]``, a constant B ``[Cin, C]``, a depthwise ConvNHWC with dilation 1 and
  top / bottom pads below its kernel height), and both biases are constants when present;
* the MatMul (standard domain) has one output; neither node has a kernel / schedule override
  or is named in ``keep`` (the config's ``nodes:`` section adds them);
* ``e`` is read by the ConvNHWC only, is not a graph output, and is at least ``min_kb`` KiB
  (smaller tensors stay in cache between the two steps anyway).

``mode``: ``off`` (the default) or ``auto``; the x86 targets set ``auto`` (their
pass_options). The fused node gives the two steps' values bit for bit: the same GEMM
driver and epilogue for each band of rows, the same depthwise kernel on each band.
"""
from __future__ import annotations

import math

from ..errors import ConfigError
from ..ir import Node
from ..ops.pwdw_nhwc import PW_ACT, PW_PARAMS, PwDwNHWC
from .absorb import sole_use, std_domain
from .registry import graph_pass


def _own(n, keep) -> bool:
    """n carries no kernel / schedule override and is not kept."""
    return n.name not in keep and "aicc_kernel" not in n.attrs and "aicc_schedule" not in n.attrs


def _candidate(g, p, n):
    """The PwDwNHWC of MatMul p and ConvNHWC n when the op takes it (its check()) and both
    biases are constants, else None."""
    pins = list(p.inputs) + [""] * (3 - len(p.inputs))
    dins = list(n.inputs) + [""] * (3 - len(n.inputs))
    if any(b and g.const(b) is None for b in (pins[2], dins[2])):
        return None
    attrs = dict(n.attrs)
    if "aicc_act" in p.attrs:
        attrs[PW_ACT] = p.attrs["aicc_act"]
        attrs[PW_PARAMS] = dict(p.attrs.get("aicc_act_params") or {})
    f = Node("PwDwNHWC", pins[:3] + dins[1:3], list(n.outputs), attrs, n.name, "aicc")
    try:
        return f if PwDwNHWC().check(f, g) is None else None
    except KeyError:             # an untyped tensor
        return None


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
        if n.op_type != "ConvNHWC" or n.domain != "aicc" or not _own(n, keep):
            continue
        e = n.inputs[0]
        p = producer.get(e)
        if (p is None or id(p) in gone or p.op_type != "MatMul" or not std_domain(p)
                or len(p.outputs) != 1 or not _own(p, keep) or not sole_use(e, n, cons, outs)):
            continue
        f = _candidate(g, p, n)
        if f is None or math.prod(g.shape(e)) * 4 < min_kb * 1024:
            continue
        fused[id(n)] = f
        gone.add(id(p))
        g.types.pop(e, None)
    g.nodes = [fused.get(id(n), n) for n in g.nodes if id(n) not in gone]
    return g
