"""Loop emitters shared by elementwise-like ops (broadcasting, flat maps).

``emit_broadcast(ctx, out_shape, in_shapes, expr)`` writes loops over the output with each
input indexed through numpy broadcasting; adjacent dims that broadcast the same way are
merged so the common cases (same shape, scalar, per-channel) become one or two loops.
"""
from __future__ import annotations


def _pad(shape, rank):
    return (1,) * (rank - len(shape)) + tuple(shape)


def collapse(out_shape, in_shapes):
    """Merge adjacent dims whose broadcast pattern (full or size-1) is the same in every
    input. Returns (dims, [per-input list of bool full-per-dim])."""
    rank = len(out_shape)
    ins = [_pad(s, rank) for s in in_shapes]
    dims, pats = [], []
    for d in range(rank):
        if out_shape[d] == 1:
            continue
        pat = tuple(s[d] != 1 for s in ins)
        if dims and pats[-1] == pat:
            dims[-1] *= out_shape[d]
        else:
            dims.append(out_shape[d])
            pats.append(pat)
    return dims, [[p[k] for p in pats] for k in range(len(in_shapes))]


def collapsed_strides(dims, full) -> list:
    """Per input, the element stride of each collapsed dim (0 where the input broadcasts);
    ``dims, full`` as returned by ``collapse``."""
    strides = []
    for f in full:
        st, acc = [0] * len(dims), 1
        for d in reversed(range(len(dims))):
            if f[d]:
                st[d] = acc
                acc *= dims[d]
        strides.append(st)
    return strides


def emit_broadcast(ctx, out_shape, in_shapes, expr, out_var=None) -> None:
    """``expr(idx)`` gets one C index expression per input and returns the element value."""
    out_var = out_var or ctx.out[0]
    w = ctx.w
    total = 1
    for d in out_shape:
        total *= int(d)
    if total == 0:
        w("/* empty output: nothing to compute */")
        return
    dims, full = collapse(out_shape, in_shapes)
    if not dims:
        w(f"{out_var}[0] = {expr(['0'] * len(in_shapes))};")
        return
    n = len(dims)
    strides = collapsed_strides(dims, full)
    if n == 1:
        idx = ["i0" if strides[k][0] else "0" for k in range(len(in_shapes))]
        with w.block(f"for (size_t i0 = 0; i0 < {dims[0]}u; ++i0)"):
            w(f"{out_var}[i0] = {expr(idx)};")
        return
    w("size_t o = 0;")
    for d in range(n):
        w(f"for (size_t i{d} = 0; i{d} < {dims[d]}u; ++i{d}) {{")
        w.level += 1
    idx = []
    for k in range(len(in_shapes)):
        terms = [f"i{d}" if strides[k][d] == 1 else f"i{d} * {strides[k][d]}u"
                 for d in range(n) if strides[k][d]]
        idx.append(" + ".join(terms) if terms else "0")
    w(f"{out_var}[o++] = {expr(idx)};")
    for _ in range(n):
        w.level -= 1
        w("}")


def emit_map(ctx, n: int, expr, out_var=None, in_var=None) -> None:
    """out[i] = expr(in[i]) over n elements."""
    out_var = out_var or ctx.out[0]
    in_var = in_var or ctx.inp[0]
    if n == 0:
        ctx.w("/* empty tensor */")
        return
    with ctx.block(f"for (size_t i = 0; i < {n}u; ++i)"):
        ctx(f"{out_var}[i] = {expr(f'{in_var}[i]')};")


def numel(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def strides_of(shape) -> list:
    st, acc = [0] * len(shape), 1
    for d in reversed(range(len(shape))):
        st[d] = acc
        acc *= int(shape[d])
    return st
