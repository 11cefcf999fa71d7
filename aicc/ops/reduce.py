"""Reductions: ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp.

(ArgMax/ArgMin live in argmax.py.)

Axes come from the ``axes`` attribute (ReduceSum before opset 13, the others before 18) or
from the second input (later opsets). A constant axes input (or one of static size 0, which
is always empty) is baked in at compile time; axes fed at run time use the kernels of
kernels/reduce/runtime_axes.py (output shape static, axes values read in C). No axes reduce everything, unless
``noop_with_empty_axes`` is set: then the output is the input mapped element by element as
onnxruntime does (x for most, |x| for L1/L2, x*x for SumSquare, log(x) for LogSum).
keepdims only changes the output's shape, not its layout.

Layout: size-1 dims are dropped and adjacent dims that are both reduced or both kept are
merged. One reduced group is one call of a helper over [O, D, I] (reduce the middle axis):
a "rows" helper when I == 1 (scalar accumulator over contiguous values) and a "cols" helper
otherwise (accumulates a row of I outputs at a time: contiguous, vectorizable). Several
separate reduced groups (e.g. axes 0 and 2 of [A, B, C]) are reduced one at a time, the
intermediate results in step scratch; every reduction here composes (Mean of equal-size
Means, L2 of L2s, LogSumExp of LogSumExps, SumSquare and L1 continue as Sum, LogSum sums
until its last stage).

Accumulation is in the tensor dtype, in ascending index order, except float Sum, Mean,
SumSquare, L1, L2 and LogSum over contiguous rows: those sum in kernels/vmath/sum16.py's 16-lane order
(vectorizable; the same on every target); over a middle axis longer than COL_BLOCK (64) rows
(a channel-last spatial mean: squeeze-excite blocks after layout-nhwc) they sum each block of
64 rows from zero and add the blocks in order. Integers (Sum, Prod, Max,
Min) wrap around on overflow (computed in unsigned arithmetic: no UB). ReduceMax/ReduceMin
accept bool (any / all).

NaN/Inf: Sum/Mean/Prod/L1/L2/SumSquare/LogSum follow IEEE arithmetic (LogSum of a negative
sum is NaN, of 0 is -Inf). ReduceMax/Min propagate NaN (as numpy and onnx.reference;
onnxruntime ignores NaN when reducing a contiguous trailing axis but propagates it
otherwise). LogSumExp is ``log(sum(exp(x - m))) + m`` with m the maximum, replaced by 0 when
infinite (onnxruntime): all -Inf gives -Inf, a +Inf gives +Inf. Empty reduced axes give the
identity: Sum/L1/L2/SumSquare 0, Prod 1, Max -Inf (the type's minimum for integers, false
for bool), Min +Inf (maximum, true), LogSum and LogSumExp -Inf, and Mean 0/0 = NaN
(undefined in ONNX; onnxruntime returns 0).
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import c_literal, ctype
from ..emit_c.loops import numel
from ..kernels.reduce.cols import COL_BLOCK, blocked_cols
from ..kernels.reduce.runtime_axes import emit_runtime
from ..kernels.vmath.sum16 import sum16
from .base import Op, empty_body, register_many

FLOAT_ONLY = {"ReduceMean", "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp",
              "ReduceLogSum"}
BOOL_OK = {"ReduceMax", "ReduceMin"}
REDUCE = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
          "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp", "ReduceLogSum"]
LATER = {"ReduceSumSquare": "ReduceSum", "ReduceL1": "ReduceSum"}   # kind of later stages


def _stage_kind(kind, k, n) -> str:
    """The reduction performed by stage k of n (see the module docstring)."""
    if kind == "ReduceLogSum":
        return kind if k == n - 1 else "ReduceSum"
    return kind if k == 0 else LATER.get(kind, kind)


def _sfx(dt) -> str:
    return np.dtype(dt).name.replace("float", "f").replace("uint", "u").replace("int", "i")


def _fn(dt, name) -> str:
    return name + "f" if np.dtype(dt) == np.float32 else name


def _exprs(kind, dt):
    """(init, acc(a, v), fin(a) or None) as C expression templates."""
    L = lambda v: c_literal(v, dt)  # noqa: E731
    if dt.kind == "b":
        return {"ReduceMax": ("0", "({v} > {a} ? {v} : {a})", None),
                "ReduceMin": ("1", "({v} < {a} ? {v} : {a})", None)}[kind]
    if dt.kind in "iu":
        info = np.iinfo(dt)
        ut = "uint64_t" if dt.itemsize == 8 else "uint32_t"
        ct = ctype(dt)
        return {
            "ReduceSum": (L(0), f"({ct})(({ut}){{a}} + ({ut}){{v}})", None),
            "ReduceProd": (L(1), f"({ct})(({ut}){{a}} * ({ut}){{v}})", None),
            "ReduceMax": (L(info.min), "({v} > {a} ? {v} : {a})", None),
            "ReduceMin": (L(info.max), "({v} < {a} ? {v} : {a})", None),
        }[kind]
    ct = ctype(dt)
    return {
        "ReduceSum": (L(0), "{a} + {v}", None),
        "ReduceMean": (L(0), "{a} + {v}", f"{{a}} / ({ct})D"),
        "ReduceMax": (L(float("-inf")), "({v} > {a} || {v} != {v} ? {v} : {a})", None),
        "ReduceMin": (L(float("inf")), "({v} < {a} || {v} != {v} ? {v} : {a})", None),
        "ReduceProd": (L(1), "{a} * {v}", None),
        "ReduceL1": (L(0), f"{{a}} + {_fn(dt, 'fabs')}({{v}})", None),
        "ReduceL2": (L(0), "{a} + {v} * {v}", f"{_fn(dt, 'sqrt')}({{a}})"),
        "ReduceSumSquare": (L(0), "{a} + {v} * {v}", None),
        "ReduceLogSum": (L(0), "{a} + {v}", f"{_fn(dt, 'log')}({{a}})"),
    }[kind]


def _lse_helper(ctx, dt, rows: bool) -> str:
    ct, sfx = ctype(dt), _sfx(dt)
    z, ninf = c_literal(0, dt), c_literal(float("-inf"), dt)
    mx = "({v} > {a} || {v} != {v} ? {v} : {a})"
    exp, log = _fn(dt, "exp"), _fn(dt, "log")
    if rows:
        name = f"aicc_reducelogsumexp_rows_{sfx}"
        return ctx.helper(name, f"""\
