"""LpNormalization (p = 1 or 2 along one axis) and MeanVarianceNormalization.

LpNormalization: [O, D, I] around ``axis``; the norm of each of the O*I vectors (sum |x| or
sqrt(sum x*x), accumulated in the tensor dtype in ascending order), then ``y = x / norm``,
and ``y = 0`` where the norm is 0 (as the opset-22 spec says; onnx.reference divides and
gives NaN there). Other p values are rejected by check().

MeanVarianceNormalization: ``y = (x - mean) / (sqrt(var) + 1e-9)`` over the ``axes``
attribute (default [0, 2, 3]), mean and variance over the reduced axes for each position of
the kept ones. The variance is the two-pass mean of squared deviations (the ONNX function
body writes it as E[x^2] - E[x]^2, which is the same value mathematically but can round
below zero and give NaN for nearly constant groups; this never does). The reduced axes need
not be contiguous: the loops walk the input in order with a static stats index.

NaN/Inf: a NaN or Inf in a vector/group makes its whole output NaN (0 * Inf, Inf / Inf);
a zero vector gives zeros (LpNormalization); the MVN variance is never negative, so a
constant group gives 0 / 1e-9 = 0 when its mean is exact (rounding residue otherwise).
Empty tensors produce no code.
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import c_literal, ctype
from ..emit_c.loops import numel
from .base import Op, empty_body, float_dtype_reason, register
from .reduce import _groups


def _sfx(dt) -> str:
    return "f32" if np.dtype(dt) == np.float32 else "f64"


def _m(dt, fn) -> str:
    return fn + "f" if np.dtype(dt) == np.float32 else fn


# -- LpNormalization -----------------------------------------------------------------------

def _lp_helper(ctx, dt, p: int) -> str:
    ct = ctype(dt)
    name = f"aicc_lpnorm{p}_{_sfx(dt)}"
    z = c_literal(0, dt)
    acc = f"{_m(dt, 'fabs')}(v)" if p == 1 else "v * v"
    fin = "" if p == 1 else \
        f"\n        for (size_t i = 0; i < I; ++i) nrm[i] = {_m(dt, 'sqrt')}(nrm[i]);"
    return ctx.helper(name, f"""\
/* L{p} normalization over the middle axis of [O, D, I]: nrm (I values of scratch) gets the
 * norm of each column, then y = x / nrm (0 where the norm is 0). */
