"""RotaryEmbedding (opset 23): rotary positional embeddings (RoPE).

X is 4-D ``[B, heads, S, head_size]`` or 3-D ``[B, S, heads * head_size]`` (``num_heads``
attribute); Y has X's shape and layout, both read through (batch, seq, head) strides. The
first ``R = rotary_embedding_dim`` (default head_size) values of each head are rotated in
R/2 pairs ``(x1, x2)``, the first and second halves or (``interleaved``) the even and odd
elements: ``y1 = cos * x1 - sin * x2``, ``y2 = sin * x1 + cos * x2``; the rest are copied.
cos/sin rows come from ``cos_cache[position_ids[b, s]]`` (caches ``[max_pos, R/2]``) or,
without position_ids, ``cos_cache[b, s]`` (caches ``[B, S, R/2]``).

Out-of-range position ids (run-time values) are clamped to ``[0, max_pos - 1]`` (onnx.reference
would index from the end for negatives or fail). NaN/Inf follow IEEE arithmetic (a NaN in a
pair reaches both outputs of the pair). float16/bfloat16 run in float32 (upcast-half pass).
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import ctype
from ..emit_c.loops import numel
from .base import Op, empty_body, register

KERNEL = """\
/* RoPE over x viewed as [B][S][H][D] at strides (x_b, x_s, x_h), the D values contiguous;
 * y has the same layout. Rotates the first R = 2 * half values of each head (pairs (k, k +
 * half), or (2k, 2k + 1) when interleaved), copies the rest. pos: [B * S] position ids
 * (clamped to [0, npos - 1]) into caches of npos rows, or NULL for [B * S]-row caches. */
static void aicc_rotary_SFX(size_t B, size_t S, size_t H, size_t D, size_t half,
    int interleaved, size_t x_b, size_t x_s, size_t x_h, const TYPE *restrict x,
    const TYPE *restrict cosc, const TYPE *restrict sinc, const int64_t *restrict pos,
    size_t npos, TYPE *restrict y)
{
    for (size_t b = 0; b < B; ++b)
        for (size_t s = 0; s < S; ++s) {
            size_t row = b * S + s;
            if (pos) {
                const int64_t t = pos[row];
                row = t < 0 ? 0 : ((uint64_t)t >= npos ? npos - 1 : (size_t)t);
            }
            const TYPE *c = cosc + row * half, *sn = sinc + row * half;
            for (size_t h = 0; h < H; ++h) {
                const TYPE *xi = x + b * x_b + s * x_s + h * x_h;
                TYPE *yo = y + b * x_b + s * x_s + h * x_h;
                for (size_t k = 0; k < half; ++k) {
                    const size_t i1 = interleaved ? 2 * k : k;
                    const size_t i2 = interleaved ? 2 * k + 1 : k + half;
                    const TYPE x1 = xi[i1], x2 = xi[i2];
                    yo[i1] = c[k] * x1 - sn[k] * x2;
                    yo[i2] = sn[k] * x1 + c[k] * x2;
                }
                for (size_t d = 2 * half; d < D; ++d)
                    yo[d] = xi[d];
            }
        }
}"""


def _layout(op, node, g):
    """(B, S, H, D, R, strides) or raises ValueError."""
    x = tuple(int(d) for d in g.shape(node.inputs[0]))
    if len(x) == 4:
        B, H, S, D = x
        st = (H * S * D, D, S * D)
    elif len(x) == 3:
        nh = int(op.attr(node, "num_heads") or 0)
        if nh <= 0 or x[2] % nh:
            raise ValueError("3-D input needs num_heads dividing the hidden size")
        B, S, H, D = x[0], x[1], nh, x[2] // nh
        st = (S * x[2], x[2], D)
    else:
        raise ValueError(f"input must be 3-D or 4-D, not {len(x)}-D")
    R = int(op.attr(node, "rotary_embedding_dim") or 0) or D
    if R % 2 or R > D:
        raise ValueError(f"rotary_embedding_dim {R} must be even and <= head size {D}")
    return B, S, H, D, R, st


@register("RotaryEmbedding", since=23)
class RotaryEmbedding(Op):
    attrs = {"interleaved": 0, "num_heads": None, "rotary_embedding_dim": 0}

    def check(self, node, g):
        dts = {g.dtype(node.inputs[k]).name for k in (0, 1, 2)}
        if len(dts) != 1 or dts.pop() not in ("float32", "float64"):
            return "input and caches must share one dtype, float32 (or float64)"
        try:
            B, S, H, D, R, _ = _layout(self, node, g)
        except ValueError as e:
            return str(e)
        cs = tuple(int(d) for d in g.shape(node.inputs[1]))
        if tuple(int(d) for d in g.shape(node.inputs[2])) != cs:
            return "cos_cache and sin_cache shapes differ"
        has_pos = len(node.inputs) > 3 and bool(node.inputs[3])
        if has_pos:
            if g.dtype(node.inputs[3]) != np.int64:
                return "position_ids must be int64"
            if tuple(int(d) for d in g.shape(node.inputs[3])) != (B, S):
                return f"position_ids must have shape [{B}, {S}]"
            if len(cs) != 2 or cs[1] != R // 2 or cs[0] < 1:
                return f"caches must be [max_pos, {R // 2}] with position_ids"
        elif cs != (B, S, R // 2):
            return f"caches must be [{B}, {S}, {R // 2}] without position_ids"
        return None

    def emit(self, node, ctx):
        dt = ctx.in_dtype(0)
        B, S, H, D, R, st = _layout(self, node, ctx.g)
        if numel(ctx.out_shape(0)) == 0:
            empty_body(ctx)
            return
        sfx = "_f32" if dt == np.float32 else "_f64"
        ctx.helper("aicc_rotary" + sfx, KERNEL.replace("TYPE", ctype(dt)).replace("_SFX", sfx))
        has_pos = len(node.inputs) > 3 and bool(node.inputs[3])
        pos = ctx.inp[3] if has_pos else "NULL"
        npos = ctx.in_shape(1)[0] if has_pos else B * S
        inter = 1 if int(self.attr(node, "interleaved")) else 0
        ctx(f"aicc_rotary{sfx}({B}u, {S}u, {H}u, {D}u, {R // 2}u, {inter}, "
            f"{st[0]}u, {st[1]}u, {st[2]}u, {ctx.inp[0]}, {ctx.inp[1]}, {ctx.inp[2]}, "
            f"{pos}, {npos}u, {ctx.out[0]});")
