"""ReverseSequence: for every batch entry b, reverse the first sequence_lens[b] steps along
the time axis and copy the rest unchanged. time_axis and batch_axis are 0 and 1 (either way
round, as the spec allows); the dims after them form one contiguous block that is moved with
memcpy.

sequence_lens (int32/int64) is read at run time. Out-of-range behaviour (onnxruntime raises an
error instead): a length is clamped into [0, time steps], so a negative length reverses
nothing and a too large one reverses the whole axis. Data is copied bit for bit (any dtype
with a C type).
"""
from __future__ import annotations

import numpy as np

from ..emit_c.loops import numel, strides_of
from ..kernels.move.copy import empty_guard
from .base import Op, dtype_reason, register
from .traits import HALF_NATIVE


@register("ReverseSequence", since=10)
class ReverseSequence(Op):
    traits = frozenset({HALF_NATIVE})
    attrs = {"batch_axis": 1, "time_axis": 0}

    def check(self, node, g):
        ta, ba = int(self.attr(node, "time_axis")), int(self.attr(node, "batch_axis"))
        if {ta, ba} != {0, 1}:
            return f"time_axis {ta} / batch_axis {ba} must be 0 and 1"
        if len(g.shape(node.inputs[0])) < 2:
            return "input rank < 2"
        if g.dtype(node.inputs[1]) not in (np.dtype(np.int32), np.dtype(np.int64)):
            return f"sequence_lens dtype {g.dtype(node.inputs[1]).name} (int32/int64 only)"
        return dtype_reason(g, node.inputs[:1])

    def emit(self, node, ctx):
        shape = ctx.in_shape(0)
        ta, ba = int(self.attr(node, "time_axis")), int(self.attr(node, "batch_axis"))
        st = strides_of(shape)
        nt, nb, q = shape[ta], shape[ba], numel(shape[2:])
        if empty_guard(ctx):
            return
        ct = ctx.out_ctype(0)
        x, y = ctx.inp[0], ctx.out[0]
        ctx(f"/* ReverseSequence time axis {ta}, batch axis {ba}: out[t] = in[len - 1 - t] for "
            "t < len (len clamped into [0, T]), else in[t] */")
        with ctx.block(f"for (size_t b = 0; b < {nb}u; ++b)"):
            ctx(f"int64_t len = (int64_t){ctx.inp[1]}[b];")
            ctx("if (len < 0) len = 0;")
            ctx(f"if (len > {nt}) len = {nt};")
            with ctx.block(f"for (size_t t = 0; t < {nt}u; ++t)"):
                ctx("const size_t s = (int64_t)t < len ? (size_t)len - 1u - t : t;")
                bo = f"b * {st[ba]}u" if st[ba] != 1 else "b"
                ctx(f"const size_t od = t * {st[ta]}u + {bo}, sd = s * {st[ta]}u + {bo};")
                if q == 1:
                    ctx(f"{y}[od] = {x}[sd];")
                else:
                    ctx(f"memcpy({y} + od, {x} + sd, {q}u * sizeof({ct}));")
