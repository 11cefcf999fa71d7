"""Which float32 rounding the SIMD requantization of a QLinear op uses (kernels/qgemm/requant.py).

The float32 forms need every sum within 2^24 (sums_fit, decided by the emitters). Then a
multiplier |m| <= F_MAX rounds by the fused multiply-add (``_f32f``, no check: the
kernels/qgemm/requant.py module doc); larger ones up to MAX_MULT by the checked form (``_f32``: a
product landing on a half-integer is redone by the exact product's side of it); beyond, or
not finite, the float64 form. Per-channel multipliers are build-time constants when the scales
are, and the build checks them all; one multiplier is checked at run time by the helper.
"""
from __future__ import annotations

import numpy as np

from .requant import F_MAX, MAX_MULT


def const_mults(ctx, n: int):
    """The multipliers ``sa * w_scale[c] / ys`` of n output channels as the C computes them
    (float32, left to right), when the three are compile-time float32 constants (w_scale: one
    or n; n = 1: the per-tensor one); else None."""
    vs = [ctx.in_const(k) for k in (1, 4, 6)]
    if any(v is None or np.asarray(v).dtype != np.float32 for v in vs) or \
            np.asarray(vs[0]).size != 1 or np.asarray(vs[2]).size != 1 or \
            np.asarray(vs[1]).size not in (1, n):
        return None
    sa, ys = (np.asarray(v, np.float32).reshape(()) for v in (vs[0], vs[2]))
    ws = np.broadcast_to(np.asarray(vs[1], np.float32).reshape(-1), (n,))
    with np.errstate(all="ignore"):
        return ((sa * ws).astype(np.float32) / ys).astype(np.float32)


def _form(m) -> str:
    """"f" unless m (build-time multipliers, None: not constants) has one above F_MAX: ""."""
    return "" if m is not None and not (np.abs(m) <= F_MAX).all() else "f"


def requant_mults(ctx, n: int) -> tuple:
    """(C name of the per-channel multipliers as a constant [n] array, float32 rounding form:
    "f" when every |m| <= F_MAX, else "" the checked form), or (None, "") when they are not
    constants or some is not finite or above MAX_MULT (the run-time array and the float64
    form stay)."""
    m = const_mults(ctx, n)
    if m is None or not (np.isfinite(m).all() and (np.abs(m) <= MAX_MULT).all()):
        return None, ""
    return ctx.const(m, "qmult"), _form(m)


def requant_mult(ctx, n: int = 1) -> str:
    """The float32 rounding form of a QLinear op's multiplier(s), each passed to the helper
    alone (inputs 1, 4, 6: the scales; n: one per output channel, computed at run time): ""
    (checked) when they are build-time constants and one is above F_MAX, else "f" (the helper
    checks |m| <= F_MAX at run time, else takes the float64 form)."""
    return _form(const_mults(ctx, n))


def multipliers(ctx, per_channel: bool, n: int) -> tuple:
    """Declare a QLinear op's requantization multiplier(s) ``sa * scale / ys`` (input 4 the
    weight / b scale; the prelude's sa, ys). Returns (C pointer to one, or to n per output
    channel / column; the float32 rounding form; whether the n are build-time constants:
    Requant.mcol)."""
    if per_channel:
        mc, form = requant_mults(ctx, n)
        if mc is not None:
            ctx("(void)sa; (void)ys;   /* the multipliers: build-time constants */")
            return mc, form, True
        mc = ctx.scratch(n * 4, "float", "mlt")
        with ctx.block(f"for (size_t j = 0; j < {n}u; ++j)"):
            ctx(f"{mc}[j] = sa * {ctx.inp[4]}[j] / ys;")
        return mc, "", False
    ctx(f"const float mlt = sa * {ctx.inp[4]}[0] / ys;")
    return "&mlt", requant_mult(ctx), False
