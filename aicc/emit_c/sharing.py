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
    def __init__(self, g, place: bool = True) -> None:
        self.g = g
        self.place = place               # Concat placement and Split/Slice sub-views allowed
        self.parent: dict = {}           # tensor -> tensor whose memory it uses
        self.offset: dict = {}           # tensor -> its byte offset inside its parent

    def root(self, name: str) -> str:
        while name in self.parent:
            name = self.parent[name]
        return name

    def root_offset(self, name: str) -> int:
        off = 0
        while name in self.parent:
            off += self.offset.get(name, 0)
            name = self.parent[name]
        return off

    def _arena_ok(self, name: str) -> bool:
        g = self.g
        return name not in g.inputs and name not in g.outputs and name not in g.constants

    def try_place(self, node) -> bool:
        """Concat whose inputs are contiguous chunks of its output: each input is placed at
        its offset inside the output (its producer writes there), and the Concat is no step.
        Only inputs that are arena tensors of their own (no parent yet) qualify."""
        g = self.g
        op = lookup(node, g.opset)
        f = getattr(op, "placed_inputs", None) if self.place else None
        offs = f(node, g) if f is not None else None
        if offs is None or not node.outputs or not self._arena_ok(node.outputs[0]):
            return False
        out = node.outputs[0]
        if len(set(node.inputs)) != len(node.inputs) or out in self.parent:
            return False
        for x in node.inputs:
            if (not self._arena_ok(x) or x in self.parent or g.dtype(x) != g.dtype(out)
                    or g.type_of(x).nbytes == 0):
                return False
        for x, off in zip(node.inputs, offs):
            self.parent[x] = out
            self.offset[x] = int(off)
        return True

    def try_subview(self, node) -> bool:
        """Split/Slice whose outputs are contiguous chunks of an arena input: no step, each
        output is the input's memory at an offset."""
        g = self.g
        op = lookup(node, g.opset)
        f = getattr(op, "view_offsets", None) if self.place else None
        if f is None or not node.inputs or not node.inputs[0]:
            return False
        src = node.inputs[0]
        if not self._arena_ok(self.root(src)) or not self._arena_ok(src):
            return False
        outs = node.outputs
        if not outs or not all(outs) or any(not self._arena_ok(o) or g.dtype(o) != g.dtype(src)
                                             for o in outs):
            return False
        offs = f(node, g)
        if offs is None:
            return False
        for o, off in zip(outs, offs):
            self.parent[o] = src
            self.offset[o] = int(off)
        return True

    def is_view(self, node) -> bool:
        g = self.g
        op = lookup(node, g.opset)
        if getattr(op, "view", False) is not True or not node.inputs or not node.inputs[0]:
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
        if out in g.outputs or any(o for o in node.outputs[1:]) or out in self.parent:
            return False                 # (already placed: a chunk of a Concat's output)
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
            return True
        return False
