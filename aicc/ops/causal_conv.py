"""CausalConvWithState (opset 27): stateful causal depthwise 1-D convolution.

input ``[B, C, L]``, weight ``[C, 1, K]``, optional bias ``[C]`` and past_state
``[B, C, K-1]`` (zeros when omitted). With ``padded = concat(past_state, input)`` along the
last axis: ``output[b, c, t] = bias[c] + sum_k weight[c, 0, k] * padded[b, c, t + k]``
(taps in ascending k), then the optional fused ``silu``/``swish`` ``y * sigmoid(y)``;
``present_state = padded[b, c, L:]`` (the last K-1 values, so past values survive when
L < K-1).

The kernel never materializes ``padded``: a tap at padded position ``p`` reads past_state
for ``p < K-1`` and input otherwise. float32 (float64 also compiles); float16/bfloat16 run
in float32 (upcast-half pass). NaN/Inf follow IEEE arithmetic.
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import ctype
from .base import Op, register
from .swish import swish_expr

KERNEL = """\
/* Causal depthwise conv over [B][C][L] with K taps per channel. past: [B][C][K-1] or NULL
 * (zeros); bias: [C] or NULL; silu: apply y * sigmoid(y). y: [B][C][L]; state: the new
 * [B][C][K-1] state (last K-1 values of past ++ x). */
static void aicc_causal_conv_SFX(size_t B, size_t C, size_t L, size_t K,
    const TYPE *restrict x, const TYPE *restrict w, const TYPE *restrict bias,
    const TYPE *restrict past, int silu, TYPE *restrict y, TYPE *restrict state)
{
    const size_t P = K - 1;     /* state length */
    for (size_t b = 0; b < B; ++b)
        for (size_t c = 0; c < C; ++c) {
            const size_t xo = (b * C + c) * L, po = (b * C + c) * P;   /* row offsets */
            const TYPE *wc = w + c * K;
            for (size_t t = 0; t < L; ++t) {
                TYPE acc = bias ? bias[c] : (TYPE)0;
                for (size_t k = 0; k < K; ++k) {
                    const size_t p = t + k;           /* position in past ++ x */
                    const TYPE v = p >= P ? x[xo + p - P] : (past ? past[po + p] : (TYPE)0);
                    acc += wc[k] * v;
                }
                y[xo + t] = silu ? SILU(acc) : acc;
            }
            for (size_t s = 0; s < P; ++s) {
                const size_t p = L + s;
                state[po + s] = p >= P ? x[xo + p - P] : (past ? past[po + p] : (TYPE)0);
            }
        }
}"""


@register("CausalConvWithState", since=27)
class CausalConvWithState(Op):
    attrs = {"activation": "none"}

    def check(self, node, g):
        names = [n for n in node.inputs if n]
        dts = {g.dtype(n).name for n in names}
        if len(dts) != 1 or next(iter(dts)) not in ("float32", "float64"):
            return "all inputs must share one dtype, float32 (or float64)"
        if self.attr(node, "activation") not in ("none", "silu", "swish"):
            return f"activation {self.attr(node, 'activation')!r} (none, silu, swish)"
        x = g.shape(node.inputs[0])
        w = g.shape(node.inputs[1])
        if len(x) != 3 or len(w) != 3 or int(w[0]) != int(x[1]) or int(w[1]) != 1 or int(w[2]) < 1:
            return f"input [B, C, L] and weight [C, 1, K] expected, got {list(x)}, {list(w)}"
        return None

    def emit(self, node, ctx):
        dt = ctx.in_dtype(0)
        B, C, L = ctx.in_shape(0)
        K = ctx.in_shape(1)[2]
        sfx = "_f32" if dt == np.float32 else "_f64"
        code = KERNEL.replace("TYPE", ctype(dt)).replace("_SFX", sfx)
        code = code.replace("SILU(acc)", f"({swish_expr('acc', 1.0, dt)})")
        ctx.helper("aicc_causal_conv" + sfx, code)
        bias = ctx.inp[2] if ctx.has_input(2) else "NULL"
        past = ctx.inp[3] if ctx.has_input(3) else "NULL"
        silu = 0 if self.attr(node, "activation") == "none" else 1
        state = ctx.out[1] if len(node.outputs) > 1 and node.outputs[1] else None
        if state is None:       # present_state not consumed: scratch
            state = ctx.scratch(max(B * C * (K - 1), 1) * dt.itemsize, ctype(dt), "state")
        if B * C == 0:
            ctx(f"(void){ctx.out[0]}; (void){state};  /* empty output: nothing to do */")
            return
        ctx(f"aicc_causal_conv{sfx}({B}u, {C}u, {L}u, {K}u, {ctx.inp[0]}, {ctx.inp[1]}, "
            f"{bias}, {past}, {silu}, {ctx.out[0]}, {state});")