/* ReduceLogSumExp of O contiguous rows of D: log(sum(exp(x - m))) + m, m the row maximum
 * (0 when infinite). */
static void {name}(size_t O, size_t D, const {ct} *restrict x, {ct} *restrict y)
{{
    for (size_t o = 0; o < O; ++o) {{
        const {ct} *restrict xo = x + o * D;
        {ct} m = {ninf}, s = {z};
        for (size_t d = 0; d < D; ++d) m = {mx.format(a='m', v='xo[d]')};
        if (isinf(m)) m = {z};
        for (size_t d = 0; d < D; ++d) s += {exp}(xo[d] - m);
        y[o] = {log}(s) + m;
    }}
}}""")
    name = f"aicc_reducelogsumexp_cols_{sfx}"
    v = "xo[d * I + i]"
    return ctx.helper(name, f"""\
/* ReduceLogSumExp over the middle axis of [O, D, I], I > 1: the column maxima in y, the sums
 * in ws (I values of scratch), then y = log(sum) + max (max taken as 0 when infinite). */
static void {name}(size_t O, size_t D, size_t I, const {ct} *restrict x,
    {ct} *restrict y, {ct} *restrict ws)
{{
    for (size_t o = 0; o < O; ++o) {{
        const {ct} *restrict xo = x + o * D * I;
        {ct} *restrict yo = y + o * I;
        for (size_t i = 0; i < I; ++i) yo[i] = {ninf};
        for (size_t d = 0; d < D; ++d)
            for (size_t i = 0; i < I; ++i) {{
                const {ct} v = {v};
                yo[i] = {mx.format(a='yo[i]', v='v')};
            }}
        for (size_t i = 0; i < I; ++i) {{
            if (isinf(yo[i])) yo[i] = {z};
            ws[i] = {z};
        }}
        for (size_t d = 0; d < D; ++d)
            for (size_t i = 0; i < I; ++i) ws[i] += {exp}({v} - yo[i]);
        for (size_t i = 0; i < I; ++i) yo[i] = {log}(ws[i]) + yo[i];
    }}
}}""")


# running values of row_extremum: 32 (GCC 12 -O3 left 16 lanes unvectorized on avx2)
EXT_LANES = 32


def row_extremum(ctx, dt, tag: str, init: str, acc: str) -> str:
    """Name of ``static T aicc_rowext_<tag>_<t>(const T *x, size_t n)``: ``acc`` (a template of
    {a} and {v}, a maximum or minimum) folded over x[0 .. n) from ``init`` through EXT_LANES
    running values (element d in lane d mod EXT_LANES), then the lanes in order, then the
    tail. Compilers vectorize the lanes' selects, where one running value was a serial chain
    (ReduceMin of 1x64x56x56 over H and W, x86-avx512: 352 -> 20 us, onnxruntime 47). The
    value of one running fold, except which of -0 and +0 a row whose extremum is zero of both
    signs gives (and which NaN, for a fold that keeps NaN)."""
    ct, L = ctype(dt), EXT_LANES
    name = f"aicc_rowext_{tag}_{_sfx(dt)}"
    ctx.helper(f"aicc_0_{name}", f"""\
