"""``aicc validate --per-node``: every intermediate tensor of a static bundle against the
reference's (onnxruntime, or onnx.reference without it), in step order, to find the first
node whose error grows beyond the tolerance and where accuracy is lost.

The bundle runs once with a hook; after each step its outputs are read from the arena (the
manifest gives each tensor's buffer, the offset of views and in-place outputs inside it, and
its dtype and shape), before a later step may reuse the memory. The reference runs the
original model with every node output added as a graph output. Tensors are matched by name:
fused nodes keep the output name of the node they absorbed, and a tensor aicc computes in
another layout or shape (channel-last convs, padded dims) has no counterpart and is not
compared.
"""
from __future__ import annotations

import numpy as np

from .errors import InputError
from .validate import compare


def reference_intermediates(model_path, feeds: dict) -> tuple:
    """({tensor: array} for every node output the reference computes, which reference)."""
    import onnx
    from onnx import shape_inference

    from .validate import reference_outputs
    model = onnx.load(str(model_path))
    inferred = shape_inference.infer_shapes(model)
    typed = {vi.name: vi for vi in inferred.graph.value_info}
    have = {o.name for o in model.graph.output}
    for n in model.graph.node:
        for o in n.output:
            if o and o not in have and o in typed:
                model.graph.output.append(typed[o])
                have.add(o)
    return reference_outputs(model, feeds, [o.name for o in model.graph.output])


def bundle_intermediates(b, feeds: dict) -> tuple:
    """({tensor: array} of every step output, final outputs included; [(step, op, node,
    [outputs])] in step order)."""
    man = b.manifest
    if b.dynamic:
        raise InputError("--per-node takes a static bundle (this one has dynamic dims)")
    mem = man["memory"]
    offsets = {x["tensor"]: int(x["offset"]) for x in mem["buffers"]}
    shared, inner = mem.get("shared") or {}, mem.get("shared_offsets") or {}
    steps = man["steps"]
    got: dict = {}

    def where(t):
        root = shared.get(t, t)
        if root not in offsets:
            return None                     # a caller's input or output buffer
        return offsets[root] + int(inner.get(t, 0))

    def hook(step, op, after):
        if not after:
            return
        s = steps[step]
        for name, ty in zip(s["outputs"], s.get("output_types") or []):
            off = where(name) if name and ty else None
            if off is None:
                continue
            dt, shape = np.dtype(ty[0]), tuple(ty[1])
            n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
            got[name] = b.arena[off:off + n].view(dt).reshape(shape).copy()
    outs = b.run(feeds, hook=hook)
    got.update(outs)
    order = [(s["index"], s["op"], s["node"], [o for o in s["outputs"] if o]) for s in steps]
    return got, order


def per_node(b, model_path, feeds: dict, rtol: float, atol: float, scaled: bool) -> tuple:
    """-> (rows, first bad row or None, which reference); a row: (step, op, node, tensor,
    Comparison) for every step output that the reference also computed with its shape.
    An intermediate tensor is beyond the tolerance when its relative L2 error exceeds rtol
    (or NaN / Inf sit elsewhere): element by element, rounding grows along a deep network
    (a float32 MobileNetV2 has ReLU6 outputs off by 2e-5 at a relative L2 error of 1e-6),
    while a wrong kernel moves the whole tensor."""
    want, which = reference_intermediates(model_path, feeds)
    got, order = bundle_intermediates(b, feeds)
    rows, first = [], None
    for step, op, node, outs in order:
        for t in outs:
            if t not in got or t not in want or np.shape(got[t]) != np.shape(want[t]):
                continue
            c = compare({t: got[t]}, {t: want[t]}, rtol, atol, scaled)[0]
            if not c.ok and c.detail.endswith("out of tolerance") and c.rel_l2 <= rtol:
                c.ok, c.detail = True, ""
            rows.append((step, op, node, t, c))
            if not c.ok and first is None:
                first = rows[-1]
    return rows, first, which
