"""Float32 sin, cos, atan, asin and acos on the x86 SIMD targets, with vector loops for the
Sin, Cos, Atan, Asin and Acos ops (kernels/vmath/exp.py dispatches here; the lane-0 forms serve every
scalar use on these targets, so the vector body and the tail give the same bits). Before: a
libm call per element, 1x64x56x56 on x86-avx512 (us, onnxruntime in brackets): Sin 1291
(370), Cos 1248 (366), Atan 2511 (242), Asin 2193 (252), Acos 2221 (197).

sin / cos (Cephes' sinf / cosf): j = the even integer nearest |x| 4/pi, |x| - j pi/4 in three
FMA steps (pi/4 in three parts), the sine or cosine polynomial of that by j's bit 1, the sign
by bit 2 (and x's sign for sin). Absolute error about 2^-24 for |x| <= 8192; lanes beyond
8192 (and +-Inf) take the C library's sinf / cosf, whose argument reduction is exact. NaN ->
NaN; sin(-0) = -0.

atan (Cephes' atanf): on |x|, reduced to |x| <= tan(pi/8) by atan(x) = pi/4 + atan((x - 1) /
(x + 1)) above tan(pi/8) and pi/2 + atan(-1/x) above tan(3pi/8), an odd polynomial, the sign
of x put back: about 2 ulp; +-Inf -> +-pi/2, -0 -> -0, NaN -> NaN.

asin (Cephes' asinf): |x| <= 1/2: x + x^3 P(x^2); above: pi/2 - 2 asin(sqrt((1 - |x|) / 2)),
the sign of x put back. acos: pi/2 - asin(x) for |x| <= 1/2, 2 asin(sqrt((1 - x) / 2)) above
1/2, pi - 2 asin(sqrt((1 + x) / 2)) below -1/2; pi/2 and pi in two parts. About 2 ulp; |x| > 1
and NaN -> NaN.

The generic target keeps the C library's functions: results differ between targets by
rounding (a few ulp).
"""
from __future__ import annotations

import numpy as np

from ...emit_c.cwriter import c_literal
from ..isa.registry import ISAS, include_line
from ..isa.x86 import INT, INT_BITS, SIMD, lane0, vconst, vpoly

FUNCS = ("sin", "cos", "atan", "asin", "acos")
VECTOR = {"Sin", "Cos", "Atan", "Asin", "Acos"}
_DP = (0.78515625, 2.4187564849853515625e-4, 3.77489497744594108e-8)    # pi/4 in three parts
_SIN = (-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1)
_COS = (2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2)
_ATAN = (8.05374449538e-2, -1.38776856032e-1, 1.99777106478e-1, -3.33329491539e-1)
_ASIN = (4.2163199048e-2, 2.4181311049e-2, 4.5470025998e-2, 7.4953002686e-2, 1.6666752422e-1)
_PIO2 = (1.5707963705062866, -4.371139000186243e-08)      # float(pi/2) and the rest
_PIO4 = 0.7853981852531433
BIG = 8192.0                  # sin / cos: larger |x| go to the C library


def _spell(isa):
    d, i, li = SIMD[isa], INT[isa], INT_BITS[isa]

    def bit(op, a, b):
        return i["bit"].format(op=op, a=a, b=b)

    def sel(a, b, x, y, p):   # b where x p y holds, else a
        return d["sel"].format(a=a, b=b, x=x, y=y, p=p)
    return d, i, li, bit, sel


def _register(ctx, isa, fn, comment, body) -> str:
    d = SIMD[isa]
    name = f"aicc_{fn}_{isa}"
    ctx.helper(f"0.{isa}.0.include", include_line(isa))
    ctx.helper(f"0.{isa}.1.{name}", f"""\
/* {fn} of {d['L']} floats (kernels/vmath/trig.py): {comment} */
static {d['v']} {name}({d['v']} x)
{{
{body}
}}""")
    return name


