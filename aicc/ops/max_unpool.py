"""MaxUnpool (any spatial rank; float and integer X, int64 indices): the output starts at
zero and each input value is written at its index, flattened over the whole output tensor
(as MaxPool's Indices with storage_order 0) over the default output shape
(in - 1) * stride + kernel - pads. The actual output shape comes from static shape inference
(the output_shape input's run-time value is not read); when it differs from the default, each
index keeps its coordinates (the default-shaped result sits at the start of every dim, as
onnx.reference and the conformance cases).

Indices outside the default shape are skipped; when several inputs share an index the last
one in input order wins.
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import ctype
from ..emit_c.loops import numel
from .base import Op, register

KERNEL = """\
/* MaxUnpool: y = 0, then each x[k] is written where its index idx[k] points. The index is
 * flattened over the default output shape inf[0..rank) (as MaxPool's Indices); its position
 * lands at the same coordinates of the actual output shape outd (larger: extra trailing
 * positions stay 0; smaller: positions outside are dropped). Indices outside the default
 * shape are skipped; the last of equal indices wins. */
static void aicc_max_unpool_SFX(size_t nx, size_t rank, const size_t *inf, const size_t *outd,
                                const TYPE *restrict x, const int64_t *restrict idx,
                                TYPE *restrict y)
{
    size_t ny = 1, ninf = 1, same = 1;
    for (size_t d = 0; d < rank; ++d) {
        ny *= outd[d];
        ninf *= inf[d];
        same &= inf[d] == outd[d];
    }
    for (size_t i = 0; i < ny; ++i)
        y[i] = 0;
    for (size_t k = 0; k < nx; ++k) {
        size_t rem, o = 0, mul = 1;
        int inside = 1;
        if (idx[k] < 0 || (uint64_t)idx[k] >= (uint64_t)ninf)
            continue;
        rem = (size_t)idx[k];
        if (same) {
            y[rem] = x[k];
            continue;
        }
        for (size_t d = rank; d-- > 0;) {
            const size_t c = rem % inf[d];
            rem /= inf[d];
            inside &= c < outd[d];
            o += c * mul;
            mul *= outd[d];
        }
        if (inside)
            y[o] = x[k];
    }
}"""

DTYPES = ("float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
          "uint64")


@register("MaxUnpool", since=9)
class MaxUnpool(Op):
    attrs = {"kernel_shape": None, "pads": None, "strides": None}

    def check(self, node, g):
        dt = g.dtype(node.inputs[0])
        if dt.name not in DTYPES:
            return f"dtype {dt.name} not supported"
        if g.dtype(node.inputs[1]) != np.int64:
            return "indices must be int64"
        x = tuple(g.shape(node.inputs[0]))
        if x != tuple(g.shape(node.inputs[1])):
            return "X and I shapes differ"
        try:
            inf = self.default_shape(node, x)
        except ValueError as e:
            return str(e)
        if len(g.shape(node.outputs[0])) != len(inf):
            return "output rank differs from the input rank"
        return None

    def default_shape(self, node, x) -> list:
        """The output shape without output_shape: (in - 1) * stride - pads + kernel."""
        r = len(x) - 2
        k = [int(v) for v in (self.attr(node, "kernel_shape") or [])]
        if len(k) != r:
            raise ValueError(f"kernel_shape {k} (need {r} values)")
        s = [int(v) for v in (self.attr(node, "strides") or [1] * r)]
        p = [int(v) for v in (self.attr(node, "pads") or [0] * (2 * r))]
        if len(s) != r or len(p) != 2 * r:
            raise ValueError("strides/pads of the wrong length")
        out = [(i - 1) * st - (p[d] + p[d + r]) + kk
               for d, (i, st, kk) in enumerate(zip(x[2:], s, k))]
        if min(out + [1]) < 1:
            raise ValueError(f"empty default output {out}")
        return [int(x[0]), int(x[1])] + out

    def emit(self, node, ctx):
        dt = ctx.in_dtype(0)
        code = KERNEL.replace("TYPE", ctype(dt)).replace("_SFX", "_" + dt.name)
        ctx.helper(f"max_unpool_{dt.name}", code)
        x, y = ctx.in_shape(0), ctx.out_shape(0)
        inf = self.default_shape(node, x)
        ctx(f"/* MaxUnpool of {list(x)} into {list(y)} (indices over {inf}) */")
        ctx(f"static const size_t inf[{len(x)}] = {{ {', '.join(f'{d}u' for d in inf)} }};")
        ctx(f"static const size_t outd[{len(x)}] = {{ {', '.join(f'{d}u' for d in y)} }};")
        ctx(f"aicc_max_unpool_{dt.name}({numel(x)}u, {len(x)}u, inf, outd, {ctx.inp[0]}, "
            f"{ctx.inp[1]}, {ctx.out[0]});")
