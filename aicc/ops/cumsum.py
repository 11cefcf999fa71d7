"""CumSum (opset 11/14) and CumProd (opset 26): inclusive/exclusive, forward/reverse scans.

Layout [O, D, I] around the axis; each step of the scan updates a row of I values (the
inner loop contiguous). ``exclusive`` shifts by one (the first output is the identity, 0 or
1), ``reverse`` scans from the end. The ``axis`` input (int32/int64 scalar or 1-element
tensor) is baked in when it is a constant; fed at run time it is read in C, negative values
counting from the end. An axis outside [-rank, rank-1] at run time is not undefined
behaviour: the output is filled with NaN (floats) or 0 (integers).

Accumulation is sequential in the tensor dtype. Integers wrap around on overflow (unsigned
arithmetic: no UB). NaN/Inf follow IEEE arithmetic: once a NaN enters a scan, the rest of
that scan is NaN. Empty tensors produce no code.
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import c_literal, ctype
from ..emit_c.loops import numel
from .base import Op, empty_body, register

DTYPES = (np.float32, np.float64, np.int32, np.int64, np.uint32, np.uint64)


def _sfx(dt) -> str:
    return np.dtype(dt).name.replace("float", "f").replace("uint", "u").replace("int", "i")


def _op(kind, dt) -> str:
    sym = "+" if kind == "CumSum" else "*"
    if dt.kind in "iu":
        ut = "uint64_t" if dt.itemsize == 8 else "uint32_t"
        return f"({ctype(dt)})(({ut}){{a}} {sym} ({ut}){{v}})"
    return f"{{a}} {sym} {{v}}"


def _helper(ctx, kind, dt) -> str:
    ct = ctype(dt)
    name = f"aicc_{kind.lower()}_1_{_sfx(dt)}"
    ident = c_literal(0 if kind == "CumSum" else 1, dt)
    op = _op(kind, dt)
    return ctx.helper(name, f"""\
/* {kind} along the middle axis of [O, D, I]: step k visits d = k (or D-1-k when reverse);
 * y[d] = x[d] (inclusive) or the identity (exclusive) at the first step, then combines the
 * previous output with x[d] (inclusive) or with the previous input (exclusive). */
static void {name}(size_t O, size_t D, size_t I, const {ct} *restrict x, {ct} *restrict y,
    int exclusive, int reverse)
{{
    for (size_t o = 0; o < O; ++o) {{
        const {ct} *restrict xo = x + o * D * I;
        {ct} *restrict yo = y + o * D * I;
        for (size_t k = 0; k < D; ++k) {{
            const size_t d = reverse ? D - 1 - k : k;
            {ct} *restrict yd = yo + d * I;
            if (k == 0) {{
                for (size_t i = 0; i < I; ++i) yd[i] = exclusive ? {ident} : xo[d * I + i];
                continue;
            }}
            {{
                const size_t p = reverse ? d + 1 : d - 1;
                const {ct} *restrict yp = yo + p * I;
                const {ct} *restrict xs = xo + (exclusive ? p : d) * I;
                for (size_t i = 0; i < I; ++i) yd[i] = {op.format(a='yp[i]', v='xs[i]')};
            }}
        }}
    }}
}}""")


def _axis_helper(ctx) -> str:
    name = "aicc_cumsum_0_axis"
    return ctx.helper(name, f"""\
/* A scan axis read at run time (negative: from the end) as [O, D, I] over dims[0..R);
 * returns 0 when it is out of range. */
static int {name}(size_t R, const size_t *dims, int64_t a, size_t *O, size_t *D, size_t *I)
{{
    if (a < 0) a += (int64_t)R;
    if (a < 0 || a >= (int64_t)R) return 0;
    *O = 1;
    *I = 1;
    for (size_t r = 0; r < (size_t)a; ++r) *O *= dims[r];
    for (size_t r = (size_t)a + 1; r < R; ++r) *I *= dims[r];
    *D = dims[(size_t)a];
    return 1;
}}""")


class _Scan(Op):
    attrs = {"exclusive": 0, "reverse": 0}

    def check(self, node, g):
        dt = g.dtype(node.inputs[0])
        if dt not in DTYPES:
            return f"dtype {dt.name} not supported"
        rank = len(g.shape(node.inputs[0]))
        if rank == 0:
            return "rank-0 input"
        if numel(g.shape(node.inputs[1])) != 1:
            return "axis must hold one value"
        a = g.const(node.inputs[1])
        if a is not None:
            a = int(np.asarray(a).reshape(-1)[0])
            if not -rank <= a < rank:
                return f"axis {a} out of range for rank {rank}"
        return None

    def emit(self, node, ctx):
        dt = ctx.in_dtype(0)
        shape = ctx.in_shape(0)
        x, y = ctx.inp[0], ctx.out[0]
        if numel(shape) == 0:
            empty_body(ctx)
            return
        fn = _helper(ctx, self.op_type, dt)
        ex = 1 if self.attr(node, "exclusive") else 0
        rev = 1 if self.attr(node, "reverse") else 0
        a = ctx.in_const(1)
        if a is not None:
            a = int(np.asarray(a).reshape(-1)[0])
            a = a + len(shape) if a < 0 else a
            o, d, i = numel(shape[:a]), shape[a], numel(shape[a + 1:])
            ctx(f"{fn}({o}u, {d}u, {i}u, {x}, {y}, {ex}, {rev});")
            return
        ah = _axis_helper(ctx)
        bad = c_literal(float("nan"), dt) if dt.kind == "f" else c_literal(0, dt)
        dims = ", ".join(f"{int(v)}u" for v in shape)
        ctx(f"static const size_t dims[{len(shape)}] = {{{dims}}};")
        ctx("size_t O, D, I;")
        with ctx.block(f"if ({ah}({len(shape)}u, dims, (int64_t){ctx.inp[1]}[0], &O, &D, &I))"):
            ctx(f"{fn}(O, D, I, {x}, {y}, {ex}, {rev});")
        with ctx.block("else"):
            ctx(f"for (size_t i = 0; i < {numel(shape)}u; ++i) {y}[i] = {bad};"
                "  /* axis out of range */")


@register("CumSum", since=11)
class CumSum(_Scan):
    pass


@register("CumProd", since=26)
class CumProd(_Scan):
    pass
