"""Which C function computes a libm name (exp, tanh, erf, log, log1p, expm1, sin, cos, atan,
asin, acos) in a node's float32 expressions: the lane-0 form of the SIMD vector function
when the node runs on a SIMD ISA (the same bits as the vector loops), else portable.py's
branch-free C, else libm.
"""
from __future__ import annotations

from . import expm1 as expm1_simd
from . import log as log_simd
from . import portable as math_c
from . import trig as trig_simd
from ..isa.registry import ISAS
from ..isa.x86 import lane0, simd_isa
from .erf import verf
from .exp import FUNCS, vexp, vtanh


def scalar(ctx, isa: str, fn: str) -> str:
    """Name of ``float aicc_exp1_ISA(float x)`` / tanh / erf: the vector function on lane 0."""
    if fn == "erf":
        return lane0(ctx, isa, fn, verf(ctx, isa))
    return lane0(ctx, isa, fn, vexp(ctx, isa) if fn == "exp" else vtanh(ctx, isa))


def math_override(ctx, m, portable: bool = True):
    """``m`` (activations.math_fn's float32 name mapping) with exp, tanh, erf, log, log1p,
    expm1, sin, cos, atan, asin and acos routed to the lane-0 forms of the vector functions
    when ctx's node runs on a SIMD ISA; else (``portable``) with exp, tanh and erf routed to
    kernels/vmath/portable.py's portable forms, or ``m`` itself."""
    isa = simd_isa(ctx)
    if isa is None:
        return math_c.override(ctx, m) if portable else m

    def routed(f):
        for mod in (expm1_simd, log_simd, trig_simd):
            if f in mod.FUNCS:
                return mod.scalar(ctx, isa, f)
        return scalar(ctx, isa, f) if f in FUNCS else m(f)
    return routed


def tag_of(expr: str) -> str:
    """Suffix for a helper name whose C text is ``expr``: the ISA when the expression uses the
    lane-0 forms (the same activation emits different text per ISA)."""
    for isa in ISAS:
        if any(f"aicc_{f}1_{isa}(" in expr
               for f in FUNCS + log_simd.FUNCS + expm1_simd.FUNCS + trig_simd.FUNCS):
            return f"_{isa}"
    return ""
