"""Where: out = cond ? x : y with numpy broadcasting of all three (loops.emit_broadcast).
The condition is a bool tensor (uint8_t, any nonzero is true). x and y may be any dtype with a
C type; values are selected bit for bit (NaN preserved)."""
from __future__ import annotations

from .base import Op, register
from .loops import emit_broadcast
from .transpose import dtype_reason


@register("Where", since=9)
class Where(Op):
    def check(self, node, g):
        return dtype_reason(g, node.inputs)

    def emit(self, node, ctx):
        c, x, y = ctx.inp[:3]
        out = ctx.out_shape(0)
        if 0 in out:
            ctx(f"(void){ctx.out[0]};  /* empty output */")
            return
        ctx("/* Where: select per element, operands broadcast */")
        emit_broadcast(ctx, out, [ctx.in_shape(0), ctx.in_shape(1), ctx.in_shape(2)],
                       lambda ix: f"{c}[{ix[0]}] ? {x}[{ix[1]}] : {y}[{ix[2]}]")
