"""Einsum (opset 12): any equation of explicit labels and an ellipsis, as nested loops.

The equation is parsed at compile time (spaces ignored; without ``->`` the output is the
ellipsis dims followed by the labels used once, alphabetically). Every label gets a size;
ellipsis dims are right-aligned across inputs and broadcast where an input has size 1 (or
lacks the dim). Each input's index is the sum over its labels of ``label * stride``, a
label repeated within one input adding its strides (a diagonal). The loops run over the
output labels (row-major, so the output is written in order) and, inside, over the summed
labels, accumulating the product of the inputs in the tensor dtype in ascending order.

This covers batch matmul, transpose, sums, inner/outer products, diagonals, traces and
scalars with one generic kernel (no blocking: large contractions are slower than MatMul).
Integers wrap around (unsigned arithmetic: no UB). NaN/Inf follow IEEE arithmetic. A summed
label of size 0 gives 0; an empty output produces no code.
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import c_literal, ctype
from ..emit_c.loops import numel, strides_of
from .base import Op, empty_body, register

DTYPES = {np.dtype(t) for t in (np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
                                 np.uint8, np.uint16, np.uint32, np.uint64)}


def _split_term(term: str):
    """Labels of one term, '...' as the single token '.'; raises ValueError."""
    out, k = [], 0
    while k < len(term):
        if term.startswith("...", k):
            out.append(".")
            k += 3
        elif term[k].isalpha():
            out.append(term[k])
            k += 1
        else:
            raise ValueError(f"bad character {term[k]!r} in einsum term {term!r}")
    if out.count(".") > 1:
        raise ValueError(f"more than one ellipsis in {term!r}")
    return out


def parse(equation: str, shapes):
    """(per-input label lists, output labels, label sizes) with ellipsis dims named
    '.0', '.1', ...; raises ValueError on an invalid equation or shapes."""
    eq = "".join(equation.split())
    lhs, arrow, rhs = eq.partition("->")
    terms = [_split_term(t) for t in lhs.split(",")]
    if len(terms) != len(shapes):
        raise ValueError(f"{len(terms)} terms for {len(shapes)} inputs")
    ell = 0
    for t, s in zip(terms, shapes):
        n = len(s) - (len(t) - ("." in t))
        if n < 0 or (n > 0 and "." not in t):
            raise ValueError(f"term {''.join(t)!r} does not match rank {len(s)}")
        ell = max(ell, n)
    ell_labels = [f".{j}" for j in range(ell)]
    ins, sizes = [], {}
    for t, s in zip(terms, shapes):
        n = len(s) - (len(t) - ("." in t))
        labels = []
        for lab in t:
            labels += ell_labels[ell - n:] if lab == "." else [lab]
        for lab, d in zip(labels, s):
            d = int(d)
            old = sizes.get(lab)
            if old is None or old == 1:
                sizes[lab] = d
            elif d != old and not (d == 1 and lab.startswith(".")):
                raise ValueError(f"label {lab!r} has sizes {old} and {d}")
        ins.append(labels)
    if arrow:
        out = []
        for lab in _split_term(rhs):
            out += ell_labels if lab == "." else [lab]
        if len(set(out)) != len(out):
            raise ValueError("repeated output label")
        if any(lab not in sizes for lab in out if not lab.startswith(".")):
            raise ValueError("output label not in any input")
    else:
        flat = [lab for t in ins for lab in t if not lab.startswith(".")]
        out = ell_labels + sorted(lab for lab in set(flat) if flat.count(lab) == 1)
    for lab in out:
        sizes.setdefault(lab, 1)
    return ins, out, sizes


@register("Einsum", since=12)
class Einsum(Op):
    attrs = {"equation": None}

    def _parse(self, node, g):
        shapes = [tuple(int(d) for d in g.shape(i)) for i in node.inputs]
        return parse(str(self.attr(node, "equation")), shapes)

    def check(self, node, g):
        dts = {g.dtype(i) for i in node.inputs}
        if len(dts) != 1:
            return "mixed dtypes"
        dt = dts.pop()
        if dt not in DTYPES:
            return f"dtype {dt.name} not supported"
        try:
            ins, out, sizes = self._parse(node, g)
        except ValueError as e:
            return str(e)
        want = tuple(sizes[lab] for lab in out)
        if tuple(int(d) for d in g.shape(node.outputs[0])) != want:
            return f"output shape {list(g.shape(node.outputs[0]))} != {list(want)}"
        return None

    def emit(self, node, ctx):
        dt = ctx.out_dtype(0)
        ct = ctype(dt)
        ins, out, sizes = self._parse(node, ctx.g)
        if numel(sizes[lab] for lab in out) == 0:
            empty_body(ctx)
            return
        summed = [lab for lab in sizes if lab not in out]
        if numel(sizes[lab] for lab in summed) == 0:
            n = numel(sizes[lab] for lab in out)
            ctx("/* einsum: a summed label of size 0, every output is 0 */")
            ctx(f"for (size_t o = 0; o < {n}u; ++o) {ctx.out[0]}[o] = {c_literal(0, dt)};")
            return
        var = {lab: f"l{k}" for k, lab in enumerate(out + summed)}
        idx = []
        for k, labels in enumerate(ins):
            shape = ctx.in_shape(k)
            st = {}
            for lab, d, s in zip(labels, shape, strides_of(shape)):
                if d != 1:
                    st[lab] = st.get(lab, 0) + s
            terms = [var[lab] if s == 1 else f"{var[lab]} * {s}u"
                     for lab, s in st.items() if s]
            idx.append(f"{ctx.inp[k]}[{' + '.join(terms) if terms else '0'}]")
        if dt.kind in "iu":
            ut = "uint64_t" if dt.itemsize == 8 else "uint32_t"
            prod = " * ".join(f"({ut}){e}" for e in idx)
            update = f"acc = ({ct})(({ut})acc + {prod});"
        else:
            update = f"acc += {' * '.join(idx)};"
        w = ctx.w
        w(f"/* einsum {self.attr(node, 'equation')!s}: output labels "
          f"{','.join(out) or '-'}, summed {','.join(summed) or '-'} */")
        w("size_t o = 0;")
        opened = 0
        for lab in out:
            w(f"for (size_t {var[lab]} = 0; {var[lab]} < {sizes[lab]}u; ++{var[lab]}) {{")
            w.level += 1
            opened += 1
        w(f"{ct} acc = {c_literal(0, dt)};")
        for lab in summed:
            w(f"for (size_t {var[lab]} = 0; {var[lab]} < {sizes[lab]}u; ++{var[lab]})")
            w.level += 1
        w(update)
        w.level -= len(summed)
        w(f"{ctx.out[0]}[o++] = acc;")
        for _ in range(opened):
            w.level -= 1
            w("}")
