"""OneHot: out[..., d, ...] = values[1] where d == indices[...] (at ``axis``), else values[0].

The depth is the output's static size along ``axis`` (shape inference reads a constant depth
input; a model with a run-time depth must declare the output shape, and the depth value itself
is then not read). Indices may be any numeric dtype; a negative index counts from the end
(index + depth). An index outside [-depth, depth) selects no position (the whole row is
off-value), as the spec says. Float indices are truncated toward zero after a range test done
in floating point (NaN and +-Inf are out of range), so the conversion to int64 is always
defined. values (off, on) is read at run time (or from the weights); it has the output dtype
and is copied bit for bit.
"""
from __future__ import annotations

from ..emit_c.loops import numel
from ..kernels.move.copy import empty_guard
from .base import Op, dtype_reason, register
from .reshape import static_output_reason


@register("OneHot", since=9)
class OneHot(Op):
    attrs = {"axis": -1}

    def check(self, node, g):
        if g.dtype(node.inputs[0]).name in ("float16", "bfloat16"):
            return f"indices dtype {g.dtype(node.inputs[0]).name} not supported"
        why = (dtype_reason(g, node.inputs[:1] + node.inputs[2:3])
               or static_output_reason(node, g, "the run-time depth input"))
        if why:
            return why
        ishape, out = list(g.shape(node.inputs[0])), list(g.shape(node.outputs[0]))
        r = len(out)
        a = int(self.attr(node, "axis"))
        a = a + r if a < 0 else a
        if r != len(ishape) + 1 or not 0 <= a < r or out[:a] + out[a + 1:] != ishape:
            return f"output shape {out} does not fit indices {ishape} with axis {a}"
        if numel(g.shape(node.inputs[2])) < 2:
            return "values must hold (off, on)"
        return None

    def emit(self, node, ctx):
        ishape, out = ctx.in_shape(0), ctx.out_shape(0)
        r = len(out)
        a = int(self.attr(node, "axis"))
        a = a + r if a < 0 else a
        depth = out[a]
        outer, inner = numel(ishape[:a]), numel(ishape[a:])
        if empty_guard(ctx):
            return
        x, v, y = ctx.inp[0], ctx.inp[2], ctx.out[0]
        ctx(f"/* OneHot axis {a}, depth {depth}: fill with off = values[0], then set on = "
            "values[1] where in range */")
        with ctx.block(f"for (size_t i = 0; i < {numel(out)}u; ++i)"):
            ctx(f"{y}[i] = {v}[0];")
        if depth == 0 or numel(ishape) == 0:
            return
        with ctx.block(f"for (size_t p = 0; p < {outer}u; ++p)"):
            with ctx.block(f"for (size_t q = 0; q < {inner}u; ++q)"):
                if ctx.in_dtype(0).kind == "f":
                    ctx(f"const double fv = (double){x}[p * {inner}u + q];")
                    ctx("int64_t j;")
                    ctx(f"if (!(fv > -{depth + 1}.0 && fv < {depth}.0)) continue;  "
                        "/* out of range or NaN */")
                    ctx("j = (int64_t)fv;")
                else:
                    ctx(f"int64_t j = (int64_t){x}[p * {inner}u + q];")
                ctx(f"if (j < 0) j += {depth};")
                ctx(f"if (j < 0 || j >= {depth}) continue;  /* out of range: all off */")
                ctx(f"{y}[(p * {depth}u + (size_t)j) * {inner}u + q] = {v}[1];")
