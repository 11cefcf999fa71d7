"""LinearAttention (opset 27): recurrent linear attention (linear, gated, delta, gated_delta).

query ``[B, T, Hq*dk]``, key ``[B, T, Hkv*dk]``, value ``[B, T, Hkv*dv]`` (heads packed in
the last axis), optional past_state ``[B, Hkv, dk, dv]`` (zeros when omitted), decay
``[B, T, Hkv*dk]`` or ``[B, T, Hkv]`` (log-space gate; gated rules), beta ``[B, T, Hkv]``
or ``[B, T, 1]`` (delta rules). Each KV head's state S ``[dk, dv]`` lives in present_state
(or step scratch) and is updated token by token, exactly the sequential recurrence of the
spec (``chunk_size`` is a tuning hint and is ignored):

* gated: ``S *= exp(g_t)`` (per key row, or one scalar per head)
* delta: ``u = beta_t * (v_t - S^T k_t)``, otherwise ``u = v_t``
* ``S += k_t u^T``
* every query head h of the group (``h / (Hq/Hkv)`` is the KV head) reads
  ``o_t = scale * q_t^T S`` (scale 0: ``1/sqrt(dk)``).

Computed in the tensor dtype (float32; onnx.reference accumulates in float32 too), sums in
ascending index order. NaN/Inf follow IEEE arithmetic and persist in the state.
float16/bfloat16 run in float32 (upcast-half pass).
"""
from __future__ import annotations

import math

import numpy as np

from ..emit_c.cwriter import c_float, ctype
from .base import Op, register

KERNEL = """\
/* Linear attention recurrence. q: [B][T][Hq][dk], k: [B][T][Hkv][dk], v: [B][T][Hkv][dv];
 * decay: [B][T][Hkv][gdim] (gdim dk or 1) or NULL; beta: [B][T][bdim] (bdim Hkv or 1) or
 * NULL; past: [B][Hkv][dk][dv] or NULL (zeros). state: [B][Hkv][dk][dv], updated in place;
 * y: [B][T][Hq][dv]; u: dv scratch values. */
static void aicc_linear_attention_SFX(size_t B, size_t T, size_t Hq, size_t Hkv, size_t dk,
    size_t dv, const TYPE *restrict q, const TYPE *restrict k, const TYPE *restrict v,
    const TYPE *restrict decay, size_t gdim, const TYPE *restrict beta, size_t bdim,
    const TYPE *restrict past, TYPE scale, TYPE *restrict state, TYPE *restrict y,
    TYPE *restrict u)
{
    const size_t group = Hq / Hkv, n = dk * dv;
    for (size_t i = 0; i < B * Hkv * n; ++i)
        state[i] = past ? past[i] : (TYPE)0;
    for (size_t b = 0; b < B; ++b)
        for (size_t t = 0; t < T; ++t)
            for (size_t h = 0; h < Hkv; ++h) {
                TYPE *S = state + (b * Hkv + h) * n;
                const TYPE *kt = k + ((b * T + t) * Hkv + h) * dk;
                const TYPE *vt = v + ((b * T + t) * Hkv + h) * dv;
                if (decay) {              /* S *= exp(g_t) */
                    const TYPE *gt = decay + ((b * T + t) * Hkv + h) * gdim;
                    for (size_t d = 0; d < dk; ++d) {
                        const TYPE e = EXP(gt[gdim == 1 ? 0 : d]);
                        for (size_t m = 0; m < dv; ++m)
                            S[d * dv + m] *= e;
                    }
                }
                if (beta) {               /* u = beta * (v - S^T k) */
                    const TYPE bt = beta[(b * T + t) * bdim + (bdim == 1 ? 0 : h)];
                    for (size_t m = 0; m < dv; ++m) {
                        TYPE r = 0;
                        for (size_t d = 0; d < dk; ++d)
                            r += S[d * dv + m] * kt[d];
                        u[m] = bt * (vt[m] - r);
                    }
                } else {
                    for (size_t m = 0; m < dv; ++m)
                        u[m] = vt[m];
                }
                for (size_t d = 0; d < dk; ++d)   /* S += k u^T */
                    for (size_t m = 0; m < dv; ++m)
                        S[d * dv + m] += kt[d] * u[m];
                for (size_t hq = h * group; hq < (h + 1) * group; ++hq) {   /* o = scale q^T S */
                    const TYPE *qt = q + ((b * T + t) * Hq + hq) * dk;
                    TYPE *yt = y + ((b * T + t) * Hq + hq) * dv;
                    for (size_t m = 0; m < dv; ++m) {
                        TYPE o = 0;
                        for (size_t d = 0; d < dk; ++d)
                            o += qt[d] * S[d * dv + m];
                        yt[m] = scale * o;
                    }
                }
            }
}"""

