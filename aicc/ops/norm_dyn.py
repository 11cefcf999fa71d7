"""aicc.NormDyn: normalization over axes whose real length is known only at run time.

Inserted by aicc/dynamic/padrules.py in place of InstanceNormalization, GroupNormalization
and LayerNormalization when they normalize across a padded axis of a dynamic-shape bucket:
the statistics must cover the real elements only. x is seen as ``view`` (GroupNormalization:
the channel axis split into [groups, channels per group]); ``axes`` are the normalized view
axes, ``exts`` their real extents (JSON Ext, or None for an unpadded axis; clamped to the
bucket's size). For every index of the other axes:

    mean = sum(x over the real box) / n,  var = sum((x - mean)^2 over the real box) / n
    y = (x - mean) / sqrt(var + epsilon) * scale + bias      (every element of the bucket)

accumulated in double, rounded to x's dtype once. ``scale_strides``/``bias_strides`` give
the element stride of scale/bias along each view axis (0: broadcast); bias may be absent.
n = 0 (an empty real box) counts as 1. NaN/Inf propagate as in the ONNX ops.
"""
from __future__ import annotations

from ..emit_c.cwriter import c_float
from ..emit_c.loops import numel, strides_of
from .base import Op, register
from .pad_fill import _CLAMP, _extent_c


@register("NormDyn", domain="aicc")
class NormDyn(Op):
    attrs = {"view": None, "axes": None, "exts": None, "epsilon": 1e-5,
             "scale_strides": None, "bias_strides": None}
    folds = False

    def emit(self, node, ctx):
        view = [int(d) for d in node.attrs["view"]]
        axes = [int(a) for a in node.attrs["axes"]]
        exts = list(node.attrs["exts"])
        ss, bs = node.attrs["scale_strides"], node.attrs["bias_strides"]
        if numel(view) == 0:
            ctx("(void)f;")
            return
        x, y, ct = ctx.inp[0], ctx.out[0], ctx.out_ctype(0)
        sc = ctx.inp[1]
        bi = ctx.inp[2] if ctx.has_input(2) else None
        st = strides_of(view)
        outer = [a for a in range(len(view)) if a not in axes]
        ctx.helper("aicc_clamp_extent", _CLAMP)
        for a, j in zip(axes, exts):
            ctx(f"const size_t e{a} = " + (_extent_c(ctx, j, view[a]) if j is not None
                                           else f"{view[a]}u") + ";")
        n = " * ".join(f"e{a}" for a in axes) or "1"
        ctx(f"const double n = (double)({n}) < 1.0 ? 1.0 : (double)({n});")

        def idx(strides):
            return " + ".join(f"i{a} * {strides[a]}u" for a in range(len(view))
                              if strides[a]) or "0"

        def open_box(real):
            for a in axes:
                bound = f"e{a}" if real else f"{view[a]}u"
                ctx.w(f"for (size_t i{a} = 0; i{a} < {bound}; ++i{a})")

        for a in outer:
            ctx(f"for (size_t i{a} = 0; i{a} < {view[a]}u; ++i{a})")
        with ctx.block(""):
            ctx("double sum = 0.0, sq = 0.0, mean, rstd;")
            open_box(True)
            ctx(f"    sum += (double){x}[{idx(st)}];")
            ctx("mean = sum / n;")
            open_box(True)
            with ctx.block(""):
                ctx(f"const double d = (double){x}[{idx(st)}] - mean;")
                ctx("sq += d * d;")
            ctx(f"rstd = 1.0 / sqrt(sq / n + {c_float(float(node.attrs['epsilon']), 'float64')});")
            open_box(False)
            b = f" + (double){bi}[{idx(bs)}]" if bi is not None else ""
            ctx(f"    {y}[{idx(st)}] = ({ct})(((double){x}[{idx(st)}] - mean) * rstd * "
                f"(double){sc}[{idx(ss)}]{b});")
