"""TopK (opset 1: attribute k; opset 10+: input K; opset 11+: largest, sorted).

Layout [O, D, I] around the axis; every one of the O*I slices is sorted by a stable
bottom-up merge sort of its indices (2*D size_t of step scratch), or for k <= 32 (and k < D)
its first k are kept sorted while the slice is scanned once (a value enters when it comes
strictly before the k-th, after every kept value it does not beat: the same order), then the
first k are written: Values in the input dtype, Indices as int64. Ties keep the lower index
first (the spec's tie-break), for both largest and smallest. sorted=0 also returns sorted
results (the order is unspecified there).

k is the static size of the outputs' axis. A constant K must equal it (check()); a K fed at
run time is read in C, and a value different from the static k is not undefined behaviour:
Values are filled with NaN (0 for integers) and Indices with -1.

NaN: ordered above every number (+Inf included), equal to each other: largest=1 returns
NaNs first, largest=0 last (numpy's sort order; onnxruntime's own NaN order may differ).
Integers compare exactly. Empty outputs (k = 0 or an empty outer dim) produce no code.
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import c_literal, ctype
from ..emit_c.loops import numel
from .base import Op, empty_body, register


def _sfx(dt) -> str:
    return np.dtype(dt).name.replace("float", "f").replace("uint", "u").replace("int", "i")


def _helper(ctx, dt) -> str:
    ct = ctype(dt)
    name = f"aicc_topk_{_sfx(dt)}"
    if dt.kind == "f":
        big = "(u > v || (u != u && v == v))"      # u before v when largest
        small = "(u < v || (u == u && v != v))"    # u before v when smallest
    else:
        big, small = "u > v", "u < v"
    return ctx.helper(name, f"""\
/* TopK over the middle axis of [O, D, I]: each slice's indices are merge-sorted (stable:
 * ties keep the lower index first) in ws (2*D values), or for K <= 32 the first K are kept
 * sorted by insertion in one scan (the same order); the first K go to vals/idx. NaN sorts
 * above every number. */
static void {name}(size_t O, size_t D, size_t I, size_t K, const {ct} *restrict x,
    {ct} *restrict vals, int64_t *restrict idx, size_t *restrict ws, int largest)
{{
    for (size_t o = 0; o < O; ++o)
        for (size_t i = 0; i < I; ++i) {{
            const {ct} *restrict xs = x + o * D * I + i;
            size_t *a = ws, *b = ws + D;
            if (K > 0 && K <= 32u && K < D) {{  /* few: insertion into the sorted first K */
                size_t n = 0;
                for (size_t d = 0; d < D; ++d) {{
                    const {ct} u = xs[d * I];
                    size_t j;
                    if (n == K) {{               /* full: u must come before the last */
                        const {ct} v = xs[a[K - 1] * I];
                        if (!(largest ? {big} : {small}))
                            continue;
                        j = K - 1;
                    }} else {{
                        j = n++;
                    }}
                    for (; j > 0; --j) {{        /* after every value it does not beat */
                        const {ct} v = xs[a[j - 1] * I];
                        if (!(largest ? {big} : {small}))
                            break;
                        a[j] = a[j - 1];
                    }}
                    a[j] = d;
                }}
            }} else {{                         /* stable merge sort of the indices */
                for (size_t d = 0; d < D; ++d) a[d] = d;
                for (size_t w = 1; w < D; w *= 2) {{
                    for (size_t lo = 0; lo < D; lo += 2 * w) {{
                        const size_t mid = D - lo > w ? lo + w : D;
                        const size_t hi = D - lo > 2 * w ? lo + 2 * w : D;
                        size_t p = lo, q = mid, t = lo;
                        while (p < mid && q < hi) {{
                            const {ct} u = xs[a[q] * I], v = xs[a[p] * I];
                            const int first = largest ? {big} : {small};
                            b[t++] = first ? a[q++] : a[p++];
                        }}
                        while (p < mid) b[t++] = a[p++];
                        while (q < hi) b[t++] = a[q++];
                    }}
                    {{
                        size_t *s = a;
                        a = b;
                        b = s;
                    }}
                }}
            }}
            for (size_t k = 0; k < K; ++k) {{
                vals[(o * K + k) * I + i] = xs[a[k] * I];
                idx[(o * K + k) * I + i] = (int64_t)a[k];
            }}
        }}
}}""")


@register("TopK", since=1)
class TopK(Op):
    attrs = {"axis": -1, "largest": 1, "sorted": 1, "k": None}

    def _axis(self, node, rank):
        ax = int(self.attr(node, "axis"))
        return ax + rank if ax < 0 else ax

    def _k_const(self, node, g):
        if len(node.inputs) > 1 and node.inputs[1]:
            v = g.const(node.inputs[1])
            return None if v is None else int(np.asarray(v).reshape(-1)[0])
        return int(self.attr(node, "k"))

    def check(self, node, g):
        dt = g.dtype(node.inputs[0])
        if dt.kind not in "iuf" or dt == np.float16:
            return f"dtype {dt.name} not supported"
        shape = g.shape(node.inputs[0])
        ax = int(self.attr(node, "axis"))
        if not -len(shape) <= ax < len(shape):
            return f"axis {ax} out of range for rank {len(shape)}"
        for o in node.outputs:
            if o and o not in g.types:
                return "output shape unknown"
        ax = self._axis(node, len(shape))
        k = int(g.shape(node.outputs[0])[ax])
        kc = self._k_const(node, g)
        if kc is not None and kc != k:
            return f"k={kc} does not match the output shape"
        if k > int(shape[ax]):
            return f"k={k} larger than the axis ({shape[ax]})"
        if len(node.inputs) > 1 and node.inputs[1] and numel(g.shape(node.inputs[1])) != 1:
            return "K must hold one value"
        return None

    def emit(self, node, ctx):
        dt = ctx.in_dtype(0)
        shape = ctx.in_shape(0)
        ax = self._axis(node, len(shape))
        o, d, i = numel(shape[:ax]), shape[ax], numel(shape[ax + 1:])
        k = ctx.out_shape(0)[ax]
        if o * k * i == 0:
            empty_body(ctx)
            return
        vals = ctx.out[0] or ctx.scratch(o * k * i * dt.itemsize, ctype(dt), "vs")
        idx = ctx.out[1] if len(ctx.out) > 1 and ctx.out[1] else None
        if idx is None:
            idx = ctx.scratch(o * k * i * 8, "int64_t", "ix")
        ws = ctx.scratch(2 * d * 8, "size_t", "ws")
        call = (f"{_helper(ctx, dt)}({o}u, {d}u, {i}u, {k}u, {ctx.inp[0]}, {vals}, {idx}, {ws}, "
                f"{1 if self.attr(node, 'largest') else 0});")
        if self._k_const(node, ctx.g) is not None:
            ctx(call)
            return
        bad = c_literal(float("nan"), dt) if dt.kind == "f" else c_literal(0, dt)
        with ctx.block(f"if ({ctx.inp[1]}[0] == {c_literal(k, np.int64)})"):
            ctx(call)
        with ctx.block("else"):
            ctx(f"/* K differs from the static k = {k}: invalid */")
            with ctx.block(f"for (size_t j = 0; j < {o * k * i}u; ++j)"):
                ctx(f"{vals}[j] = {bad};")
                ctx(f"{idx}[j] = -1;")
