"""The activation table: one C expression per unary function, shared by the standalone ops
(elementwise.py) and by the epilogues fused into Conv/Gemm/MatMul (fuse-activation).

Each entry is ``fn(x, p, m, L) -> C expression`` where ``x`` is a C expression (a local
variable, evaluated once), ``p`` the parameters (floats), ``m(name)`` the math.h function for
the dtype (``expf`` for float32, ``exp`` for float64), ``L(v)`` a literal of the dtype.

NaN: every entry propagates NaN (comparisons are written so that NaN falls through to the
branch that returns x or an expression of x). Inf follows the math.h functions.

Erf (and exact Gelu) in float32 is not libm's erff but piecewise polynomials (``_erf``: max
absolute error about 6e-8, 1 ulp of 1.0; relative 2e-7 below 0.875), plain arithmetic and
selects that the C compiler vectorizes (a libm call per element cannot be, without
-ffast-math); float64 keeps erf().
"""
from __future__ import annotations

import math

import numpy as np

from ...emit_c.cwriter import c_literal, ctype
from .coeffs import ERF_BIG, ERF_MID, ERF_SMALL, GELU_K, GELU_TANH_C, horner
from .mathlib import math_override
from .portable import PORTABLE, act_form


def _clamp01(t, L):
    return f"({t} < {L(0)} ? {L(0)} : ({t} > {L(1)} ? {L(1)} : {t}))"


ACT = {
    "Relu": lambda x, p, m, L: f"({x} < {L(0)} ? {L(0)} : {x})",
    "LeakyRelu": lambda x, p, m, L: f"({x} < {L(0)} ? {L(p['alpha'])} * {x} : {x})",
    "Clip": lambda x, p, m, L: _clip(x, p, L),
    "Sigmoid": lambda x, p, m, L: f"({L(1)} / ({L(1)} + {m('exp')}(-{x})))",
    "HardSigmoid": lambda x, p, m, L: _clamp01(f"({L(p['alpha'])} * {x} + {L(p['beta'])})", L),
    "HardSwish": lambda x, p, m, L: f"({x} * {_clamp01(f'({L(1 / 6)} * {x} + {L(0.5)})', L)})",
    "Tanh": lambda x, p, m, L: f"{m('tanh')}({x})",
    "Erf": lambda x, p, m, L: _erf(x, m, L),
    "Exp": lambda x, p, m, L: f"{m('exp')}({x})",
    "Log": lambda x, p, m, L: f"{m('log')}({x})",
    # below 0 the invalid operation's NaN from (x - x) / (x - x), the bits of the hardware
    # square root (x86: the default NaN), without the libm call that sets errno: GCC -O2
    # branches to it for x < 0 (4096 values of mixed signs: 16 us against 3.3)
    "Sqrt": lambda x, p, m, L: f"({x} < {L(0)} ? ({x} - {x}) / ({x} - {x}) : {m('sqrt')}({x}))",
    "Abs": lambda x, p, m, L: f"{m('fabs')}({x})",
    "Neg": lambda x, p, m, L: f"(-{x})",
    "Reciprocal": lambda x, p, m, L: f"({L(1)} / {x})",
    "Floor": lambda x, p, m, L: f"{m('floor')}({x})",
    "Ceil": lambda x, p, m, L: f"{m('ceil')}({x})",
    "Round": lambda x, p, m, L: f"{m('rint')}({x})",      # half to even (default FP mode)
    "Sin": lambda x, p, m, L: f"{m('sin')}({x})",
    "Cos": lambda x, p, m, L: f"{m('cos')}({x})",
    "Tan": lambda x, p, m, L: f"{m('tan')}({x})",
    "Asin": lambda x, p, m, L: f"{m('asin')}({x})",
    "Acos": lambda x, p, m, L: f"{m('acos')}({x})",
    "Atan": lambda x, p, m, L: f"{m('atan')}({x})",
    "Sinh": lambda x, p, m, L: f"{m('sinh')}({x})",
    "Cosh": lambda x, p, m, L: f"{m('cosh')}({x})",
    "Asinh": lambda x, p, m, L: f"{m('asinh')}({x})",
    "Acosh": lambda x, p, m, L: f"{m('acosh')}({x})",
    "Atanh": lambda x, p, m, L: f"{m('atanh')}({x})",
    "Sign": lambda x, p, m, L: f"({x} > {L(0)} ? {L(1)} : ({x} < {L(0)} ? {L(-1)} : {x}))",
    "Softsign": lambda x, p, m, L: f"({x} / ({L(1)} + {m('fabs')}({x})))",
    # log(1 + exp(x)) without overflow for large x
    "Softplus": lambda x, p, m, L: (f"({x} > {L(0)} ? {x} + {m('log1p')}({m('exp')}(-{x})) "
                                    f": {m('log1p')}({m('exp')}({x})))"),
    "Elu": lambda x, p, m, L: f"({x} < {L(0)} ? {L(p['alpha'])} * {m('expm1')}({x}) : {x})",
    "Selu": lambda x, p, m, L: (f"({x} <= {L(0)} ? {L(p['gamma'])} * ({L(p['alpha'])} * "
                                f"{m('exp')}({x}) - {L(p['alpha'])}) : {L(p['gamma'])} * {x})"),
    "Celu": lambda x, p, m, L: (f"({x} < {L(0)} ? {L(p['alpha'])} * {m('expm1')}({x} / "
                                f"{L(p['alpha'])}) : {x})"),
    "ThresholdedRelu": lambda x, p, m, L: f"({x} > {L(p['alpha'])} ? {x} : ({x} != {x} ? {x} : {L(0)}))",
    "Mish": lambda x, p, m, L: (f"({x} * {m('tanh')}({x} > {L(0)} ? {x} + {m('log1p')}("
                                f"{m('exp')}(-{x})) : {m('log1p')}({m('exp')}({x}))))"),
    "Gelu": lambda x, p, m, L: _gelu(x, p, m, L),
    # x * sigmoid(alpha * x) in ops/swish.py's swish_expr order (alpha 1: no multiplication)
    "Swish": lambda x, p, m, L: (f"({x} * ({L(1)} / ({L(1)} + {m('exp')}(-("
                                 + (x if float(p.get('alpha', 1.0)) == 1.0 else
                                    f"{L(p['alpha'])} * {x}") + ")))))"),
}

