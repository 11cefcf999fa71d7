"""Softmax, LogSoftmax, Hardmax.

Opset < 13: the input is coerced to 2-D at ``axis`` (default 1): rows of prod(shape[axis:])
contiguous values. Opset >= 13: one ``axis`` (default -1): [outer, D, inner]. With inner == 1
a row helper walks contiguous rows; otherwise a strided helper processes a whole [D, inner]
slab at once (inner-most loops contiguous) with 2*inner values of step scratch for the
per-column max and sum.

Numerically stable: ``e = exp(x - max)``, Softmax ``e / sum(e)``, LogSoftmax
``x - max - log(sum(e))`` (onnxruntime's formulas), in the tensor dtype.

On the x86-avx2 / x86-avx512 / arm-neon targets (the target's ``kernels:`` list,
``aicc_kernel`` on the node), float32 Softmax and LogSoftmax over contiguous rows use vector code: exp_simd's vector
exp (about 1 ulp), lane-wise sums (a different summation order: results agree to rounding)
and, for Softmax, a multiplication by 1 / sum instead of a division per value (onnxruntime
scales the same way; one more rounding, within 1.5 ulp); exp(x - max) below FLT_MIN is +0
(kernels/vmath/exp.py vexp flush: no subnormal is computed, the slow path of x86 multipliers;
such an output is 0 rather than subnormal). Elsewhere float32 uses kernels/vmath/portable.py's
portable exp (loops of it vectorize); rows store exp(x - max), then sum it in order.

NaN/Inf: a NaN in a softmax row makes the whole row NaN. -Inf inputs give 0 (Softmax) or -Inf
(LogSoftmax) as long as one value in the row is finite; a row of all -Inf, or with a +Inf,
computes Inf - Inf and yields NaN, as onnxruntime does. Hardmax marks the first maximum
(NaN compares false, so it is never chosen unless it is the first value). Empty tensors
(including D == 0) produce no code.
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import c_literal, ctype
from ..emit_c.loops import numel
from ..kernels.isa.registry import ISAS
from ..kernels.isa.x86 import SIMD, simd_isa
from .base import Op, empty_body, float_dtype_reason, register_many
from .reduce import row_extremum
from .traits import SCHEDULABLE


def _sfx(dt) -> str:
    return "f32" if np.dtype(dt) == np.float32 else "f64"


def _m(dt, fn) -> str:
    return fn + "f" if np.dtype(dt) == np.float32 else fn


def _exp(ctx, dt) -> tuple:
    """(exp function, helper-name suffix) of the portable helpers: kernels/vmath/portable.py's exp for
    float32 on a node without a SIMD ISA (loops of it vectorize), else the C library's."""
    if np.dtype(dt) == np.float32 and simd_isa(ctx) is None:
        from ..kernels.vmath.portable import portable
        return portable(ctx, "exp"), "_c"
    return _m(dt, "exp"), ""


def _row_helper(ctx, kind, dt) -> str:
    """Contiguous rows: the maximum (reduce.row_extremum: NaN never wins, and a NaN anywhere
    in the row makes the row NaN all the same), exp(x - max) into y (a loop compilers
    vectorize with math_c's exp), their sum in order, then the scaling or the log."""
    ct = ctype(dt)
    exp, sfx = _exp(ctx, dt)
    name = f"aicc_{kind.lower()}_rows_{_sfx(dt)}{sfx}"
    mx = row_extremum(ctx, dt, "maxnum", c_literal(float("-inf"), dt), "({v} > {a} ? {v} : {a})")
    if kind == "Softmax":
        tail = "for (size_t d = 0; d < D; ++d) yr[d] = yr[d] / sum;"
    else:
        tail = (f"const {ct} ls = {_m(dt, 'log')}(sum);\n"
                f"        for (size_t d = 0; d < D; ++d) yr[d] = xr[d] - mx - ls;")
    return ctx.helper(name, f"""\
/* {kind} over R contiguous rows of D values (D >= 1): max, exp(x - max) and its sum. */
static void {name}(size_t R, size_t D, const {ct} *restrict x, {ct} *restrict y)
{{
    for (size_t r = 0; r < R; ++r) {{
        const {ct} *restrict xr = x + r * D;
        {ct} *restrict yr = y + r * D;
        const {ct} mx = {mx}(xr, D);
        {ct} sum = {c_literal(0, dt)};
        for (size_t d = 0; d < D; ++d)
            yr[d] = {exp}(xr[d] - mx);
        for (size_t d = 0; d < D; ++d)
            sum += yr[d];
        {tail}
    }}
}}""")


