"""Small clean-up passes: identity removal, dead-node elimination, output materialization."""
from __future__ import annotations

import numpy as np

from ..errors import UnsupportedError
from ..ir import Node
from .registry import graph_pass

IDENTITY_LIKE = {"Identity"}


def _is_identity(n, g, used=frozenset()) -> bool:
    if n.domain not in ("", "ai.onnx"):
        return False
    if n.op_type in IDENTITY_LIKE:
        return True
    # Dropout in inference: output = input, mask unused (and training_mode, opset >= 12,
    # absent or a constant false: a training-mode Dropout is random, not an identity)
    if n.op_type != "Dropout" or (len(n.outputs) >= 2 and n.outputs[1] in used):
        return False
    if n.attrs.get("is_test", 1) == 0 and g.opset < 7:
        return False
    if len(n.inputs) >= 3 and n.inputs[2]:
        tm = g.const(n.inputs[2])
        return tm is not None and not bool(np.asarray(tm).reshape(-1)[0])
    return True


@graph_pass("remove-identity")
def remove_identity(g):
    """Bypass Identity, inference-mode Dropout without a used mask and a Relu of a Relu's
    output (Relu is idempotent, on NaN and -0 too; Xception-41 applies it twice to its first
    block's input, each read in its own layout): consumers read the input directly. Kept
    when its output is a graph output (it becomes the copy)."""
    g = g.copy()
    rename, kept = {}, []
    outs = set(g.outputs)
    used = outs | {i for n in g.nodes for i in n.inputs if i}
    relu_outs = set()
    for n in g.nodes:
        n.inputs = [rename.get(i, i) for i in n.inputs]
        relu = n.op_type == "Relu" and n.domain in ("", "ai.onnx")
        ident = _is_identity(n, g, used) or (relu and n.inputs[0] in relu_outs)
        if relu and not ident:
            relu_outs.add(n.outputs[0])
        if ident and n.outputs[0] not in outs:
            rename[n.outputs[0]] = n.inputs[0]
            continue
        if ident and n.op_type == "Dropout":
            n = Node("Identity", n.inputs[:1], n.outputs[:1], {}, n.name)
        kept.append(n)
    g.nodes = kept
    return g


@graph_pass("eliminate-dead-nodes")
def eliminate_dead_nodes(g):
    """Drop nodes none of whose outputs reaches a graph output, and unused constants."""
    g = g.copy()
    live = set(g.outputs)
    kept = []
    for n in reversed(g.nodes):
        if any(o in live for o in n.outputs if o):
            kept.append(n)
            live.update(i for i in n.inputs if i)
    g.nodes = kept[::-1]
    g.constants = {k: v for k, v in g.constants.items() if k in live}
    produced = {o for n in g.nodes for o in n.outputs}
    g.types = {k: v for k, v in g.types.items() if k in produced or k in g.inputs}
    return g


@graph_pass("materialize-outputs")
def materialize_outputs(g):
    """Make every graph output the output of a step (outputs live in caller buffers): a
    constant output gets a copy step. A graph input that is also an output is rejected."""
    g = g.copy()
    both = [o for o in g.outputs if o in g.inputs]
    if both:
        raise UnsupportedError(f"graph input(s) {', '.join(map(repr, both))} are also graph "
                               "outputs")
    if len(set(g.outputs)) != len(g.outputs):
        raise UnsupportedError("a tensor is listed twice among the graph outputs")
    taken = set(g.constants) | set(g.types) | set(g.inputs) | {
        t for n in g.nodes for t in list(n.inputs) + list(n.outputs)}
    rename = {}
    for o in g.outputs:
        if o in g.constants:
            src, k = f"{o}__aicc_const", 1
            while src in taken:
                src, k = f"{o}__aicc_const_{k}", k + 1
            taken.add(src)
            g.constants[src] = g.constants.pop(o)
            g.types[o] = g.type_of(src)
            rename[o] = src
    # other nodes reading the constant keep reading it (now under its new name): the copy
    # step is appended last, so reading its output would break the topological order
    for n in g.nodes:
        if any(i in rename for i in n.inputs):
            n.inputs = [rename.get(i, i) for i in n.inputs]
    for o, src in rename.items():
        g.nodes.append(Node("Identity", [src], [o], {}, f"copy_{len(g.nodes)}"))
    return g
