"""Loss ops: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.

Layout: the input is [N, C, d1..dk] viewed as [N, C, D] (D = prod(d), 1 without spatial
dims), the target [N, d1..dk] as [N, D]. One shared kernel (``aicc_nll_*``) gathers
``-lp[n, t, d] * w[t]`` per sample and reduces:

* ``none``: the per-sample loss, shape [N, d1..dk];
* ``sum``:  the sum of the losses (accumulated in double);
* ``mean``: sum(loss) / sum(w[t]) over the counted samples (w = 1 without a weight input),
  i.e. the plain mean without weights and ignore_index, the PyTorch/onnxruntime weighted
  mean otherwise (ignored samples count neither in the numerator nor in the denominator).

SoftmaxCrossEntropyLoss first computes log_softmax over axis 1 with the LogSoftmax kernels of
softmax.py (``x - max - log(sum(exp(x - max)))``) into its optional ``log_prob`` output (or
step scratch), then runs the same kernel.

Targets (int32/int64) and the weight input are read at run time. A target equal to
``ignore_index`` (if the attribute is given; negative values allowed) gives loss 0 and weight
0. Out-of-range targets (< 0 or >= C, not the ignore_index) are defined here as ignored too
(loss 0, weight 0): nothing is read out of bounds. NaN/Inf in the scores or weights
propagate; ``mean`` with no counted sample (or weights summing to 0) is 0/0 = NaN, as in
numpy and PyTorch.
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import c_literal, ctype
from ..emit_c.loops import numel
from .base import Op, empty_body, register
from .softmax import _row_helper, _strided_helper

REDUCTIONS = {"none": 0, "sum": 1, "mean": 2}


def _sfx(dt) -> str:
    return {"float32": "f32", "float64": "f64", "int32": "i32", "int64": "i64"}[np.dtype(dt).name]


def _nll_helper(ctx, dt, tdt) -> str:
    ct, tt = ctype(dt), ctype(tdt)
    name = f"aicc_nll_{_sfx(dt)}_{_sfx(tdt)}"
    one, zero = c_literal(1, dt), c_literal(0, dt)
    return ctx.helper(name, f"""\
/* Negative log-likelihood over log-probabilities lp [N, C, D] and targets t [N, D]:
 * loss = -lp[n, t, d] * w[t] (w == NULL: weight 1). A target equal to ignore (when
 * use_ignore) or outside [0, C) contributes loss 0 and weight 0. red 0: out [N, D] per
 * sample; 1: out[0] = sum; 2: out[0] = sum / sum of the weights (NaN when that is 0). */
static void {name}(size_t N, size_t C, size_t D, const {ct} *restrict lp,
    const {tt} *restrict t, const {ct} *restrict w, int use_ignore, int64_t ignore, int red,
    {ct} *restrict out)
{{
    double sum = 0.0, wsum = 0.0;
    for (size_t n = 0; n < N; ++n)
        for (size_t d = 0; d < D; ++d) {{
            const int64_t c = (int64_t)t[n * D + d];
            {ct} l = {zero};
            if (!(use_ignore && c == ignore) && c >= 0 && (uint64_t)c < (uint64_t)C) {{
                const {ct} wc = w ? w[c] : {one};
                l = -lp[(n * C + (size_t)c) * D + d] * wc;
                wsum += (double)wc;
            }}
            if (red == 0)
                out[n * D + d] = l;
            else
                sum += (double)l;
        }}
    if (red == 1)
        out[0] = ({ct})sum;
    else if (red == 2)
        out[0] = ({ct})(sum / wsum);
}}""")


class _Loss(Op):
    attrs = {"reduction": "mean", "ignore_index": None}

    def check(self, node, g):
        dt = g.dtype(node.inputs[0])
        if dt not in (np.float32, np.float64):
            return f"dtype {dt.name} not supported (float32/float64 only)"
        tdt = g.dtype(node.inputs[1])
        if tdt not in (np.int32, np.int64):
            return f"target dtype {tdt.name} not supported (int32/int64)"
        xs, ts = g.shape(node.inputs[0]), g.shape(node.inputs[1])
        if len(xs) < 2:
            return f"input rank {len(xs)} < 2"
        if tuple(ts) != tuple(xs[:1]) + tuple(xs[2:]):
            return f"target shape {list(ts)} does not match input shape {list(xs)}"
        if len(node.inputs) > 2 and node.inputs[2]:
            if g.dtype(node.inputs[2]) != dt:
                return "weight dtype differs from the input dtype"
            if tuple(g.shape(node.inputs[2])) != (xs[1],):
                return f"weight shape {list(g.shape(node.inputs[2]))} is not [C]"
        red = self.attr(node, "reduction")
        if isinstance(red, bytes):
            red = red.decode()
        if red not in REDUCTIONS:
            return f"reduction {red!r} not supported"
        return None

    def _call_nll(self, node, ctx, lp):
        xs = ctx.in_shape(0)
        n, c, d = xs[0], xs[1], numel(xs[2:])
        red = self.attr(node, "reduction")
        red = REDUCTIONS[red.decode() if isinstance(red, bytes) else red]
        ii = self.attr(node, "ignore_index")
        w = ctx.inp[2] if ctx.has_input(2) else "NULL"
        fn = _nll_helper(ctx, ctx.in_dtype(0), ctx.in_dtype(1))
        ign = c_literal(0 if ii is None else int(ii), np.int64)
        ctx(f"{fn}({n}u, {c}u, {d}u, {lp}, {ctx.inp[1]}, {w}, {0 if ii is None else 1}, "
            f"{ign}, {red}, {ctx.out[0]});")


@register("NegativeLogLikelihoodLoss", since=12)
class NegativeLogLikelihoodLoss(_Loss):
    def emit(self, node, ctx):
        if numel(ctx.out_shape(0)) == 0:
            empty_body(ctx)
            return
        ctx("/* NegativeLogLikelihoodLoss: input holds log-probabilities */")
        self._call_nll(node, ctx, ctx.inp[0])


@register("SoftmaxCrossEntropyLoss", since=12)
class SoftmaxCrossEntropyLoss(_Loss):
    def emit(self, node, ctx):
        if numel(ctx.out_shape(0)) == 0:
            if len(ctx.out) > 1 and ctx.out[1]:
                ctx(f"(void){ctx.out[1]};")
            empty_body(ctx)
            return
        dt = ctx.in_dtype(0)
        xs = ctx.in_shape(0)
        n, c, d = xs[0], xs[1], numel(xs[2:])
        if len(ctx.out) > 1 and ctx.out[1]:
            lp = ctx.out[1]
        else:
            lp = ctx.scratch(max(1, n * c * d) * dt.itemsize, ctype(dt), "lp")
        ctx("/* SoftmaxCrossEntropyLoss: log_softmax over the class axis, then NLL */")
        if n * c * d:
            if d == 1:
                ctx(f"{_row_helper(ctx, 'LogSoftmax', dt)}({n}u, {c}u, {ctx.inp[0]}, {lp});")
            else:
                ws = ctx.scratch(2 * d * dt.itemsize, ctype(dt), "ws")
                ctx(f"{_strided_helper(ctx, 'LogSoftmax', dt)}({n}u, {c}u, {d}u, "
                    f"{ctx.inp[0]}, {lp}, {ws});")
        self._call_nll(node, ctx, lp)
