"""Elementwise families as tables: unary math/activations and broadcasting binary ops.

Binary semantics (documented, tested): float ops follow IEEE-754 (NaN propagates, x/0 is
+-Inf or NaN). Integer Div by zero gives 0 and INT_MIN / -1 gives INT_MIN (no trap); Mod
follows the ONNX fmod attribute; Pow on integers is exact repeated multiplication.
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import ctype
from .activations import ACT, INT_OK, act_expr, act_params
from .base import Op, register_many
from .loops import emit_broadcast, emit_map, numel

UNARY = sorted(set(ACT) - {"Clip", "Gelu"})


@register_many(UNARY, since=1)
class Unary(Op):
    def check(self, node, g):
        dt = g.dtype(node.inputs[0])
        if dt.kind == "f" and dt.itemsize >= 4:
            return None
        if dt.kind in "iu" and self.op_type in INT_OK:
            return None
        return f"dtype {dt.name} not supported"

    def emit(self, node, ctx):
        p = act_params(node, ctx.g)
        dt = ctx.in_dtype(0)
        ct = ctype(dt)
        n = numel(ctx.out_shape(0))
        if n == 0:
            ctx("/* empty tensor */")
            return
        with ctx.block(f"for (size_t i = 0; i < {n}u; ++i)"):
            ctx(f"const {ct} x = {ctx.inp[0]}[i];")
            ctx(f"{ctx.out[0]}[i] = {act_expr(self.op_type, p, 'x', dt)};")


@register_many(["Gelu"], since=20)
class GeluOp(Unary):
    pass


@register_many(["Clip"], since=6)
class Clip(Unary):
    def check(self, node, g):
        for k in (1, 2):
            if len(node.inputs) > k and node.inputs[k] and g.const(node.inputs[k]) is None:
                return "min/max must be constants"
        return super().check(node, g)

    def emit(self, node, ctx):
        p = act_params(node, ctx.g)
        dt = ctx.in_dtype(0)
        if dt.kind in "iu":
            info = np.iinfo(dt)
            for k in ("min", "max"):
                if p.get(k) is not None:
                    p[k] = int(np.clip(p[k], info.min, info.max))
        ct = ctype(dt)
        n = numel(ctx.out_shape(0))
        if n == 0:
            ctx("/* empty tensor */")
            return
        with ctx.block(f"for (size_t i = 0; i < {n}u; ++i)"):
            ctx(f"const {ct} x = {ctx.inp[0]}[i];")
            ctx(f"{ctx.out[0]}[i] = {act_expr('Clip', p, 'x', dt)};")


# -- binary ----------------------------------------------------------------------------

BINARY_FLOAT = {
    "Add": "{a} + {b}", "Sub": "{a} - {b}", "Mul": "{a} * {b}", "Div": "{a} / {b}",
    "Pow": "pow({a}, {b})", "Max": "AICC_FMAX({a}, {b})", "Min": "AICC_FMIN({a}, {b})",
}
COMPARE = {"Equal": "==", "Less": "<", "Greater": ">", "LessOrEqual": "<=",
           "GreaterOrEqual": ">="}
LOGIC = {"And": "&&", "Or": "||", "Xor": "!="}


def _helpers(ctx, ct):
    ctx.helper("AICC_FMAXMIN", "/* max/min that propagate NaN (as numpy and onnxruntime do) */\n"
               "#define AICC_FMAX(a, b) ((a) != (a) || (a) > (b) ? (a) : (b))\n"
               "#define AICC_FMIN(a, b) ((a) != (a) || (a) < (b) ? (a) : (b))")


def _int_div_helper(ctx, ct, unsigned):
    name = f"aicc_div_{ct}"
    if unsigned:
        body = "    return b == 0 ? 0 : a / b;"
    else:
        body = ("    if (b == 0) return 0;              /* defined: x / 0 = 0 */\n"
                "    if (b == -1) return (" + ct + ")(0u - (uint64_t)a);  /* INT_MIN / -1 wraps */\n"
                "    return a / b;")
    ctx.helper(name, f"static {ct} {name}({ct} a, {ct} b)\n{{\n{body}\n}}")
    return name


def _int_pow_helper(ctx, ct):
    name = f"aicc_ipow_{ct}"
    ctx.helper(name, f"static {ct} {name}({ct} a, int64_t e)\n{{\n"
               f"    {ct} r = 1;\n"
               f"    if (e < 0) return (a == 1) ? 1 : (a == -1 ? ((e & 1) ? -1 : 1) : 0);\n"
               f"    while (e > 0) {{ if (e & 1) r = ({ct})(r * a); a = ({ct})(a * a); e >>= 1; }}\n"
               f"    return r;\n}}")
    return name


@register_many(list(BINARY_FLOAT) + list(COMPARE) + list(LOGIC), since=1)
class Binary(Op):
    def check(self, node, g):
        dts = {g.dtype(i).name for i in node.inputs}
        if "float16" in dts:
            return "float16 not supported"
        if self.op_type in ("Max", "Min", "Sum", "Mean") and len(node.inputs) != 2:
            return "variadic form with other than 2 inputs"
        return None

    def emit(self, node, ctx):
        g = ctx.g
        a, b = ctx.inp[0], ctx.inp[1]
        dt = ctx.in_dtype(0)
        ct = ctype(dt)
        op = self.op_type
        out_shape = ctx.out_shape(0)
        shapes = [ctx.in_shape(0), ctx.in_shape(1)]
        if op in BINARY_FLOAT and dt.kind == "f":
            _helpers(ctx, ct)
            tmpl = BINARY_FLOAT[op]
            if op == "Pow":
                tmpl = "pow{f}({a}, {b})"
                f = "f" if dt == np.float32 and ctx.in_dtype(1) == np.float32 else ""
                cast = f"({ct})" if not f else ""
                tmpl = cast + tmpl.replace("{f}", f)
            expr = lambda ix: tmpl.format(a=f"{a}[{ix[0]}]", b=f"{b}[{ix[1]}]")  # noqa: E731
        elif op in BINARY_FLOAT:
            unsigned = dt.kind == "u"
            if op == "Div":
                fn = _int_div_helper(ctx, ct, unsigned)
                expr = lambda ix: f"{fn}({a}[{ix[0]}], {b}[{ix[1]}])"  # noqa: E731
            elif op == "Pow":
                if ctx.in_dtype(1).kind == "f":
                    expr = lambda ix: f"({ct})pow((double){a}[{ix[0]}], (double){b}[{ix[1]}])"  # noqa: E731
                else:
                    fn = _int_pow_helper(ctx, ct)
                    expr = lambda ix: f"{fn}({a}[{ix[0]}], (int64_t){b}[{ix[1]}])"  # noqa: E731
            elif op in ("Max", "Min"):
                c = ">" if op == "Max" else "<"
                expr = lambda ix: f"({a}[{ix[0]}] {c} {b}[{ix[1]}] ? {a}[{ix[0]}] : {b}[{ix[1]}])"  # noqa: E731
            else:
                sym = {"Add": "+", "Sub": "-", "Mul": "*"}[op]
                # wrap-around arithmetic without signed-overflow UB
                ut = "uint64_t" if dt.itemsize == 8 else "uint32_t"
                expr = lambda ix: f"({ct})(({ut}){a}[{ix[0]}] {sym} ({ut}){b}[{ix[1]}])"  # noqa: E731
        elif op in COMPARE:
            sym = COMPARE[op]
            expr = lambda ix: f"(uint8_t)({a}[{ix[0]}] {sym} {b}[{ix[1]}])"  # noqa: E731
        else:
            sym = LOGIC[op]
            expr = lambda ix: f"(uint8_t)((({a}[{ix[0]}]) != 0) {sym} (({b}[{ix[1]}]) != 0))"  # noqa: E731
        emit_broadcast(ctx, out_shape, shapes, expr)


@register_many(["Not"], since=1)
class Not(Op):
    def emit(self, node, ctx):
        emit_map(ctx, numel(ctx.out_shape(0)), lambda x: f"(uint8_t)!{x}")


@register_many(["Identity"], since=1)
class Identity(Op):
    def check(self, node, g):
        t = g.type_of(node.inputs[0])
        return None if hasattr(t, "dtype") else "not a tensor"

    def emit(self, node, ctx):
        nbytes = ctx.g.type_of(node.outputs[0]).nbytes
        if nbytes:
            ctx(f"memcpy({ctx.out[0]}, {ctx.inp[0]}, {nbytes}u);")
        else:
            ctx("/* empty tensor */")
