"""inline-control-flow: If, Loop and Scan become straight-line nodes.

A static plan has no branches or loops of its own, so control flow is flattened at compile
time (subgraph tensors renamed per copy; outer-scope names kept):

- If: a constant condition inlines the taken branch. Otherwise both branches are inlined
  and each output is ``Where(cond, then_k, else_k)``: both run, the condition picks (aicc's
  kernels are defined for every input value, so computing the branch not taken is harmless).
  The branches' outputs must have the same static shape.
- Loop: the trip count must be a compile-time constant (at most ``max_unroll``), the
  condition input absent or constant true, and the body's condition output the body's
  condition input passed through (a for-loop: no early exit). The body is copied once per
  iteration (iteration number a constant); scan outputs are stacked with Unsqueeze + Concat.
- Scan (opset 9+): the sequence length comes from the static shape of the scan inputs (at
  most ``max_unroll``); per step, the scan inputs are sliced with Gather, the body copied,
  scan outputs stacked along their axes (reverse directions honoured).

Anything else (data-dependent trip counts, early exit, more than max_unroll steps, sequence
types) is left in place and reported as unsupported by the node's name.
"""
from __future__ import annotations

import numpy as np
import onnx

from ..errors import ModelError
from ..ir import Node
from .registry import graph_pass

CONTROL = ("If", "Loop", "Scan")


def _body_nodes(gp: onnx.GraphProto, prefix: str, outer_map: dict):
    """Nodes of a subgraph with its own names prefixed; outer_map renames the subgraph's
    formal inputs (and anything else) to tensors of the enclosing graph."""
    from ..frontend.onnx_import import _attr_value, _text
    names = {}
    for init in gp.initializer:
        names[_text(init.name)] = prefix + _text(init.name)
    for n in gp.node:
        for o in n.output:
            if o:
                names[_text(o)] = prefix + _text(o)
    names.update(outer_map)

    def rn(x):
        x = _text(x)
        return names.get(x, x) if x else ""
    nodes = []
    for k, n in enumerate(gp.node):
        attrs = {}
        for a in n.attribute:
            attrs[a.name] = (a if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
                             else _attr_value(a))
        op = _text(n.op_type)
        if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
               for a in n.attribute):
            # a nested subgraph refers to this body's tensors by their body names
            attrs["aicc_outer"] = {**names, **attrs.get("aicc_outer", {})}
        nodes.append(Node(op, [rn(x) for x in n.input], [rn(x) for x in n.output], attrs,
                          name=prefix + (_text(n.name) or f"{op}_{k}"), domain=_text(n.domain)))
    consts = {names[_text(i.name)]: onnx.numpy_helper.to_array(i) for i in gp.initializer}
    outs = [rn(o.name) for o in gp.output]
    return nodes, consts, outs


def _const(g, name):
    return None if not name else g.const(name)


def _inline_if(node, g, fresh):
    c = _const(g, node.inputs[0])
    outer = node.attrs.get("aicc_outer", {})
    then_g, else_g = node.attrs["then_branch"].g, node.attrs["else_branch"].g
    nodes, consts = [], {}
    if c is not None:
        taken = then_g if bool(np.asarray(c).reshape(-1)[0]) else else_g
        ns, cs, outs = _body_nodes(taken, fresh(), outer)
        nodes += ns
        consts.update(cs)
        nodes += [Node("Identity", [o], [y], name=f"{node.name}/out{k}")
                  for k, (o, y) in enumerate(zip(outs, node.outputs))]
        return nodes, consts
    tn, tc, touts = _body_nodes(then_g, fresh(), outer)
    en, ec, eouts = _body_nodes(else_g, fresh(), outer)
    nodes += tn + en
    consts.update(tc)
    consts.update(ec)
    for k, (a, b, y) in enumerate(zip(touts, eouts, node.outputs)):
        nodes.append(Node("Where", [node.inputs[0], a, b], [y], name=f"{node.name}/select{k}"))
    return nodes, consts


def _stack(g, parts, axis, out, name, consts, reverse=False):
    """Unsqueeze each part at axis and Concat them into out."""
    ax = f"{name}/axis"
    nodes, ups = [], []
    if g.opset >= 13:
        consts[ax] = np.array([axis], np.int64)
    for k, p in enumerate(reversed(parts) if reverse else parts):
        u = f"{name}/u{k}"
        if g.opset >= 13:                       # axes an input since opset 13
            nodes.append(Node("Unsqueeze", [p, ax], [u], name=f"{name}/unsq{k}"))
        else:
            nodes.append(Node("Unsqueeze", [p], [u], {"axes": (int(axis),)},
                              name=f"{name}/unsq{k}"))
        ups.append(u)
    nodes.append(Node("Concat", ups, [out], {"axis": int(axis)}, name=f"{name}/concat"))
    return nodes