# spec defaults of the attributes each activation reads
ACT_ATTRS = {
    "LeakyRelu": {"alpha": 0.01},
    "HardSigmoid": {"alpha": 0.2, "beta": 0.5},
    "Elu": {"alpha": 1.0},
    "Selu": {"alpha": 1.67326319217681884765625, "gamma": 1.05070102214813232421875},
    "Celu": {"alpha": 1.0},
    "ThresholdedRelu": {"alpha": 1.0},
    "Gelu": {"approximate": "none"},
    "Swish": {"alpha": 1.0},
}

# usable on integer tensors (others are float-only)
INT_OK = {"Relu", "Abs", "Neg", "Sign", "Clip"}


def _clip(x, p, L):
    e = x
    if p.get("min") is not None:
        e = f"({e} < {L(p['min'])} ? {L(p['min'])} : {e})"
    if p.get("max") is not None:
        e = f"({e} > {L(p['max'])} ? {L(p['max'])} : {e})"
    return e


def _erf(x, m, L):
    """erf: libm for float64; for float32 the polynomials above on |x| < 0.875 (x * P(x^2)),
    [0.875, 2.25) and [2.25, 4) (1 - Q(|x| - mid), sign restored with copysignf), 1 beyond
    (erf(4) rounds to 1 in float32). NaN takes the first branch (x * P = NaN); +-Inf give
    +-1; -0 gives -0."""
    if m("erf") != "erff":
        return f"{m('erf')}({x})"
    t = f"fabsf({x})"
    small = f"(({x}) * {horner(f'(({x}) * ({x}))', ERF_SMALL, L)})"
    mid = f"({L(1)} - {horner(f'({t} - {L(1.5625)})', ERF_MID, L)})"
    big = f"({L(1)} - {horner(f'({t} - {L(3.125)})', ERF_BIG, L)})"
    return (f"(!({t} >= {L(0.875)}) ? {small} : copysignf({t} < {L(2.25)} ? {mid} : "
            f"({t} < {L(4)} ? {big} : {L(1)}), {x}))")


def _gelu(x, p, m, L):
    if p.get("approximate", "none") == "tanh":
        # 0.5 * x * (1 + tanh(u)) = x / (1 + exp(-2u)): one exp and a division instead of tanh's
        # exp, division and sign handling, and no cancellation in 1 + tanh(u) for x < 0
        w = f"{L(-2 * GELU_TANH_C)} * ({x} + {L(0.044715)} * {x} * {x} * {x})"
        return f"({x} / ({L(1)} + {m('exp')}({w})))"
    return f"({L(0.5)} * {x} * ({L(1)} + {_erf(f'({x} * {L(GELU_K)})', m, L)}))"


def math_fn(dtype):
    dt = np.dtype(dtype)
    if dt == np.float32:
        return lambda name: name + "f"
    if dt.kind in "iu":
        return lambda name: {"fabs": "labs"}.get(name, name)
    return lambda name: name


