"""EyeLike: a 2-D tensor shaped like the input with ones on the k-th diagonal (j - i == k)
and zeros elsewhere; the output dtype is the ``dtype`` attribute or the input's. The input's
values are never read. Any output dtype with a C type (bool: 1; float16/bfloat16: the bits
of 1.0). Any k is valid (a diagonal outside the matrix gives all zeros).
"""
from __future__ import annotations

import numpy as np

from ..kernels.move.copy import empty_guard
from .base import Op, dtype_reason, register
from .misc import _fill_literal
from .traits import HALF_NATIVE


@register("EyeLike", since=9)
class EyeLike(Op):
    traits = frozenset({HALF_NATIVE})
    attrs = {"dtype": None, "k": 0}

    def check(self, node, g):
        if len(g.shape(node.inputs[0])) != 2:
            return "input must be 2-D"
        return dtype_reason(g, node.outputs)

    def emit(self, node, ctx):
        n, m = ctx.out_shape(0)
        k = int(self.attr(node, "k"))
        dt = ctx.out_dtype(0)
        if empty_guard(ctx):
            return
        one = _fill_literal(np.asarray(1).astype(dt), dt)
        ct = ctx.out_ctype(0)
        ctx(f"/* EyeLike k={k}: zeros, then ones where j - i == k */")
        with ctx.block(f"for (size_t i = 0; i < {n * m}u; ++i)"):
            ctx(f"{ctx.out[0]}[i] = ({ct})0;")
        lo, hi = max(0, -k), min(n, m - k)          # rows i with 0 <= i + k < m
        if lo < hi:
            with ctx.block(f"for (size_t i = {lo}u; i < {hi}u; ++i)"):
                ctx(f"{ctx.out[0]}[i * {m}u + i{f' + {k}u' if k > 0 else f' - {-k}u' if k else ''}]"
                    f" = {one};")