def vsincos(ctx, isa: str, fn: str) -> str:
    """Name of ``V aicc_sin_ISA(V x)`` / cos (fn)."""
    d, i, li, bit, sel = _spell(isa)
    m = ISAS[isa].vmath         # truncation, compare masks (isa/<name>/vmath.py)
    v, L = d["v"], d["L"]
    sign = vconst(d, -0.0)
    r = "ax"
    for c in _DP:
        r = f"{d['fnma']}(y, {vconst(d, c)}, {r})"
    # sin: the sine polynomial where bit 1 of j is clear; cos: where it is set
    cosp = (f"{d['add']}({d['fnma']}(z, {vconst(d, 0.5)}, {vconst(d, 1.0)}), "
            f"{d['mul']}({d['mul']}({vpoly(d, 'z', _COS[::-1])}, z), z))")
    sinp = f"{d['fma']}({d['mul']}({vpoly(d, 'z', _SIN[::-1])}, z), r, r)"
    first, second = (sinp, cosp) if fn == "sin" else (cosp, sinp)
    # the sign bit: negated for j mod 8 in 4, 6 (sin; and once more for x < 0), in 2, 4 (cos:
    # bit 2 of j + 2)
    jj = "j" if fn == "sin" else f"{i['add']}(j, {li['set1']}(2))"
    flip = f"{li['flt']}({i['slli']}({li['band']}({jj}, {li['set1']}(4)), 29))"
    if fn == "sin":
        flip = bit("xor", flip, bit("and", sign, "x"))
    big = m["any"].format(m=m["cmp"].format(x="ax", y=vconst(d, BIG), p="_CMP_GT_OQ"))
    body = f"""\
    const {v} ax = {bit('andnot', sign, 'x')};
    {li['vi']} j = {m['cvtt']}({d['mul']}(ax, {vconst(d, 4 / np.pi)}));
    j = {li['band']}({i['add']}(j, {li['set1']}(1)), {li['set1']}(~1));
    const {v} y = {li['cvt']}(j);
    const {v} r = {r};
    const {v} z = {d['mul']}(r, r);
    const {v} q = {li['cvt']}({li['band']}(j, {li['set1']}(2)));
    {v} res = {sel(first, second, 'q', vconst(d, 0.0), '_CMP_NEQ_OQ')};
    res = {bit('xor', 'res', flip)};
    if ({big}) {{   /* large |x|, +-Inf: libm */
        float a[{L}], o[{L}];
        {d['st']}(a, x);
        {d['st']}(o, res);
        for (int l = 0; l < {L}; ++l)
            if (fabsf(a[l]) > {c_literal(BIG, np.float32)})
                o[l] = {fn}f(a[l]);
        res = {d['ld']}(o);
    }}
    return res;"""
    return _register(ctx, isa, fn, f"|x| - j pi/4, j even nearest |x| 4/pi, the sine or cosine "
                     f"polynomial by j; |x| > {BIG:g} through {fn}f", body)


def vatan(ctx, isa: str) -> str:
    """Name of ``V aicc_atan_ISA(V x)``."""
    d, i, li, bit, sel = _spell(isa)
    v = d["v"]
    sign = vconst(d, -0.0)
    one = vconst(d, 1.0)
    t8, t38 = vconst(d, 0.4142135623730950), vconst(d, 2.414213562373095)   # tan(pi/8), tan(3pi/8)
    mid = f"{d['div']}({d['sub']}(ax, {one}), {d['add']}(ax, {one}))"
    body = f"""\
    const {v} ax = {bit('andnot', sign, 'x')};
    {v} t = {sel('ax', mid, 'ax', t8, '_CMP_GT_OQ')};
    {v} y0 = {sel(vconst(d, 0.0), vconst(d, _PIO4), 'ax', t8, '_CMP_GT_OQ')};
    t = {sel('t', f"{d['div']}({vconst(d, -1.0)}, ax)", 'ax', t38, '_CMP_GT_OQ')};
    y0 = {sel('y0', vconst(d, _PIO2[0]), 'ax', t38, '_CMP_GT_OQ')};
    const {v} z = {d['mul']}(t, t);
    const {v} y = {d['add']}({d['fma']}({d['mul']}({vpoly(d, 'z', _ATAN[::-1])}, z), t, t), y0);
    return {bit('or', 'y', bit('and', sign, 'x'))};"""
    return _register(ctx, isa, "atan", "Cephes' atanf on |x| reduced below tan(pi/8), the "
                     "sign of x put back", body)


def _asin_core(d, s, zz):
    """s + s^3 P(s^2) for |s| <= 1/2 (z = s^2 given)."""
    return f"{d['fma']}({d['mul']}({vpoly(d, zz, _ASIN[::-1])}, {zz}), {s}, {s})"


