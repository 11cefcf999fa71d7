"""NonZero, Compress and Unique: ops whose output size depends on the input values.

aicc plans every buffer at compile time, so such an output needs a static shape. Decision:

* When the model declares the output shape (a graph output with fixed dims, as the ONNX
  conformance cases do), NonZero and Compress are compiled with that size as a fixed count:
  the kernel computes the result at run time and writes the first N entries; if the run-time
  count differs, extra entries are dropped, and missing ones are filled (NonZero: index -1,
  which no valid coordinate has, so the caller can find the real count; Compress: zeros). The
  declared shape is the contract, as for every other op; nothing is read or written out of
  bounds whatever the data.
* Otherwise (onnx shape inference leaves a symbolic dim), check() refuses the node with a
  reason naming the op and why, instead of the generic "non-static shape" error of lowering.
* Unique is always refused: besides its data-dependent sizes, its four outputs need sorting
  and first-occurrence bookkeeping that no model we target uses.

NonZero: an element is nonzero when ``x != 0`` (NaN counts; -0.0 does not; float16/bfloat16
compare their bits without the sign). Coordinates are int64, row-major order. Compress:
``condition`` (bool, read at run time) selects slices along ``axis`` (the flattened input when
axis is absent); entries beyond the condition's length are not selected. Data is copied bit
for bit.
"""
from __future__ import annotations

from ..emit_c.loops import numel, strides_of
from .base import Op, dtype_reason, register
from .traits import HALF_NATIVE

WHY = ("its output size depends on the input values ({what}), and aicc sizes every buffer at "
       "compile time; declare the output shape in the model (a fixed count) to compile it")


def _dynamic_reason(node, g, what) -> str | None:
    for o in node.outputs:
        if not o:
            continue
        t = g.type_of(o) if (o in g.types or o in g.constants) else None
        if t is None or not t.is_static:
            return f"output '{o}' is {t if t is not None else 'untyped'}: " + WHY.format(what=what)
    return None


@register("NonZero", since=9)
class NonZero(Op):
    def check(self, node, g):
        why = (dtype_reason(g, node.inputs)
               or _dynamic_reason(node, g, "the number of nonzero elements"))
        if why:
            return why
        r, out = len(g.shape(node.inputs[0])), g.shape(node.outputs[0])
        if len(out) != 2 or out[0] != r:
            return f"declared output shape {list(out)} is not [rank {r}, count]"
        return None

    def emit(self, node, ctx):
        shape = ctx.in_shape(0)
        r, n = len(shape), ctx.out_shape(0)[1]
        y = ctx.out[0]
        if r == 0 or n == 0:
            ctx(f"(void){y};  /* empty output */")
            return
        dt = ctx.in_dtype(0)
        x = ctx.inp[0]
        test = (f"({x}[i] & 0x7FFFu) != 0" if dt.name in ("float16", "bfloat16")
                else f"{x}[i] != 0")
        st = strides_of(shape)
        ctx(f"/* NonZero: coordinates of the first {n} nonzero elements (the declared count); "
            "missing ones are -1 */")
        ctx("size_t c = 0;")
        with ctx.block(f"for (size_t i = 0; i < {numel(shape)}u && c < {n}u; ++i)"):
            ctx(f"if (!({test})) continue;")
            for d in range(r):
                v = "i" if r == 1 else (f"i / {st[d]}u" if d == 0 else
                                        f"(i / {st[d]}u) % {shape[d]}u" if st[d] > 1 else
                                        f"i % {shape[d]}u")
                ctx(f"{y}[{d * n}u + c] = (int64_t)({v});")
            ctx("++c;")
        with ctx.block(f"for (; c < {n}u; ++c)"):
            for d in range(r):
                ctx(f"{y}[{d * n}u + c] = -1;")


@register("Compress", since=9)
class Compress(Op):
    traits = frozenset({HALF_NATIVE})
    attrs = {"axis": None}

    def check(self, node, g):
        why = (dtype_reason(g, node.inputs)
               or _dynamic_reason(node, g, "the number of true conditions"))
        if why:
            return why
        shape, out = list(g.shape(node.inputs[0])), list(g.shape(node.outputs[0]))
        a = self.attr(node, "axis")
        if a is None:
            ok = len(out) == 1
        else:
            a = int(a) + len(shape) if int(a) < 0 else int(a)
            ok = len(out) == len(shape) and all(
                out[d] == shape[d] for d in range(len(shape)) if d != a)
        return None if ok else f"declared output shape {out} does not fit input {shape}"

    def emit(self, node, ctx):
        shape, out = ctx.in_shape(0), ctx.out_shape(0)
        a = self.attr(node, "axis")
        if a is None:
            shape, a = (numel(shape),), 0
        a = int(a) + len(shape) if int(a) < 0 else int(a)
        outer, dim, q = numel(shape[:a]), shape[a], numel(shape[a + 1:])
        n = out[a] if len(out) > a else 0
        y, x = ctx.out[0], ctx.inp[0]
        ct = ctx.out_ctype(0)
        if numel(out) == 0:
            ctx(f"(void){y};  /* empty output */")
            return
        length = min(numel(ctx.in_shape(1)), dim)
        ctx(f"/* Compress axis {a}: the slices whose condition is true, in order, into the "
            f"{n} declared slots; unfilled slots are zeros */")
        ctx("size_t c = 0;")
        if length:
            with ctx.block(f"for (size_t i = 0; i < {length}u && c < {n}u; ++i)"):
                ctx(f"if (!{ctx.inp[1]}[i]) continue;")
                with ctx.block(f"for (size_t p = 0; p < {outer}u; ++p)"):
                    ctx(f"memcpy({y} + (p * {n}u + c) * {q}u, {x} + (p * {dim}u + i) * {q}u, "
                        f"{q}u * sizeof({ct}));")
                ctx("++c;")
        with ctx.block(f"for (; c < {n}u; ++c)"):
            with ctx.block(f"for (size_t p = 0; p < {outer}u; ++p)"):
                with ctx.block(f"for (size_t e = 0; e < {q}u; ++e)"):
                    ctx(f"{y}[(p * {n}u + c) * {q}u + e] = ({ct})0;")


@register("Unique", since=11)
class Unique(Op):
    attrs = {"axis": None, "sorted": 1}

    def check(self, node, g):
        return ("not implemented: its output sizes depend on the input values (the number of "
                "distinct values), and aicc sizes every buffer at compile time")
