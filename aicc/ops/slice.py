"""Slice: a strided view of the input, copied out with one loop nest.

Opset 1-9 take ``starts``/``ends``/``axes`` attributes; opset >= 10 takes them (and
``steps``) as inputs. Per the spec, a negative start or end counts from the end of its axis,
then for step > 0 start and end are clamped to [0, dim], for step < 0 start to [0, dim-1] and
end to [-1, dim-1] (so INT64_MIN / INT64_MAX mean "to the edge"). Negative steps become
negative input strides.

Constant parameters (the usual case) are resolved at compile time: the C code is a strided
copy with fixed offsets, and a constant step 0 is rejected. Parameters computed at run time
(graph inputs) are read by the C code, which applies the same clamping (helper
``aicc_slice_axis``); the output shape must then be static (inferred or declared by the
model) and bounds the work. Run-time values that disagree with the static output shape never
cause an out-of-bounds access: along each axis the first min(run-time count, static size)
output positions receive the selected elements and the rest are written as zeros; an axis
outside [-rank, rank) is ignored, a repeated axis takes its last entry, and a run-time step 0
(invalid per the spec) is taken as 1. Dtype-agnostic, bit-exact.
"""
from __future__ import annotations

from ..emit_c.loops import numel, strides_of
from ..errors import UnsupportedError
from ..kernels.move.copy import _Nest, emit_gather_copy, empty_guard
from .base import Op, dtype_reason, register
from .reshape import is_runtime, static_output_reason
from .traits import HALF_NATIVE


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
    traits = frozenset({HALF_NATIVE})
    attrs = {"starts": None, "ends": None, "axes": None}

    def check(self, node, g):
        return (dtype_reason(g, node.inputs[:1])
                or static_output_reason(node, g, "the run-time starts/ends/axes/steps"))

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

    def view_offsets(self, node, g):
        """The slice is one contiguous run of the input (unit dims, then one axis cut with
        step 1, then whole axes): its byte offset."""
        if g.opset >= 10:
            vals = []
            for k in (1, 2, 3, 4):
                if k >= len(node.inputs) or not node.inputs[k]:
                    vals.append(None)
                    continue
                v = g.const(node.inputs[k])
                if v is None:
                    return None
                vals.append(v.reshape(-1).tolist())
            starts, ends, axes, steps = vals
        else:
            starts, ends = self.attr(node, "starts"), self.attr(node, "ends")
            axes, steps = self.attr(node, "axes"), None
        shape = [int(d) for d in g.shape(node.inputs[0])]
        try:
            st, sp, out = slice_plan(shape, starts, ends, axes, steps)
        except UnsupportedError:
            return None
        d = 0
        while d < len(out) and out[d] == 1:
            d += 1
        if d < len(out) and sp[d] != 1:
            return None
        if any(out[a] != shape[a] or (sp[a] != 1 and shape[a] > 1) for a in range(d + 1, len(out))):
            return None
        isz = g.dtype(node.inputs[0]).itemsize
        return [sum(s * t for s, t in zip(st, strides_of(shape))) * isz]

    def emit(self, node, ctx):
        if ctx.g.opset >= 10 and any(is_runtime(node, ctx.g, k) for k in (1, 2, 3, 4)):
            return emit_runtime_slice(node, ctx)
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


_AXIS = """/* Slice, one axis per the spec: a negative start/end counts from the end, then clamping
   (step > 0: both into [0, n]; step < 0: start into [0, n-1], end into [-1, n-1]). A step
   of 0 (invalid) is taken as 1. Writes the first index, the step and the element count; the
   indices start + j * step for j < count are all inside [0, n). No overflow for any input. */
static void aicc_slice_axis(int64_t s, int64_t e, int64_t k, int64_t n,
    int64_t *start, int64_t *step, int64_t *count)
{
    if (k == 0) k = 1;
    *step = k;
    if (n <= 0) {
        *start = 0;
        *count = 0;
        return;
    }
    if (s < 0) s += n;
    if (e < 0) e += n;
    if (k > 0) {
        s = s < 0 ? 0 : (s > n ? n : s);
        e = e < 0 ? 0 : (e > n ? n : e);
        *count = e > s ? (e - s - 1) / k + 1 : 0;
    } else {
        s = s < 0 ? 0 : (s > n - 1 ? n - 1 : s);
        e = e < -1 ? -1 : (e > n - 1 ? n - 1 : e);
        *count = s > e ? (int64_t)((uint64_t)(s - e - 1) / ((uint64_t)0 - (uint64_t)k)) + 1 : 0;
    }
    *start = s;
}"""


def emit_runtime_slice(node, ctx) -> None:
    """Slice whose parameters are read at run time (see the module docstring)."""
    shape, out = ctx.in_shape(0), ctx.out_shape(0)
    r = len(shape)
    if empty_guard(ctx):
        return
    if r == 0:
        ctx(f"{ctx.out[0]}[0] = {ctx.inp[0]}[0];")
        return
    present = [k for k in (1, 2, 3, 4) if ctx.has_input(k)]
    nk = min(numel(ctx.in_shape(k)) for k in present)
    ctx.helper("aicc_slice_axis", _AXIS)
    ist = strides_of(shape)
    ct = ctx.out_ctype(0)
    ctx("/* Slice, parameters read at run time: per-axis first index, step and count */")
    ctx(f"static const int64_t dims[{r}] = {{{', '.join(str(d) for d in shape)}}};")
    ctx(f"int64_t st[{r}], sp[{r}], cnt[{r}];")
    with ctx.block(f"for (size_t d = 0; d < {r}u; ++d)"):
        ctx("st[d] = 0;")
        ctx("sp[d] = 1;")
        ctx("cnt[d] = dims[d];")
    if nk:
        with ctx.block(f"for (size_t i = 0; i < {nk}u; ++i)"):
            ax = f"(int64_t){ctx.inp[3]}[i]" if ctx.has_input(3) else "(int64_t)i"
            ctx(f"int64_t a = {ax};")
            ctx(f"if (a < 0) a += {r};")
            ctx(f"if (a < 0 || a >= {r}) continue;  /* invalid axis: ignored */")
            step = f"(int64_t){ctx.inp[4]}[i]" if ctx.has_input(4) else "1"
            ctx(f"aicc_slice_axis((int64_t){ctx.inp[1]}[i], (int64_t){ctx.inp[2]}[i], {step}, "
                "dims[a], &st[a], &sp[a], &cnt[a]);")
    ctx("/* positions past the run-time count (only when it disagrees with the static "
        "shape) are zeros */")
    ctx("size_t o = 0;")
    with _Nest(ctx.w) as nest:
        base = "0"
        for d in range(r):
            inner = numel(out[d + 1:])
            nest.open(f"for (int64_t j{d} = 0; j{d} < {out[d]}; ++j{d})")
            with ctx.block(f"if (j{d} >= cnt[{d}])"):
                if inner == 1:
                    ctx(f"{ctx.out[0]}[o++] = ({ct})0;")
                else:
                    ctx(f"for (size_t z = 0; z < {inner}u; ++z) {ctx.out[0]}[o++] = ({ct})0;")
                ctx("continue;")
            mul = f" * {ist[d]}" if ist[d] != 1 else ""
            ctx(f"const int64_t b{d} = {base + ' + ' if base != '0' else ''}"
                f"(st[{d}] + j{d} * sp[{d}]){mul};")
            base = f"b{d}"
        ctx(f"{ctx.out[0]}[o++] = {ctx.inp[0]}[(size_t){base}];")
