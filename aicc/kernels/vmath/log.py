"""Float32 log and log1p on the x86 SIMD targets, and the activations built on them: Log,
Softplus and Mish with vector loops (kernels/vmath/exp.py dispatches here; the lane-0 forms of log and
log1p serve every scalar use on these targets, so the standalone op, its tail and the fused
forms give the same bits).

log(x): x = m 2^e with m in [sqrt(1/2), sqrt(2)) from the exponent and mantissa bits (a
subnormal x is scaled by 2^23 first), f = m - 1, Cephes' logf polynomial f - f^2/2 + f^3 P(f),
plus e ln 2 in two parts (about 1 ulp). x < 0 and NaN -> NaN, +-0 -> -Inf, +Inf -> +Inf.

log1p(u) (u >= 0, as Softplus and Mish use it: u = exp(-|x|)): w = 1 + u rounded, then
log(w) + (u - (w - 1)) / w, the rounding of w corrected to first order (about 2 ulp; log1p(u)
= u where w rounds to 1). +Inf -> +Inf.

Softplus(x) = max(x, 0) + log1p(exp(-|x|)), which is activations' two-branch form for both
signs (x + log1p(exp(-x)) for x > 0, log1p(exp(x)) otherwise) evaluated without a branch;
Mish(x) = x * tanh(Softplus(x)). NaN stays NaN.

Nodes without a SIMD ISA use kernels/vmath/portable.py's portable log and log1p (the same steps without FMA):
results differ between targets by rounding (a few ulp).
"""
from __future__ import annotations

from ..isa.registry import include_line
from ..isa.x86 import INT_BITS, SIMD, lane0, vconst, vpoly
from .coeffs import LOG_P

FUNCS = ("log", "log1p")
VECTOR = {"Log", "Softplus", "Mish"}


def vlog(ctx, isa: str) -> str:
    """Name of the vector log ``V aicc_log_ISA(V x)`` (registered once)."""
    d, i = SIMD[isa], INT_BITS[isa]
    v, fma, mul, add, sub = d["v"], d["fma"], d["mul"], d["add"], d["sub"]
    name = f"aicc_log_{isa}"

    def sel(a, b, x, y, p):        # b where x p y holds, else a
        return d["sel"].format(a=a, b=b, x=x, y=y, p=p)
    poly = vpoly(d, "f", LOG_P[::-1])
    tiny = vconst(d, 1.17549435e-38)      # FLT_MIN: below it, x is scaled by 2^23 first
    ctx.helper(f"0.{isa}.0.include", include_line(isa))
    ctx.helper(f"0.{isa}.1.{name}", f"""\
/* log of {d['L']} floats (kernels/vmath/log.py): x = m 2^e, m in [sqrt(1/2), sqrt(2)) (subnormal x
 * scaled by 2^23 first), f = m - 1, Cephes' logf polynomial, + e ln 2 in two parts. x < 0 and
 * NaN give NaN, +-0 gives -Inf, +Inf gives +Inf. */
static {v} {name}({v} x)
{{
    const {v} xs = {sel('x', f'{mul}(x, {vconst(d, 8388608.0)})', 'x', tiny, '_CMP_LT_OQ')};
    const {v} eadj = {sel(vconst(d, 0.0), vconst(d, -23.0), 'x', tiny, '_CMP_LT_OQ')};
    const {i['vi']} b = {i['bits']}(xs);
    {v} m = {i['flt']}({i['bor']}({i['band']}(b, {i['set1']}(0x007fffff)), {i['set1']}(0x3f800000)));
    {v} e = {add}({i['cvt']}({i['sub']}({i['srli']}(b, 23), {i['set1']}(127))), eadj);
    const {v} big = {sel(vconst(d, 0.0), vconst(d, 1.0), 'm', vconst(d, 1.41421356), '_CMP_GT_OQ')};
    m = {sel('m', f'{mul}(m, {vconst(d, 0.5)})', 'm', vconst(d, 1.41421356), '_CMP_GT_OQ')};
    e = {add}(e, big);
    const {v} f = {sub}(m, {vconst(d, 1.0)});
    const {v} z = {mul}(f, f);
    {v} y = {mul}({mul}(f, z), {poly});
    y = {fma}(e, {vconst(d, -2.12194440e-4)}, y);
    y = {d['fnma']}(z, {vconst(d, 0.5)}, y);
    {v} r = {fma}(e, {vconst(d, 0.693359375)}, {add}(f, y));
    r = {sel('r', vconst(d, float('inf')), 'x', vconst(d, float('inf')), '_CMP_EQ_OQ')};
    r = {sel('r', vconst(d, float('-inf')), 'x', vconst(d, 0.0), '_CMP_EQ_OQ')};
    return {sel('r', vconst(d, float('nan')), 'x', vconst(d, 0.0), '_CMP_NGE_UQ')};
}}""")
    return name


def vlog1p(ctx, isa: str) -> str:
    """Name of ``V aicc_log1p_ISA(V u)`` for u >= 0 (see the module docstring)."""
    d = SIMD[isa]
    name = f"aicc_log1p_{isa}"
    lg = vlog(ctx, isa)
    one = vconst(d, 1.0)
    corr = f"{d['div']}({d['sub']}(u, {d['sub']}(w, {one})), w)"
    r = f"{d['add']}({lg}(w), {corr})"
    ctx.helper(f"0.{isa}.2.{name}", f"""\
/* log1p(u) of {d['L']} floats, u >= 0 (kernels/vmath/log.py): log(w) for w = 1 + u, plus the rounding
 * of w to first order; +Inf gives +Inf. */
static {d['v']} {name}({d['v']} u)
{{
    const {d['v']} w = {d['add']}({one}, u);
    const {d['v']} r = {r};
    return {d['sel'].format(a='r', b='u', x='u', y=vconst(d, float('inf')), p='_CMP_EQ_OQ')};
}}""")
    return name


def scalar(ctx, isa: str, fn: str) -> str:
    """Name of ``float aicc_log1_ISA(float x)`` / log1p: the vector function on lane 0."""
    return lane0(ctx, isa, fn, vlog(ctx, isa) if fn == "log" else vlog1p(ctx, isa))


def vector_expr(ctx, isa: str, act: str, xv: str, vexp, vtanh) -> str:
    """Log / Softplus / Mish of the vector variable ``xv`` (vexp, vtanh: exp_simd's)."""
    d = SIMD[isa]
    if act == "Log":
        return f"{vlog(ctx, isa)}({xv})"
    # max(x, 0) + log1p(exp(-|x|)); max(0, x) keeps a NaN x (the second operand)
    zero = vconst(d, 0.0)
    negabs = f"{d['sub']}({zero}, {SIMD[isa]['max']}({xv}, {d['sub']}({zero}, {xv})))"
    sp = (f"{d['add']}({d['max']}({vconst(d, 0.0)}, {xv}), "
          f"{vlog1p(ctx, isa)}({vexp(ctx, isa)}({negabs})))")
    if act == "Softplus":
        return sp
    return f"{d['mul']}({xv}, {vtanh(ctx, isa)}({sp}))"
