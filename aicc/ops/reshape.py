"""Reshape, Flatten, Squeeze, Unsqueeze: the data is unchanged, only the shape differs.

The output shape comes from shape inference on the folded graph (Reshape's 0 / -1 /
allowzero, Squeeze/Unsqueeze axes as attribute before opset 13 or as constant input from 13,
Flatten's axis are all resolved there), so the kernel is one memcpy of the whole tensor; the
memory planner may later alias input and output instead. Shape/axes inputs must be
compile-time constants (a run-time shape would make the output shape dynamic); they are never
read by the C code. Values (NaN included) are copied bit for bit.
"""
from __future__ import annotations

from .base import Op, register
from .transpose import dtype_reason


def runtime_input_reason(node, g, ks, what) -> str | None:
    """Reason when one of inputs ``ks`` is a graph input (its value only known at run time).
    Inputs computed by other nodes may still fold to constants, so only graph inputs are
    refused here; emitters re-check constness on the final graph."""
    for k in ks:
        if k < len(node.inputs) and node.inputs[k] and node.inputs[k] in g.inputs:
            return f"{what} must be a compile-time constant"
    return None


def emit_memcpy(ctx) -> None:
    nbytes = ctx.g.type_of(ctx.node.outputs[0]).nbytes
    if nbytes:
        ctx(f"/* {ctx.node.op_type}: same bytes, new shape */")
        ctx(f"memcpy({ctx.out[0]}, {ctx.inp[0]}, {nbytes}u);")
    else:
        ctx(f"(void){ctx.out[0]};  /* empty tensor */")


class _Reshape(Op):
    shape_inputs = (1,)

    def check(self, node, g):
        return (dtype_reason(g, node.inputs[:1])
                or runtime_input_reason(node, g, self.shape_inputs, "shape/axes input"))

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
