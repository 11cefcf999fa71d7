"""Slice: a strided view of the input, copied out with one loop nest.

Opset 1-9 take ``starts``/``ends``/``axes`` attributes; opset >= 10 takes them (and
``steps``) as inputs, which must be compile-time constants. Per the spec, a negative start or
end counts from the end of its axis, then for step > 0 start and end are clamped to
[0, dim], for step < 0 start to [0, dim-1] and end to [-1, dim-1] (so INT64_MIN / INT64_MAX
mean "to the edge"); step 0 is rejected. Negative steps become negative input strides. The
C code only reads elements inside the input (all offsets are resolved at compile time).
Dtype-agnostic, bit-exact.
"""
from __future__ import annotations

from ..errors import UnsupportedError
from .base import Op, register
from .loops import strides_of
from .reshape import runtime_input_reason
from .transpose import dtype_reason, emit_gather_copy, empty_guard


def slice_plan(shape, starts, ends, axes=None, steps=None):
    """Spec semantics -> (start per dim, step per dim, output shape)."""
    r = len(shape)
    axes = list(range(len(starts))) if axes is None else [int(a) for a in axes]
    steps = [1] * len(starts) if steps is None else [int(s) for s in steps]
    st, sp, out = [0] * r, [1] * r, list(shape)
    seen = set()
    for s, e, a, k in zip(starts, ends, axes, steps):
        s, e = int(s), int(e)
        a = a + r if a < 0 else a
        if not 0 <= a < r or a in seen:
            raise UnsupportedError(f"Slice: bad or repeated axis {a} for rank {r}")
        seen.add(a)
        if k == 0:
            raise UnsupportedError("Slice: step 0")
        n = shape[a]
        s = s + n if s < 0 else s
        e = e + n if e < 0 else e
        if k > 0:
            s, e = min(max(s, 0), n), min(max(e, 0), n)
            cnt = max(0, -(-(e - s) // k))
        else:
            s, e = min(max(s, 0), n - 1), min(max(e, -1), n - 1)
            cnt = max(0, -(-(s - e) // -k))
        st[a], sp[a], out[a] = s, k, cnt
    return st, sp, out


@register("Slice", since=1)
class Slice(Op):
    attrs = {"starts": None, "ends": None, "axes": None}

    def check(self, node, g):
        return (dtype_reason(g, node.inputs[:1])
                or runtime_input_reason(node, g, (1, 2, 3, 4), "starts/ends/axes/steps"))

    def params(self, node, ctx):
        if ctx.g.opset < 10:
            return (self.attr(node, "starts"), self.attr(node, "ends"), self.attr(node, "axes"),
                    None)
        vals = []
        for k in (1, 2, 3, 4):
            if not ctx.has_input(k):
                vals.append(None)
                continue
            v = ctx.in_const(k)
            if v is None:
                raise UnsupportedError(f"Slice {node.name}: input {k} (starts/ends/axes/steps) "
                                       "is not a compile-time constant")
            vals.append(v.reshape(-1).tolist())
        return tuple(vals)

    def emit(self, node, ctx):
        shape = ctx.in_shape(0)
        starts, ends, axes, steps = self.params(node, ctx)
        st, sp, out = slice_plan(shape, starts, ends, axes, steps)
        if tuple(out) != ctx.out_shape(0):
            raise UnsupportedError(f"Slice {node.name}: computed shape {out} != inferred "
                                   f"{list(ctx.out_shape(0))}")
        if empty_guard(ctx):
            return
        ist = strides_of(shape)
        base = sum(s * t for s, t in zip(st, ist))
        emit_gather_copy(ctx, out, [k * t for k, t in zip(sp, ist)], in_base=base,
                         note=f"Slice starts={st} steps={sp}")
