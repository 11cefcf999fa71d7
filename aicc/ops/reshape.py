"""Reshape, Flatten, Squeeze, Unsqueeze: the data is unchanged, only the shape differs.

The output shape comes from shape inference on the folded graph (Reshape's 0 / -1 /
allowzero, Squeeze/Unsqueeze axes as attribute before opset 13 or as input from 13, Flatten's
axis are all resolved there), so the kernel is one memcpy of the whole tensor; the memory
planner may later alias input and output instead. The shape/axes inputs are never read by the
C code, so they may be computed at run time (graph inputs) as long as the output shape is
static: either shape inference resolved it or the model declares it (a graph output's type).
The static shape is the contract: a run-time shape/axes value that disagrees with it is
ignored (the same bytes are copied; nothing is read or written out of bounds). When the output
shape is not static, check() says so. Values (NaN included) are copied bit for bit.
"""
from __future__ import annotations

from .base import Op, dtype_reason, register
from .traits import HALF_NATIVE


def is_runtime(node, g, k) -> bool:
    """Input k is present and not a compile-time constant (its value is read at run time)."""
    return k < len(node.inputs) and bool(node.inputs[k]) and g.const(node.inputs[k]) is None


def static_output_reason(node, g, why: str = "") -> str | None:
    """Reason when an output's shape is not static. ``why`` names what the shape depends on
    (e.g. "the run-time shape input"), for the message."""
    for o in node.outputs:
        t = g.type_of(o) if o and (o in g.types or o in g.constants) else None
        if o and (t is None or not t.is_static):
            dep = f" (it depends on {why})" if why else ""
            return (f"output '{o}' has no static shape{dep}: {t if t is not None else 'untyped'}; "
                    "make that input a constant or declare the output shape in the model")
    return None


def emit_memcpy(ctx) -> None:
    nbytes = ctx.g.type_of(ctx.node.outputs[0]).nbytes
    if nbytes:
        ctx(f"/* {ctx.node.op_type}: same bytes, new shape */")
        ctx(f"memcpy({ctx.out[0]}, {ctx.inp[0]}, {nbytes}u);")
    else:
        ctx(f"(void){ctx.out[0]};  /* empty tensor */")


class _Reshape(Op):
    traits = frozenset({HALF_NATIVE})
    view = True          # no step when the output is not a graph output (emit_c/sharing.py)
    shape_inputs = (1,)

    def check(self, node, g):
        why = (dtype_reason(g, node.inputs[:1])
               or static_output_reason(node, g, "the run-time shape/axes input"))
        if why:
            return why
        n_in, n_out = g.type_of(node.inputs[0]), g.type_of(node.outputs[0])
        if n_in.is_static and n_in.size != n_out.size:
            return (f"output shape {list(n_out.shape)} does not hold the {n_in.size} input "
                    "elements")
        return None

    def emit(self, node, ctx):
        emit_memcpy(ctx)


@register("Reshape", since=1)
class Reshape(_Reshape):
    attrs = {"allowzero": 0}


@register("Flatten", since=1)
class Flatten(_Reshape):
    attrs = {"axis": 1}


@register("Squeeze", since=1)
class Squeeze(_Reshape):
    attrs = {"axes": None}


@register("Unsqueeze", since=1)
class Unsqueeze(_Reshape):
    attrs = {"axes": None}
