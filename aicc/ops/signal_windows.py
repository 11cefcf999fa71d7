"""HannWindow, HammingWindow, BlackmanWindow and MelWeightMatrix (opset 17).

The output shape is static; the scalar inputs may be run-time tensors (read at run time).

Windows: ``a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N)`` in double, N = size (periodic) or
size - 1 (symmetric): Hann (0.5, 0.5, 0), Hamming (25/46, 21/46, 0), Blackman (0.42, 0.5,
0.08); a symmetric window of size 1 is [1] (onnx.reference gives NaN), and so is every
point when a run-time size makes N < 1. Integer
output_datatype truncates the values (0 or 1).

MelWeightMatrix follows onnx.reference step by step (mel edges in float32 when the edge
inputs are float32, bin edges by numpy's float floor division, then truncation to integers);
weights of rows outside the static output are not written. Run-time parameters out of range
(num_mel_bins, dft_length or sample_rate < 1) give an all-zero matrix.
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import c_float
from ..emit_c.loops import numel
from .base import Op, register, register_many
from .signal import FLOATS, _scalar_i64, _zero_out

# -- windows ---------------------------------------------------------------------------------

WINDOWS = {"HannWindow": (0.5, 0.5, 0.0),
           "HammingWindow": (25.0 / 46.0, 21.0 / 46.0, 0.0),
           "BlackmanWindow": (0.42, 0.5, 0.08)}


@register_many(list(WINDOWS), since=17)
class Window(Op):
    attrs = {"periodic": 1, "output_datatype": 1}

    def check(self, node, g):
        dt = g.dtype(node.outputs[0])
        if dt.kind not in "fiu" or dt.name == "float16":
            return f"output dtype {dt.name} not supported"
        return None

    def emit(self, node, ctx):
        n = numel(ctx.out_shape(0))
        if n == 0:
            ctx(f"(void){ctx.out[0]};  /* empty window */")
            return
        a0, a1, a2 = WINDOWS[self.op_type]
        per = int(self.attr(node, "periodic"))
        ct = ctx.out_ctype(0)
        ctx(f"/* {self.op_type} ({'periodic' if per else 'symmetric'}), {n} points */")
        ctx(f"const int64_t sz = {_scalar_i64(ctx, 0)};")
        ctx(f"const double den = (double)sz{'' if per else ' - 1.0'};")
        with ctx.block(f"for (size_t k = 0; k < {n}u; ++k)"):
            ctx("const double t = den > 0.0 ? 6.283185307179586476925 * (double)k / den : 0.0;")
            e = f"{c_float(a0, 'float64')} - {c_float(a1, 'float64')} * cos(t)"
            if a2:
                e += f" + {c_float(a2, 'float64')} * cos(2.0 * t)"
            ctx(f"{ctx.out[0]}[k] = ({ct})(den > 0.0 ? {e} : 1.0);")


# -- MelWeightMatrix ---------------------------------------------------------------------------

MEL = """\
/* numpy / CPython float floor division a // b (b != 0). */
static double aicc_floordiv(double a, double b)
{
    const double m = fmod(a, b);
    double d = (a - m) / b, f;
    if (m != 0.0 && ((b < 0.0) != (m < 0.0)))
        d -= 1.0;
    if (d == 0.0)
        return 0.0;
    f = floor(d);
    if (d - f > 0.5)
        f += 1.0;
    return f;
}

/* float -> int64 truncation, saturated to +-2^50, NaN -> 0 (bin indices only). */
static int64_t aicc_mel_int(double v)
{
    if (v != v)
        return 0;
    if (v > 1125899906842624.0)
        return INT64_C(1125899906842624);
    if (v < -1125899906842624.0)
        return -INT64_C(1125899906842624);
    return (int64_t)v;
}

/* Bin edge i of onnx.reference's MelWeightMatrix. */
static int64_t aicc_mel_edge(int64_t i, double low, double step, int64_t dl, int64_t sr)
{
    double f = (double)i * step + low;
    f = 700.0 * expm1(f / 2595.0 * 2.302585092994046);
    return aicc_mel_int(aicc_floordiv(((double)dl + 1.0) * f, (double)sr));
}"""


@register("MelWeightMatrix", since=17)
class MelWeightMatrix(Op):
    attrs = {"output_datatype": 1}

    def check(self, node, g):
        if g.dtype(node.outputs[0]).name not in FLOATS:
            return f"output dtype {g.dtype(node.outputs[0]).name} not supported (float32, float64)"
        if g.dtype(node.inputs[3]).name not in FLOATS:
            return f"edge dtype {g.dtype(node.inputs[3]).name} not supported (float32, float64)"
        if len(g.shape(node.outputs[0])) != 2:
            return "output must be 2-D"
        return None

    def emit(self, node, ctx):
        nbins, nmel = ctx.out_shape(0)
        ct = ctx.out_ctype(0)
        y = ctx.out[0]
        if nbins * nmel == 0:
            ctx(f"(void){y};  /* empty output */")
            return
        ctx.helper("signal.3.mel", MEL)
        edt = ctx.in_dtype(3)
        ctx("/* MelWeightMatrix (onnx.reference's algorithm) */")
        _zero_out(ctx)
        ctx(f"const int64_t nm = {_scalar_i64(ctx, 0)}, dl = {_scalar_i64(ctx, 1)}, "
            f"sr = {_scalar_i64(ctx, 2)};")
        for k, v in ((3, "lo"), (4, "hi")):
            c = ctx.in_const(k)
            x = c_float(np.asarray(c).reshape(-1)[0], edt) if c is not None else f"{ctx.inp[k]}[0]"
            if edt == np.float32:
                ctx(f"const double {v}mel = (double)(2595.0f * log1pf({x} / 700.0f)) / "
                    "2.302585092994046;")
            else:
                ctx(f"const double {v}mel = 2595.0 * log1p({x} / 700.0) / 2.302585092994046;")
        with ctx.block("if (nm >= 1 && dl >= 1 && sr >= 1)"):
            ctx("const double step = (himel - lomel) / ((double)nm + 2.0);")
            ctx(f"const int64_t m = nm < {nmel} ? nm : {nmel};")
            with ctx.block("for (int64_t i = 0; i < m; ++i)"):
                ctx("const int64_t l = aicc_mel_edge(i, lomel, step, dl, sr);")
                ctx("const int64_t c = aicc_mel_edge(i + 1, lomel, step, dl, sr);")
                ctx("const int64_t h = aicc_mel_edge(i + 2, lomel, step, dl, sr);")
                ctx(f"const int64_t j0 = l < 0 ? 0 : l, j1 = c < {nbins} ? c : {nbins - 1};")
                ctx(f"const int64_t j2 = h < {nbins} ? h : {nbins};")
                with ctx.block("if (c == l)"):
                    ctx(f"if (c >= 0 && c < {nbins}) {y}[c * {nmel} + i] = ({ct})1;")
                with ctx.block("else"):
                    ctx("for (int64_t j = j0; j <= j1; ++j)")
                    ctx(f"    {y}[j * {nmel} + i] = ({ct})((double)(j - l) / (double)(c - l));")
                with ctx.block("if (h > c)"):
                    ctx("for (int64_t j = c < 0 ? 0 : c; j < j2; ++j)")
                    ctx(f"    {y}[j * {nmel} + i] = ({ct})((double)(h - j) / (double)(h - c));")
