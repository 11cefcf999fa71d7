"""BitShift, BitwiseAnd/Or/Xor (numpy broadcasting) and BitwiseNot on integer tensors.

All bit operations are done on the uint64_t image of the operands (sign-extended for signed
types) and brought back to the dtype modulo 2^bits without implementation-defined
conversions (cast.py's wrap helper), so no input value has undefined behaviour:

- BitShift LEFT: bits shifted past the top (or the sign bit) are lost.
- BitShift RIGHT: logical for unsigned types, arithmetic (sign-extending) for signed types,
  computed as ``-1 - ((-1 - x) >> s)`` for negative x (never shifting a negative value).
- A shift amount that is negative or >= the bit width gives what the sign extension alone
  produces (the spec, opset 28): -1 for a right shift of a negative x, 0 otherwise.
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import ctype
from ..emit_c.loops import emit_broadcast, emit_map, numel
from .base import Op, register, register_many
from .cast import cast_expr

INT_TYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
U64, I64 = np.dtype(np.uint64), np.dtype(np.int64)


def _same_shape_inputs(node, g):
    """In-place candidates: inputs with the output's shape (read before overwritten)."""
    out = g.shape(node.outputs[0])
    return [k for k, i in enumerate(node.inputs) if i and g.shape(i) == out]


def _int_reason(g, names):
    dts = {g.dtype(n) for n in names if n}
    if len(dts) != 1:
        return "inputs of different dtypes"
    dt = dts.pop()
    return None if dt.name in INT_TYPES else f"dtype {dt.name} not supported (integers only)"


def _from_u64(ctx, dt, e):
    """The dtype's value of the uint64_t expression e, modulo 2^bits."""
    return cast_expr(ctx, U64, dt, f"({e})")


def _shift_helpers(ctx, kind):
    if kind == "shl":
        return ctx.helper("aicc_shl_u64", """\
/* u << s for 0 <= s < bits, else 0 (the result is taken modulo 2^bits by the caller) */
static uint64_t aicc_shl_u64(uint64_t u, int64_t s, int bits)
{
    return (s < 0 || s >= bits) ? 0u : u << s;
}""")
    if kind == "shr":
        return ctx.helper("aicc_shr_u64", """\
/* logical u >> s for 0 <= s < bits, else 0 */
static uint64_t aicc_shr_u64(uint64_t u, int64_t s, int bits)
{
    return (s < 0 || s >= bits) ? 0u : u >> s;
}""")
    return ctx.helper("aicc_sar_i64", """\
/* arithmetic x >> s (sign-extending) for 0 <= s < bits, else the sign fill (-1 or 0);
 * negative x is shifted as its complement -1 - x >= 0, so nothing is implementation-defined */
static int64_t aicc_sar_i64(int64_t x, int64_t s, int bits)
{
    if (s < 0 || s >= bits) return x < 0 ? -1 : 0;
    return x < 0 ? -1 - ((-1 - x) >> s) : x >> s;
}""")


@register("BitShift", since=11)
class BitShift(Op):
    attrs = {"direction": None}
    inplace_inputs = staticmethod(_same_shape_inputs)

    def _dir(self, node):
        d = self.attr(node, "direction")
        return d.decode() if isinstance(d, bytes) else d

    def check(self, node, g):
        if self._dir(node) not in ("LEFT", "RIGHT"):
            return f"direction {self._dir(node)!r} (must be LEFT or RIGHT)"
        return _int_reason(g, node.inputs[:2])

    def emit(self, node, ctx):
        dt = ctx.in_dtype(0)
        ct = ctype(dt)
        bits = dt.itemsize * 8
        x, y = ctx.inp[0], ctx.inp[1]
        left = self._dir(node) == "LEFT"
        ctx(f"/* BitShift {'LEFT' if left else 'RIGHT'} on {ct}; shift amounts outside "
            f"[0, {bits}) give the sign fill */")

        def expr(ix):
            s = cast_expr(ctx, dt, I64, f"{y}[{ix[1]}]")
            if left:
                return _from_u64(ctx, dt, f"{_shift_helpers(ctx, 'shl')}((uint64_t){x}[{ix[0]}], "
                                 f"{s}, {bits})")
            if dt.kind == "u":
                return f"({ct}){_shift_helpers(ctx, 'shr')}((uint64_t){x}[{ix[0]}], {s}, {bits})"
            return f"({ct}){_shift_helpers(ctx, 'sar')}((int64_t){x}[{ix[0]}], {s}, {bits})"
        emit_broadcast(ctx, ctx.out_shape(0), [ctx.in_shape(0), ctx.in_shape(1)], expr)


BITWISE = {"BitwiseAnd": "&", "BitwiseOr": "|", "BitwiseXor": "^"}


@register_many(list(BITWISE), since=18)
class Bitwise(Op):
    inplace_inputs = staticmethod(_same_shape_inputs)

    def check(self, node, g):
        return _int_reason(g, node.inputs[:2])

    def emit(self, node, ctx):
        dt = ctx.in_dtype(0)
        a, b = ctx.inp[0], ctx.inp[1]
        sym = BITWISE[self.op_type]
        ctx(f"/* {self.op_type}, broadcast */")
        emit_broadcast(ctx, ctx.out_shape(0), [ctx.in_shape(0), ctx.in_shape(1)],
                       lambda ix: _from_u64(ctx, dt, f"(uint64_t){a}[{ix[0]}] {sym} "
                                            f"(uint64_t){b}[{ix[1]}]"))


@register("BitwiseNot", since=18)
class BitwiseNot(Op):
    inplace_inputs = staticmethod(_same_shape_inputs)

    def check(self, node, g):
        return _int_reason(g, node.inputs[:1])

    def emit(self, node, ctx):
        dt = ctx.in_dtype(0)
        ctx("/* BitwiseNot */")
        emit_map(ctx, numel(ctx.out_shape(0)), lambda v: _from_u64(ctx, dt, f"~(uint64_t){v}"))
