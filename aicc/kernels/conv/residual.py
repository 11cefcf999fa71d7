"""The residual term of a Conv's epilogue (passes/fuse_residual.py): input 3, a tensor of the
output's shape and dtype, added to the conv output (bias included, rounded to the dtype)
before the fused activation: ``y = act(round(conv + bias) + r)``, the unfused ``Add`` bit for
bit.

Every kernel path runs the conv alone (``without``) and then ``pass_after``: the Add's own
loop ``y = act(y + r)`` over the output, still in cache, in the same step. Adding it in
registers instead, in the Winograd tiles form's output transform, was measured slower in
the interleaved benchmark (onnxruntime's run leaves the caches cold): ResNet-8 ratio 0.83
against 0.81 with the loop and 0.79 unfused, ResNet-18 0.946 / 0.939 / 0.939 (x86-avx512,
4 alternating rounds each), though faster with warm caches (64 channels at 32x32: 227 ->
195-217 us). NaN/Inf: IEEE addition, as the Add.
"""
from __future__ import annotations

from copy import copy

import numpy as np
from ..vmath.fused import fused_act_helper, fused_array_act

RESIDUAL = "aicc_residual"


def has_residual(node) -> bool:
    return bool(node.attrs.get(RESIDUAL)) and len(node.inputs) > 3 and bool(node.inputs[3])


def check(node, g, out_shape) -> str | None:
    """Why the residual input cannot be fused (None when it can, or when there is none)."""
    if not node.attrs.get(RESIDUAL):
        return None
    if not has_residual(node):
        return "aicc_residual without a residual input (input 3)"
    t = g.type_of(node.inputs[3])
    if t.dtype != g.dtype(node.inputs[0]):
        return f"residual dtype {t.dtype.name}, the conv's is {g.dtype(node.inputs[0]).name}"
    if t.is_static and tuple(t.shape) != tuple(out_shape):
        return f"residual shape {list(t.shape)}, the output's is {list(out_shape)}"
    return None


def without(node):
    """The conv alone: no residual input, no activation (run before ``pass_after``)."""
    n = copy(node)
    n.inputs = list(node.inputs[:3])
    while n.inputs and not n.inputs[-1]:
        n.inputs.pop()
    n.attrs = {k: v for k, v in node.attrs.items()
               if k not in (RESIDUAL, "aicc_act", "aicc_act_params")}
    return n


def reference(y: np.ndarray, r: np.ndarray) -> np.ndarray:
    return (y + r).astype(y.dtype)


def pass_after(ctx, node, n: int) -> None:
    """``y = act(y + r)`` over the n outputs of a conv emitted by ``without(node)``: the
    loops of the Add it replaces (elementwise.Binary: the rounded sums, then the vector
    activation over them where there is one, else the activation per element), so its values
    are the unfused graph's bit for bit."""
    y, r, dt = ctx.out[0], ctx.inp[3], ctx.out_dtype(0)
    arr = fused_array_act(ctx, node, dt)
    fn = None if arr else fused_act_helper(ctx, node, dt)
    ctx(f"/* fused residual Add{' and activation' if node.attrs.get('aicc_act') else ''} */")
    ctx(f"for (size_t i = 0; i < {n}u; ++i)")
    ctx(f"    {y}[i] = {fn}({y}[i] + {r}[i]);" if fn else f"    {y}[i] += {r}[i];")
    if arr:
        ctx(f"{arr}({y}, {n}u);")
