"""RMSNormalization (opset 23).

Rows are the trailing axes from ``axis`` on (R rows of D contiguous values):
``y = x / sqrt(mean(x*x) + epsilon) * scale``, written as ``x * inv * scale`` with
``inv = 1 / sqrt(ms + eps)``, the sum of squares accumulated in the tensor dtype in sum16's
order (vectorized; the ascending sum was a serial chain: 196 x 768, x86-avx512 104 -> 36
us, x86-avx2 111 -> 40, onnxruntime 74-84). stash_type is ignored: float32 computes in
float32, float64 in float64 (float16/bfloat16 are rejected). scale must be unidirectionally
broadcastable to X: a scalar or the full normalized shape (leading 1s allowed) is indexed
directly in the row loop; any other broadcast (e.g. [1, D] over [R, D] with more rows, or a
per-row scale) normalizes first and multiplies by the broadcast scale in a second pass.

NaN/Inf: a NaN or Inf in a row makes the whole row's output NaN (or 0 * Inf = NaN); a row
of zeros gives 0 (inv = 1/sqrt(eps)); scale NaN/Inf only affect their own positions. Empty
tensors produce no code; an empty normalized axis set with rows is rejected by check().
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import c_literal, ctype
from ..emit_c.loops import emit_broadcast
from ..kernels.vmath.sum16 import sum16
from .base import Op, empty_body, float_dtype_reason, register
from .normalization import LayerNormalization, _param_stride


def _sfx(dt) -> str:
    return "f32" if np.dtype(dt) == np.float32 else "f64"


def _helper(ctx, dt) -> str:
    ct = ctype(dt)
    name = f"aicc_rmsnorm_{_sfx(dt)}"
    sq = "sqrtf" if dt == np.float32 else "sqrt"
    one = c_literal(1, dt)
    total = sum16(ctx, dt, "sq")
    return ctx.helper(name, f"""\
/* RMS norm of R contiguous rows of D: y = x * (1 / sqrt(mean(x*x) + eps)) * scale[d * ss]
 * (ss = 0: one scale value, 1: a full row of D; scale NULL: no scaling). */
static void {name}(size_t R, size_t D, const {ct} *restrict x, const {ct} *restrict scale,
    size_t ss, {ct} eps, {ct} *restrict y)
{{
    for (size_t r = 0; r < R; ++r) {{
        const {ct} *restrict xr = x + r * D;
        {ct} *restrict yr = y + r * D;
        const {ct} inv = {one} / {sq}({total}(xr, D) / ({ct})D + eps);
        if (scale && ss) {{
            for (size_t d = 0; d < D; ++d) yr[d] = xr[d] * inv * scale[d];
        }} else if (scale) {{
            for (size_t d = 0; d < D; ++d) yr[d] = xr[d] * inv * scale[0];
        }} else {{
            for (size_t d = 0; d < D; ++d) yr[d] = xr[d] * inv;
        }}
    }}
}}""")


@register("RMSNormalization", since=23)
class RMSNormalization(Op):
    attrs = {"axis": -1, "epsilon": 1e-5, "stash_type": 1}

    _split = LayerNormalization._split        # same axis semantics

    def check(self, node, g):
        r = float_dtype_reason(g.dtype(i) for i in node.inputs[:2])
        if r:
            return r
        shape = g.shape(node.inputs[0])
        ax = int(self.attr(node, "axis"))
        if not -len(shape) <= ax < len(shape):
            return f"axis {ax} out of range for rank {len(shape)}"
        _, rows, d = self._split(node, shape)
        if d == 0 and rows:
            return "empty normalized axes"
        ss = tuple(int(v) for v in g.shape(node.inputs[1]))
        if len(ss) > len(shape) or any(a != 1 and a != b
                                       for a, b in zip(reversed(ss), reversed(shape))):
            return f"scale of shape {list(ss)} not broadcastable to {list(shape)}"
        return None

    def emit(self, node, ctx):
        dt = ctx.out_dtype(0)
        shape = ctx.in_shape(0)
        ax, rows, d = self._split(node, shape)
        if rows * d == 0:
            empty_body(ctx)
            return
        eps = c_literal(float(self.attr(node, "epsilon")), dt)
        fn = _helper(ctx, dt)
        sshape = ctx.in_shape(1)
        ss = _param_stride(sshape, shape[ax:])
        x, s, y = ctx.inp[0], ctx.inp[1], ctx.out[0]
        if ss is not None:
            ctx(f"{fn}({rows}u, {d}u, {x}, {s}, {ss}u, {eps}, {y});")
            return
        ctx(f"{fn}({rows}u, {d}u, {x}, NULL, 0u, {eps}, {y});")
        emit_broadcast(ctx, shape, [shape, sshape], lambda i: f"{y}[{i[0]}] * {s}[{i[1]}]")