/* {tag} of x[0 .. n) by {L} running values (lane d mod {L}), then the lanes in order and
 * the tail; n == 0 gives {init}. */
static {ct} {name}(const {ct} *restrict x, size_t n)
{{
    const size_t nb = n - n % {L}u;
    {ct} a = {init}, lane[{L}];
    for (size_t j = 0; j < {L}u; ++j) lane[j] = {init};
    for (size_t d = 0; d < nb; d += {L}u)
        for (size_t j = 0; j < {L}u; ++j) {{
            const {ct} v = x[d + j];
            lane[j] = {acc.format(a='lane[j]', v='v')};
        }}
    for (size_t j = 0; j < {L}u; ++j) a = {acc.format(a='a', v='lane[j]')};
    for (size_t d = nb; d < n; ++d) {{
        const {ct} v = x[d];
        a = {acc.format(a='a', v='v')};
    }}
    return a;
}}""")
    return name


def _extremum_rows(ctx, kind, dt, init, acc) -> str:
    """Float ReduceMax / ReduceMin of contiguous rows through row_extremum (NaN once seen
    stays)."""
    ct = ctype(dt)
    name = f"aicc_{kind.lower()}_rows_{_sfx(dt)}"
    ext = row_extremum(ctx, dt, kind[6:].lower(), init, acc)
    return ctx.helper(name, f"""\
/* {kind} of O contiguous rows of D values ({ext}; D == 0 gives the identity) */
static void {name}(size_t O, size_t D, const {ct} *restrict x, {ct} *restrict y)
{{
    for (size_t o = 0; o < O; ++o)
        y[o] = {ext}(x + o * D, D);
}}""")


# float reductions that are sums of a term: contiguous rows use sum16's order
SUM16_TERMS = {"ReduceSum": "sum", "ReduceMean": "sum", "ReduceLogSum": "sum",
               "ReduceSumSquare": "sq", "ReduceL2": "sq", "ReduceL1": "abs"}


def _reduce_helper(ctx, kind, dt, rows: bool, blocked: bool = False) -> str:
    """The helper reducing [O, D] rows (rows) or the middle axis of [O, D, I]; blocked: the
    latter in blocks of COL_BLOCK rows summed apart (float sums over D > COL_BLOCK), with a
    scratch row t of I values."""
    if kind == "ReduceLogSumExp":
        return _lse_helper(ctx, dt, rows)
    ct = ctype(dt)
    init, acc, fin = _exprs(kind, dt)
    if rows and kind in SUM16_TERMS and dt in (np.float32, np.float64):
        name = f"aicc_{kind.lower()}_rows_{_sfx(dt)}"
        res = fin.format(a="a") if fin else "a"
        total = sum16(ctx, dt, SUM16_TERMS[kind])
        return ctx.helper(name, f"""\
