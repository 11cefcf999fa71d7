"""Attention (opset 23, 24, 25): scaled dot-product attention with masks and a KV cache.

Q, K, V are 3-D ``[B, S, heads * head_size]`` (with ``q_num_heads``/``kv_num_heads``) or
4-D ``[B, heads, S, head_size]``; both are read in place through (batch, head, seq) strides,
so no transpose is materialized. Grouped-query attention: query head ``h`` uses KV head
``h / (Hq / Hkv)``. With ``past_key``/``past_value`` the caches are concatenated (past rows
first) into ``present_key``/``present_value`` (or step scratch when those outputs are
omitted) and attention reads the concatenation; without a past, requested present outputs
are K/V in 4-D layout.

The step is one call of ``aicc_attention_<t>`` with a constant params struct. For each
(batch, query head, query row) the kernel

1. builds the additive bias row over the Skv keys (step scratch): the float ``attn_mask``
   value (0 without a mask), plus ``-inf`` for every key a rule disallows: a false boolean
   mask entry, a key past the mask's last dim (the mask is padded with -inf / False), a
   key ``j >= nonpad_kv_seqlen[b]``, causal ``j > i + offset``, the sliding window
   (opset 25: ``offset + i - j > left`` or ``j - offset - i > right``). ``offset`` is the past
   length, or ``nonpad_kv_seqlen[b] - Sq`` with an external cache (bottom-right alignment);
2. scores ``s_j = (q_i . k_j) * scale`` (default ``1/sqrt(head_size)``), softcap
   ``c * tanh(s / c)`` when ``softcap > 0``, plus the bias;
3. a stable softmax ``exp(s - max) / sum`` (a row of all ``-inf`` scores gives weights 0);
4. ``y_i = sum_j p_j v_j``.

``qk_matmul_output`` ([B, Hq, Sq, Skv]): mode 0 the scaled ``Q K^T`` (before softcap, as the
spec and onnxruntime; onnx.reference returns it after softcap), 1 after softcap, 2 after
the bias (-inf where masked), 3 the softmax weights.

Fully masked rows (every bias entry ``-inf``, decided on the bias, not on the scores) give
weights 0, so ``Y`` and the mode-3 output are 0 there (spec errata, onnx.reference,
onnxruntime). ``nonpad_kv_seqlen`` values are clamped to ``[0, Skv + Sq]`` (which changes
no result: 0 already masks every key, Skv + Sq allows every key).

Precision: everything is computed in the tensor dtype (float32 or float64), dot products
in ascending order; ``softmax_precision`` is accepted and ignored (the difference from a
float64 softmax is rounding). float16/bfloat16 nodes are computed in float32 by the
upcast-half pass. NaN/Inf follow IEEE arithmetic: a NaN score or bias makes its whole row
NaN (as numpy's max/exp); a masked key still contributes ``0 * v_j`` to ``Y`` (so an Inf or
NaN in V reaches Y, as the plain ``P @ V`` of the reference).
"""
from __future__ import annotations

import math

import numpy as np

from ..emit_c.cwriter import c_float, ctype
from ..emit_c.loops import numel
from .base import Op, empty_body, register

PARAMS = """\
/* One Attention node. Q, K, V and Y are viewed as [batch][head][seq][dim] with the dim
 * contiguous and the other axes at the given strides (elements); K and V hold Hkv heads of
 * Skv rows. The attn_mask is read at b*m_b + h*m_h + i*m_s + j (stride 0: broadcast) for
 * keys j < m_len; keys j >= m_len are masked. */
typedef struct {
    size_t B, Hq, Hkv, Sq, Skv, Dk, Dv;
    size_t q_b, q_h, q_s, k_b, k_h, k_s, v_b, v_h, v_s, y_b, y_h, y_s;
    size_t m_b, m_h, m_s, m_len;
    int causal;          /* key j allowed only when j <= i + offset */
    int64_t offset;      /* keys before the query block (without nonpad_kv_seqlen) */
    int64_t left, right; /* sliding window (-1: unbounded side) */
    int qk_mode;         /* qk_matmul_output: 0 scaled QK^T, 1 softcapped, 2 + bias, 3 softmax */
    double scale, softcap;
} aicc_attn_params;"""

