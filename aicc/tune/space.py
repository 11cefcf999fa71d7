"""What `aicc tune` searches: the distinct layers of a compiled graph (problems) and the
schedules tried on each (candidates, from configs/tune.yaml).

A problem is one float32 Conv, Gemm or MatMul of the graph after the pipeline, identified by
its key: a hash of the target, op, attributes (fusions included: activation, residual),
input and output types and which inputs are constant. Two nodes with one key generate the
same kernel, so they are measured once and take the same schedule. The weights' values are
not part of the key (they do not change the time).
"""
from __future__ import annotations

import hashlib
import json
import math

import numpy as np

from ..targets import ROOT
from ..yamlio import load_yaml

SPACE_FILE = ROOT / "configs" / "tune.yaml"
TUNED_OPS = ("Conv", "Gemm", "MatMul")
_SKIP_ATTRS = ("aicc_schedule", "aicc_kernel")


def _plain(v):
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in sorted(v.items())}
    if isinstance(v, (np.integer, np.floating)):
        return v.item()
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return v


def tuned(n, g) -> bool:
    """Whether `aicc tune` measures node n: a float32 Conv / Gemm / MatMul (the ops whose
    kernel families take schedules)."""
    if n.domain not in ("", "ai.onnx") or n.op_type not in TUNED_OPS or not n.outputs:
        return False
    return all(g.dtype(t) == np.float32 for t in n.inputs[:2] if t) and \
        g.dtype(n.outputs[0]) == np.float32


def problem(n, g, target: str) -> dict:
    """The node's problem: what its key hashes, and numeric features for the cost model."""
    ins = [None if not t else [str(g.dtype(t)), list(g.shape(t)), g.const(t) is not None]
           for t in n.inputs]
    desc = {"target": target, "op": n.op_type,
            "attrs": {k: _plain(v) for k, v in sorted(n.attrs.items()) if k not in _SKIP_ATTRS},
            "inputs": ins, "outputs": [[str(g.dtype(t)), list(g.shape(t))] for t in n.outputs]}
    text = json.dumps(desc, sort_keys=True)
    key = f"{n.op_type.lower()}-{hashlib.sha1(text.encode()).hexdigest()[:16]}"
    return {"key": key, "op": n.op_type, "label": label(n, g), "features": features(n, g)}


def label(n, g) -> str:
    """A short readable name: "Conv 64x56x56 k3x3 s1x1 g1 -> 128 +Relu +res",
    "MatMul 128x768 @ 768x3072"."""
    x = g.shape(n.inputs[0])
    fused = (f" +{n.attrs['aicc_act']}" if n.attrs.get("aicc_act") else "") + \
        (" +res" if n.op_type == "Conv" and len(n.inputs) > 3 and n.inputs[3] else "")
    if n.op_type == "Conv":
        w = g.shape(n.inputs[1])
        k = "x".join(map(str, w[2:]))
        s = "x".join(map(str, n.attrs.get("strides", [1] * (len(w) - 2))))
        return (f"Conv {'x'.join(map(str, x[1:]))} k{k} s{s} g{n.attrs.get('group', 1)} "
                f"-> {w[0]}{fused}")
    b = g.shape(n.inputs[1])
    return f"{n.op_type} {'x'.join(map(str, x))} @ {'x'.join(map(str, b))}{fused}"