static void {name}(size_t O, size_t D, size_t I, const {ct} *restrict x,
    {ct} *restrict y, {ct} *restrict nrm)
{{
    for (size_t o = 0; o < O; ++o) {{
        const {ct} *restrict xo = x + o * D * I;
        {ct} *restrict yo = y + o * D * I;
        for (size_t i = 0; i < I; ++i) nrm[i] = {z};
        for (size_t d = 0; d < D; ++d)
            for (size_t i = 0; i < I; ++i) {{
                const {ct} v = xo[d * I + i];
                nrm[i] += {acc};
            }}{fin}
        for (size_t d = 0; d < D; ++d)
            for (size_t i = 0; i < I; ++i)
                yo[d * I + i] = nrm[i] == {z} ? {z} : xo[d * I + i] / nrm[i];
    }}
}}""")


@register("LpNormalization", since=1)
class LpNormalization(Op):
    attrs = {"axis": -1, "p": 2}

    def check(self, node, g):
        r = float_dtype_reason([g.dtype(node.inputs[0])])
        if r:
            return r
        if int(self.attr(node, "p")) not in (1, 2):
            return f"p={self.attr(node, 'p')} (only 1 and 2 are defined)"
        rank = len(g.shape(node.inputs[0]))
        ax = int(self.attr(node, "axis"))
        if not -rank <= ax < rank:
            return f"axis {ax} out of range for rank {rank}"
        return None

    def emit(self, node, ctx):
        dt = ctx.out_dtype(0)
        shape = ctx.in_shape(0)
        ax = int(self.attr(node, "axis"))
        ax = ax + len(shape) if ax < 0 else ax
        o, d, i = numel(shape[:ax]), shape[ax], numel(shape[ax + 1:])
        if o * d * i == 0:
            empty_body(ctx)
            return
        ws = ctx.scratch(i * dt.itemsize, ctype(dt), "nrm")
        fn = _lp_helper(ctx, dt, int(self.attr(node, "p")))
        ctx(f"{fn}({o}u, {d}u, {i}u, {ctx.inp[0]}, {ctx.out[0]}, {ws});")


# -- MeanVarianceNormalization ---------------------------------------------------------------

def emit_grouped(ctx, groups, body) -> None:
    """Loops over every input element in order; ``body(k)`` gets the C expression of the
    kept-position (stats) index ``k``; the flat input index is ``xi``."""
    w = ctx.w
    strides, acc = [0] * len(groups), 1
    for j in reversed(range(len(groups))):
        if not groups[j][1]:
            strides[j] = acc
            acc *= groups[j][0]
    w("{")
    w.level += 1
    w("size_t xi = 0;")
    for j, (n, _) in enumerate(groups):
        w(f"for (size_t i{j} = 0; i{j} < {n}u; ++i{j}) {{")
        w.level += 1
    terms = [f"i{j}" if strides[j] == 1 else f"i{j} * {strides[j]}u"
             for j in range(len(groups)) if strides[j]]
    w(f"const size_t k = {' + '.join(terms) if terms else '0'};")
    w(body("k"))
    w("++xi;")
    for _ in range(len(groups) + 1):
        w.level -= 1
        w("}")


@register("MeanVarianceNormalization", since=9)
class MeanVarianceNormalization(Op):
    attrs = {"axes": (0, 2, 3)}

    def _axes(self, node, g):
        rank = len(g.shape(node.inputs[0]))
        return [int(a) for a in self.attr(node, "axes")], rank

    def check(self, node, g):
        r = float_dtype_reason([g.dtype(node.inputs[0])])
        if r:
            return r
        axes, rank = self._axes(node, g)
        if any(not -rank <= a < rank for a in axes):
            return f"axes {axes} out of range for rank {rank}"
        return None

    def emit(self, node, ctx):
        dt = ctx.out_dtype(0)
        ct = ctype(dt)
        shape = ctx.in_shape(0)
        axes, rank = self._axes(node, ctx.g)
        axes = {a + rank if a < 0 else a for a in axes}
        n = numel(shape)
        if n == 0:
            empty_body(ctx)
            return
        kept = numel(s for d, s in enumerate(shape) if d not in axes)
        per = n // kept
        groups = _groups(shape, axes)
        x, y = ctx.inp[0], ctx.out[0]
        mean = ctx.scratch(2 * kept * dt.itemsize, ct, "st")
        den = f"{mean} + {kept}u"
        z = c_literal(0, dt)
        ctx(f"/* MVN: per kept position k, the mean over {per} values, then the two-pass "
            f"standard deviation */")
        with ctx.block(f"for (size_t k = 0; k < {kept}u; ++k)"):
            ctx(f"{mean}[k] = {z};")
            ctx(f"({den})[k] = {z};")
        emit_grouped(ctx, groups, lambda k: f"{mean}[{k}] += {x}[xi];")
        with ctx.block(f"for (size_t k = 0; k < {kept}u; ++k)"):
            ctx(f"{mean}[k] = {mean}[k] / ({ct}){per}u;")
        emit_grouped(ctx, groups, lambda k: f"const {ct} t = {x}[xi] - {mean}[{k}]; "
                                            f"({den})[{k}] += t * t;")
        eps = c_literal(1e-9, dt)
        with ctx.block(f"for (size_t k = 0; k < {kept}u; ++k)"):
            ctx(f"({den})[k] = {_m(dt, 'sqrt')}(({den})[k] / ({ct}){per}u) + {eps};")
        emit_grouped(ctx, groups,
                     lambda k: f"{y}[xi] = ({x}[xi] - {mean}[{k}]) / ({den})[{k}];")