def _inline_loop(node, g, fresh, max_unroll):
    m = _const(g, node.inputs[0]) if node.inputs else None
    cond = node.inputs[1] if len(node.inputs) > 1 else ""
    if m is None:
        return None
    trips = int(np.asarray(m).reshape(-1)[0])
    if cond and (_const(g, cond) is None or not bool(np.asarray(_const(g, cond)).reshape(-1)[0])):
        return None
    body = node.attrs["body"].g
    b_in = [i.name for i in body.input]
    b_out = [o.name for o in body.output]
    # a for-loop: the body's condition output is its condition input, passed through
    passthrough = b_out[0] == b_in[1] or any(
        n.op_type == "Identity" and n.output[0] == b_out[0] and n.input[0] == b_in[1]
        for n in body.node)
    if not passthrough or not 0 <= trips <= max_unroll:
        return None
    n_carried = len(node.inputs) - 2
    carried = list(node.inputs[2:])
    outer = node.attrs.get("aicc_outer", {})
    nodes, consts, scans = [], {}, [[] for _ in range(len(b_out) - 1 - n_carried)]
    for it in range(trips):
        p = fresh()
        itn, cn = f"{p}iter", f"{p}cond"
        consts[itn] = np.array(it, np.int64)
        consts[cn] = np.array(True)
        mapping = {b_in[0]: itn, b_in[1]: cn, **dict(zip(b_in[2:], carried)), **outer}
        ns, cs, outs = _body_nodes(body, p, mapping)
        nodes += ns
        consts.update(cs)
        carried = outs[1:1 + n_carried]
        for k, s in enumerate(outs[1 + n_carried:]):
            scans[k].append(s)
    for k, y in enumerate(node.outputs[:n_carried]):
        if y:
            src = carried[k] if trips else node.inputs[2 + k]
            nodes.append(Node("Identity", [src], [y], name=f"{node.name}/final{k}"))
    for k, y in enumerate(node.outputs[n_carried:]):
        if y:
            if not scans[k]:
                return None            # zero iterations: an empty scan output of unknown shape
            nodes += _stack(g, scans[k], 0, y, f"{node.name}/scan{k}", consts)
    return nodes, consts


def _inline_scan(node, g, fresh, max_unroll):
    if g.opset < 9:
        return None
    body = node.attrs["body"].g
    n_scan = int(node.attrs["num_scan_inputs"])
    n_state = len(node.inputs) - n_scan
    scan_ins = node.inputs[n_state:]
    in_axes = list(node.attrs.get("scan_input_axes") or [0] * n_scan)
    in_dirs = list(node.attrs.get("scan_input_directions") or [0] * n_scan)
    n_sout = len(body.output) - n_state
    out_axes = list(node.attrs.get("scan_output_axes") or [0] * n_sout)
    out_dirs = list(node.attrs.get("scan_output_directions") or [0] * n_sout)
    lengths = set()
    for x, ax in zip(scan_ins, in_axes):
        shape = g.shape(x) if x in g.types or x in g.constants else None
        if shape is None or not all(isinstance(d, int) for d in shape):
            return None
        lengths.add(int(shape[ax % len(shape)]))
    if len(lengths) != 1:
        return None
    steps = lengths.pop()
    if not 0 < steps <= max_unroll:
        return None
    b_in = [i.name for i in body.input]
    outer = node.attrs.get("aicc_outer", {})
    nodes, consts = [], {}
    states = list(node.inputs[:n_state])
    souts = [[] for _ in range(n_sout)]
    for t in range(steps):
        p = fresh()
        slices = []
        for j, (x, ax, d) in enumerate(zip(scan_ins, in_axes, in_dirs)):
            idx = f"{p}idx{j}"
            consts[idx] = np.array(steps - 1 - t if d else t, np.int64)
            rank = len(g.shape(x))
            s = f"{p}slice{j}"
            nodes.append(Node("Gather", [x, idx], [s], {"axis": int(ax) % rank},
                              name=f"{p}gather{j}"))
            slices.append(s)
        mapping = {**dict(zip(b_in, states + slices)), **outer}
        ns, cs, outs = _body_nodes(body, p, mapping)
        nodes += ns
        consts.update(cs)
        states = outs[:n_state]
        for k, s in enumerate(outs[n_state:]):
            souts[k].append(s)
    for k, y in enumerate(node.outputs[:n_state]):
        if y:
            nodes.append(Node("Identity", [states[k]], [y], name=f"{node.name}/final{k}"))
    for k, y in enumerate(node.outputs[n_state:]):
        if y:
            rank = len(g.shape(y)) if y in g.types else None
            ax = int(out_axes[k])
            if ax < 0:
                if rank is None:
                    return None
                ax += rank
            nodes += _stack(g, souts[k], ax, y, f"{node.name}/scan{k}", consts,
                            bool(out_dirs[k]))
    return nodes, consts


@graph_pass("inline-control-flow")
def inline_control_flow(g, *, max_unroll: int = 64, max_nodes: int = 200_000):
    """Flatten If (both branches + Where, or the constant branch), for-style Loop with a
    constant trip count and Scan over static sequences into plain nodes (see module doc).
    Nested loops multiply: a graph growing past ``max_nodes`` nodes is refused."""
    if not any(n.op_type in CONTROL and n.domain in ("", "ai.onnx") for n in g.nodes):
        return g
    g = g.copy()
    counter = iter(range(1 << 30))
    for _round in range(8):                      # nested control flow: a few rounds
        changed, nodes = False, []
        for i, n in enumerate(g.nodes):
            res = None
            if n.domain in ("", "ai.onnx") and n.op_type in CONTROL:
                def fresh(n=n):
                    return f"{n.name}#{next(counter)}/"
                try:
                    res = {"If": lambda: _inline_if(n, g, fresh),
                           "Loop": lambda: _inline_loop(n, g, fresh, max_unroll),
                           "Scan": lambda: _inline_scan(n, g, fresh, max_unroll)}[n.op_type]()
                except (KeyError, AttributeError, IndexError, TypeError, ValueError):
                    res = None                   # malformed: left for the support check
            if res is None:
                nodes.append(n)
                continue
            new_nodes, consts = res
            if len(nodes) + len(new_nodes) + len(g.nodes) - i - 1 > max_nodes:
                raise ModelError(f"{n.op_type} node {n.name!r}: unrolling it would take the "
                                 f"graph past {max_nodes} nodes (nested loops multiply; "
                                 "inline-control-flow max_nodes)")
            nodes += new_nodes
            g.constants.update(consts)
            changed = True
        g.nodes = nodes
        if not changed:
            break
    return g
