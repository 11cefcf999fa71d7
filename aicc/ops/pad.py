"""Pad: modes constant, reflect, edge and wrap, in every opset form (pads/value attributes
before opset 11; pads, optional constant_value and, from 18, axes as inputs).

Negative pads crop first (as onnxruntime does); the modes then see the cropped input. An
output coordinate maps to input coordinate c = o - pad_begin, folded into [0, n) per mode:
reflect mirrors without repeating the edge (period 2(n-1), as numpy; pads wider than the
input keep reflecting where onnxruntime refuses), edge clamps, wrap takes c mod n, constant
writes the value. Each output row (innermost dim) is done by a shared helper: the left part
per element, the span inside the input as one memcpy, the right part per element; outer dims
only select the source row. reflect/edge/wrap on an empty dim are rejected (nothing to copy
from). Values are copied bit for bit (NaN preserved); the pad value is converted to the data
dtype at compile time (integers saturate, bool is value != 0, float16 as its bits).

Inputs computed at run time (graph inputs): a run-time constant_value is read from its
pointer (it has the data dtype; an empty one means 0). Run-time pads or axes are read by the C
code, which applies the same crop-then-pad rules per dim (``aicc_pad_dims``); the output shape
must then be static (inferred or declared by the model) and bounds the work. Run-time values
that disagree with the static output shape never cause an out-of-bounds access: every output
position maps through the mode into the (cropped) input or gets the pad value; crops larger
than the dim leave an empty window (pad value in every mode); an axis outside [-rank, rank) is
ignored and a repeated axis takes its last entry. The run-time path does not merge dims.
"""
from __future__ import annotations

import numpy as np

from ..emit_c.loops import numel, strides_of
from ..errors import UnsupportedError
from ..kernels.move.copy import _Nest
from .base import Op, dtype_reason, register
from .misc import _fill_literal
from .reshape import is_runtime, static_output_reason

MODES = {"constant": 0, "reflect": 1, "edge": 2, "wrap": 3}

_MAP = """/* Pad: fold input coordinate c into [0, n) per mode (1 reflect, 2 edge, 3 wrap);
   -1 for a coordinate outside the input in constant mode (0). */
static int64_t aicc_pad_map(int64_t c, int64_t n, int mode)
{
    if (c >= 0 && c < n) return c;
    if (mode == 0 || n <= 0) return -1;
    if (mode == 2) return c < 0 ? 0 : n - 1;
    if (mode == 3) return ((c % n) + n) % n;
    if (n == 1) return 0;
    c = ((c % (2 * n - 2)) + (2 * n - 2)) % (2 * n - 2);
    return c < n ? c : 2 * n - 2 - c;
}"""


def _row_helper(ctx, ct):
    name = f"aicc_pad_row_{ct}"
    ctx.helper("aicc_pad_map", _MAP)
    ctx.helper(name, f"""/* Pad one row: dst[j] = src[map(j - pb)] for j < olen (value v outside in
   constant mode); the span inside the input is one memcpy. */
static void {name}({ct} *dst, const {ct} *src, int64_t olen, int64_t pb, int64_t n,
    int mode, {ct} v)
{{
    const int64_t lo = pb < 0 ? 0 : (pb > olen ? olen : pb);
    const int64_t e = pb + n;
    const int64_t hi = e < lo ? lo : (e > olen ? olen : e);
    int64_t j;
    for (j = 0; j < lo; ++j) {{
        const int64_t c = aicc_pad_map(j - pb, n, mode);
        dst[j] = c < 0 ? v : src[c];
    }}
    if (hi > lo) memcpy(dst + lo, src + (lo - pb), (size_t)(hi - lo) * sizeof({ct}));
    for (j = hi; j < olen; ++j) {{
        const int64_t c = aicc_pad_map(j - pb, n, mode);
        dst[j] = c < 0 ? v : src[c];
    }}
}}""")
    return name


_DIMS = """/* Pad with run-time pads: per dim, the crop at the start (cb), the size of the cropped
   window (nn, never negative) and the padding at the start (pb, clamped into [0, out dim]:
   a consistent pads vector is never changed by the clamp). Negative pads crop first. */
static void aicc_pad_dims(int r, const int64_t *dims, const int64_t *odims, int64_t *pb,
    const int64_t *pe, int64_t *cb, int64_t *nn)
{
    int d;
    for (d = 0; d < r; ++d) {
        const int64_t n = dims[d];
        const int64_t ce = pe[d] < 0 ? (pe[d] < -n ? n : -pe[d]) : 0;
        cb[d] = pb[d] < 0 ? (pb[d] < -n ? n : -pb[d]) : 0;
        nn[d] = n - cb[d] - ce;
        if (nn[d] < 0) nn[d] = 0;
        pb[d] = pb[d] < 0 ? 0 : (pb[d] > odims[d] ? odims[d] : pb[d]);
    }
}"""