RULES = {"linear": (False, False), "gated": (True, False), "delta": (False, True),
         "gated_delta": (True, True)}


def _dims(op, node, g):
    hq, hkv = int(op.attr(node, "q_num_heads") or 0), int(op.attr(node, "kv_num_heads") or 0)
    q, k, v = (tuple(int(d) for d in g.shape(node.inputs[i])) for i in range(3))
    if hq <= 0 or hkv <= 0 or hq % hkv:
        raise ValueError("q_num_heads must be a positive multiple of kv_num_heads")
    if len(q) != 3 or len(k) != 3 or len(v) != 3:
        raise ValueError("query/key/value must be 3-D")
    if q[2] % hq or v[2] % hkv or k[2] != hkv * (q[2] // hq) or k[:2] != q[:2] or v[:2] != q[:2]:
        raise ValueError(f"inconsistent query/key/value shapes {q}, {k}, {v}")
    return q[0], q[1], hq, hkv, q[2] // hq, v[2] // hkv


@register("LinearAttention", since=27)
class LinearAttention(Op):
    attrs = {"chunk_size": 64, "kv_num_heads": None, "q_num_heads": None, "scale": 0.0,
             "update_rule": "gated_delta"}

    def check(self, node, g):
        names = [n for n in node.inputs if n]
        dts = {g.dtype(n).name for n in names} | {g.dtype(n).name for n in node.outputs if n}
        if len(dts) != 1 or next(iter(dts)) not in ("float32", "float64"):
            return "all tensors must share one dtype, float32 (or float64)"
        rule = self.attr(node, "update_rule")
        if rule not in RULES:
            return f"update_rule {rule!r} (linear, gated, delta, gated_delta)"
        try:
            B, T, hq, hkv, dk, dv = _dims(self, node, g)
        except ValueError as e:
            return str(e)
        gated, delta = RULES[rule]
        has = lambda i: len(node.inputs) > i and bool(node.inputs[i])  # noqa: E731
        if has(4) != gated or has(5) != delta:
            return f"update_rule {rule!r} needs decay {'given' if gated else 'omitted'} " \
                   f"and beta {'given' if delta else 'omitted'}"
        if has(3) and tuple(int(d) for d in g.shape(node.inputs[3])) != (B, hkv, dk, dv):
            return f"past_state must be [{B}, {hkv}, {dk}, {dv}]"
        if gated and tuple(int(d) for d in g.shape(node.inputs[4])) not in \
                ((B, T, hkv * dk), (B, T, hkv)):
            return "decay must be [B, T, Hkv*dk] or [B, T, Hkv]"
        if delta and tuple(int(d) for d in g.shape(node.inputs[5])) not in \
                ((B, T, hkv), (B, T, 1)):
            return "beta must be [B, T, Hkv] or [B, T, 1]"
        return None

    def emit(self, node, ctx):
        dt = ctx.in_dtype(0)
        ct = ctype(dt)
        B, T, hq, hkv, dk, dv = _dims(self, node, ctx.g)
        sfx = "_f32" if dt == np.float32 else "_f64"
        exp = "expf" if dt == np.float32 else "exp"
        ctx.helper("aicc_linear_attention" + sfx,
                   KERNEL.replace("TYPE", ct).replace("_SFX", sfx).replace("EXP", exp))
        scale = float(self.attr(node, "scale") or 0.0) or (1.0 / math.sqrt(dk) if dk else 1.0)
        decay = ctx.inp[4] if ctx.has_input(4) else "NULL"
        gdim = (dk if ctx.in_shape(4)[2] == hkv * dk else 1) if ctx.has_input(4) else 1
        beta = ctx.inp[5] if ctx.has_input(5) else "NULL"
        bdim = ctx.in_shape(5)[2] if ctx.has_input(5) else 1
        past = ctx.inp[3] if ctx.has_input(3) else "NULL"
        state = ctx.out[1] if len(node.outputs) > 1 and node.outputs[1] else None
        if state is None:
            state = ctx.scratch(max(B * hkv * dk * dv, 1) * dt.itemsize, ct, "state")
        u = ctx.scratch(max(dv, 1) * dt.itemsize, ct, "u")
        ctx(f"aicc_linear_attention{sfx}({B}u, {T}u, {hq}u, {hkv}u, {dk}u, {dv}u, "
            f"{ctx.inp[0]}, {ctx.inp[1]}, {ctx.inp[2]}, {decay}, {gdim}u, {beta}, {bdim}u, "
            f"{past}, {c_float(scale, dt)}, {state}, {ctx.out[0]}, {u});")
