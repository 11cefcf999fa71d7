"""The op interface and registry.

An op lives in one module: its ONNX attributes with spec defaults, an optional support check,
a numpy reference (constant folding and tests; defaults to onnx.reference on the one node), and
its C emitter. Register with ``@register("Relu", since=6)``; the newest registration whose
``since`` is at most the model's opset wins.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..emit_c.cwriter import C_TYPES
from ..errors import UnsupportedError

_REGISTRY: dict = {}       # (domain, op_type) -> list[(since, Op)]


class Op:
    op_type: str = ""
    domain: str = ""
    since: int = 1
    attrs: dict = {}            # attribute name -> spec default (None: required / no default)
    folds: bool = True          # may constant folding evaluate it?
    traits: frozenset = frozenset()     # what passes may assume of it (ops/traits.py)
    # Memory sharing (emit_c/sharing.py): a view op's output is its input 0 under another
    # shape (no step, no copy). inplace_inputs(node, g) -> input indices whose memory the
    # op may overwrite with output 0 (its emitted loops must read each element before
    # writing the same element, and must not pass these pointers to restrict helpers).
    view: bool = False
    inplace_inputs = None
    # Placement (emit_c/sharing.py): placed_inputs(node, g) -> byte offset of each input inside
    # output 0 when every input is one contiguous chunk of it (Concat: producers write there,
    # no copy); view_offsets(node, g) -> byte offset of each output inside input 0 when every
    # output is one contiguous chunk of it (Split, Slice: no step). None: not possible.
    placed_inputs = None
    view_offsets = None

    # -- attributes --------------------------------------------------------
    def attr(self, node, name):
        if name in node.attrs:
            return node.attrs[name]
        return self.attrs.get(name)

    # -- support -----------------------------------------------------------
    def check(self, node, g) -> str | None:
        """Why this node cannot be compiled (None when it can). Called on the final graph."""
        return None

    # -- reference -----------------------------------------------------------
    def reference(self, node, g, inputs: list) -> list:
        """numpy outputs for numpy inputs (None for omitted optional inputs)."""
        from .reference import run_onnx_reference
        return run_onnx_reference(node, g, inputs)

    # -- C ---------------------------------------------------------------------
    def emit(self, node, ctx) -> None:
        raise NotImplementedError(f"{self.op_type}: no C emitter")


def register(op_type: str, since: int = 1, domain: str = "") -> Callable:
    """Class decorator: register an Op subclass (instantiated once)."""
    def deco(cls):
        inst = cls()
        inst.op_type, inst.since, inst.domain = op_type, since, domain
        lst = _REGISTRY.setdefault((domain, op_type), [])
        lst.append((since, inst))
        lst.sort(key=lambda t: t[0])
        return cls
    return deco


def register_many(op_types, since: int = 1, domain: str = "", traits=None,
                  **fields) -> Callable:
    """Register one class under several op types (tables of small families). ``traits``:
    {op type: its traits} added to the class's."""
    def deco(cls):
        for t in op_types:
            inst = cls()
            inst.op_type, inst.since, inst.domain = t, since, domain
            for k, v in fields.items():
                setattr(inst, k, v)
            if traits and t in traits:
                inst.traits = cls.traits | frozenset(traits[t])
            lst = _REGISTRY.setdefault((domain, t), [])
            lst.append((since, inst))
            lst.sort(key=lambda p: p[0])
        return cls
    return deco


def lookup(node, opset: int) -> Op | None:
    lst = _REGISTRY.get((node.domain if node.domain != "ai.onnx" else "", node.op_type))
    if not lst:
        return None
    best = None
    for since, op in lst:
        if since <= opset or node.domain == "aicc":
            best = op
    return best


def registered_ops() -> list:
    return sorted(f"{d + '.' if d else ''}{t}" for (d, t) in _REGISTRY)


_ONNX_TYPE = {"float32": "float", "float64": "double"}


