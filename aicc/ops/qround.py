"""A multiplier for requantization without the half-integer check (qrequant_simd.py).

The requantization's float32 form (qrequant_simd.py, the module doc) computes p = fl32(a m)
for an int32 sum a (|a| <= 2^24) and rounds it half to even; p is then rint(a m) unless p
is a half-integer that the exact product a m is not, which a check per vector catches (an
int -> float conversion, a subtraction, an absolute value, a compare and a branch per 16
sums: MobileNetV2 int8's requantization was a fifth of its time, x86-avx512-vnni).

For a constant multiplier m the sums where that can happen are known at build time: a m
within half a float32 ulp of a half-integer h. Only the h where rounding changes an output
matter (h + yzp in [lo - 1, hi]: beyond, both sides saturate alike), a few hundred, and the
sums near each are enumerated. ``tie_free_mult`` returns a float32 m' (m itself when it
passes, else its nearest neighbours first) such that, for every sum a near such an h,
rint(fl32(a m')) and rint(a m') are both rint(a m): the same outputs for every a (away from
every h, a m and a m' round alike: they differ by at most |a| |m' - m|, which the
enumeration's width covers). The C then uses m' and the check-free form (``_f32n``); the
float64 forms (tails, other cases) give the same values with m' by the second condition.

When no m' passes (small multipliers: their products move past the half-integers fastest),
AVX-512 has a second check-free form (``_f32d``): floor(fl_down(a m + 0.5)), the fused
multiply-add and the conversion both rounding down (embedded rounding). floor(fl_down(x)) is
floor(x) (integers are floats here), and floor(a m + 0.5) is rint(a m) except on an exact
tie a m = k + 0.5, which ``exact_ties`` rules out at build time (a float32 m = M 2^e with a
24-bit odd M has none in reach unless M is small).
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import c_float
from .qgemm_simd import zp_const
from .qrequant_simd import EXACT, MAX_MULT, irange

MAX_STEPS = 256          # float32 neighbours of m tried on each side
MAX_CANDIDATES = 1 << 21  # sums examined at most (else None: the C keeps its check)


def _halves(ydt: str, yzp) -> np.ndarray:
    """The half-integers h where rounding changes an output (h + yzp in [lo - 1, hi])."""
    lo, hi = irange(ydt)
    return np.arange(lo - int(yzp) - 1, hi - int(yzp) + 1, dtype=np.float64) + 0.5


def _usable(m, yzp) -> bool:
    """m (one multiplier or an array) and yzp are constants, m finite, nonzero, <= MAX_MULT."""
    if m is None or yzp is None:
        return False
    m = np.asarray(m, np.float32)
    return (m.size > 0 and bool(np.isfinite(m).all()) and bool((m != 0).all())
            and bool((np.abs(m) <= MAX_MULT).all()))


def tie_free_mult(m, ydt: str, yzp, steps: int = MAX_STEPS):
    """A float32 multiplier m' giving rint(a m)'s outputs through both fl32(a m') and the
    exact a m' for every int32 sum a (module doc), or None (m or yzp not a constant, m not
    finite, zero or above MAX_MULT, or no neighbour within MAX_STEPS passes)."""
    if not _usable(m, yzp):
        return None
    h = _halves(ydt, yzp)
    mf = float(m)
    # |a m' - a m| <= |a| |m| * rel over the sums near the h (|a m| <= hmax + 1), plus the
    # float32 product's rounding
    hmax = np.abs(h).max() + 1.0
    w = hmax * steps * 2.0 ** -23 + float(np.spacing(np.float32(hmax)))
    a0 = np.ceil(np.minimum((h - w) / mf, (h + w) / mf))
    a1 = np.floor(np.maximum((h - w) / mf, (h + w) / mf))
    if np.maximum(a1 - a0 + 1, 0).sum() > MAX_CANDIDATES:
        return None
    a = np.concatenate([np.arange(x, y + 1) for x, y in zip(a0, a1) if y >= x] or [[0.0]])
    a = a[np.abs(a) <= EXACT]
    want = np.rint(a * mf)                        # a m exact in float64 (25 + 24 bits)
    up = down = np.float32(m)
    for step in range(steps + 1):
        for mt in ((up,) if step == 0 else (up, down)):
            if abs(float(mt)) > MAX_MULT:
                continue
            e = a * float(mt)                     # exact
            if np.array_equal(np.rint(e.astype(np.float32)), want) and \
                    np.array_equal(np.rint(e), want):
                return np.float32(mt)
        up, down = np.nextafter(up, np.float32(np.inf)), np.nextafter(down, np.float32(-np.inf))
    return None


def exact_ties(m, ydt: str, yzp) -> bool:
    """Whether some int32 sum a has a m exactly a half-integer h where rounding matters (the
    floor form's one difference from rint) for the multiplier m (or any of an array of
    them), or m / yzp are not usable constants."""
    if not _usable(m, yzp):
        return True
    h = _halves(ydt, yzp)
    mf = np.asarray(m, np.float32).astype(np.float64).reshape(-1, 1, 1)
    a = np.rint(h[None, :, None] / mf) + np.arange(-1, 2)[None, None, :]
    return bool(((a * mf == h[None, :, None]) & (np.abs(a) <= EXACT)).any())


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


def requant_mults(ctx, n: int, isa: str) -> tuple:
    """(C name of the per-channel multipliers as a constant [n] array, float32 rounding form),
    or (None, "") when they are not constants or some is zero, not finite or above MAX_MULT
    (the run-time array and the float64 form stay). AVX-512: the floor form "d" when no
    channel has an exact tie; else "n" when every channel's own multiplier is tie-free (no
    neighbour search per channel: build time); else the checked form."""
    m, ydt, yzp = const_mults(ctx, n), ctx.out_dtype(0).name, zp_const(ctx, 7)
    if not _usable(m, yzp):
        return None, ""
    if isa == "avx512" and not exact_ties(m, ydt, yzp):
        form = "d"
    elif all(tie_free_mult(x, ydt, yzp, steps=0) == x for x in m):
        form = "n"
    else:
        form = ""
    return ctx.const(m, "qmult"), form


def requant_mult(ctx, expr: str) -> tuple:
    """(C expression of a QLinear op's per-tensor multiplier, float32 rounding form; inputs
    1, 4, 6: the scales, 7: the y zero point): the literal m' and "n" when tie_free_mult
    finds one (sa, ys: the prelude's variables, marked used); else expr and "d" (the floor
    form, AVX-512) when no exact tie occurs; else expr and "" (the checked form)."""
    m = const_mults(ctx, 1)
    m, ydt, yzp = None if m is None else m[0], ctx.out_dtype(0).name, zp_const(ctx, 7)
    mt = tie_free_mult(m, ydt, yzp)
    if mt is None:
        return expr, "" if exact_ties(m, ydt, yzp) else "d"
    ctx(f"(void)sa; (void)ys;   /* multiplier {c_float(mt)}: sa * w_scale / ys or a float32 "
        "neighbour giving the same outputs without a tie check (qround.py) */")
    return c_float(mt), "n"


def multipliers(ctx, per_channel: bool, n: int, isa: str) -> tuple:
    """Declare a QLinear op's requantization multiplier(s) ``sa * scale / ys`` (input 4 the
    weight / b scale; the prelude's sa, ys). Returns (C pointer to one, or to n per output
    channel / column; the float32 rounding form; whether the n are build-time constants:
    Requant.mcol)."""
    if per_channel:
        mc, form = requant_mults(ctx, n, isa)
        if mc is not None:
            ctx("(void)sa; (void)ys;   /* the multipliers: build-time constants */")
            return mc, form, True
        mc = ctx.scratch(n * 4, "float", "mlt")
        with ctx.block(f"for (size_t j = 0; j < {n}u; ++j)"):
            ctx(f"{mc}[j] = sa * {ctx.inp[4]}[j] / ys;")
        return mc, "", False
    expr, form = requant_mult(ctx, f"sa * {ctx.inp[4]}[0] / ys")
    ctx(f"const float mlt = {expr};")
    return "&mlt", form, False