def _int_expr(name: str, params: dict, x: str, dt) -> str:
    """Integer forms of INT_OK: -INT_MIN is INT_MIN (two's complement wrap, as onnxruntime
    and numpy) without signed overflow; no comparison that is always false for unsigned
    types (which -Wtype-limits rejects). Clip bounds are saturated to the dtype's range."""
    ct = ctype(dt)
    L = lambda v: c_literal(v, dt)  # noqa: E731
    uns = dt.kind == "u"
    neg = (f"({ct})(0u - {x})" if uns else
           f"({ct})({x} == INT{dt.itemsize * 8}_MIN ? {x} : -{x})")
    if name == "Abs":
        return x if uns else f"({x} < 0 ? {neg} : {x})"
    if name == "Neg":
        return neg
    if name == "Relu":
        return x if uns else f"({x} < 0 ? 0 : {x})"
    if name == "Sign":
        return f"({ct})({x} > 0)" if uns else f"({ct})(({x} > 0) - ({x} < 0))"
    if name == "Clip":
        info = np.iinfo(dt)
        e = x
        lo, hi = params.get("min"), params.get("max")
        if lo is not None and lo == lo and lo > info.min:
            lo = min(int(lo), int(info.max))
            e = f"({e} < {L(lo)} ? {L(lo)} : {e})"
        if hi is not None and hi == hi and hi < info.max:
            hi = max(int(hi), int(info.min))
            e = f"({e} > {L(hi)} ? {L(hi)} : {e})"
        return e
    raise KeyError(f"{name} has no integer form")


def act_expr(name: str, params: dict, x: str, dtype, ctx=None) -> str:
    """C expression of activation ``name`` applied to the C expression ``x`` (evaluated
    more than once: pass a variable). With ``ctx`` (the emitting node's context), float32 exp
    and tanh on a SIMD target are exp_simd's (the same bits as its vector loops)."""
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        return _int_expr(name, params, x, dt)
    m = math_fn(dt)
    if ctx is not None and dt == np.float32:
        form = act_form(ctx, name, params, x)
        if form is not None:
            return form
        m = math_override(ctx, m, portable=name in PORTABLE)
    return ACT[name](x, params, m, lambda v: c_literal(v, dt))


def act_params(node, g) -> dict:
    """Parameters of an activation node, spec defaults filled (Clip min/max from inputs
    for opset >= 11, from attributes before)."""
    p = dict(ACT_ATTRS.get(node.op_type, {}))
    for k in p:
        if k in node.attrs:
            v = node.attrs[k]
            p[k] = v if isinstance(v, str) else float(v)
    if node.op_type == "Clip":
        if "min" in node.attrs or "max" in node.attrs:
            p["min"] = node.attrs.get("min", None)
            p["max"] = node.attrs.get("max", None)
        else:
            for k, key in ((1, "min"), (2, "max")):
                v = g.const(node.inputs[k]) if len(node.inputs) > k else None
                p[key] = None if v is None else float(np.asarray(v).reshape(-1)[0])
    return p


def act_numpy(name: str, params: dict, x: np.ndarray) -> np.ndarray:
    """numpy reference of the fusable activations (used by fused-op references)."""
    dt = x.dtype
    with np.errstate(all="ignore"):
        if name == "Relu":
            y = np.where(x < 0, 0, x)
        elif name == "LeakyRelu":
            y = np.where(x < 0, params["alpha"] * x, x)
        elif name == "Clip":
            y = x
            if params.get("min") is not None:
                y = np.where(y < params["min"], params["min"], y)
            if params.get("max") is not None:
                y = np.where(y > params["max"], params["max"], y)
        elif name == "Sigmoid":
            y = 1 / (1 + np.exp(-x))
        elif name == "HardSigmoid":
            y = np.clip(params["alpha"] * x + params["beta"], 0, 1)
        elif name == "HardSwish":
            y = x * np.clip(x / 6 + 0.5, 0, 1)
        elif name == "Tanh":
            y = np.tanh(x)
        elif name == "Swish":
            a = x.dtype.type(params.get("alpha", 1.0))
            y = x * (x.dtype.type(1) / (x.dtype.type(1) + np.exp(-(a * x))))
        elif name == "Gelu":         # in float64, rounded once
            d = np.asarray(x, np.float64)
            if params.get("approximate", "none") == "tanh":
                y = 0.5 * d * (1 + np.tanh(math.sqrt(2 / math.pi) * (d + 0.044715 * d ** 3)))
            else:
                y = 0.5 * d * (1 + np.vectorize(math.erf, otypes=[np.float64])(d / math.sqrt(2)))
        else:
            raise KeyError(name)
    return np.asarray(y).astype(dt)


def fused_epilogue(node):
    """(activation name, params) fused into a Conv/Gemm/MatMul node, or (None, {})."""
    return node.attrs.get("aicc_act"), dict(node.attrs.get("aicc_act_params") or {})


def apply_epilogue(node, y: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """numpy reference of a fused epilogue: y + bias (broadcast on the last axis for MatMul,
    already included for Conv/Gemm), then the fused activation."""
    if bias is not None:
        y = (y + bias).astype(y.dtype)
    name, params = fused_epilogue(node)
    return y if name is None else act_numpy(name, params, y)


def unfused(node):
    """A copy of the node without aicc_* attributes (for the standard ONNX reference)."""
    from copy import copy
    n = copy(node)
    n.attrs = {k: v for k, v in node.attrs.items() if not k.startswith("aicc_")}
    return n
