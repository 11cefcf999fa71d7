"""TensorScatter (KV-cache update): the output is a copy of ``past_cache`` in which, for every
prefix index (the dims before ``axis``; the first one is the batch), the ``update`` rows along
``axis`` are written starting at ``write_indices[batch]`` (0 when omitted; int64 read at run
time). mode "circular" wraps the row index modulo the axis length; "linear" does not.

Out-of-range behaviour (the spec leaves it undefined, onnxruntime raises): in linear mode a row
that would land outside [0, max_sequence_length) is skipped; in circular mode the index is
reduced with a non-negative modulo, so a negative write index wraps too. Each row is one
memcpy of the dims after ``axis``. Bit-exact, any dtype with a C type.
"""
from __future__ import annotations

import numpy as np

from ..emit_c.loops import numel
from ..kernels.move.copy import empty_guard
from .base import Op, dtype_reason, register


@register("TensorScatter", since=24)
class TensorScatter(Op):
    attrs = {"mode": "linear", "axis": -2}

    def _mode(self, node):
        m = self.attr(node, "mode")
        return m.decode() if isinstance(m, bytes) else str(m)

    def check(self, node, g):
        if self._mode(node) not in ("linear", "circular"):
            return f"mode {self._mode(node)!r} not supported"
        cache, upd = g.shape(node.inputs[0]), g.shape(node.inputs[1])
        r = len(cache)
        a = int(self.attr(node, "axis")) % r if r else 0
        if r < 2 or a == 0 or len(upd) != r or any(
                upd[d] != cache[d] for d in range(r) if d != a) or upd[a] > cache[a]:
            return f"update {list(upd)} does not fit cache {list(cache)} on axis {a}"
        if len(node.inputs) > 2 and node.inputs[2] and \
                g.dtype(node.inputs[2]) not in (np.dtype(np.int64), np.dtype(np.int32)):
            return f"write_indices dtype {g.dtype(node.inputs[2]).name} not supported"
        return dtype_reason(g, node.inputs[:2])

    def emit(self, node, ctx):
        cache, upd = ctx.in_shape(0), ctx.in_shape(1)
        r = len(cache)
        a = int(self.attr(node, "axis")) % r
        circular = self._mode(node) == "circular"
        nb, prefix = cache[0], numel(cache[1:a])   # batch, other prefix dims
        m, s, q = cache[a], upd[a], numel(cache[a + 1:])
        ct = ctx.out_ctype(0)
        if empty_guard(ctx):
            return
        y = ctx.out[0]
        ctx(f"/* TensorScatter {'circular' if circular else 'linear'}, axis {a}: copy the "
            f"cache, then write {s} update rows per prefix at write_indices[batch] */")
        ctx(f"memcpy({y}, {ctx.inp[0]}, {numel(cache)}u * sizeof({ct}));")
        if s == 0 or q == 0:
            return
        with ctx.block(f"for (size_t b = 0; b < {nb}u; ++b)"):
            w = f"(int64_t){ctx.inp[2]}[b]" if ctx.has_input(2) else "0"
            ctx(f"const int64_t w = {w};")
            with ctx.block(f"for (size_t p = 0; p < {prefix}u; ++p)"):
                ctx(f"const size_t row = b * {prefix}u + p;")
                with ctx.block(f"for (int64_t t = 0; t < {s}; ++t)"):
                    if circular:
                        ctx(f"int64_t c = (int64_t)(((w % {m}) + {m} + t) % {m});")
                    else:
                        ctx("int64_t c;")
                        ctx(f"if (w < 0 || w > {m} - 1 - t) continue;  /* outside the cache */")
                        ctx("c = w + t;")
                    ctx(f"memcpy({y} + (row * {m}u + (size_t)c) * {q}u, "
                        f"{ctx.inp[1]} + (row * {s}u + (size_t)t) * {q}u, {q}u * sizeof({ct}));")
