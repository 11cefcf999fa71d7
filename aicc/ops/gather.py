"""Gather, GatherElements, GatherND: indexed copies with run-time indices.

Indices (int32 or int64, a run-time tensor or a constant) count from the end of their axis
when negative, as in the spec. Out-of-range behaviour (onnxruntime raises an error instead):
an index outside [-dim, dim) is not read; its output element (Gather, GatherElements) or its
whole gathered block (Gather, GatherND) is written as zeros. The C code therefore never reads
out of bounds, whatever the index values. Data is copied bit for bit (any dtype with a C type).
"""
from __future__ import annotations

import numpy as np

from ..emit_c.loops import numel, strides_of
from ..errors import UnsupportedError
from ..kernels.move.copy import _Nest, _cat
from .base import Op, dtype_reason, register
from .traits import HALF_NATIVE


def _index_reason(g, name):
    if g.dtype(name) not in (np.dtype(np.int32), np.dtype(np.int64)):
        return f"indices dtype {g.dtype(name).name} (int32/int64 only)"
    return None


def _axis(node, op, rank):
    a = int(op.attr(node, "axis"))
    return a + rank if a < 0 else a


def _axis_reason(node, op, g) -> str | None:
    """An axis outside [-rank, rank) of the data (also rank 0: nothing to index)."""
    r = len(g.shape(node.inputs[0]))
    a = int(op.attr(node, "axis"))
    if not -r <= a < r:
        return f"axis {a} outside [-{r}, {r}) for rank-{r} data"
    return None


def _fetch(ctx, j, src, n, dst, q, ct):
    """Emit: normalise the int64 index ``j`` against ``n`` and copy ``q`` elements from
    ``src + j * q`` to ``dst``, or write zeros when the index is out of range."""
    ctx(f"if ({j} < 0) {j} += {n};")
    if q == 1:
        ctx(f"{dst}[0] = ({j} >= 0 && {j} < {n}) ? {src}[(size_t){j}] : ({ct})0;")
        return
    with ctx.block(f"if ({j} >= 0 && {j} < {n})"):
        ctx(f"memcpy({dst}, {src} + (size_t){j} * {q}u, {q}u * sizeof({ct}));")
    with ctx.block("else"):
        ctx(f"for (size_t q = 0; q < {q}u; ++q) {dst}[q] = ({ct})0;  /* out of range */")


@register("Gather", since=1)
class Gather(Op):
    traits = frozenset({HALF_NATIVE})
    attrs = {"axis": 0}

    def check(self, node, g):
        return (dtype_reason(g, node.inputs[:1]) or _index_reason(g, node.inputs[1])
                or _axis_reason(node, self, g))

    def emit(self, node, ctx):
        shape = ctx.in_shape(0)
        a = _axis(node, self, len(shape))
        p, n, q = numel(shape[:a]), shape[a], numel(shape[a + 1:])
        k = numel(ctx.in_shape(1))
        ct = ctx.out_ctype(0)
        if numel(ctx.out_shape(0)) == 0:
            ctx(f"(void){ctx.out[0]};  /* empty output */")
            return
        ctx(f"/* Gather axis {a}: out[p, k, :] = data[p, idx[k], :] ({q} elements each); */")
        ctx("/* an index outside [-dim, dim) gives zeros */")
        with _Nest(ctx.w) as nest:
            pe = "0u"
            if p > 1:
                nest.open(f"for (size_t p = 0; p < {p}u; ++p)")
                pe = "p"
            nest.open(f"for (size_t k = 0; k < {k}u; ++k)")
            ctx(f"int64_t j = (int64_t){ctx.inp[1]}[k];")
            row = "k" if p == 1 else ("p" if k == 1 else f"(p * {k}u + k)")
            src = ctx.inp[0] if p == 1 else f"{ctx.inp[0]} + {pe} * {n * q}u"
            ctx(f"{ct} *dst = {ctx.out[0]} + {row}{f' * {q}u' if q > 1 else ''};")
            _fetch(ctx, "j", src if p == 1 else f"({src})", n, "dst", q, ct)


