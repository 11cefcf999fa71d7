"""Signal processing: DFT (opset 17 and 20) and STFT (windows and MelWeightMatrix are in
signal_windows.py).

Output shapes are static (onnx shape inference or the model's declared outputs); the scalar
inputs axis, dft_length, frame_step and frame_length may be run-time tensors and are read at
run time. A run-time value that does not agree with the static output shape (or is out of
its valid range: axis outside [-r, -2] U [0, r-2], a length < 1, frame_step < 1) gives an
all-zero output instead of an error (the C step cannot fail). Every read stays in bounds.
STFT without an explicit onesided attribute whose static output is two-sided is refused:
onnx shape inference reads the absent attribute as 0 while the spec default is 1.

DFT/STFT: complex values are interleaved [..., 2]; real input is [..., 1]. Signals shorter
than dft_length are zero-padded, longer ones truncated; irfft (inverse + onesided) takes the
first dft_length / 2 + 1 bins, ignores the imaginary parts of the DC and Nyquist bins and
returns real [..., 1] (numpy.fft.irfft). The transform runs in double precision per line with
a twiddle table cos/sin(2 pi j / L): a radix-2 FFT (L log2 L butterflies) when L is a power of
two, else the direct O(L * bins) sum; rounded once to the output type; the inverse is scaled
by 1 / L. NaN/Inf in a line propagate to that line. STFT also takes a real signal as [B, S]
(the rank-2 form PyTorch's TorchScript exporter writes, which onnxruntime accepts).
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import c_int, ctype
from ..emit_c.loops import numel
from .base import Op, register

FLOATS = ("float32", "float64")

CORE = """\
/* tw[2j], tw[2j + 1] = cos, sin(2 pi j / L) for j < L. */
static void aicc_dft_twiddles(size_t L, double *tw)
{
    for (size_t j = 0; j < L; ++j) {
        const double t = 6.283185307179586476925 * (double)j / (double)L;
        tw[2 * j] = cos(t);
        tw[2 * j + 1] = sin(t);
    }
}

/* out[k] = sum_{n < L} fr[n] exp(sign * 2 pi i k n / L) for k < nk <= L (complex values
 * interleaved re, im; out holds 2 L doubles). L a power of two: an iterative radix-2 FFT in
 * place in out (fr copied in bit-reversed order, then log2 L passes of butterflies with the
 * twiddles tw[k L / len]); otherwise the direct sum, the twiddle index k n mod L kept
 * incrementally (no overflow). */
static void aicc_dft_line(size_t L, size_t nk, double sign, const double *fr, const double *tw,
                          double *out)
{
    if ((L & (L - 1)) == 0) {
        size_t j = 0;
        for (size_t i = 0; i < L; ++i) {
            out[2 * j] = fr[2 * i];
            out[2 * j + 1] = fr[2 * i + 1];
            size_t bit = L >> 1;
            while (j & bit) {
                j ^= bit;
                bit >>= 1;
            }
            j |= bit;
        }
        for (size_t len = 2; len <= L; len <<= 1) {
            const size_t half = len / 2, stride = L / len;
            for (size_t s0 = 0; s0 < L; s0 += len)
                for (size_t k = 0; k < half; ++k) {
                    const double c = tw[2 * k * stride], w = sign * tw[2 * k * stride + 1];
                    double *a = out + 2 * (s0 + k), *b = out + 2 * (s0 + k + half);
                    const double tr = b[0] * c - b[1] * w, ti = b[0] * w + b[1] * c;
                    b[0] = a[0] - tr;
                    b[1] = a[1] - ti;
                    a[0] += tr;
                    a[1] += ti;
                }
        }
        return;
    }
    for (size_t k = 0; k < nk; ++k) {
        double re = 0.0, im = 0.0;
        size_t j = 0;
        for (size_t n = 0; n < L; ++n) {
            const double c = tw[2 * j], s = sign * tw[2 * j + 1];
            re += fr[2 * n] * c - fr[2 * n + 1] * s;
            im += fr[2 * n] * s + fr[2 * n + 1] * c;
            j += k;
            if (j >= L)
                j -= L;
        }
        out[2 * k] = re;
        out[2 * k + 1] = im;
    }
}"""

DFT_C = """\
/* DFT along the middle axis of x viewed as [outer][n_in][inner][cin] (cin 1: real, 2:
 * complex) into y [outer][n_out][inner][cout]. mode 0: forward, the first n_out bins;
 * 1: inverse (scaled by 1 / L); 2: irfft (first L / 2 + 1 input bins, Hermitian extension,
 * real output, cout 1). ws: 6 L doubles of scratch. */