CONCAT = """\
/* dst[b][h] = rows of past[b][h] (P rows, contiguous [B][H][P][D]; may be NULL when P == 0)
 * followed by the L rows of x[b][h] (strided); dst is contiguous [B][H][P + L][D]. */
static void aicc_attn_concat_SFX(size_t B, size_t H, size_t P, size_t L, size_t D,
    const TYPE *restrict past, const TYPE *restrict x, size_t x_b, size_t x_h, size_t x_s,
    TYPE *restrict dst)
{
    for (size_t b = 0; b < B; ++b)
        for (size_t h = 0; h < H; ++h) {
            TYPE *d = dst + (b * H + h) * (P + L) * D;
            if (P > 0)
                memcpy(d, past + (b * H + h) * P * D, P * D * sizeof(TYPE));
            for (size_t s = 0; s < L; ++s)
                memcpy(d + (P + s) * D, x + b * x_b + h * x_h + s * x_s, D * sizeof(TYPE));
        }
}"""

KERNEL = """\
/* Attention (see aicc_attn_params). fmask: additive float mask or NULL; bmask: boolean
 * mask (nonzero = attend) or NULL; nonpad: valid keys per batch or NULL; qk: the optional
 * [B][Hq][Sq][Skv] qk_matmul_output or NULL; ws: 2 * Skv scratch values (bias and scores). */
static void aicc_attention_SFX(const aicc_attn_params *p, const TYPE *restrict q,
    const TYPE *restrict k, const TYPE *restrict v, const TYPE *restrict fmask,
    const uint8_t *restrict bmask, const int64_t *restrict nonpad, TYPE *restrict y,
    TYPE *restrict qk, TYPE *restrict ws)
{
    const TYPE scale = (TYPE)p->scale, cap = (TYPE)p->softcap, zero = 0, one = 1;
    const size_t group = p->Hq / p->Hkv;
    TYPE *restrict bias = ws, *restrict sc = ws + p->Skv;
    for (size_t b = 0; b < p->B; ++b) {
        /* keys of this batch that are not padding, and the causal/window offset */
        int64_t nvalid = (int64_t)p->Skv, offset = p->offset;
        if (nonpad) {
            const int64_t hi = (int64_t)(p->Skv + p->Sq);
            const int64_t n = nonpad[b] < 0 ? 0 : (nonpad[b] > hi ? hi : nonpad[b]);
            nvalid = n;
            offset = n - (int64_t)p->Sq;
        }
        for (size_t h = 0; h < p->Hq; ++h) {
            const TYPE *qh = q + b * p->q_b + h * p->q_h;
            const TYPE *kh = k + b * p->k_b + (h / group) * p->k_h;
            const TYPE *vh = v + b * p->v_b + (h / group) * p->v_h;
            for (size_t i = 0; i < p->Sq; ++i) {
                const TYPE *qi = qh + i * p->q_s;
                TYPE *yi = y + b * p->y_b + h * p->y_h + i * p->y_s;
                TYPE *qki = qk ? qk + ((b * p->Hq + h) * p->Sq + i) * p->Skv : NULL;
                const size_t mrow = b * p->m_b + h * p->m_h + i * p->m_s;
                const int64_t pos = (int64_t)i + offset;
                int open = 0;
                /* 1. bias row: mask value, -inf for every disallowed key */
                for (size_t j = 0; j < p->Skv; ++j) {
                    const int64_t d = pos - (int64_t)j;      /* query position - key */
                    int allowed = (int64_t)j < nvalid && j < p->m_len;
                    TYPE bj = zero;
                    if (p->causal && d < 0) allowed = 0;
                    if (p->left >= 0 && d > p->left) allowed = 0;
                    if (p->right >= 0 && -d > p->right) allowed = 0;
                    if (j < p->m_len) {
                        if (bmask && !bmask[mrow + j]) allowed = 0;
                        if (fmask) bj = fmask[mrow + j];
                    }
                    bias[j] = allowed ? bj : bj - (TYPE)INFINITY;
                    if (!(bias[j] == -(TYPE)INFINITY)) open = 1;
                }
                /* 2. scaled scores, softcap, bias */
                for (size_t j = 0; j < p->Skv; ++j) {
                    const TYPE *kj = kh + j * p->k_s;
                    TYPE x = zero;
                    for (size_t c = 0; c < p->Dk; ++c)
                        x += qi[c] * kj[c];
                    x *= scale;
                    if (qki && p->qk_mode == 0) qki[j] = x;
                    if (cap > zero) x = cap * TANH(x / cap);
                    if (qki && p->qk_mode == 1) qki[j] = x;
                    x += bias[j];
                    if (qki && p->qk_mode == 2) qki[j] = x;
                    sc[j] = x;
                }
                /* 3. softmax; a fully masked row gets weights 0 */
                if (open) {
                    TYPE mx = sc[0], sum = zero;
                    for (size_t j = 1; j < p->Skv; ++j)
                        if (sc[j] > mx) mx = sc[j];
                    if (mx == -(TYPE)INFINITY) mx = zero;    /* all scores -inf: weights 0 */
                    for (size_t j = 0; j < p->Skv; ++j) {
                        sc[j] = EXP(sc[j] - mx);
                        sum += sc[j];
                    }
                    if (sum == zero) sum = one;
                    for (size_t j = 0; j < p->Skv; ++j)
                        sc[j] = sc[j] / sum;
                } else {
                    for (size_t j = 0; j < p->Skv; ++j)
                        sc[j] = zero;
                }
                if (qki && p->qk_mode == 3)
                    for (size_t j = 0; j < p->Skv; ++j) qki[j] = sc[j];
                /* 4. y_i = sum_j p_j v_j */
                for (size_t c = 0; c < p->Dv; ++c)
                    yi[c] = zero;
                for (size_t j = 0; j < p->Skv; ++j) {
                    const TYPE *vj = vh + j * p->v_s;
                    const TYPE w = sc[j];
                    for (size_t c = 0; c < p->Dv; ++c)
                        yi[c] += w * vj[c];
                }
            }
        }
    }
}"""