def features(n, g) -> dict:
    """Numbers describing the problem's size and shape (the cost model's problem features):
    the GEMM it amounts to (m rows of weights or A, n columns, k depth, batch), and for a
    conv its geometry."""
    x = list(g.shape(n.inputs[0]))
    f = {"op_conv": float(n.op_type == "Conv"), "op_gemm": float(n.op_type == "Gemm"),
         "op_matmul": float(n.op_type == "MatMul"),
         "act": float(bool(n.attrs.get("aicc_act"))),
         "residual": float(bool(n.attrs.get("aicc_residual")) or len(n.inputs) > 3),
         "b_const": float(len(n.inputs) > 1 and g.const(n.inputs[1]) is not None)}
    if n.op_type == "Conv":
        w = list(g.shape(n.inputs[1]))
        y = list(g.shape(n.outputs[0]))
        grp = int(n.attrs.get("group", 1))
        sp = len(w) - 2
        ks = w[2:] + [1] * (2 - sp)
        st = list(n.attrs.get("strides", [1] * sp)) + [1] * (2 - sp)
        dl = list(n.attrs.get("dilations", [1] * sp)) + [1] * (2 - sp)
        pos = math.prod(y[2:])
        f.update(batch=x[0], cin=x[1], cout=w[0], group=grp, cin_g=w[1], cout_g=w[0] // grp,
                 kh=ks[0], kw=ks[1], sh=st[0], sw=st[1], dh=dl[0], dw=dl[1],
                 h=(x[2:] + [1])[0], w=(x[2:] + [1, 1])[1], positions=pos,
                 m=w[0] // grp, n=pos, k=w[1] * math.prod(w[2:]),
                 pads=float(sum(n.attrs.get("pads", [0]))))
    else:
        a, b = list(g.shape(n.inputs[0])), list(g.shape(n.inputs[1]))
        if n.op_type == "Gemm":
            m = a[1] if n.attrs.get("transA") else a[0]
            k = a[0] if n.attrs.get("transA") else a[1]
            nn = b[0] if n.attrs.get("transB") else b[1]
            batch = 1
        else:
            m, k = (a[-2] if len(a) > 1 else 1), a[-1]
            nn = b[-1] if len(b) > 1 else 1
            batch = math.prod(list(g.shape(n.outputs[0]))[:-2]) if len(a) > 2 else 1
        f.update(batch=batch, m=m, n=nn, k=k)
    f["flops"] = 2.0 * f.get("batch", 1) * f["m"] * f["n"] * f["k"] * \
        (f.get("group", 1) if n.op_type == "Conv" else 1)
    return {k: float(v) for k, v in f.items()}


def family(n, target) -> list:
    """The schedule families a node's emitter reads (conv: the SIMD convs, conv_c: the
    portable ones; gemm)."""
    if n.op_type == "Conv":
        return ["conv", "conv_c"] if "conv_c" in (target.schedule or {}) else ["conv"]
    return ["gemm"]


def load_space() -> dict:
    return load_yaml(SPACE_FILE.read_text())


def candidates(fams: list, space: dict | None = None, defaults: dict | None = None) -> list:
    """The schedules tried for a node of these families, in a fixed order: the default ({}),
    each algo alone, then each algo with one parameter changed to a value other than the
    target's (``defaults``: the target's schedule, {family: {parameter: value}})."""
    space = load_space() if space is None else space
    defaults = defaults or {}
    bases, variants = [{}], []
    for fam in fams:
        s = space.get(fam) or {}
        params = s.get("params") or {}
        for a in s.get("algo") or [None]:
            base = {} if a in (None, "auto") else {"algo": a}
            if a == "winograd":
                base["wino_m"] = 2
            bases.append(base)
            fixed = defaults.get(fam) or {}
            variants += [{**base, p: v} for p, vs in params.items() for v in vs
                         if fixed.get(p) != v]
    out, seen = [], set()
    for c in bases + variants:
        if sched_id(c) not in seen:
            seen.add(sched_id(c))
            out.append(c)
    return out


def sched_id(s: dict) -> str:
    """A schedule's canonical text (the log's and the tie-breaks' identity)."""
    return json.dumps(s, sort_keys=True, separators=(",", ":"))


def sched_features(s: dict, names: list) -> list:
    """A schedule as numbers for the cost model: one-hot algo, then each parameter (-1 when
    the schedule leaves it at the default)."""
    algo = s.get("algo", "auto")
    return [float(algo == a) for a in names[0]] + [float(s.get(p, -1)) for p in names[1]]


def feature_names(space: dict | None = None) -> tuple:
    """(algos, parameters) over every family of the space, in a fixed order."""
    space = load_space() if space is None else space
    algos, params = ["auto"], []
    for s in space.values():
        for a in s.get("algo") or []:
            if a not in algos:
                algos.append(a)
        for p in s.get("params") or {}:
            if p not in params:
                params.append(p)
    return algos, params