def schema_type_reason(node, g) -> str | None:
    """Input/output dtypes against the op schema's type constraints (onnx's checker does
    not check them): every tensor bound to one type variable has the same dtype."""
    from onnx import defs
    try:
        schema = defs.get_schema(node.op_type, g.opset, node.domain or "")
    except Exception:  # noqa: BLE001 - no schema (custom domain): the op's check decides
        return None
    allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    bound: dict = {}
    for names, formals in ((node.inputs, schema.inputs), (node.outputs, schema.outputs)):
        for k, name in enumerate(names):
            if not name or not formals:
                continue
            if k >= len(formals) and formals[-1].option != defs.OpSchema.FormalParameterOption.Variadic:
                continue                      # an aicc extension (e.g. MatMul's fused bias)
            ts = formals[min(k, len(formals) - 1)].type_str
            if ts not in allowed:
                continue
            try:
                dt = g.dtype(name).name
            except KeyError:
                continue
            t = f"tensor({_ONNX_TYPE.get(dt, dt)})"
            # the allowed list is the op's own business (some ops accept more than the
            # schema, e.g. float64 quantization); mixing dtypes in one variable never is
            prev = bound.setdefault(ts, (t, g.dtype(name).kind == "f"))
            if prev[1] != (g.dtype(name).kind == "f"):
                # float mixed with integer/bool in one type variable: no kernel can take it
                # (integer widths may mix: emitters read each input with its own C type)
                return f"{name!r} has dtype {dt}, but {ts} is {prev[0][7:-1]} elsewhere"
    return None


def _negative_output(n, g) -> str | None:
    """Why n's outputs cannot exist: a negative dim that its sizes, scales, pads or k gave
    (shape inference lets them through; the loops would run over a wrapped count)."""
    for o in n.outputs:
        t = g.types.get(o) if o else None
        if t is not None and any(isinstance(d, (int, np.integer)) and d < 0 for d in t.shape):
            return (f"output {o!r} would have the negative shape {list(t.shape)}: check the "
                    "node's sizes, scales, pads or k")
    return None


def check_supported(g) -> None:
    """Raise one UnsupportedError naming every unsupported op and its nodes."""
    for kind, names in (("input", g.inputs), ("output", g.outputs)):
        for name in names:
            t = g.types.get(name)
            dt = np.dtype(t.dtype) if t is not None else None
            if dt is not None and dt.name not in C_TYPES:
                raise UnsupportedError(
                    f"graph {kind} {name!r} has dtype {'string' if dt.kind in 'OSU' else dt.name}"
                    ": aicc compiles numeric and boolean tensors only")
    problems: dict = {}
    for n in g.nodes:
        op = lookup(n, g.opset)
        neg = _negative_output(n, g)
        if neg:
            problems.setdefault((n.op_type if not n.domain else f"{n.domain}.{n.op_type}",
                                 neg), []).append(n.name)
            continue
        if op is None:
            reason = "no implementation"
        else:
            try:
                reason = schema_type_reason(n, g) or op.check(n, g)
            except Exception as e:  # noqa: BLE001 - a check must never crash the build
                reason = f"check failed: {e}"
                unknown = [t for t in (*n.inputs, *n.outputs)
                           if t and t not in g.types and t not in g.constants]
                if isinstance(e, KeyError) and unknown:
                    reason = (f"no type / shape for {', '.join(repr(t) for t in unknown[:3])} "
                              "(shape inference did not reach it, e.g. past an unsupported op)")
        if reason:
            key = (n.op_type if not n.domain else f"{n.domain}.{n.op_type}", reason)
            problems.setdefault(key, []).append(n.name)
    if problems:
        parts = []
        for (op, reason), names in sorted(problems.items()):
            shown = ", ".join(repr(x) for x in names[:5])
            more = f" and {len(names) - 5} more" if len(names) > 5 else ""
            parts.append(f"{op} ({reason}; nodes {shown}{more})")
        raise UnsupportedError(f"unsupported: {'; '.join(parts)}")


def static_shape(g, name) -> tuple:
    return tuple(int(d) for d in g.shape(name))


def np_dtype(g, name) -> np.dtype:
    return g.dtype(name)


def empty_body(ctx) -> None:
    """Body of a step whose output is empty (the output pointers are still declared)."""
    ctx(" ".join(f"(void){o};" for o in ctx.out if o) + "  /* empty output: nothing to do */")


def float_dtype_reason(dts) -> str | None:
    dts = {np.dtype(d) for d in dts}
    if len(dts) != 1:
        return "mixed dtypes " + ", ".join(sorted(d.name for d in dts))
    dt = dts.pop()
    if dt not in (np.float32, np.float64):
        return f"dtype {dt.name} not supported (float32/float64 only)"
    return None


def dtype_reason(g, names) -> str | None:
    """Why these tensors cannot be moved by C code (None when every dtype has a C type)."""
    for n in names:
        if n:
            dt = g.dtype(n)
            if dt.name not in C_TYPES:
                return f"dtype {dt.name} not supported"
    return None