def typed(code: str, dt) -> str:
    f32 = np.dtype(dt) == np.float32
    code = code.replace("TYPE", ctype(dt)).replace("_SFX", "_f32" if f32 else "_f64")
    return code.replace("TANH", "tanhf" if f32 else "tanh").replace("EXP", "expf" if f32 else "exp")


def _in(node, k):
    return node.inputs[k] if k < len(node.inputs) and node.inputs[k] else None


def _out(node, k):
    return node.outputs[k] if k < len(node.outputs) and node.outputs[k] else None


class _Layout:
    """Heads, sizes and (batch, head, seq) strides of one Attention node."""

    def __init__(self, op, node, g):
        sh = lambda k: tuple(int(d) for d in g.shape(node.inputs[k]))  # noqa: E731
        q, k, v = sh(0), sh(1), sh(2)
        self.rank = len(q)
        if self.rank == 3:
            hq, hkv = op.attr(node, "q_num_heads"), op.attr(node, "kv_num_heads")
            if not hq or not hkv:
                raise ValueError("3-D inputs need q_num_heads and kv_num_heads")
            hq, hkv = int(hq), int(hkv)
            if q[2] % hq or k[2] % hkv or v[2] % hkv:
                raise ValueError("hidden sizes not divisible by the head counts")
            self.B, self.Sq, self.L = q[0], q[1], k[1]
            self.Hq, self.Hkv, self.Dk, self.Dv = hq, hkv, q[2] // hq, v[2] // hkv
            if k[2] // hkv != self.Dk:
                raise ValueError("Q and K head sizes differ")
            self.qs = (q[1] * q[2], self.Dk, q[2])
            self.ks = (k[1] * k[2], self.Dk, k[2])
            self.vs = (v[1] * v[2], self.Dv, v[2])
            self.ys = (self.Sq * self.Hq * self.Dv, self.Dv, self.Hq * self.Dv)
            if v[1] != self.L:
                raise ValueError("K and V sequence lengths differ")
        elif self.rank == 4:
            self.B, self.Hq, self.Sq, self.Dk = q
            self.Hkv, self.L, self.Dv = k[1], k[2], v[3]
            if k[3] != self.Dk or v[1] != self.Hkv or v[2] != self.L:
                raise ValueError(f"inconsistent Q/K/V shapes {q}, {k}, {v}")
            self.qs = (q[1] * q[2] * q[3], q[2] * q[3], q[3])
            self.ks = (k[1] * k[2] * k[3], k[2] * k[3], k[3])
            self.vs = (v[1] * v[2] * v[3], v[2] * v[3], v[3])
            self.ys = (self.Hq * self.Sq * self.Dv, self.Sq * self.Dv, self.Dv)
        else:
            raise ValueError(f"Q/K/V must be 3-D or 4-D, not {len(q)}-D")
        if self.Hkv <= 0 or self.Hq % self.Hkv:
            raise ValueError(f"q heads {self.Hq} not a multiple of kv heads {self.Hkv}")
        pk = _in(node, 4)
        self.P = int(g.shape(pk)[2]) if pk else 0
        self.Skv = self.P + self.L
        # attn_mask: right-aligned broadcast to [B, Hq, Sq, m_len]
        self.m = (0, 0, 0, self.Skv)
        m = _in(node, 3)
        if m:
            ms = tuple(int(d) for d in g.shape(m))
            if not 1 <= len(ms) <= 4:
                raise ValueError(f"attn_mask rank {len(ms)}")
            if ms[-1] > self.Skv:
                raise ValueError(f"attn_mask last dim {ms[-1]} > {self.Skv} keys")
            full = (1,) * (4 - len(ms)) + ms
            st, acc = [0, 0, 0], ms[-1]
            for ax in (2, 1, 0):
                if full[ax] != 1 and full[ax] != (self.B, self.Hq, self.Sq)[ax]:
                    raise ValueError(f"attn_mask shape {ms} does not broadcast")
                st[ax] = acc if full[ax] != 1 else 0
                acc *= full[ax]
            self.m = (st[0], st[1], st[2], ms[-1])


