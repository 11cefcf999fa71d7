"""Elementwise families as tables: unary math/activations, Clip, and broadcasting binary ops
(Add Sub Mul Div Pow Mod, comparisons, logic). Variadic Sum/Mean/Max/Min: variadic.py;
bitwise ops: bitwise.py; IsNaN/IsInf/PRelu/Shrink: pointwise.py.

Semantics (documented, tested), with no C undefined behaviour for any input:

- float ops follow IEEE-754 (NaN propagates, x/0 is +-Inf or NaN); float32 Pow uses powf,
  other float Pow combinations compute in double and round to the base dtype; a constant
  exponent of 1, 2 or 3 (the base's dtype) multiplies instead (x * x * x: within 1 ulp).
- integer Add/Sub/Mul wrap modulo 2^bits (computed in uint64_t); Abs/Neg of INT_MIN is
  INT_MIN; integer Div truncates, x / 0 = 0, INT_MIN / -1 = INT_MIN.
- Mod fmod=0: floor modulo with the sign of the divisor (numpy.mod), float edge cases as
  numpy (x mod 0 and Inf mod y are NaN, a zero result takes the sign of the divisor,
  finite x mod +-Inf is x or the divisor); fmod=1: C fmod / truncating %. Integer x mod 0
  is 0 (as numpy); INT_MIN mod -1 is 0.
- integer Pow is exact modulo 2^bits (as numpy); negative exponents give 1 / a^|e|
  truncated (1, +-1 for a == -1, else 0, also for a == 0). An integer base with a float
  exponent computes in double and converts with truncation and saturation (NaN -> 0).
- Clip bounds may be constants (baked in) or fed at run time (read from their pointers).
- A float Add/Sub/Mul/Div may carry a fused activation (``aicc_act`` / ``aicc_act_params``,
  pass fuse-binary-activation): each element is ``act(r)`` with ``r = a op b`` rounded to
  the dtype (passed as an argument of that type to a small inline function holding the
  activation's expression from activations.ACT), in the same loop: bit for bit the result of
  the two separate steps.
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import c_literal, ctype, dtype_tag
from ..emit_c.loops import emit_broadcast, emit_map, numel
from ..kernels.isa.registry import ISAS
from ..kernels.isa.x86 import include_vmath, simd_isa
from ..kernels.vmath import vector
from ..kernels.vmath.act import (ACT, INT_OK, act_expr, act_numpy, act_params, apply_epilogue,
                                 fused_epilogue, unfused)
from ..kernels.vmath.fused import fused_act_helper, fused_array_act
from .base import Op, register_many
from .cast import cast_expr
from .traits import ACTIVATION, ARITHMETIC, ELEMENTWISE, HALF_NATIVE, ROUNDING_COMMUTES

UNARY = sorted(set(ACT) - {"Clip", "Gelu", "Swish"})
UNARY_TRAITS = {
    **{a: {ACTIVATION, ELEMENTWISE} for a in ("LeakyRelu", "Sigmoid", "HardSigmoid",
                                              "HardSwish", "Tanh")},
    "Relu": {ACTIVATION, ELEMENTWISE, ROUNDING_COMMUTES},
    "Elu": {ELEMENTWISE}, "Selu": {ELEMENTWISE},
    "Abs": {ELEMENTWISE, ROUNDING_COMMUTES}, "Neg": {ELEMENTWISE, ROUNDING_COMMUTES},
}


def _same_shape_inputs(node, g):
    """In-place candidates: inputs with the output's shape (their index equals the output's
    in the emitted loops, so each element is read before it is overwritten)."""
    out = g.shape(node.outputs[0])
    return [k for k, i in enumerate(node.inputs) if i and g.shape(i) == out]


@register_many(UNARY, since=1, traits=UNARY_TRAITS)
class Unary(Op):
    inplace_inputs = staticmethod(_same_shape_inputs)
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
        isa = vector.supports(node, ctx, p)
        if isa:
            vector.emit(ctx, node, isa, n, p)
            return
        with ctx.block(f"for (size_t i = 0; i < {n}u; ++i)"):
            ctx(f"const {ct} x = {ctx.inp[0]}[i];")
            ctx(f"{ctx.out[0]}[i] = {act_expr(self.op_type, p, 'x', dt, ctx)};")


@register_many(["Gelu"], since=20)
class GeluOp(Unary):
    pass


@register_many(["Gelu"], domain="aicc")
class AiccGelu(GeluOp):
    """aicc.Gelu: the standard Gelu (``approximate``, default none) for graphs below opset 20
    (pass fuse-gelu writes it for the erf GELU of TorchScript exports)."""

    def reference(self, node, g, inputs):
        return [act_numpy("Gelu", act_params(node, g), np.asarray(inputs[0]))]


def _const_bound(key, v, dt):
    """C literal of a constant Clip bound (None when it cannot clip anything)."""
    if dt.kind == "f":
        return None if v != v else c_literal(v, dt)
    info = np.iinfo(dt)
    v = int(v)
    if (key == "min" and v <= info.min) or (key == "max" and v >= info.max):
        return None
    return c_literal(min(max(v, int(info.min)), int(info.max)), dt)


@register_many(["Clip"], since=6)
class Clip(Unary):
    """Clip: bounds from attributes (opset < 11) or inputs 1/2; constant bounds are baked in,
    bounds fed at run time are read once from their pointers. min > max gives max
    everywhere (the spec's rule); a NaN bound (float) clips nothing; NaN x stays NaN."""
    traits = frozenset({ACTIVATION, ROUNDING_COMMUTES, ELEMENTWISE})

    def emit(self, node, ctx):
        g = ctx.g
        p = act_params(node, g)
        dt = ctx.in_dtype(0)
        ct = ctype(dt)
        n = numel(ctx.out_shape(0))
        if n == 0:
            ctx("/* empty tensor */")
            return
        runtime = {}
        if not ("min" in node.attrs or "max" in node.attrs):
            for k, key in ((1, "min"), (2, "max")):
                if not ctx.has_input(k):
                    continue
                v = ctx.in_const(k)
                if v is None:
                    runtime[key] = k
                elif dt.kind in "iu":
                    p[key] = int(np.asarray(v).reshape(-1)[0])    # exact (no float round trip)
        if not runtime:
            isa = vector.supports(node, ctx, p)
            if isa:           # float32 on a SIMD target: vector max / min
                vector.emit(ctx, node, isa, n, p)
                return
            with ctx.block(f"for (size_t i = 0; i < {n}u; ++i)"):
                ctx(f"const {ct} x = {ctx.inp[0]}[i];")
                ctx(f"{ctx.out[0]}[i] = {act_expr('Clip', p, 'x', dt)};")
            return
        ctx("/* Clip with bounds fed at run time */")
        bounds = {}
        for key in ("min", "max"):
            if key in runtime:
                var = "lo" if key == "min" else "hi"
                ctx(f"const {ct} {var} = {ctx.inp[runtime[key]]}[0];")
                bounds[key] = var
            elif p.get(key) is not None:
                bounds[key] = _const_bound(key, p[key], dt)
        with ctx.block(f"for (size_t i = 0; i < {n}u; ++i)"):
            ctx(f"{ct} x = {ctx.inp[0]}[i];")
            if bounds.get("min"):
                ctx(f"if (x < {bounds['min']}) x = {bounds['min']};")
            if bounds.get("max"):
                ctx(f"if (x > {bounds['max']}) x = {bounds['max']};")
            ctx(f"{ctx.out[0]}[i] = x;")


# -- binary ----------------------------------------------------------------------------

BINARY_FLOAT = {"Add": "{a} + {b}", "Sub": "{a} - {b}", "Mul": "{a} * {b}", "Div": "{a} / {b}"}
COMPARE = {"Equal": "==", "Less": "<", "Greater": ">", "LessOrEqual": "<=",
           "GreaterOrEqual": ">="}
LOGIC = {"And": "&&", "Or": "||", "Xor": "!="}
ARITH = list(BINARY_FLOAT) + ["Pow", "Mod"]
U64 = np.dtype(np.uint64)


def _int_min(dt) -> str:
    return f"INT{dt.itemsize * 8}_MIN"


def _int_div_helper(ctx, dt):
    ct = ctype(dt)
    name = f"aicc_div_{dtype_tag(dt)}"
    if dt.kind == "u":
        body = "    return b == 0 ? 0 : a / b;   /* defined here: x / 0 = 0 */"
    else:
        body = (f"    if (b == 0) return 0;              /* defined here: x / 0 = 0 */\n"
                f"    if (b == -1) return ({ct})(a == {_int_min(dt)} ? a : -a);  "
                f"/* INT_MIN / -1 wraps to INT_MIN */\n"
                f"    return ({ct})(a / b);")
    ctx.helper(name, f"/* integer Div, truncating, no trap */\n"
               f"static {ct} {name}({ct} a, {ct} b)\n{{\n{body}\n}}")
    return name


def _int_mod_helper(ctx, dt, fmod):
    ct = ctype(dt)
    name = f"aicc_mod{fmod}_{dtype_tag(dt)}"
    if dt.kind == "u":
        body = "    return b == 0 ? 0 : a % b;   /* defined here: x mod 0 = 0 (numpy) */"
    else:
        fix = "" if fmod else "\n    if (r != 0 && ((r < 0) != (b < 0))) r = r + b;   /* sign of b */"
        body = (f"    {ct} r;\n"
                f"    if (b == 0 || b == -1) return 0;   /* x mod 0 = 0 (numpy); no INT_MIN % -1 */\n"
                f"    r = ({ct})(a % b);{fix}\n"
                f"    return r;")
    kind = "fmod (sign of a)" if fmod else "floor mod (sign of b, numpy.mod)"
    ctx.helper(name, f"/* integer Mod, {kind} */\n"
               f"static {ct} {name}({ct} a, {ct} b)\n{{\n{body}\n}}")
    return name


def _float_mod_helper(ctx, dt, fmod):
    ct = ctype(dt)
    f = "f" if dt == np.float32 else ""
    name = f"aicc_mod{fmod}_{dtype_tag(dt)}"
    if fmod:
        body = f"    return fmod{f}(a, b);"
        kind = "fmod (sign of a); x mod 0, Inf mod y and NaN give NaN"
    else:
        zero = c_literal(0, dt)
        body = (f"    {ct} r = fmod{f}(a, b);\n"
                f"    if (r != {zero}) {{\n"
                f"        if ((b < {zero}) != (r < {zero})) r += b;   /* NaN r stays NaN */\n"
                f"    }} else {{\n"
                f"        r = copysign{f}({zero}, b);\n"
                f"    }}\n"
                f"    return r;")
        kind = ("floor mod as numpy.mod: sign of b, 0 as +-0 with the sign of b, x mod +-Inf "
                "is x or b, x mod 0 and Inf mod y give NaN")
    ctx.helper(name, f"/* float Mod, {kind} */\nstatic {ct} {name}({ct} a, {ct} b)\n"
               f"{{\n{body}\n}}")
    return name


def _int_pow_helper(ctx):
    name = "aicc_ipow_u64"
    ctx.helper(name, f"""\
/* integer power, exact modulo 2^64 (square and multiply; the caller keeps the low bits).
 * A negative exponent gives 1 / a^|e| truncated: 1 for a == 1, +-1 for a == -1 (signed
 * types, sgn), else 0 (also for a == 0, defined here). */
static uint64_t {name}(uint64_t a, int64_t e, int sgn)
{{
    uint64_t r = 1u;
    if (e < 0) {{
        if (a == 1u) return 1u;
        if (sgn && a == UINT64_MAX) return ((uint64_t)e & 1u) ? UINT64_MAX : 1u;
        return 0u;
    }}
    while (e > 0) {{
        if (e & 1) r *= a;
        a *= a;
        e /= 2;
    }}
    return r;
}}""")
    return name


def _wrap(ctx, dt, expr_u64):
    """The dtype's value of a uint64_t expression, modulo 2^bits (no UB, see cast.py)."""
    return cast_expr(ctx, U64, dt, f"({expr_u64})")


@register_many(ARITH + list(COMPARE) + list(LOGIC), since=1,
               traits={t: {ARITHMETIC, ELEMENTWISE} for t in ("Add", "Sub", "Mul", "Div")})
class Binary(Op):
    inplace_inputs = staticmethod(_same_shape_inputs)
    attrs = {"fmod": 0}

    def check(self, node, g):
        dts = [g.dtype(i) for i in node.inputs]
        for dt in dts:
            if dt.name not in ("float32", "float64", "int8", "int16", "int32", "int64",
                               "uint8", "uint16", "uint32", "uint64", "bool"):
                return f"dtype {dt.name} not supported"
        if self.op_type != "Pow" and len(set(dts)) != 1:
            return "inputs of different dtypes"
        if self.op_type == "Mod" and int(self.attr(node, "fmod")) not in (0, 1):
            return f"fmod={self.attr(node, 'fmod')} (must be 0 or 1)"
        act, _ = fused_epilogue(node)
        if act is not None:
            if self.op_type not in BINARY_FLOAT or dts[0].kind != "f":
                return f"fused activation {act!r} on a {dts[0].name} {self.op_type}"
            if act not in ACT:
                return f"fused activation {act!r} unknown"
        return None

    def reference(self, node, g, inputs):
        """The standard op, then the fused activation (if any) on its dtype-rounded result."""
        from .reference import run_onnx_reference
        if fused_epilogue(node)[0] is None:
            return run_onnx_reference(node, g, inputs)
        y = np.asarray(run_onnx_reference(unfused(node), g, inputs)[0])
        return [apply_epilogue(node, y)]

    def _expr(self, node, ctx):
        """C expression of one element from the two operand expressions."""
        op = self.op_type
        dt, dt1 = ctx.in_dtype(0), ctx.in_dtype(1)
        ct = ctype(dt)
        if op in COMPARE:
            return lambda a, b: f"(uint8_t)({a} {COMPARE[op]} {b})"
        if op in LOGIC:
            return lambda a, b: f"(uint8_t)((({a}) != 0) {LOGIC[op]} (({b}) != 0))"
        if op == "Mod":
            fm = int(self.attr(node, "fmod"))
            fn = (_float_mod_helper if dt.kind == "f" else _int_mod_helper)(ctx, dt, fm)
            return lambda a, b: f"{fn}({a}, {b})"
        if op == "Pow":
            e = ctx.in_const(1)
            e = float(np.asarray(e).reshape(-1)[0]) if e is not None and np.size(e) == 1 else None
            if dt.kind == "f" and dt1 == dt and e in (1.0, 2.0, 3.0):
                # constant exponents 1, 2, 3 as multiplications (a libm call per element was
                # 25x onnxruntime, which squares and cubes the same way): x and x * x are
                # pow's correctly rounded values, x * x * x rounds twice (within 1 ulp)
                return lambda a, b: {1.0: "{a}", 2.0: "({a} * {a})",
                                     3.0: "({a} * {a} * {a})"}[e].format(a=a)
            if dt.kind == "f":
                if dt == np.float32 and dt1 == np.float32:
                    return lambda a, b: f"powf({a}, {b})"
                return lambda a, b: f"({ct})pow((double){a}, (double){b})"
            if dt1.kind == "f":       # integer base, float exponent: saturating conversion
                return lambda a, b: cast_expr(ctx, np.dtype(np.float64), dt,
                                              f"pow((double){a}, (double){b})")
            fn = _int_pow_helper(ctx)
            sgn = int(dt.kind == "i")
            return lambda a, b: _wrap(ctx, dt, f"{fn}((uint64_t){a}, "
                                      f"{cast_expr(ctx, dt1, np.dtype(np.int64), b)}, {sgn})")
        if dt.kind == "f":
            return lambda a, b: BINARY_FLOAT[op].format(a=a, b=b)
        if op == "Div":
            fn = _int_div_helper(ctx, dt)
            return lambda a, b: f"{fn}({a}, {b})"
        sym = {"Add": "+", "Sub": "-", "Mul": "*"}[op]
        # wrap-around arithmetic in uint64_t: no signed overflow
        return lambda a, b: _wrap(ctx, dt, f"(uint64_t){a} {sym} (uint64_t){b}")

    def emit(self, node, ctx):
        a, b = ctx.inp[0], ctx.inp[1]
        f = self._expr(node, ctx)
        arr = fused_array_act(ctx, node, ctx.out_dtype(0))
        if arr is not None:     # the rounded results, then the vector activation over them
            emit_broadcast(ctx, ctx.out_shape(0), [ctx.in_shape(0), ctx.in_shape(1)],
                           lambda ix: f(f"{a}[{ix[0]}]", f"{b}[{ix[1]}]"))
            ctx(f"{arr}({ctx.out[0]}, {numel(ctx.out_shape(0))}u);")
            return
        act = fused_act_helper(ctx, node, ctx.out_dtype(0))
        isa = simd_isa(ctx) if ctx.out_dtype(0) == np.float32 and act is None else None
        vb = ISAS[isa].vmath.get("binary") if isa else None
        if vb and self.op_type in BINARY_FLOAT and ctx.in_dtype(1) == np.float32 and \
                vb(ctx, self.op_type, a, b, ctx.out_shape(0), ctx.in_shape(0), ctx.in_shape(1)):
            include_vmath(ctx, isa)       # an ISA's loop of the same operations
            ctx.kernel = isa
            return
        if act is not None:
            g = f
            f = lambda x, y: f"{act}({g(x, y)})"  # noqa: E731
        emit_broadcast(ctx, ctx.out_shape(0), [ctx.in_shape(0), ctx.in_shape(1)],
                       lambda ix: f(f"{a}[{ix[0]}]", f"{b}[{ix[1]}]"))


@register_many(["Not"], since=1)
class Not(Op):
    def emit(self, node, ctx):
        emit_map(ctx, numel(ctx.out_shape(0)), lambda x: f"(uint8_t)!{x}")


@register_many(["Identity"], since=1)
class Identity(Op):
    traits = frozenset({ELEMENTWISE, HALF_NATIVE})
    view = True          # no step when the output is not a graph output (emit_c/sharing.py)
    def check(self, node, g):
        t = g.type_of(node.inputs[0])
        return None if hasattr(t, "dtype") else "not a tensor"

    def emit(self, node, ctx):
        nbytes = ctx.g.type_of(node.outputs[0]).nbytes
        if nbytes:
            ctx(f"memcpy({ctx.out[0]}, {ctx.inp[0]}, {nbytes}u);")
        else:
            ctx("/* empty tensor */")