# -- SIMD rows (float32 Softmax / LogSoftmax, contiguous rows, x86-avx2 / x86-avx512) ---------

def _hred(ctx, isa) -> None:
    """aicc_hmax_ISA / aicc_hsum_ISA: max and sum across the lanes of one vector, in
    registers (the ISA's vmath table: ``hred``)."""
    v, body = SIMD[isa]["v"], ISAS[isa].vmath["hred"]
    ctx.helper(f"0.{isa}.5.aicc_hred", "\n\n".join(f"""\
static AICC_UNUSED float aicc_h{fn}_{isa}({v} v)
{{
{body.format(op=op)}
}}""" for fn, op in (("max", "max"), ("sum", "add"))))


def _simd_row_helper(ctx, kind, isa) -> str:
    """Rows with exp_simd's vector exp; the row tail (D % L values) is read with -Inf past the
    row (exp gives 0: nothing added to the sum): masked loads and stores on x86 (_row_tail),
    a small buffer elsewhere. The max runs on four vector
    accumulators and the sum of exp on two, reduced across lanes in registers (the max's
    latency chain and the reductions through memory bounded the loop: Softmax of 2 x 128 x 128
    in the C loop, x86-avx2 19.0 -> 16.2 us, x86-avx512 13.1 -> 9.3)."""
    from ..kernels.vmath.exp import vexp
    d = SIMD[isa]
    v, L = d["v"], d["L"]
    # exp of x - max <= 0; values below FLT_MIN flushed to +0: the row sum (>= 1, the max's
    # term) is the same, and no subnormal is computed (masked attention rows)
    ex = vexp(ctx, isa, flush=True)
    _hred(ctx, isa)
    name = f"aicc_{kind.lower()}_rows_f32_{isa}"
    if kind == "Softmax":        # e stored, then scaled by 1 / sum
        store = [f"{d['st']}(yr + j, e0);", f"{d['st']}(yr + j + {L}u, e1);"]
        # ISAs with a load / store of 4 vectors (``ld4v``: NEON's LD1 / ST1 of 4) scale 4
        # vectors per step first
        quad = "" if "ld4v" not in d else f"""
        for (j = 0; j + {4 * L}u <= Dv; j += {4 * L}u) {{
            {d['v4']} q = {d['ld4v']}(yr + j);
            q.val[0] = {d['mul']}(q.val[0], vinv); q.val[1] = {d['mul']}(q.val[1], vinv);
            q.val[2] = {d['mul']}(q.val[2], vinv); q.val[3] = {d['mul']}(q.val[3], vinv);
            {d['st4v']}(yr + j, q);
        }}"""
        fin = f"""\
        const float inv = 1.0f / sum;
        const {v} vinv = {d['set1']}(inv);{quad}
        for ({"" if quad else "j = 0"}; j < Dv; j += {L}u)
            {d['st']}(yr + j, {d['mul']}({d['ld']}(yr + j), vinv));
        for (j = Dv; j < D; ++j)
            yr[j] = yr[j] * inv;"""
        what = "e = exp(x - max) stored, y = e * (1 / sum of e)"
    else:                        # (x - max) - log(sum), the scalar helper's order
        store = ["", ""]
        fin = f"""\
        const float ls = logf(sum);
        const {v} vm2 = {d['set1']}(mx), vls = {d['set1']}(ls);
        for (j = 0; j < Dv; j += {L}u)
            {d['st']}(yr + j, {d['sub']}({d['sub']}({d['ld']}(xr + j), vm2), vls));
        for (j = Dv; j < D; ++j)
            yr[j] = xr[j] - mx - ls;"""
        what = "y = x - max - log(sum of exp(x - max))"
    mx, ad = d.get("rowmax", d["max"]), d["add"]
    tail, buf = _row_tail(ctx, isa, d, ex, kind == "Softmax"), ""
    if tail is None:             # through a buffer padded with -Inf
        buf = f"t[{L}], "
        tail_store = ("\n            for (size_t l = 0; l < nt; ++l)"
                      "\n                yr[Dv + l] = t[l];") if kind == "Softmax" else ""
        tail = f"""\
            for (size_t l = 0; l < {L}u; ++l)
                t[l] = l < nt ? xr[Dv + l] - mx : -HUGE_VALF;
            const {v} e = {ex}({d['ld']}(t));
            {d['st']}(t, e);
            s1 = {ad}(s1, e);{tail_store}"""
    text = f"""\
/* {kind} over R contiguous rows of D floats ({isa}, {L} lanes): max, {what}
 * (exp: {ex}; sums on two vectors, then across lanes). A NaN in a row makes the row NaN; rows
 * with +Inf or all -Inf give NaN (Inf - Inf), as the scalar helper. */
static void {name}(size_t R, size_t D, const float *restrict x, float *restrict y)
{{
    const size_t Dv = D - D % {L}u, nt = D - Dv;
    for (size_t r = 0; r < R; ++r) {{
        const float *restrict xr = x + r * D;
        float *restrict yr = y + r * D;
        float {buf}mx, sum;
        {v} m0 = {d['set1']}(xr[0]), m1 = m0, m2 = m0, m3 = m0;
        {v} s0 = {d['zero']}, s1 = {d['zero']};
        size_t j = 0;
        for (; j + {4 * L}u <= Dv; j += {4 * L}u) {{
            m0 = {mx}(m0, {d['ld']}(xr + j));
            m1 = {mx}(m1, {d['ld']}(xr + j + {L}u));
            m2 = {mx}(m2, {d['ld']}(xr + j + {2 * L}u));
            m3 = {mx}(m3, {d['ld']}(xr + j + {3 * L}u));
        }}
        for (; j < Dv; j += {L}u)
            m0 = {mx}(m0, {d['ld']}(xr + j));
        mx = aicc_hmax_{isa}({mx}({mx}(m0, m1), {mx}(m2, m3)));
        for (j = Dv; j < D; ++j)
            if (xr[j] > mx) mx = xr[j];
        const {v} vneg = {d['set1']}(-mx);
        for (j = 0; j + {2 * L}u <= Dv; j += {2 * L}u) {{
            const {v} e0 = {ex}({ad}({d['ld']}(xr + j), vneg));
            const {v} e1 = {ex}({ad}({d['ld']}(xr + j + {L}u), vneg));
            {store[0]}
            {store[1]}
            s0 = {ad}(s0, e0);
            s1 = {ad}(s1, e1);
        }}
        if (j < Dv) {{
            const {v} e0 = {ex}({ad}({d['ld']}(xr + j), vneg));
            {store[0]}
            s0 = {ad}(s0, e0);
        }}
        if (nt) {{
{tail}
        }}
        sum = aicc_hsum_{isa}({ad}(s0, s1));
{fin}
    }}
}}"""
    # no blank statement lines (LogSoftmax stores nothing in the exp loop); the name sorts
    # after vmath's helpers (exp) and pool/simd.py's (the tails' lane-mask table)
    ctx.helper(f"softmax.{isa}.{name}", "\n".join(ln for ln in text.split("\n") if ln.strip()))
    return name


