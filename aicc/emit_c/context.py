"""What an op emitter sees: its node, typed C variables for its tensors, and a writer.

An emitter writes the body of one step function. Inputs are ``ctx.inp[i]`` (None for an
omitted optional input), outputs ``ctx.out[i]``; both are pointer variables whose
declarations (with shape comments) the step prologue provides. Emitters may add shared
helper functions (``ctx.helper``), derived read-only constants (``ctx.const``, e.g. packed
weights) and step-local scratch memory from the arena (``ctx.scratch``).
"""
from __future__ import annotations

import numpy as np

from .cwriter import CWriter, ctype


class StepContext:
    def __init__(self, g, node, index: int, target, helpers: dict) -> None:
        self.g = g
        self.node = node
        self.index = index
        self.target = target
        self.w = CWriter()
        self.w.level = 1
        self._helpers = helpers          # shared across the bundle: name -> code
        self.inp = [f"in{k}" if name else None for k, name in enumerate(node.inputs)]
        self.out = [f"out{k}" if name else None for k, name in enumerate(node.outputs)]
        self.extra_consts: list = []     # (var, ndarray)
        self.scratches: list = []        # (var, nbytes, ctype)
        self.restrict = True             # emitters writing in place set this False
        self.kernel = ""                 # the kernel variant an emitter chose (manifest, profile)
        self.schedule: dict = {}         # the schedule parameters it resolved (manifest, --dump-ir)

    # -- tensor facts ------------------------------------------------------------
    def in_shape(self, k: int) -> tuple:
        return tuple(int(d) for d in self.g.shape(self.node.inputs[k]))

    def out_shape(self, k: int) -> tuple:
        return tuple(int(d) for d in self.g.shape(self.node.outputs[k]))

    def in_dtype(self, k: int) -> np.dtype:
        return self.g.dtype(self.node.inputs[k])

    def out_dtype(self, k: int) -> np.dtype:
        return self.g.dtype(self.node.outputs[k])

    def in_ctype(self, k: int) -> str:
        return ctype(self.in_dtype(k))

    def out_ctype(self, k: int) -> str:
        return ctype(self.out_dtype(k))

    def in_const(self, k: int):
        """Compile-time value of input k (None when not a constant or omitted)."""
        if k >= len(self.node.inputs):
            return None
        return self.g.const(self.node.inputs[k])

    def has_input(self, k: int) -> bool:
        return k < len(self.node.inputs) and bool(self.node.inputs[k])

    # -- additions ---------------------------------------------------------------
    def helper(self, name: str, code: str) -> str:
        """Register a shared static C function (emitted once per bundle); returns name.
        Helpers are emitted sorted by name, before all steps: a helper that calls another
        must sort after it (e.g. "conv.1.kernel" after "conv.0.util")."""
        prev = self._helpers.get(name)
        if prev is not None and prev != code:
            raise AssertionError(f"helper {name} defined twice with different code")
        self._helpers[name] = code
        return name

    def const(self, arr: np.ndarray, hint: str = "k") -> str:
        var = f"{hint}{len(self.extra_consts)}"
        self.extra_consts.append((var, np.ascontiguousarray(arr)))
        return var

    def scratch(self, nbytes: int, ct: str = "float", hint: str = "tmp") -> str:
        var = f"{hint}{len(self.scratches)}"
        self.scratches.append((var, int(nbytes), ct))
        return var

    def __call__(self, line: str = "") -> CWriter:
        return self.w(line)

    def block(self, head: str):
        return self.w.block(head)