static void aicc_dft_SFX(size_t outer, size_t n_in, size_t inner, size_t cin, size_t L,
                         size_t n_out, int mode, const TYPE *x, TYPE *y, double *ws)
{
    double *tw = ws, *fr = ws + 2 * L, *out = ws + 4 * L;
    const size_t cout = mode == 2 ? 1 : 2;
    const double scale = mode == 0 ? 1.0 : 1.0 / (double)L;
    aicc_dft_twiddles(L, tw);
    for (size_t o = 0; o < outer; ++o)
        for (size_t i = 0; i < inner; ++i) {
            const TYPE *xl = x + (o * n_in * inner + i) * cin;
            TYPE *yl = y + (o * n_out * inner + i) * cout;
            const size_t st = inner * cin;
            for (size_t n = 0; n < 2 * L; ++n)
                fr[n] = 0.0;
            if (mode == 2) {
                const size_t nb = n_in < L / 2 + 1 ? n_in : L / 2 + 1;
                for (size_t k = 0; k < nb; ++k) {
                    const double re = (double)xl[k * st];
                    const int edge = k == 0 || 2 * k == L;   /* DC, Nyquist: real */
                    const double im = (cin == 2 && !edge) ? (double)xl[k * st + 1] : 0.0;
                    fr[2 * k] = re;
                    fr[2 * k + 1] = im;
                    if (!edge) {
                        fr[2 * (L - k)] = re;
                        fr[2 * (L - k) + 1] = -im;
                    }
                }
            } else {
                const size_t m = n_in < L ? n_in : L;
                for (size_t n = 0; n < m; ++n) {
                    fr[2 * n] = (double)xl[n * st];
                    fr[2 * n + 1] = cin == 2 ? (double)xl[n * st + 1] : 0.0;
                }
            }
            aicc_dft_line(L, n_out, mode == 0 ? -1.0 : 1.0, fr, tw, out);
            for (size_t k = 0; k < n_out; ++k) {
                yl[k * inner * cout] = (TYPE)(out[2 * k] * scale);
                if (cout == 2)
                    yl[k * inner * cout + 1] = (TYPE)(out[2 * k + 1] * scale);
            }
        }
}"""

STFT = """\
/* STFT of x [B][S][cin]: frame f starts at f * step (samples past the end are zero), is
 * multiplied by win (NULL: ones) and transformed (length L, the first nb bins) into
 * y [B][F][nb][2]. ws: 6 L doubles of scratch. step >= 1. */