def _row_tail(ctx, isa, d, ex, store: bool):
    """The row tail's statements with the pool kernels' masked loads / stores (x - max in the
    first nt lanes, -Inf in the others, as the buffer's) on x86, where the buffer's scalar
    stores and vector load stalled store forwarding (Softmax of 12 x 197 x 197, x86-avx2:
    0.32 -> 0.28 ms); None elsewhere (the buffer)."""
    from ..kernels.pool.simd import POOL, header, spell
    if ISAS[isa].family != "x86" or isa not in POOL:
        return None
    header(ctx, isa)
    s = spell(isa)
    xv = s["mload_ninf"].format(p="xr + Dv", m="mk")
    return "\n".join([f"            const {s['mt']} mk = {s['mask'].format(n='nt')};",
                      f"            const {d['v']} e = {ex}({d['add']}({xv}, vneg));"]
                     + (["            " + s["mstore"].format(p="yr + Dv", m="mk", v="e") + ";"]
                        if store else [])
                     + [f"            s1 = {d['add']}(s1, e);"])


def _strided_helper(ctx, kind, dt) -> str:
    ct = ctype(dt)
    exp, sfx = _exp(ctx, dt)
    name = f"aicc_{kind.lower()}_strided_{_sfx(dt)}{sfx}"
    if kind == "Softmax":
        store = "\n                yo[d * I + i] = e;"
        fin = """\
        for (size_t d = 0; d < D; ++d)
            for (size_t i = 0; i < I; ++i) yo[d * I + i] = yo[d * I + i] / sm[i];"""
    else:
        store = ""
        fin = f"""\
        for (size_t i = 0; i < I; ++i) sm[i] = {_m(dt, 'log')}(sm[i]);
        for (size_t d = 0; d < D; ++d)
            for (size_t i = 0; i < I; ++i) yo[d * I + i] = xo[d * I + i] - mx[i] - sm[i];"""
    return ctx.helper(name, f"""\
/* {kind} over the middle axis of [O, D, I] (D >= 1, I > 1), a [D, I] slab at a time with
 * contiguous inner loops; ws: 2*I scratch values (per-column max and sum). */
static void {name}(size_t O, size_t D, size_t I, const {ct} *restrict x, {ct} *restrict y,
    {ct} *restrict ws)
{{
    {ct} *restrict mx = ws, *restrict sm = ws + I;
    for (size_t o = 0; o < O; ++o) {{
        const {ct} *restrict xo = x + o * D * I;
        {ct} *restrict yo = y + o * D * I;
        for (size_t i = 0; i < I; ++i) {{
            mx[i] = xo[i];
            sm[i] = {c_literal(0, dt)};
        }}
        for (size_t d = 1; d < D; ++d)
            for (size_t i = 0; i < I; ++i)
                if (xo[d * I + i] > mx[i]) mx[i] = xo[d * I + i];
        for (size_t d = 0; d < D; ++d)
            for (size_t i = 0; i < I; ++i) {{
                const {ct} e = {exp}(xo[d * I + i] - mx[i]);{store}
                sm[i] += e;
            }}
{fin}
    }}
}}""")


