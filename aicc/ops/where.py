"""Where: out = cond ? x : y with numpy broadcasting of all three (loops.emit_broadcast).
The condition is a bool tensor (uint8_t, any nonzero is true). x and y may be any dtype with a
C type; values are selected bit for bit (NaN preserved). The select is a small inline function
of both values, so the loop reads x and y unconditionally and compiles to vector blends (the
branch per element ran 13x slower on random conditions with GCC 12 on x86-avx512)."""
from __future__ import annotations

from ..emit_c.cwriter import ctype, sanitize
from ..emit_c.loops import emit_broadcast
from .base import Op, dtype_reason, register
from .traits import HALF_NATIVE


@register("Where", since=9)
class Where(Op):
    traits = frozenset({HALF_NATIVE})
    def check(self, node, g):
        return dtype_reason(g, node.inputs)

    def emit(self, node, ctx):
        c, x, y = ctx.inp[:3]
        out = ctx.out_shape(0)
        if 0 in out:
            ctx(f"(void){ctx.out[0]};  /* empty output */")
            return
        ct = ctype(ctx.out_dtype(0))
        sel = f"aicc_where_{sanitize(ct, 24)}"
        ctx.helper(f"where.{sel}", f"""\
/* cond ? a : b with both operands evaluated by the caller: a loop of it loads x and y
 * unconditionally, so compilers vectorize it as a blend instead of branching per element */
static inline {ct} {sel}(uint8_t c, {ct} a, {ct} b)
{{
    return c ? a : b;
}}""")
        ctx("/* Where: select per element, operands broadcast */")
        emit_broadcast(ctx, out, [ctx.in_shape(0), ctx.in_shape(1), ctx.in_shape(2)],
                       lambda ix: f"{sel}({c}[{ix[0]}], {x}[{ix[1]}], {y}[{ix[2]}])")
