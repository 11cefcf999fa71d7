"""ScatterND, ScatterElements and Scatter (the deprecated opset 9-10 name of ScatterElements
without reduction): the output is a copy of ``data`` with ``updates`` written (or combined)
at the positions that ``indices`` (int32/int64, read at run time) select.

reduction: none (write), add, mul, max, min, applied in index order (duplicate indices
accumulate; with none the last write wins, as onnxruntime does). Integer add/mul wrap (done
in uint64_t, then converted back); bool add is logical or, mul logical and; float max/min are
``std::max``/``std::min`` as in onnxruntime (the existing value is kept when either side is
NaN). Reductions other than none on float16/bfloat16 are not supported (check() says so).

Negative indices count from the end of their axis. Out-of-range behaviour (onnxruntime
raises an error instead): an index outside [-dim, dim) is skipped, i.e. that update (the
whole slice for ScatterND) is not applied. Nothing is ever read or written out of bounds.
"""
from __future__ import annotations

import numpy as np

from ..emit_c.loops import numel, strides_of
from ..errors import UnsupportedError
from ..kernels.move.copy import _Nest, _cat
from .base import Op, dtype_reason, register
from .traits import HALF_NATIVE

REDUCTIONS = ("none", "add", "mul", "max", "min")


def _reduction(op, node):
    r = op.attr(node, "reduction")
    return r.decode() if isinstance(r, bytes) else str(r)


def _combine(ctx, red, dst, src):
    """C statement: dst (an lvalue) combined with src per the reduction."""
    dt = ctx.out_dtype(0)
    ct = ctx.out_ctype(0)
    if red == "none":
        return f"{dst} = {src};"
    if red == "max":
        return f"if ({dst} < {src}) {dst} = {src};"
    if red == "min":
        return f"if ({src} < {dst}) {dst} = {src};"
    if dt.kind == "b":
        return f"{dst} = (uint8_t)({dst} {'||' if red == 'add' else '&&'} {src});"
    op = "+" if red == "add" else "*"
    if dt.kind in "iu":
        return f"{dst} = ({ct})((uint64_t){dst} {op} (uint64_t){src});"
    return f"{dst} = {dst} {op} {src};"


class _Scatter(Op):
    traits = frozenset({HALF_NATIVE})
    attrs = {"reduction": "none"}

    def check(self, node, g):
        why = dtype_reason(g, node.inputs[:1])
        if why:
            return why
        if g.dtype(node.inputs[1]) not in (np.dtype(np.int32), np.dtype(np.int64)):
            return f"indices dtype {g.dtype(node.inputs[1]).name} (int32/int64 only)"
        red = _reduction(self, node)
        if red not in REDUCTIONS:
            return f"reduction {red!r} not supported"
        if red != "none" and g.dtype(node.inputs[0]).name in ("float16", "bfloat16"):
            return f"reduction {red} on {g.dtype(node.inputs[0]).name} not supported"
        return None

    def copy_data(self, ctx):
        nbytes = ctx.g.type_of(ctx.node.outputs[0]).nbytes
        ctx(f"/* {ctx.node.op_type}: start from a copy of data */")
        ctx(f"memcpy({ctx.out[0]}, {ctx.inp[0]}, {nbytes}u);")


@register("ScatterND", since=11)
class ScatterND(_Scatter):
    def emit(self, node, ctx):
        dshape, ishape = ctx.in_shape(0), ctx.in_shape(1)
        if numel(dshape) == 0:
            ctx(f"(void){ctx.out[0]};  /* empty output */")
            return
        kk = ishape[-1] if ishape else 0
        if not ishape or kk > len(dshape):
            raise UnsupportedError(f"ScatterND {node.name}: indices {list(ishape)} do not fit "
                                   f"data {list(dshape)}")
        red = _reduction(self, node)
        nt, q = numel(ishape[:-1]), numel(dshape[kk:])
        st = strides_of(dshape)
        self.copy_data(ctx)
        if nt == 0 or q == 0:
            return
        ct = ctx.out_ctype(0)
        ctx(f"/* each index tuple of {kk} selects a slice of {q} elements, reduction {red}; a "
            "tuple with any index outside [-dim, dim) is skipped */")
        with ctx.block(f"for (size_t t = 0; t < {nt}u; ++t)"):
            ctx(f"const {ctx.in_ctype(1)} *ix = {ctx.inp[1]} + t * {kk}u;")
            ctx(f"const {ct} *src = {ctx.inp[2]} + t * {q}u;")
            ctx("size_t off = 0;")
            ctx("int ok = 1;")
            ctx("(void)ix;" if kk == 0 else "int64_t v;")
            for j in range(kk):
                n = dshape[j]
                ctx(f"v = (int64_t)ix[{j}];")
                ctx(f"if (v < 0) v += {n};")
                ctx(f"if (v < 0 || v >= {n}) ok = 0; else off += {_cat('0u', '(size_t)v', st[j])};")
            ctx("if (!ok) continue;  /* out of range: skipped */")
            if red == "none" and q > 1:
                ctx(f"memcpy({ctx.out[0]} + off, src, {q}u * sizeof({ct}));")
            elif q == 1:
                ctx(_combine(ctx, red, f"{ctx.out[0]}[off]", "src[0]"))
            else:
                with ctx.block(f"for (size_t e = 0; e < {q}u; ++e)"):
                    ctx(_combine(ctx, red, f"{ctx.out[0]}[off + e]", "src[e]"))


@register("ScatterElements", since=11)
class ScatterElements(_Scatter):
    attrs = {"reduction": "none", "axis": 0}

    def emit(self, node, ctx):
        dshape, ishape = ctx.in_shape(0), ctx.in_shape(1)
        r = len(dshape)
        a = int(self.attr(node, "axis"))
        a = a + r if a < 0 else a
        red = _reduction(self, node) if self.op_type != "Scatter" else "none"
        if len(ishape) != r or any(ishape[d] > dshape[d] for d in range(r) if d != a):
            raise UnsupportedError(f"{node.op_type} {node.name}: indices shape {list(ishape)} "
                                   f"exceeds data shape {list(dshape)} off the axis")
        if numel(dshape) == 0:
            ctx(f"(void){ctx.out[0]};  /* empty output */")
            return
        self.copy_data(ctx)
        if numel(ishape) == 0:
            return
        ds = strides_of(dshape)
        ctx(f"/* axis {a}, reduction {red}: out[i with i[{a}] = idx[i]] <- updates[i]; an index "
            "outside [-dim, dim) is skipped */")
        ctx("size_t o = 0;")
        base = "0u"
        with _Nest(ctx.w) as nest:
            for d in range(r):
                nest.open(f"for (size_t i{d} = 0; i{d} < {ishape[d]}u; ++i{d})")
                if d != a and ishape[d] > 1:
                    ctx(f"const size_t b{d} = {_cat(base, f'i{d}', ds[d])};")
                    base = f"b{d}"
            ctx(f"int64_t j = (int64_t){ctx.inp[1]}[o];")
            ctx("const size_t u = o++;")
            ctx(f"if (j < 0) j += {dshape[a]};")
            ctx(f"if (j < 0 || j >= {dshape[a]}) continue;  /* out of range: skipped */")
            ctx(_combine(ctx, red, f"{ctx.out[0]}[{_cat(base, '(size_t)j', ds[a])}]",
                         f"{ctx.inp[2]}[u]"))


@register("Scatter", since=9)
class Scatter(ScatterElements):
    attrs = {"reduction": "none", "axis": 0}     # no reduction attribute: always "none"