def _hardmax_rows_helper(ctx, dt) -> str:
    """Hardmax of contiguous rows (I = 1): the row maximum of the non-NaN values by
    reduce.row_extremum (the running argmax was a branch per element: 64 x 1000, x86-avx512
    87 -> 31 us, x86-avx2 31, onnxruntime 48-49), then the first index holding it. The same
    index as the running argmax: NaN never wins, except that a NaN first element keeps index
    0."""
    ct = ctype(dt)
    name = f"aicc_hardmax_rows_{_sfx(dt)}"
    z, one = c_literal(0, dt), c_literal(1, dt)
    mx = row_extremum(ctx, dt, "maxnum", c_literal(float("-inf"), dt), "({v} > {a} ? {v} : {a})")
    return ctx.helper(name, f"""\
/* Hardmax of O contiguous rows of D >= 1: 1 at the first maximum (NaN never wins; a NaN first
 * element keeps index 0), else 0. */
static void {name}(size_t O, size_t D, const {ct} *restrict x, {ct} *restrict y)
{{
    for (size_t o = 0; o < O; ++o) {{
        const {ct} *restrict xo = x + o * D;
        {ct} *restrict yo = y + o * D;
        const {ct} m = {mx}(xo, D);
        size_t best = 0;
        if (xo[0] == xo[0])
            while (xo[best] != m) ++best;
        for (size_t k = 0; k < D; ++k) yo[k] = {z};
        yo[best] = {one};
    }}
}}""")