def vasin(ctx, isa: str) -> str:
    """Name of ``V aicc_asin_ISA(V x)``."""
    d, i, li, bit, sel = _spell(isa)
    v = d["v"]
    sign = vconst(d, -0.0)
    half = vconst(d, 0.5)
    far = f"{d['add']}({d['sub']}({vconst(d, _PIO2[1])}, {d['add']}(p, p)), {vconst(d, _PIO2[0])})"

    def where_big(a, b):
        return sel(a, b, "big", vconst(d, 0.0), "_CMP_NEQ_OQ")
    body = f"""\
    const {v} ax = {bit('andnot', sign, 'x')};
    const {v} zb = {d['mul']}({half}, {d['sub']}({vconst(d, 1.0)}, ax));
    const {v} big = {sel(vconst(d, 0.0), vconst(d, 1.0), 'ax', half, '_CMP_GT_OQ')};
    const {v} s = {where_big('ax', f"{d['sqrt']}(zb)")};
    const {v} z = {where_big(f"{d['mul']}(ax, ax)", 'zb')};
    const {v} p = {_asin_core(d, 's', 'z')};
    {v} y = {where_big('p', far)};
    y = {sel('y', vconst(d, float('nan')), 'ax', vconst(d, 1.0), '_CMP_GT_OQ')};
    return {bit('or', 'y', bit('and', sign, 'x'))};"""
    return _register(ctx, isa, "asin", "Cephes' asinf, pi/2 - 2 asin(sqrt((1 - |x|) / 2)) "
                     "above 1/2; |x| > 1 gives NaN", body)


def vacos(ctx, isa: str) -> str:
    """Name of ``V aicc_acos_ISA(V x)``."""
    d, i, li, bit, sel = _spell(isa)
    v = d["v"]
    half, one = vconst(d, 0.5), vconst(d, 1.0)
    hi, lo = vconst(d, _PIO2[0]), vconst(d, _PIO2[1])
    body = f"""\
    const {v} ax = {bit('andnot', vconst(d, -0.0), 'x')};
    const {v} big = {sel(vconst(d, 0.0), vconst(d, 1.0), 'ax', half, '_CMP_GT_OQ')};
    const {v} zb = {d['mul']}({half}, {d['sub']}({one}, ax));
    const {v} s = {sel('x', f"{d['sqrt']}(zb)", 'big', vconst(d, 0.0), '_CMP_NEQ_OQ')};
    const {v} z = {sel(f"{d['mul']}(x, x)", 'zb', 'big', vconst(d, 0.0), '_CMP_NEQ_OQ')};
    const {v} p = {_asin_core(d, 's', 'z')};
    const {v} mid = {d['add']}({d['sub']}({lo}, p), {hi});
    const {v} pos = {d['add']}(p, p);
    const {v} neg = {d['add']}({d['sub']}({d['add']}({lo}, {lo}), pos), {d['add']}({hi}, {hi}));
    {v} y = {sel('mid', 'pos', 'x', half, '_CMP_GT_OQ')};
    y = {sel('y', 'neg', 'x', vconst(d, -0.5), '_CMP_LT_OQ')};
    return {sel('y', vconst(d, float('nan')), 'ax', one, '_CMP_GT_OQ')};"""
    return _register(ctx, isa, "acos", "pi/2 - asin(x) for |x| <= 1/2, else 2 asin(sqrt((1 "
                     "-+ x) / 2)) (pi minus that below -1/2); |x| > 1 gives NaN", body)


def vfunc(ctx, isa: str, fn: str) -> str:
    """Name of the vector function of ``fn`` (one of FUNCS)."""
    if fn in ("sin", "cos"):
        return vsincos(ctx, isa, fn)
    return {"atan": vatan, "asin": vasin, "acos": vacos}[fn](ctx, isa)


def scalar(ctx, isa: str, fn: str) -> str:
    """Name of ``float aicc_FN1_ISA(float x)``: the vector function on lane 0."""
    return lane0(ctx, isa, fn, vfunc(ctx, isa, fn))


def vector_expr(ctx, isa: str, act: str, xv: str) -> str:
    """Sin / Cos / Atan / Asin / Acos of the vector variable ``xv``."""
    return f"{vfunc(ctx, isa, act.lower())}({xv})"
