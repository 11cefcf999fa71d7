"""Walks over every part of an ONNX model: its graph, the subgraphs of If / Loop / Scan
nodes at any depth, and the model-local functions."""
from __future__ import annotations

import onnx


def subgraphs(node):
    """The graphs a node's attributes hold (If branches, Loop / Scan bodies)."""
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            yield a.g
        elif a.type == onnx.AttributeProto.GRAPHS:
            yield from a.graphs


def all_nodes(model: onnx.ModelProto):
    """Every node of the model: the graph's, its subgraphs' and the functions'."""
    stack = [model.graph.node] + [f.node for f in model.functions]
    while stack:
        for n in stack.pop():
            yield n
            stack.extend(g.node for g in subgraphs(n))


def all_graphs(model: onnx.ModelProto):
    """The model's graph and every subgraph (in the graph or in a function)."""
    yield model.graph
    for n in all_nodes(model):
        yield from subgraphs(n)
