"""Buffer sharing decided at lowering: views and in-place steps.

- A *view* op (``Op.view``: Reshape, Flatten, Squeeze, Unsqueeze, Identity) whose input and
  output have the same dtype and whose output is not a graph output produces no step: its
  output is the input's memory under another shape.
- An *in-place* step (``Op.inplace_inputs(node, g)`` lists the inputs an op may overwrite,
  e.g. elementwise maps) writes its output over input k when that input's memory is an
  arena buffer (not a caller buffer, not weights), has the same size, and is not read after
  this step by anyone (including other views of it). Its pointers lose ``restrict``.
"""
from __future__ import annotations

from ..ops import lookup


class Sharing:
    def __init__(self, g) -> None:
        self.g = g
        self.parent: dict = {}           # tensor -> tensor whose memory it uses

    def root(self, name: str) -> str:
        while name in self.parent:
            name = self.parent[name]
        return name

    def is_view(self, node) -> bool:
        g = self.g
        op = lookup(node, g.opset)
        if not getattr(op, "view", False) or not node.inputs or not node.inputs[0]:
            return False
        src, dst = node.inputs[0], node.outputs[0]
        if dst in g.outputs or src in g.constants:
            return False
        return (g.dtype(src) == g.dtype(dst) and
                g.type_of(src).nbytes == g.type_of(dst).nbytes)

    def add_view(self, node) -> None:
        self.parent[node.outputs[0]] = node.inputs[0]

    def group_last(self, root: str, last: dict) -> int:
        members = [t for t in list(self.parent) + [root] if self.root(t) == root]
        return max((last.get(t, -1) for t in members), default=-1)

    def try_inplace(self, step, last: dict, where_ok) -> bool:
        """Let step's output 0 reuse one of its inputs' memory when legal."""
        g, node = self.g, step.node
        op = lookup(node, g.opset)
        cands = getattr(op, "inplace_inputs", None)
        if cands is None or not node.outputs or not node.outputs[0]:
            return False
        out = node.outputs[0]
        if out in g.outputs or any(o for o in node.outputs[1:]):
            return False
        for k in cands(node, g):
            name = node.inputs[k] if k < len(node.inputs) else ""
            if not name or name in g.constants:
                continue
            r = self.root(name)
            if not where_ok(r) or node.inputs.count(name) > 1:
                continue
            if g.type_of(r).nbytes != g.type_of(out).nbytes or g.dtype(name) != g.dtype(out):
                continue
            if self.group_last(r, last) != step.index:
                continue
            self.parent[out] = name
            step.ctx.restrict = False
            return True
        return False
