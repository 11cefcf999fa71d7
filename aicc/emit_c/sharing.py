"""Buffer sharing decided at lowering: views and in-place steps.

- A *view* op (``Op.view``: Reshape, Flatten, Squeeze, Unsqueeze, Identity) whose input and
  output have the same dtype and whose output is not a graph output produces no step: its
  output is the input's memory under another shape.
- An *in-place* step (``Op.inplace_inputs(node, g)`` lists the inputs an op may overwrite,
  e.g. elementwise maps) writes its output over input k when that input's memory is an
  arena buffer (not a caller buffer, not weights), has the same size, and is not read after
  this step by anyone (including other views of it). Its pointers lose ``restrict``.

Each group of tensors sharing one buffer keeps its root, every member's byte offset from the
root and, while in-place decisions are made, its last reading step, updated as members join:
lowering stays linear in the node count (a chain of in-place steps is one growing group).
"""
from __future__ import annotations

from ..ops import lookup


class Sharing:
    def __init__(self, g, place: bool = True) -> None:
        self.g = g
        self.place = place               # Concat placement and Split/Slice sub-views allowed
        self.parent: dict = {}           # tensor -> tensor whose memory it uses
        self._root: dict = {}            # tensor with a parent -> its group's root
        self._off: dict = {}             # tensor with a parent -> its byte offset in the root
        self._members: dict = {}         # root -> the tensors of its group (itself included)
        self._last = None                # the ``last`` dict group_last was asked with
        self._glast: dict = {}           # root -> last step reading its group (under _last)

    def root(self, name: str) -> str:
        return self._root.get(name, name)

    def root_offset(self, name: str) -> int:
        return self._off.get(name, 0)

    def _link(self, child: str, parent: str, off: int = 0) -> None:
        """child (a root) uses parent's memory at byte offset ``off``; its group joins."""
        self.parent[child] = parent
        r, base = self.root(parent), self.root_offset(parent) + off
        group = self._members.pop(child, [child])
        for t in group:
            self._root[t] = r
            self._off[t] = self._off.get(t, 0) + base
        self._members.setdefault(r, [r]).extend(group)
        c = self._glast.pop(child, None)
        if r in self._glast:
            if c is None:
                c = max(self._last.get(t, -1) for t in group)
            self._glast[r] = max(self._glast[r], c)

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
            self._link(x, out, int(off))
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
            self._link(o, src, int(off))
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
        self._link(node.outputs[0], node.inputs[0])

    def group_last(self, root: str, last: dict) -> int:
        """The last step reading any tensor of root's group."""
        if self._last is not last:
            self._last, self._glast = last, {}
        v = self._glast.get(root)
        if v is None:
            v = max(last.get(t, -1) for t in self._members.get(root, [root]))
            self._glast[root] = v
        return v

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
            self._link(out, name)
            return True
        return False
