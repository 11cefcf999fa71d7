"""insert-padding: Graph -> Graph for one bucket of a dynamic-shape model.

The bucket's graph is static (every dynamic dim pinned to the bucket's size). The real
tensors are smaller along the padded axes; this pass propagates, from the graph inputs, which
axes are padded and their real extents (``padrules.RULES``, one rule per op), and inserts
where a rule asks:

- ``aicc.PadFill`` before an op that would read padding (a sum, a max, a softmax, a
  convolution's border): the padding becomes the op's neutral value, so the real region of
  the op's output is exact;
- ``aicc.ExtentScale`` after a mean over padded axes (bucket count / real count);
- ``aicc.SeqLens`` as the ``sequence_lens`` of an RNN whose time axis is padded.

Every node that reads a padded tensor and has no rule, or whose rule finds padding unsafe,
is reported at once, by name. Each extent is checked against the static shape at the
bucket's own sizes (a rule that computed a wrong formula fails the build, not the output).
"""
from __future__ import annotations

import numpy as np

from ..errors import ModelError, UnsupportedError
from ..ir import Node, TensorType
from .extent import Compound
from .padrules import RULES, PadUnsafe


def insert_padding(g, in_pads: dict, dims: list, names: list):
    """g: a bucket's final static graph; in_pads: {graph input: {axis: Ext}}; dims: the
    bucket's value of each dynamic dim; names: the dims' names. Returns (graph, {tensor:
    {axis: Ext}}) with the padding of every tensor (graph outputs included)."""
    g = g.copy()
    pads = {k: dict(v) for k, v in in_pads.items() if v}
    nodes, problems = [], []
    fresh = iter(range(1 << 30))

    def new_tensor(like: str, t: TensorType | None = None) -> str:
        name = f"{like}::pad{next(fresh)}"
        g.types[name] = t if t is not None else g.type_of(like)
        return name

    for node in g.nodes:
        ip = [pads.get(x, {}) if x else {} for x in node.inputs]
        if not any(ip):
            nodes.append(node)
            continue
        rule = RULES.get(node.op_type if node.domain in ("", "ai.onnx")
                         else f"{node.domain}.{node.op_type}")
        try:
            if rule is None:
                raise PadUnsafe("no padding rule for this op")
            try:
                res = rule(node, g, ip)
            except (IndexError, KeyError, TypeError, ValueError, ZeroDivisionError) as e:
                raise PadUnsafe(f"cannot follow the padding through it ({e})") from None
            if any(isinstance(e, Compound) for _k, axes, _f in res.fills for e in axes.values()) \
                    or (res.scale and any(isinstance(e, Compound) for e in res.scale[1])) \
                    or (res.seq_lens and isinstance(res.seq_lens[0], Compound)):
                raise PadUnsafe("it would need the real size of an axis merged from two padded "
                                "axes")

        except PadUnsafe as e:
            axes = "; ".join(f"input {k} axis {a} (dim {_dims_of(e2, names)})"
                             for k, p in enumerate(ip) for a, e2 in p.items())
            problems.append(f"node {node.name!r} ({node.op_type}) reads padding along {axes}: {e}")
            nodes.append(node)
            continue
        if res.replace is not None:
            op_type, attrs = res.replace
            node = Node(op_type, list(node.inputs), list(node.outputs), attrs, node.name, "aicc")
        else:
            node = Node(node.op_type, list(node.inputs), list(node.outputs), dict(node.attrs),
                        node.name, node.domain)
        for k, axes, kind in res.fills:
            src = node.inputs[k]
            dst = new_tensor(src)
            axes = dict(sorted(axes.items()))
            nodes.append(Node("PadFill", [src], [dst],
                              {"axes": list(axes), "exts": [e.to_json() for e in axes.values()],
                               "fill": list(kind) if isinstance(kind, tuple) else kind},
                              name=f"{node.name}/pad_fill{k}", domain="aicc"))
            pads[dst] = dict(ip[k])
            node.inputs[k] = dst
        if res.seq_lens is not None:
            ext, batch = res.seq_lens
            t_ax = 1 if int(node.attrs.get("layout", 0) or 0) else 0
            size = int(g.shape(node.inputs[0])[t_ax])
            sl = new_tensor(node.inputs[0], TensorType(np.dtype(np.int32), (int(batch),)))
            nodes.append(Node("SeqLens", [], [sl], {"ext": ext.to_json(), "size": size},
                              name=f"{node.name}/seq_lens", domain="aicc"))
            while len(node.inputs) < 5:
                node.inputs.append("")
            node.inputs[4] = sl
        after = []
        if res.scale is not None:
            k, exts, count = res.scale
            orig = node.outputs[k]
            tmp = new_tensor(orig)
            node.outputs[k] = tmp
            pads[tmp] = dict(res.out[k])
            after.append(Node("ExtentScale", [tmp], [orig],
                              {"exts": [e.to_json() for e in exts], "count": int(count)},
                              name=f"{node.name}/extent_scale", domain="aicc"))
        nodes.append(node)
        nodes.extend(after)
        for k, o in enumerate(node.outputs):
            if o and k < len(res.out) and res.out[k]:
                pads[o] = dict(res.out[k])
        if res.scale is not None:
            k = res.scale[0]
            if res.out[k]:
                pads[after[0].outputs[0]] = dict(res.out[k])
    if problems:
        raise UnsupportedError("padding a dynamic dim is not safe here and no run-time size "
                               "fixes it: " + "; ".join(problems))
    g.nodes = nodes
    for t, p in pads.items():
        shape = g.shape(t)
        for ax, e in p.items():
            if isinstance(e, Compound):
                if e.size != int(shape[ax]):
                    raise ModelError(f"internal: merged padded axis {ax} of tensor {t!r} has "
                                     f"{e.size} elements, the bucket's shape says {shape[ax]}")
                continue
            if e.eval(dims) != int(shape[ax]):
                raise ModelError(f"internal: padding extent {e.text(names)} of tensor {t!r} "
                                 f"axis {ax} is {e.eval(dims)} at {_at(dims, names)}, but the "
                                 f"bucket's shape says {shape[ax]}")
    return g, pads


def _dims_of(e, names) -> str:
    return e.text(names)


def _at(dims, names) -> str:
    return ", ".join(f"{n}={d}" for n, d in zip(names, dims))