def _hardmax_helper(ctx, dt) -> str:
    ct = ctype(dt)
    name = f"aicc_hardmax_{_sfx(dt)}"
    return ctx.helper(name, f"""\
/* Hardmax over the middle axis of [O, D, I] (D >= 1): 1 at the first maximum, else 0. */
static void {name}(size_t O, size_t D, size_t I, const {ct} *restrict x, {ct} *restrict y)
{{
    for (size_t o = 0; o < O; ++o)
        for (size_t i = 0; i < I; ++i) {{
            const {ct} *restrict xo = x + o * D * I + i;
            {ct} *restrict yo = y + o * D * I + i;
            size_t best = 0;
            for (size_t d = 1; d < D; ++d)
                if (xo[d * I] > xo[best * I]) best = d;
            for (size_t d = 0; d < D; ++d)
                yo[d * I] = d == best ? {c_literal(1, dt)} : {c_literal(0, dt)};
        }}
}}""")


@register_many(["Softmax", "LogSoftmax", "Hardmax"], since=1, traits={"Softmax": {SCHEDULABLE}})
class Softmax(Op):
    def _axis_default(self, g):
        return -1 if g.opset >= 13 else 1

    def _layout(self, node, g):
        shape = tuple(int(d) for d in g.shape(node.inputs[0]))
        ax = int(node.attrs.get("axis", self._axis_default(g)))
        ax = ax + len(shape) if ax < 0 else ax
        if g.opset < 13:
            return numel(shape[:ax]), numel(shape[ax:]), 1
        return numel(shape[:ax]), shape[ax], numel(shape[ax + 1:])

    def check(self, node, g):
        r = float_dtype_reason([g.dtype(node.inputs[0])])
        if r:
            return r
        rank = len(g.shape(node.inputs[0]))
        ax = int(node.attrs.get("axis", self._axis_default(g)))
        if not -rank <= ax < rank:
            return f"axis {ax} out of range for rank {rank}"
        return None

    def emit(self, node, ctx):
        dt = ctx.out_dtype(0)
        o, d, i = self._layout(node, ctx.g)
        if o * d * i == 0:
            empty_body(ctx)
            return
        x, y = ctx.inp[0], ctx.out[0]
        if self.op_type == "Hardmax":
            if i == 1:
                ctx(f"{_hardmax_rows_helper(ctx, dt)}({o}u, {d}u, {x}, {y});")
            else:
                ctx(f"{_hardmax_helper(ctx, dt)}({o}u, {d}u, {i}u, {x}, {y});")
            return
        if i == 1:
            isa = simd_isa(ctx) if dt == np.float32 else None
            ctx.kernel = isa or ""
            helper = _simd_row_helper(ctx, self.op_type, isa) if isa else \
                _row_helper(ctx, self.op_type, dt)
            ctx(f"{helper}({o}u, {d}u, {x}, {y});")
            return
        ws = ctx.scratch(2 * i * dt.itemsize, ctype(dt), "ws")
        ctx(f"{_strided_helper(ctx, self.op_type, dt)}({o}u, {d}u, {i}u, {x}, {y}, {ws});")