@register("Pad", since=1)
class Pad(Op):
    attrs = {"mode": "constant", "pads": None, "value": 0.0, "paddings": None}

    def check(self, node, g):
        mode = self.attr(node, "mode")
        if mode not in MODES:
            return f"mode {mode!r} not supported"
        return (dtype_reason(g, node.inputs[:1])
                or static_output_reason(node, g, "the run-time pads/axes"))

    def params(self, node, ctx, r):
        """(pads begin list, pads end list, value) per the op version."""
        def const(k, what):
            if not ctx.has_input(k):
                return None
            v = ctx.in_const(k)
            if v is None:
                raise UnsupportedError(f"Pad {node.name}: {what} is not a compile-time constant")
            return v
        if ctx.g.opset < 11:
            pads = self.attr(node, "pads") or self.attr(node, "paddings")
            value, axes = self.attr(node, "value"), None
        else:
            pads = const(1, "pads").reshape(-1).tolist()
            if is_runtime(node, ctx.g, 2) and numel(ctx.in_shape(2)):
                value = None                        # read at run time
            else:
                v = const(2, "constant_value")
                value = 0 if v is None or v.size == 0 else v.reshape(-1)[0]
            a = const(3, "axes")
            axes = None if a is None else [int(x) + r if int(x) < 0 else int(x)
                                           for x in a.reshape(-1)]
        axes = list(range(r)) if axes is None else axes
        k = len(axes)
        pb, pe = [0] * r, [0] * r
        for i, a in enumerate(axes):
            pb[a], pe[a] = int(pads[i]), int(pads[i + k])
        return pb, pe, value

    def emit(self, node, ctx):
        if ctx.g.opset >= 11 and (is_runtime(node, ctx.g, 1) or is_runtime(node, ctx.g, 3)):
            return self.emit_runtime(node, ctx)
        shape, out = ctx.in_shape(0), ctx.out_shape(0)
        r = len(shape)
        mode = self.attr(node, "mode")
        m = MODES[mode]
        pb, pe, value = self.params(node, ctx, r)
        if [s + b + e for s, b, e in zip(shape, pb, pe)] != list(out):
            raise UnsupportedError(f"Pad {node.name}: pads {pb}/{pe} do not give shape {out}")
        if numel(out) == 0:
            ctx(f"(void){ctx.out[0]};  /* empty output */")
            return
        # crop first: negative pads shrink the input window, positive ones pad around it
        plain = [b == 0 and e == 0 for b, e in zip(pb, pe)]      # neither padded nor cropped
        off = [max(-b, 0) for b in pb]
        shape = [s - max(-b, 0) - max(-e, 0) for s, b, e in zip(shape, pb, pe)]
        pb = [max(b, 0) for b in pb]
        if m and 0 in shape:
            raise UnsupportedError(f"Pad {node.name}: {mode} mode on an empty input")
        ct = ctx.out_ctype(0)
        val = self.value_expr(ctx, value)
        if r == 0:
            ctx(f"{ctx.out[0]}[0] = {ctx.inp[0]}[0];")
            return
        row = _row_helper(ctx, ct)
        ist = strides_of(ctx.in_shape(0))
        base = sum(a * b for a, b in zip(off, ist))
        # merge adjacent unpadded outer dims (their rows are contiguous in both tensors)
        dims = []                          # (out size, in size, pad begin, in stride)
        for d in range(r - 1):
            if dims and plain[d] and dims[-1][2] == 0 and dims[-1][1] == dims[-1][0]:
                o, i_, p, _ = dims[-1]
                dims[-1] = (o * out[d], i_ * shape[d], 0, ist[d])
            else:
                dims.append((out[d], shape[d], pb[d], ist[d]))
        olen, n, p = out[-1], shape[-1], pb[-1]
        ctx(f"/* Pad mode {mode}: pads begin {pb}, end {pe}; per output row */")
        ctx("size_t o = 0;")
        srcs, tests = [], []
        with _Nest(ctx.w) as nest:
            for d, (osz, isz, pad, st) in enumerate(dims):
                nest.open(f"for (size_t i{d} = 0; i{d} < {osz}u; ++i{d})")
                if pad == 0 and osz == isz:
                    srcs.append(f"i{d} * {st}u")
                    continue
                ctx(f"const int64_t c{d} = aicc_pad_map((int64_t)i{d} - {pad}, {isz}, {m});")
                srcs.append(f"(size_t)c{d} * {st}u")
                if m == 0:
                    tests.append(f"c{d} < 0")
            if base:
                srcs.insert(0, f"{base}u")
            src = f"{ctx.inp[0]} + {' + '.join(srcs)}" if srcs else ctx.inp[0]
            call = f"{row}({ctx.out[0]} + o, {src}, {olen}, {p}, {n}, {m}, {val});"
            if tests:
                with ctx.block(f"if ({' || '.join(tests)})"):
                    ctx(f"{row}({ctx.out[0]} + o, {ctx.inp[0]}, {olen}, {olen}, 0, 0, {val});"
                        "  /* constant row */")
                with ctx.block("else"):
                    ctx(call)
            else:
                ctx(call)
            ctx(f"o += {olen}u;")

    def value_expr(self, ctx, value) -> str:
        """C expression of the pad value: a literal, or the run-time constant_value."""
        if value is None:
            return f"{ctx.inp[2]}[0]"
        dt = ctx.out_dtype(0)
        if dt.kind in "iub":
            info = np.iinfo(dt) if dt.kind != "b" else None
            value = (value != 0) if info is None else int(np.clip(int(value), info.min, info.max))
        return _fill_literal(np.asarray(value).astype(dt), dt)

    def emit_runtime(self, node, ctx):
        """Pads/axes read at run time (see the module docstring)."""
        shape, out = ctx.in_shape(0), ctx.out_shape(0)
        r = len(shape)
        mode = self.attr(node, "mode")
        m = MODES[mode]
        if numel(out) == 0:
            ctx(f"(void){ctx.out[0]};  /* empty output */")
            return
        if r == 0:
            ctx(f"{ctx.out[0]}[0] = {ctx.inp[0]}[0];")
            return
        ct = ctx.out_ctype(0)
        value = 0
        if ctx.has_input(2):
            v = ctx.in_const(2)
            value = None if v is None and numel(ctx.in_shape(2)) else (
                0 if v is None or v.size == 0 else v.reshape(-1)[0])
        val = self.value_expr(ctx, value)
        row = _row_helper(ctx, ct)
        ctx.helper("aicc_pad_dims", _DIMS)
        npads = numel(ctx.in_shape(1))
        k = min(numel(ctx.in_shape(3)), npads // 2) if ctx.has_input(3) else min(r, npads // 2)
        ist = strides_of(shape)
        ctx(f"/* Pad mode {mode}, pads{'/axes' if ctx.has_input(3) else ''} read at run time */")
        ctx(f"static const int64_t dims[{r}] = {{{', '.join(str(d) for d in shape)}}};")
        ctx(f"static const int64_t odims[{r}] = {{{', '.join(str(d) for d in out)}}};")
        ctx(f"int64_t pb[{r}], pe[{r}], cb[{r}], nn[{r}];")
        with ctx.block(f"for (size_t d = 0; d < {r}u; ++d)"):
            ctx("pb[d] = 0;")
            ctx("pe[d] = 0;")
        if k:
            with ctx.block(f"for (size_t i = 0; i < {k}u; ++i)"):
                ax = f"(int64_t){ctx.inp[3]}[i]" if ctx.has_input(3) else "(int64_t)i"
                ctx(f"int64_t a = {ax};")
                ctx(f"if (a < 0) a += {r};")
                ctx(f"if (a < 0 || a >= {r}) continue;  /* invalid axis: ignored */")
                ctx(f"pb[a] = (int64_t){ctx.inp[1]}[i];")
                ctx(f"pe[a] = (int64_t){ctx.inp[1]}[i + {k}u];")
        ctx(f"aicc_pad_dims({r}, dims, odims, pb, pe, cb, nn);")
        ctx("size_t o = 0;")
        srcs, tests = [], []
        with _Nest(ctx.w) as nest:
            for d in range(r - 1):
                nest.open(f"for (int64_t i{d} = 0; i{d} < {out[d]}; ++i{d})")
                ctx(f"const int64_t c{d} = aicc_pad_map(i{d} - pb[{d}], nn[{d}], {m});")
                srcs.append(f"(size_t)(cb[{d}] + c{d}) * {ist[d]}u")
                tests.append(f"c{d} < 0")
            srcs.append(f"(size_t)cb[{r - 1}]")
            src = f"{ctx.inp[0]} + {' + '.join(srcs)}"
            olen = out[-1]
            call = (f"{row}({ctx.out[0]} + o, {src}, {olen}, pb[{r - 1}], nn[{r - 1}], {m}, "
                    f"{val});")
            if tests:
                with ctx.block(f"if ({' || '.join(tests)})"):
                    ctx(f"{row}({ctx.out[0]} + o, {ctx.inp[0]}, {olen}, {olen}, 0, 0, {val});"
                        "  /* constant row */")
                with ctx.block("else"):
                    ctx(call)
            else:
                ctx(call)
            ctx(f"o += {olen}u;")