/* {kind} of O contiguous rows of D values (sum16 order; D == 0 gives the identity). */
static void {name}(size_t O, size_t D, const {ct} *restrict x, {ct} *restrict y)
{{
    for (size_t o = 0; o < O; ++o) {{
        const {ct} a = {total}(x + o * D, D);
        y[o] = {res};
    }}
}}""")
    if rows and kind in ("ReduceMax", "ReduceMin") and dt.kind == "f":
        return _extremum_rows(ctx, kind, dt, init, acc)
    if rows:
        name = f"aicc_{kind.lower()}_rows_{_sfx(dt)}"
        res = fin.format(a="a") if fin else "a"
        return ctx.helper(name, f"""\
/* {kind} of O contiguous rows of D values (ascending order; D == 0 gives the identity). */
static void {name}(size_t O, size_t D, const {ct} *restrict x, {ct} *restrict y)
{{
    for (size_t o = 0; o < O; ++o) {{
        const {ct} *restrict xo = x + o * D;
        {ct} a = {init};
        for (size_t d = 0; d < D; ++d) {{
            const {ct} v = xo[d];
            a = {acc.format(a='a', v='v')};
        }}
        y[o] = {res};
    }}
}}""")
    name = f"aicc_{kind.lower()}_cols_{_sfx(dt)}"
    finish = (f"\n        for (size_t i = 0; i < I; ++i) yo[i] = {fin.format(a='yo[i]')};"
              if fin else "")
    if blocked:
        return blocked_cols(ctx, name, kind, ct, init, acc.format(a="t[i]", v="v"), finish)
    return ctx.helper(name, f"""\
/* {kind} over the middle axis of [O, D, I], I > 1: a row of I results at a time, updated
 * with each contiguous row of the input (ascending d). */