@register("Attention", since=23)
class Attention(Op):
    attrs = {"is_causal": 0, "kv_num_heads": None, "q_num_heads": None,
             "qk_matmul_output_mode": 0, "scale": None, "softcap": 0.0,
             "softmax_precision": None, "left_window_size": -1, "right_window_size": -1}

    def check(self, node, g):
        dts = {g.dtype(node.inputs[k]).name for k in (0, 1, 2)}
        for k in (4, 5):
            if _in(node, k):
                dts.add(g.dtype(node.inputs[k]).name)
        if len(dts) != 1 or dts.pop() not in ("float32", "float64"):
            return "Q/K/V/past must share one dtype, float32 or float64"
        try:
            _Layout(self, node, g)
        except ValueError as e:
            return str(e)
        m = _in(node, 3)
        if m and g.dtype(m) != np.bool_ and g.dtype(m) != g.dtype(node.inputs[0]):
            return f"attn_mask dtype {g.dtype(m).name} (bool or the dtype of Q only)"
        if bool(_in(node, 4)) != bool(_in(node, 5)):
            return "past_key and past_value must be given together"
        if _in(node, 6):
            if _in(node, 4):
                return "nonpad_kv_seqlen cannot be combined with past_key/past_value"
            if g.dtype(node.inputs[6]) != np.int64:
                return "nonpad_kv_seqlen must be int64"
        if _out(node, 3) and int(self.attr(node, "qk_matmul_output_mode")) not in (0, 1, 2, 3):
            return "qk_matmul_output_mode must be 0..3"
        return None

    def emit(self, node, ctx):
        g = ctx.g
        dt = ctx.in_dtype(0)
        ct = ctype(dt)
        lay = _Layout(self, node, g)
        sfx = "_f32" if dt == np.float32 else "_f64"
        B, Hkv, P, L = lay.B, lay.Hkv, lay.P, lay.L
        kvs = {}
        # K and V as attention reads them: the concatenated cache or the inputs in place
        for which, k_in, k_past, k_out, D, strides in (("k", 1, 4, 1, lay.Dk, lay.ks),
                                                       ("v", 2, 5, 2, lay.Dv, lay.vs)):
            dst = ctx.out[k_out] if _out(node, k_out) else None
            if P and dst is None:
                dst = ctx.scratch(max(B * Hkv * lay.Skv * D, 1) * dt.itemsize, ct, "cache")
            if dst is not None and B * Hkv * lay.Skv * D:
                ctx.helper("aicc_attn_1_concat" + sfx, typed(CONCAT, dt))
                past = ctx.inp[k_past] if P else "NULL"
                ctx(f"aicc_attn_concat{sfx}({B}u, {Hkv}u, {P}u, {L}u, {D}u, {past}, "
                    f"{ctx.inp[k_in]}, {strides[0]}u, {strides[1]}u, {strides[2]}u, {dst});")
            if P:
                kvs[which] = (dst, (Hkv * lay.Skv * D, lay.Skv * D, D))
            else:
                kvs[which] = (ctx.inp[k_in], strides)
        if numel(ctx.out_shape(0)) == 0:
            if not any(_out(node, k) for k in (1, 2)):
                empty_body(ctx)
            return
        # helper keys sort in dependency order (params struct first)
        ctx.helper("aicc_attn_0_params", PARAMS)
        ctx.helper("aicc_attn_2_kernel" + sfx, typed(KERNEL, dt))
        scale = self.attr(node, "scale")
        if scale is None:       # default 1/sqrt(head_size) (1 for an empty head: QK^T is 0)
            scale = 1.0 / math.sqrt(lay.Dk) if lay.Dk else 1.0
        scale = float(scale)
        mode = int(self.attr(node, "qk_matmul_output_mode"))
        mb, mh, ms, mlen = lay.m
        kp, ksd = kvs["k"]
        vp, vsd = kvs["v"]
        u = lambda t: ", ".join(f"{x}u" for x in t)  # noqa: E731
        ctx("static const aicc_attn_params prm = {")
        ctx(f"    {u((lay.B, lay.Hq, lay.Hkv, lay.Sq, lay.Skv, lay.Dk, lay.Dv))},"
            "  /* B, Hq, Hkv, Sq, Skv, Dk, Dv */")
        ctx(f"    {u(lay.qs)}, {u(ksd)}, {u(vsd)}, {u(lay.ys)},  /* Q, K, V, Y strides */")
        ctx(f"    {u((mb, mh, ms, mlen))},  /* mask strides, length */")
        ctx(f"    {1 if int(self.attr(node, 'is_causal')) else 0}, INT64_C({P}), "
            f"INT64_C({int(self.attr(node, 'left_window_size'))}), "
            f"INT64_C({int(self.attr(node, 'right_window_size'))}), {mode},"
            "  /* causal, offset, window, qk mode */")
        ctx(f"    {c_float(scale, np.float64)}, "
            f"{c_float(float(self.attr(node, 'softcap')), np.float64)}  /* scale, softcap */")
        ctx("};")
        m = _in(node, 3)
        fmask = ctx.inp[3] if m and g.dtype(m) != np.bool_ else "NULL"
        bmask = ctx.inp[3] if m and g.dtype(m) == np.bool_ else "NULL"
        nonpad = ctx.inp[6] if _in(node, 6) else "NULL"
        qk = ctx.out[3] if _out(node, 3) else "NULL"
        ws = ctx.scratch(max(2 * lay.Skv, 1) * dt.itemsize, ct, "ws")
        ctx(f"aicc_attention{sfx}(&prm, {ctx.inp[0]}, {kp}, {vp}, {fmask}, {bmask}, {nonpad}, "
            f"{ctx.out[0]}, {qk}, {ws});")