@register("GatherElements", since=11)
class GatherElements(Op):
    traits = frozenset({HALF_NATIVE})
    attrs = {"axis": 0}

    def check(self, node, g):
        return (dtype_reason(g, node.inputs[:1]) or _index_reason(g, node.inputs[1])
                or _axis_reason(node, self, g))

    def emit(self, node, ctx):
        dshape, ishape = ctx.in_shape(0), ctx.in_shape(1)
        r = len(dshape)
        a = _axis(node, self, r)
        ds = strides_of(dshape)
        ct = ctx.out_ctype(0)
        if len(ishape) != r or any(ishape[d] > dshape[d] for d in range(r) if d != a):
            raise UnsupportedError(f"GatherElements {node.name}: indices shape {list(ishape)} "
                                   f"exceeds data shape {list(dshape)} off the axis")
        if numel(ishape) == 0:
            ctx(f"(void){ctx.out[0]};  /* empty output */")
            return
        ctx(f"/* GatherElements axis {a}: out[i] = data[i with i[{a}] = idx[i]]; an index */")
        ctx("/* outside [-dim, dim) gives 0 */")
        ctx("size_t o = 0;")
        base = "0u"
        with _Nest(ctx.w) as nest:
            for d in range(r):
                nest.open(f"for (size_t i{d} = 0; i{d} < {ishape[d]}u; ++i{d})")
                if d != a and ishape[d] > 1:
                    ctx(f"const size_t b{d} = {_cat(base, f'i{d}', ds[d])};")
                    base = f"b{d}"
            ctx(f"int64_t j = (int64_t){ctx.inp[1]}[o];")
            ctx(f"if (j < 0) j += {dshape[a]};")
            ctx(f"{ctx.out[0]}[o++] = (j >= 0 && j < {dshape[a]}) ? "
                f"{ctx.inp[0]}[{_cat(base, '(size_t)j', ds[a])}] : ({ct})0;")


@register("GatherND", since=11)
class GatherND(Op):
    traits = frozenset({HALF_NATIVE})
    attrs = {"batch_dims": 0}

    def check(self, node, g):
        return dtype_reason(g, node.inputs[:1]) or _index_reason(g, node.inputs[1])

    def emit(self, node, ctx):
        dshape, ishape = ctx.in_shape(0), ctx.in_shape(1)
        b = int(self.attr(node, "batch_dims"))
        kk = ishape[-1]
        nb = numel(dshape[:b])
        m = numel(ishape[b:-1])
        q = numel(dshape[b + kk:])
        per_batch = numel(dshape[b:])
        st = strides_of(dshape[b:])
        ct = ctx.out_ctype(0)
        if tuple(ishape[:b]) != tuple(dshape[:b]) or kk > len(dshape) - b:
            raise UnsupportedError(f"GatherND {node.name}: indices {list(ishape)} do not fit "
                                   f"data {list(dshape)} with batch_dims {b}")
        if numel(ctx.out_shape(0)) == 0:
            ctx(f"(void){ctx.out[0]};  /* empty output */")
            return
        ctx(f"/* GatherND batch_dims {b}: each index tuple of {kk} selects a block of {q} "
            "elements; */")
        ctx("/* a tuple with any index outside [-dim, dim) gives a block of zeros */")
        with _Nest(ctx.w) as nest:
            nest.open(f"for (size_t t = 0; t < {nb * m}u; ++t)")
            ctx(f"const {ctx.in_ctype(1)} *ix = {ctx.inp[1]} + t * {kk}u;")
            ctx(f"{ct} *dst = {ctx.out[0]} + t * {q}u;")
            ctx(f"size_t off = {f'(t / {m}u) * {per_batch}u' if nb > 1 else '0u'};")
            ctx("int ok = 1;")
            ctx("int64_t v;")
            for j in range(kk):
                n = dshape[b + j]
                ctx(f"v = (int64_t)ix[{j}];")
                ctx(f"if (v < 0) v += {n};")
                ctx(f"if (v < 0 || v >= {n}) ok = 0; else off += {_cat('0u', '(size_t)v', st[j])};")
            if q == 1:
                ctx(f"dst[0] = ok ? {ctx.inp[0]}[off] : ({ct})0;")
            else:
                with ctx.block("if (ok)"):
                    ctx(f"memcpy(dst, {ctx.inp[0]} + off, {q}u * sizeof({ct}));")
                with ctx.block("else"):
                    ctx(f"for (size_t q = 0; q < {q}u; ++q) dst[q] = ({ct})0;  /* out of range */")