static void {name}(size_t O, size_t D, size_t I, const {ct} *restrict x, {ct} *restrict y)
{{
    for (size_t o = 0; o < O; ++o) {{
        const {ct} *restrict xo = x + o * D * I;
        {ct} *restrict yo = y + o * I;
        for (size_t i = 0; i < I; ++i) yo[i] = {init};
        for (size_t d = 0; d < D; ++d) {{
            const {ct} *restrict xd = xo + d * I;
            for (size_t i = 0; i < I; ++i) {{
                const {ct} v = xd[i];
                yo[i] = {acc.format(a='yo[i]', v='v')};
            }}
        }}{finish}
    }}
}}""")


def _groups(shape, axes):
    """[(size, reduced)] with size-1 dims dropped and like neighbours merged."""
    out = []
    for d, n in enumerate(shape):
        if n == 1:
            continue
        red = d in axes
        if out and out[-1][1] == red:
            out[-1] = (out[-1][0] * n, red)
        else:
            out.append((n, red))
    return out


def _stages(shape, axes):
    """[(O, D, I)] reductions to perform in order, the last reduced group first."""
    cur, stages = _groups(shape, axes), []
    while any(r for _, r in cur):
        k = max(i for i, (_, r) in enumerate(cur) if r)
        stages.append((numel(n for n, _ in cur[:k]), cur[k][0],
                       numel(n for n, _ in cur[k + 1:])))
        merged = []
        for n, r in cur[:k] + cur[k + 1:]:
            if merged and merged[-1][1] == r:
                merged[-1] = (merged[-1][0] * n, r)
            else:
                merged.append((n, r))
        cur = merged
    return stages


def _dtype_reason(op_type, dt) -> str | None:
    if dt in (np.float32, np.float64):
        return None
    if dt.kind in "iu" and op_type not in FLOAT_ONLY:
        return None
    if dt.kind == "b" and op_type in BOOL_OK:
        return None
    return f"dtype {dt.name} not supported"


@register_many(REDUCE, since=1)
class Reduce(Op):
    attrs = {"keepdims": 1, "noop_with_empty_axes": 0}

    def _axes_input(self, g) -> bool:
        return g.opset >= (13 if self.op_type == "ReduceSum" else 18)

    def _runtime(self, node, g) -> bool:
        """Axes fed at run time (a non-constant axes input that is not statically empty)."""
        return (self._axes_input(g) and len(node.inputs) > 1 and bool(node.inputs[1])
                and g.const(node.inputs[1]) is None and numel(g.shape(node.inputs[1])) > 0)

    def axes(self, node, g):
        """Normalized reduced axes (a set; empty means 'noop'), or a reason string (also
        read by passes/layout_nhwc.py)."""
        rank = len(g.shape(node.inputs[0]))
        if self._axes_input(g):
            axes = []
            if len(node.inputs) > 1 and node.inputs[1]:
                v = g.const(node.inputs[1])
                if v is not None:
                    axes = [int(a) for a in np.asarray(v).reshape(-1)]
        else:
            axes = [int(a) for a in node.attrs.get("axes", [])]
        if any(not -rank <= a < max(rank, 1) for a in axes):
            return f"axes {axes} out of range for rank {rank}"
        if not axes:
            return set() if self.attr(node, "noop_with_empty_axes") else set(range(rank))
        return {a + rank if a < 0 else a for a in axes}

    def check(self, node, g):
        r = _dtype_reason(self.op_type, g.dtype(node.inputs[0]))
        if r:
            return r
        if self._runtime(node, g):
            if node.outputs[0] not in g.types:
                return "axes computed at run time and the output shape is unknown"
            if g.dtype(node.inputs[1]) != np.int64:
                return f"axes of dtype {g.dtype(node.inputs[1]).name}"
            return None
        axes = self.axes(node, g)
        return axes if isinstance(axes, str) else None

    def emit(self, node, ctx):
        dt = ctx.in_dtype(0)
        ct = ctype(dt)
        if self._runtime(node, ctx.g):
            exprs = None if self.op_type == "ReduceLogSumExp" else _exprs(self.op_type, dt)
            emit_runtime(ctx, self.op_type, dt, _sfx(dt), exprs,
                         self.attr(node, "keepdims"), self.attr(node, "noop_with_empty_axes"))
            return
        shape = ctx.in_shape(0)
        axes = self.axes(node, ctx.g)
        x, y = ctx.inp[0], ctx.out[0]
        if numel(ctx.out_shape(0)) == 0:
            empty_body(ctx)
            return
        if numel(shape) == 0:
            # every reduced set is empty: the identity of the reduction
            fn = _reduce_helper(ctx, self.op_type, dt, rows=True)
            ctx(f"{fn}({numel(ctx.out_shape(0))}u, 0u, {x}, {y});")
            return
        stages = _stages(shape, axes) or [(numel(shape), 1, 1)]   # noop: elementwise map
        src = x
        for k, (o, d, i) in enumerate(stages):
            kind = _stage_kind(self.op_type, k, len(stages))
            dst = y if k == len(stages) - 1 else ctx.scratch(o * i * dt.itemsize, ct, "ws")
            if i == 1:
                ctx(f"{_reduce_helper(ctx, kind, dt, rows=True)}({o}u, {d}u, {src}, {dst});")
            elif kind == "ReduceLogSumExp":
                ws = ctx.scratch(i * dt.itemsize, ct, "ws")
                ctx(f"{_reduce_helper(ctx, kind, dt, rows=False)}({o}u, {d}u, {i}u, {src}, "
                    f"{dst}, {ws});")
            elif kind in SUM16_TERMS and dt.kind == "f" and d > COL_BLOCK:
                ws = ctx.scratch(i * dt.itemsize, ct, "ws")
                ctx(f"{_reduce_helper(ctx, kind, dt, rows=False, blocked=True)}({o}u, {d}u, "
                    f"{i}u, {src}, {dst}, {ws});")
            else:
                ctx(f"{_reduce_helper(ctx, kind, dt, rows=False)}({o}u, {d}u, {i}u, {src}, "
                    f"{dst});")
            src = dst
