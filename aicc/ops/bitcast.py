"""BitCast (opset 26): reinterpret the bytes of a tensor as another type of the same width.

The shape is unchanged (the spec requires equal bit widths; check() refuses other pairs, and
types without a C representation here: sub-byte, 8-bit float, complex). Little-endian hosts
(every aicc target) need no byte swapping, so the kernel is one memcpy. NaN payloads, -0.0,
subnormals and Inf are kept bit for bit. A cast to bool normalises each byte to 0/1 (aicc's
bool is a uint8_t that must hold 0 or 1; onnx.reference keeps the raw byte, which numpy also
reads as True), so no value can produce an invalid bool.
"""
from __future__ import annotations

from ..emit_c.loops import numel
from .base import Op, dtype_reason, register
from .traits import HALF_NATIVE


@register("BitCast", since=26)
class BitCast(Op):
    traits = frozenset({HALF_NATIVE})
    attrs = {"to": None}

    def check(self, node, g):
        why = dtype_reason(g, [node.inputs[0], node.outputs[0]])
        if why:
            return why
        a, b = g.dtype(node.inputs[0]), g.dtype(node.outputs[0])
        if a.itemsize != b.itemsize:
            return f"{a.name} and {b.name} have different widths"
        if tuple(g.shape(node.inputs[0])) != tuple(g.shape(node.outputs[0])):
            return "output shape differs from the input shape"
        return None

    def emit(self, node, ctx):
        n = numel(ctx.in_shape(0))
        a, b = ctx.in_dtype(0), ctx.out_dtype(0)
        if n == 0:
            ctx(f"(void){ctx.out[0]};  /* empty tensor */")
            return
        if b.name == "bool" and a.name != "bool":
            ctx(f"/* BitCast {a.name} -> bool: each byte normalised to 0/1 */")
            with ctx.block(f"for (size_t i = 0; i < {n}u; ++i)"):
                ctx(f"{ctx.out[0]}[i] = (uint8_t)({ctx.inp[0]}[i] != 0);")
            return
        ctx(f"/* BitCast {a.name} -> {b.name}: same bits (little endian) */")
        ctx(f"memcpy({ctx.out[0]}, {ctx.inp[0]}, {n * a.itemsize}u);")
