"""aicc.PadFill, aicc.ExtentScale, aicc.SeqLens: the run-time side of dynamic-shape buckets.

Inserted by aicc/dynamic/padding.py into a bucket's graph; they read the actual dynamic dims
(``f->dims``) at run time. Extents (attribute ``exts``: JSON of aicc.dynamic.extent.Ext) are
clamped to [0, the bucket's size] before use.

- PadFill(x) -> y: y = x with every element past the real extent of each listed axis
  overwritten: ``zero``, ``one``, ``neg_inf``/``pos_inf`` (the dtype's lowest/highest value
  for integers), ``edge`` (the last real element along the axis; nothing when the extent is
  0) or ``["value", v]``. May run in place.
- ExtentScale(x) -> y: y = x * (count / product of the extents), computed in double and
  rounded to x's dtype once: turns a mean over the bucket's padded axes (whose padding was
  filled with zeros) into the mean over the real elements. A product below 1 counts as 1.
- TakeFromEnd(x) -> y: ``count`` elements along ``axis`` starting ``offset`` (negative)
  before the real end: x[..., ext+offset : ext+offset+count, ...] (the axis dropped when y
  has one dim less); the start is clamped into [0, size - count].
- SeqLens() -> int32[batch]: every entry the real length of a padded time axis (an RNN's
  sequence_lens).
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import c_literal, ctype
from ..emit_c.loops import numel
from .base import Op, register


def _ext(j):
    from ..dynamic.extent import Ext
    return Ext.from_json(j)


def _extent_c_expr(ctx, e) -> str:
    from ..dynamic.extent import FDIV_C
    if "aicc_fdiv" in e.c("d"):
        ctx.helper("aicc_fdiv", FDIV_C)
    return e.c("f->dims")


def _extent_c(ctx, j, size: int) -> str:
    return f"aicc_clamp_extent({_extent_c_expr(ctx, _ext(j))}, {size})"


_CLAMP = """\
/* a dynamic extent clamped to [0, the bucket's size] */
static size_t aicc_clamp_extent(int64_t e, size_t size)
{
    return e <= 0 ? 0u : (uint64_t)e >= (uint64_t)size ? size : (size_t)e;
}"""


def _fill_value(kind, dt) -> str:
    dt = np.dtype(dt)
    if isinstance(kind, (list, tuple)):
        return c_literal(kind[1] if dt.kind == "f" else int(kind[1]), dt)
    if kind in ("neg_inf", "pos_inf"):
        if dt.kind == "f":
            return c_literal(float("-inf") if kind == "neg_inf" else float("inf"), dt)
        if dt.kind == "b":
            return "0" if kind == "neg_inf" else "1"
        info = np.iinfo(dt)
        return c_literal(info.min if kind == "neg_inf" else info.max, dt)
    return c_literal(1 if kind == "one" else 0, dt)


@register("PadFill", domain="aicc")
class PadFill(Op):
    attrs = {"axes": None, "exts": None, "fill": "zero"}
    folds = False

    def inplace_inputs(self, node, g):
        return [0]

    def emit(self, node, ctx):
        ctx.restrict = False
        shape = ctx.in_shape(0)
        dt = ctx.in_dtype(0)
        ct = ctype(dt)
        x, y = ctx.inp[0], ctx.out[0]
        total = numel(shape)
        if total == 0:
            ctx("(void)f;")
            return
        ctx.helper("aicc_clamp_extent", _CLAMP)
        kind = node.attrs["fill"]
        ctx(f"if ((const void *){y} != (const void *){x}) memcpy({y}, {x}, {total}u * sizeof({ct}));")
        for a, (ax, j) in enumerate(zip(node.attrs["axes"], node.attrs["exts"])):
            outer, size, inner = numel(shape[:ax]), shape[ax], numel(shape[ax + 1:])
            n = f"n{a}"
            ctx(f"const size_t {n} = {_extent_c(ctx, j, size)};")
            if kind == "edge":
                src = f"{y}[(o * {size}u + {n} - 1u) * {inner}u + i]"
                head = f"for (size_t o = 0; {n} > 0u && o < {outer}u; ++o)"
            else:
                src = _fill_value(kind, dt)
                head = f"for (size_t o = 0; o < {outer}u; ++o)"
            with ctx.block(head):
                with ctx.block(f"for (size_t j = {n}; j < {size}u; ++j)"):
                    ctx(f"for (size_t i = 0; i < {inner}u; ++i) "
                        f"{y}[(o * {size}u + j) * {inner}u + i] = {src};")


@register("ExtentScale", domain="aicc")
class ExtentScale(Op):
    attrs = {"exts": None, "count": 1}
    folds = False

    def inplace_inputs(self, node, g):
        return [0]

    def emit(self, node, ctx):
        ctx.restrict = False
        total = numel(ctx.in_shape(0))
        ct = ctx.in_ctype(0)
        x, y = ctx.inp[0], ctx.out[0]
        ctx.helper("aicc_clamp_extent", _CLAMP)
        count = int(node.attrs["count"])
        ctx("double real = 1.0;")
        for j in node.attrs["exts"]:
            ctx(f"real *= (double){_extent_c(ctx, j, count)};")
        ctx(f"const double s = (double){count} / (real < 1.0 ? 1.0 : real);")
        ctx(f"for (size_t i = 0; i < {total}u; ++i) {y}[i] = ({ct})((double){x}[i] * s);")


@register("SeqLens", domain="aicc")
class SeqLens(Op):
    attrs = {"ext": None, "size": 1}
    folds = False

    def emit(self, node, ctx):
        n = numel(ctx.out_shape(0))
        y = ctx.out[0]
        if n == 0:          # batch 0: `i < 0u` is an error under -Wtype-limits
            ctx(f"(void){y};  /* empty tensor */")
            return
        ctx.helper("aicc_clamp_extent", _CLAMP)
        ctx(f"const int32_t len = (int32_t){_extent_c(ctx, node.attrs['ext'], int(node.attrs['size']))};")
        ctx(f"for (size_t i = 0; i < {n}u; ++i) {y}[i] = len;")


@register("TakeFromEnd", domain="aicc")
class TakeFromEnd(Op):
    attrs = {"axis": 0, "ext": None, "offset": -1, "count": 1}
    folds = False

    def emit(self, node, ctx):
        shape = ctx.in_shape(0)
        ax, count = int(node.attrs["axis"]), int(node.attrs["count"])
        outer, size, inner = numel(shape[:ax]), shape[ax], numel(shape[ax + 1:])
        x, y, ct = ctx.inp[0], ctx.out[0], ctx.in_ctype(0)
        if outer * inner * count == 0 or size < count:
            ctx("(void)f;")
            return
        ctx.helper("aicc_clamp_extent", _CLAMP)
        e = _ext(node.attrs["ext"]) + int(node.attrs["offset"])
        ctx(f"const size_t s = aicc_clamp_extent({_extent_c_expr(ctx, e)}, {size - count});")
        ctx(f"for (size_t o = 0; o < {outer}u; ++o)")
        ctx(f"    memcpy({y} + o * {count * inner}u, {x} + (o * {size}u + s) * {inner}u, "
            f"{count * inner}u * sizeof({ct}));")
