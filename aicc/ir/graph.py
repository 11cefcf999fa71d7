"""The Graph IR: nodes over named, typed tensors; constants held as numpy arrays.

A Graph is treated as a value: passes build a new Graph (``g.copy()`` then edit the
copy) and return it. Tensor names are the ONNX names; they never reach C code.
"""
from __future__ import annotations

import copy as _copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class TensorType:
    """dtype (numpy) and shape; a dim is an int, or a str for a symbolic dim."""

    dtype: np.dtype
    shape: tuple

    @property
    def is_static(self) -> bool:
        return all(isinstance(d, int) for d in self.shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= int(d)
        return n

    @property
    def nbytes(self) -> int:
        return self.size * np.dtype(self.dtype).itemsize

    def __str__(self) -> str:
        dims = ",".join(str(d) for d in self.shape)
        return f"{np.dtype(self.dtype).name}[{dims}]"


@dataclass
class Node:
    op_type: str
    inputs: list            # tensor names; "" marks an omitted optional input
    outputs: list
    attrs: dict = field(default_factory=dict)
    name: str = ""
    domain: str = ""

    def __str__(self) -> str:
        attrs = ", ".join(f"{k}={_short(v)}" for k, v in sorted(self.attrs.items()))
        a = f" {{{attrs}}}" if attrs else ""
        return f"{', '.join(self.outputs)} = {self.op_type}({', '.join(self.inputs)}){a}"


def _short(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return f"array{list(v.shape)}" if v.size > 8 else repr(v.tolist())
    if isinstance(v, (list, tuple)) and len(v) > 8:
        return f"[{len(v)} items]"
    return repr(v)


@dataclass
class Graph:
    nodes: list
    inputs: list                 # names of graph inputs (not constants)
    outputs: list                # names of graph outputs
    types: dict                  # name -> TensorType, for every tensor with a known type
    constants: dict              # name -> np.ndarray (initializers and folded values)
    opset: int = 17
    name: str = "model"

    def copy(self) -> "Graph":
        return Graph(
            nodes=[_copy.copy(n) for n in self.nodes],
            inputs=list(self.inputs),
            outputs=list(self.outputs),
            types=dict(self.types),
            constants=dict(self.constants),
            opset=self.opset,
            name=self.name,
        )

    # -- queries ---------------------------------------------------------
    def producers(self) -> dict:
        return {o: n for n in self.nodes for o in n.outputs if o}

    def consumers(self) -> dict:
        cons: dict = {}
        for n in self.nodes:
            for i in n.inputs:
                if i:
                    cons.setdefault(i, []).append(n)
        return cons

    def type_of(self, name: str) -> TensorType:
        if name in self.constants:
            c = self.constants[name]
            return TensorType(c.dtype, tuple(c.shape))
        return self.types[name]

    def shape(self, name: str) -> tuple:
        return self.type_of(name).shape

    def dtype(self, name: str) -> np.dtype:
        return np.dtype(self.type_of(name).dtype)

    def const(self, name: str):
        """The constant value of a tensor, or None (also for omitted inputs)."""
        return self.constants.get(name) if name else None

    def __str__(self) -> str:
        from .printer import format_graph
        return format_graph(self)


def dtype_from_name(name: str) -> np.dtype:
    """numpy dtype from its name, including ml_dtypes' types (which onnx uses): bfloat16,
    the 8-bit and 4-bit floats, 4-bit and 2-bit integers."""
    if name in _ML_DTYPES:
        import ml_dtypes
        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)


_ML_DTYPES = {"bfloat16", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
              "float4_e2m1fn", "float8_e8m0fnu", "int4", "uint4", "int2", "uint2"}