static void aicc_stft_SFX(size_t B, size_t S, size_t cin, size_t F, size_t step, size_t L,
                          size_t nb, const TYPE *x, const TYPE *win, TYPE *y, double *ws)
{
    double *tw = ws, *fr = ws + 2 * L, *out = ws + 4 * L;
    if (step > S)
        step = S + 1;     /* same frames (all but the first past the end), no overflow */
    aicc_dft_twiddles(L, tw);
    for (size_t b = 0; b < B; ++b)
        for (size_t f = 0; f < F; ++f) {
            TYPE *yf = y + (b * F + f) * nb * 2;
            for (size_t n = 0; n < L; ++n) {
                const size_t idx = f * step + n;
                const double w = win ? (double)win[n] : 1.0;
                fr[2 * n] = fr[2 * n + 1] = 0.0;
                if (idx < S) {
                    const TYPE *xs = x + (b * S + idx) * cin;
                    fr[2 * n] = (double)xs[0] * w;
                    if (cin == 2)
                        fr[2 * n + 1] = (double)xs[1] * w;
                }
            }
            aicc_dft_line(L, nb, -1.0, fr, tw, out);
            for (size_t k = 0; k < 2 * nb; ++k)
                yf[k] = (TYPE)out[k];
        }
}"""


def _typed(code, dt):
    return code.replace("_SFX", "_" + ctype(dt)).replace("TYPE", ctype(dt))


def _scalar_i64(ctx, k) -> str:
    """int64 C expression of scalar input k (literal when constant)."""
    v = ctx.in_const(k)
    if v is not None:
        return c_int(int(np.asarray(v).reshape(-1)[0]), "int64")
    return f"(int64_t){ctx.inp[k]}[0]"


def _zero_out(ctx, k=0):
    ctx(f"memset({ctx.out[k]}, 0, {numel(ctx.out_shape(k)) * ctx.out_dtype(k).itemsize}u);")


def _has(node, k):
    return k < len(node.inputs) and bool(node.inputs[k])


# -- DFT ------------------------------------------------------------------------------------

@register("DFT", since=17)
class DFT(Op):
    attrs = {"axis": 1, "inverse": 0, "onesided": 0}

    def _candidates(self, node, g):
        """[(axis, Lmax, L if static else None)] of the axes consistent with the shapes."""
        xs, ys = tuple(g.shape(node.inputs[0])), tuple(g.shape(node.outputs[0]))
        r = len(xs)
        inv, one = int(self.attr(node, "inverse")), int(self.attr(node, "onesided"))
        irfft = bool(inv and one)
        if r < 2 or len(ys) != r or xs[-1] not in (1, 2) or ys[-1] != (1 if irfft else 2):
            raise ValueError(f"input {list(xs)} / output {list(ys)} are not [..., 1 or 2] "
                             "signals of the same rank")
        if g.opset >= 20:
            ax_const = None if not _has(node, 2) else g.const(node.inputs[2])
            axes = (range(r - 1) if _has(node, 2) and ax_const is None
                    else [int(np.asarray(ax_const).reshape(-1)[0]) if _has(node, 2) else -2])
        else:
            axes = [int(self.attr(node, "axis"))]
        lconst = g.const(node.inputs[1]) if _has(node, 1) else None
        out = []
        for a in axes:
            a = a + r if a < 0 else a
            if not 0 <= a <= r - 2:
                continue
            if any(xs[d] != ys[d] for d in range(r - 1) if d != a):
                continue
            nout = ys[a]
            lmax = 2 * nout - 1 if (one and not inv) else nout
            if not _has(node, 1):
                L = 2 * (xs[a] - 1) if irfft else xs[a]
            elif lconst is not None:
                L = int(np.asarray(lconst).reshape(-1)[0])
            else:
                L = None
            if L is not None and (L < 1 or (L // 2 + 1 if (one and not inv) else L) != nout):
                continue
            out.append((a, lmax, L))
        if not out:
            raise ValueError(f"no valid axis gives output {list(ys)} from input {list(xs)}")
        return out

    def check(self, node, g):
        dt = g.dtype(node.inputs[0])
        if dt.name not in FLOATS:
            return f"dtype {dt.name} not supported (float32, float64)"
        try:
            self._candidates(node, g)
        except ValueError as e:
            return str(e)
        return None

    def emit(self, node, ctx):
        dt = ctx.in_dtype(0)
        xs, ys = ctx.in_shape(0), ctx.out_shape(0)
        r = len(xs)
        inv, one = int(self.attr(node, "inverse")), int(self.attr(node, "onesided"))
        mode = 2 if inv and one else (1 if inv else 0)
        cands = self._candidates(node, ctx.g)
        if numel(ys) == 0:
            ctx(f"(void){ctx.out[0]};  /* empty output */")
            return
        if numel(xs) == 0:
            _zero_out(ctx)
            return
        ctx.helper("signal.0.core", CORE)
        ctx.helper(f"signal.1.dft_{ctype(dt)}", _typed(DFT_C, dt))
        fn = f"aicc_dft_{ctype(dt)}"
        lmax = max(c[1] for c in cands)
        ws = ctx.scratch(6 * lmax * 8, "double", "ws")
        ctx(f"/* DFT mode {mode} ({['forward', 'inverse', 'irfft'][mode]}, onesided={one}) */")
        if ctx.g.opset >= 20 and _has(node, 2) and ctx.in_const(2) is None:
            ctx(f"int64_t ax = (int64_t){ctx.inp[2]}[0];")
            ctx(f"if (ax < 0) ax += {r};")
        else:
            ctx(f"const int64_t ax = {cands[0][0]};")
        if _has(node, 1) and ctx.in_const(1) is None:
            ctx(f"const int64_t dl = (int64_t){ctx.inp[1]}[0];")
        ctx("int done = 0;")
        for a, lm, L in cands:
            nout = ys[a]
            outer, n_in, inner = numel(xs[:a]), xs[a], numel(xs[a + 1:-1])
            if L is None:
                Lx = "dl"
                want = "dl / 2 + 1" if (one and not inv) else "dl"
                cond = f"ax == {a} && dl >= 1 && dl <= {lm} && {want} == {nout}"
            else:
                Lx, cond = str(L), f"ax == {a}"
            with ctx.block(f"if (!done && {cond})"):
                ctx(f"{fn}({outer}u, {n_in}u, {inner}u, {xs[-1]}u, (size_t){Lx}, {nout}u, {mode}, "
                    f"{ctx.inp[0]}, {ctx.out[0]}, {ws});")
                ctx("done = 1;")
        with ctx.block("if (!done)"):
            ctx("/* axis or dft_length disagrees with the static shapes: zeros */")
            _zero_out(ctx)


# -- STFT -----------------------------------------------------------------------------------

@register("STFT", since=17)
class STFTOp(Op):
    attrs = {"onesided": 1}

    def _geom(self, node, g):
        xs, ys = tuple(g.shape(node.inputs[0])), tuple(g.shape(node.outputs[0]))
        if len(xs) == 2:            # a real signal without its last dim (TorchScript's form)
            xs = (*xs, 1)
        if len(xs) != 3 or xs[2] not in (1, 2) or len(ys) != 4 or ys[3] != 2 or ys[0] != xs[0]:
            raise ValueError(f"signal {list(xs)} -> output {list(ys)} is not [B, S, 1|2] or "
                             "[B, S] -> [B, frames, bins, 2]")
        one = int(self.attr(node, "onesided"))
        nb = ys[2]
        lmax = 2 * nb - 1 if one else nb
        W = int(g.shape(node.inputs[2])[0]) if _has(node, 2) else None
        return xs, ys, one, nb, lmax, W

    def check(self, node, g):
        dt = g.dtype(node.inputs[0])
        if dt.name not in FLOATS:
            return f"dtype {dt.name} not supported (float32, float64)"
        if _has(node, 2) and g.dtype(node.inputs[2]) != dt:
            return "window dtype differs from the signal"
        try:
            xs, ys, one, nb, lmax, W = self._geom(node, g)
        except ValueError as e:
            return str(e)
        L = W
        if _has(node, 3) and g.const(node.inputs[3]) is not None:
            L = int(np.asarray(g.const(node.inputs[3])).reshape(-1)[0])
        if "onesided" not in node.attrs and L and L > 2 and nb == L:
            return (f"output has {nb} two-sided bins but onesided defaults to 1 "
                    f"({L // 2 + 1} bins): onnx shape inference ignores that default; "
                    "set onesided explicitly")
        return None

    def emit(self, node, ctx):
        dt = ctx.in_dtype(0)
        xs, ys, one, nb, lmax, W = self._geom(node, ctx.g)
        if numel(ys) == 0:
            ctx(f"(void){ctx.out[0]};  /* empty output */")
            return
        ctx.helper("signal.0.core", CORE)
        ctx.helper(f"signal.2.stft_{ctype(dt)}", _typed(STFT, dt))
        ws = ctx.scratch(6 * lmax * 8, "double", "ws")
        ctx(f"const int64_t step = {_scalar_i64(ctx, 1)};")
        if _has(node, 3):
            ctx(f"const int64_t L = {_scalar_i64(ctx, 3)};")
        else:
            ctx(f"const int64_t L = {W if W is not None else xs[1]};")
        conds = ["step >= 1", "L >= 1", f"L <= {lmax}", f"{'L / 2 + 1' if one else 'L'} == {nb}"]
        if W is not None:
            conds.append(f"L == {W}")
        win = ctx.inp[2] if W is not None else "NULL"
        ctx(f"/* STFT: {ys[1]} frames, {nb} bins (onesided={one}) */")
        with ctx.block(f"if ({' && '.join(conds)})"):
            ctx(f"aicc_stft_{ctype(dt)}({xs[0]}u, {xs[1]}u, {xs[2]}u, {ys[1]}u, (size_t)step, "
                f"(size_t)L, {nb}u, {ctx.inp[0]}, {win}, {ctx.out[0]}, {ws});")
        with ctx.block("else"):
            ctx("/* frame_step / frame_length disagree with the static shapes: zeros */")
            _zero_out(ctx)
