"""MaxPool (with the optional Indices output), AveragePool, GlobalAveragePool, GlobalMaxPool:
1-D, 2-D and 3-D, float32 and float64.

Attributes: kernel_shape, strides, pads, dilations, auto_pad, ceil_mode, storage_order
(Indices), count_include_pad. Output sizes and auto_pad SAME_* padding follow onnxruntime:
pad_needed = (ceil(in / stride) - 1) * stride + kernel - in (kernel not dilated), split
head = pad_needed / 2 (SAME_UPPER) or (pad_needed + 1) / 2 (SAME_LOWER); with ceil_mode the
last window must start inside the input or its leading padding (onnx shape inference
sometimes keeps that window; check() then reports the shape mismatch). Nodes whose SAME
padding would be negative (kernel smaller than stride) are unsupported (onnxruntime rejects
them).

Semantics at the edges:
* MaxPool: padding never wins (it acts as -inf); a window with no input element (only
  possible with pads >= kernel, which onnxruntime rejects) gives -inf and Indices -1.
* AveragePool divisor: without count_include_pad the number of input elements in the
  window; with it, the taps inside the padded input [-pad_begin, in + pad_end) (windows that
  ceil_mode extends beyond the trailing padding are not charged for the overhang); a window
  with no input element gives 0. As onnxruntime.
* NaN: MaxPool and GlobalMaxPool propagate NaN (a NaN anywhere in the window gives NaN, and
  Indices points at the first NaN); onnxruntime's result for NaN windows depends on its
  kernel variant (its scalar kernels skip NaN, its SIMD kernels depend on position), so we
  take the numpy/PyTorch rule. Averages propagate NaN/Inf by IEEE arithmetic.
* Ties: Indices gives the first maximum in window scan order, as onnxruntime. The index is
  flattened over the whole input tensor (n, c, then the spatial dims row-major, or
  column-major with storage_order 1).
"""
from __future__ import annotations

from .base import Op, register, register_many
from .conv import AUTO_PADS, FLOATS, ints, static_shapes
from .conv_kernels import params_c, suffix, typed, use
from .loops import numel

ROWS = """\
/* y[i] = max(y[i], x[i * sx]) for i < n; NaN propagates (a NaN x wins, a NaN y stays).
 * Blocks of 8 with branch-free selects, which compilers vectorize (unit stride) at -O2. */
static void aicc_rowmax_SFX(size_t n, const TYPE *restrict x, size_t sx, TYPE *restrict y)
{
    const size_t n8 = n - n % 8;
    size_t i = 0;
    for (; i < n8; i += 8)
        for (size_t u = 0; u < 8; ++u) {
            const TYPE v = x[(i + u) * sx], a = y[i + u];
            const TYPE m = v > a ? v : a;
            y[i + u] = v != v ? v : m;
        }
    for (; i < n; ++i) {
        const TYPE v = x[i * sx], a = y[i];
        const TYPE m = v > a ? v : a;
        y[i] = v != v ? v : m;
    }
}

/* y[i] += x[i * sx] for i < n (blocks of 8 as above) */
static void aicc_rowadd_SFX(size_t n, const TYPE *restrict x, size_t sx, TYPE *restrict y)
{
    const size_t n8 = n - n % 8;
    size_t i = 0;
    for (; i < n8; i += 8)
        for (size_t u = 0; u < 8; ++u)
            y[i + u] += x[(i + u) * sx];
    for (; i < n; ++i)
        y[i] += x[i * sx];
}"""

TAPS = """\
/* The number of taps t < k of a window starting at s (step d) with 0 <= s + t * d < n. */
static size_t aicc_taps(int64_t s, size_t k, size_t d, int64_t n)
{
    const int64_t dd = (int64_t)d;
    const int64_t lo = s >= 0 ? 0 : (-s + dd - 1) / dd;
    int64_t hi = n - 1 - s < 0 ? -1 : (n - 1 - s) / dd;     /* last tap inside */
    if (hi > (int64_t)k - 1)
        hi = (int64_t)k - 1;
    return hi >= lo ? (size_t)(hi - lo + 1) : 0;
}

/* AveragePool divisor along spatial dim d for output position o: the taps inside the input,
 * or with count_include_pad (p->flag) inside the padded input [-pad, in + pad_end). */
static size_t aicc_window_count(const aicc_conv_params *p, int d, size_t o)
{
    const int64_t start = (int64_t)(o * p->stride[d]);      /* in padded coordinates */
    const int64_t padded = (int64_t)(p->pad[d] + p->in[d] + p->pad_end[d]);
    if (p->flag)
        return aicc_taps(start, p->k[d], p->dil[d], padded);
    return aicc_taps(start - (int64_t)p->pad[d], p->k[d], p->dil[d], (int64_t)p->in[d]);
}"""

DIVIDE = """\
/* Divides an AveragePool output row of sums by the window element counts (czy: the count
 * of the row's window along D and H). Columns whose window lies inside the input share one
 * divisor and run in blocks of 8 (vectorized); the border columns are counted one by one. */
static void aicc_divide_row_SFX(const aicc_conv_params *p, size_t czy, TYPE *restrict yr)
{
    const size_t OW = p->out[2], SW = p->stride[2];
    size_t flo, fhi, llo, lhi, lo, hi, o = 0;
    if (czy == 0)
        return;     /* no input element in the window: the sum stays 0 */
    aicc_valid_range(aicc_tap_off(p, 2, 0), SW, p->in[2], OW, &flo, &fhi);
    aicc_valid_range(aicc_tap_off(p, 2, p->k[2] - 1), SW, p->in[2], OW, &llo, &lhi);
    lo = flo > llo ? flo : llo;
    hi = fhi < lhi ? fhi : lhi;
    hi = hi < lo ? lo : hi;
    for (; o < (hi > lo ? lo : OW); ++o) {       /* leading border (or every column) */
        const size_t cnt = czy * aicc_window_count(p, 2, o);
        yr[o] = cnt > 0 ? yr[o] / (TYPE)cnt : (TYPE)0;
    }
    if (hi > lo) {                                /* interior: one divisor */
        const TYPE d = (TYPE)(czy * p->k[2]);
        const size_t n8 = lo + (hi - lo) / 8 * 8;
        for (; o < n8; o += 8)
            for (size_t u = 0; u < 8; ++u)
                yr[o + u] /= d;
        for (; o < hi; ++o)
            yr[o] /= d;
    }
    for (; o < OW; ++o) {                         /* trailing border */
        const size_t cnt = czy * aicc_window_count(p, 2, o);
        yr[o] = cnt > 0 ? yr[o] / (TYPE)cnt : (TYPE)0;
    }
}"""

POOL = """\
/* MaxPool (avg == 0) or AveragePool (avg == 1), one plane at a time: the plane starts at
 * -inf (max) or 0 (sum); per kernel tap, the ranges of output rows/columns where the tap
 * lands inside the input are computed once and every such row takes the max with (adds) the
 * input row; padding is skipped, never tested per element. Averages then divide by the
 * window's element count (aicc_window_count). */
static void aicc_pool_SFX(const aicc_conv_params *p, int avg, const TYPE *restrict x,
                          TYPE *restrict y)
{
    const size_t X = p->in[0] * p->in[1] * p->in[2], P = p->out[0] * p->out[1] * p->out[2];
    const size_t KK = p->k[0] * p->k[1] * p->k[2], OW = p->out[2], SW = p->stride[2];
    for (size_t c = 0; c < p->batch * p->cin_g; ++c) {
        const TYPE *xc = x + c * X;
        TYPE *yc = y + c * P;
        for (size_t i = 0; i < P; ++i)
            yc[i] = avg ? (TYPE)0 : -(TYPE)INFINITY;
        for (size_t t = 0; t < KK; ++t) {
            const size_t kz = t / (p->k[1] * p->k[2]), ky = t / p->k[2] % p->k[1];
            const size_t kx = t % p->k[2];
            size_t zlo, zhi, ylo, yhi, lo, hi;
            aicc_valid_range(aicc_tap_off(p, 0, kz), p->stride[0], p->in[0], p->out[0],
                             &zlo, &zhi);
            aicc_valid_range(aicc_tap_off(p, 1, ky), p->stride[1], p->in[1], p->out[1],
                             &ylo, &yhi);
            aicc_valid_range(aicc_tap_off(p, 2, kx), SW, p->in[2], OW, &lo, &hi);
            if (lo == hi)
                continue;
            for (size_t z = zlo; z < zhi; ++z)
                for (size_t r = ylo; r < yhi; ++r) {
                    const size_t iz = (size_t)aicc_pos(p, 0, z, kz);
                    const size_t iy = (size_t)aicc_pos(p, 1, r, ky);
                    const TYPE *xs = xc + (iz * p->in[1] + iy) * p->in[2] + aicc_pos(p, 2, lo, kx);
                    TYPE *yr = yc + (z * p->out[1] + r) * OW + lo;
                    if (avg)
                        aicc_rowadd_SFX(hi - lo, xs, SW, yr);
                    else
                        aicc_rowmax_SFX(hi - lo, xs, SW, yr);
                }
        }
        if (avg)
            for (size_t z = 0; z < p->out[0]; ++z)
                for (size_t r = 0; r < p->out[1]; ++r)
                    aicc_divide_row_SFX(p, aicc_window_count(p, 0, z) * aicc_window_count(p, 1, r),
                                        yc + (z * p->out[1] + r) * OW);
    }
}"""

POOL_IDX = """\
/* MaxPool with Indices: per output element, scan its window (taps outside the input are
 * skipped); the first maximum in scan order wins (a NaN wins and stays). The index is
 * flattened over the input tensor, the spatial part row-major (p->flag == 0) or
 * column-major (p->flag == 1). A window without input elements gives -inf and -1. */
static void aicc_maxpool_idx_SFX(const aicc_conv_params *p, const TYPE *restrict x,
                                 TYPE *restrict y, int64_t *restrict idx)
{
    const size_t X = p->in[0] * p->in[1] * p->in[2], KK = p->k[0] * p->k[1] * p->k[2];
    size_t q = 0;
    for (size_t c = 0; c < p->batch * p->cin_g; ++c)
        for (size_t z = 0; z < p->out[0]; ++z)
            for (size_t r = 0; r < p->out[1]; ++r)
                for (size_t o = 0; o < p->out[2]; ++o, ++q) {
                    TYPE best = -(TYPE)INFINITY;
                    int64_t at = -1;
                    for (size_t t = 0; t < KK; ++t) {
                        const int64_t iz = aicc_pos(p, 0, z, t / (p->k[1] * p->k[2]));
                        const int64_t iy = aicc_pos(p, 1, r, t / p->k[2] % p->k[1]);
                        const int64_t ix = aicc_pos(p, 2, o, t % p->k[2]);
                        size_t i, s;
                        TYPE v;
                        if (!aicc_inside(iz, p->in[0]) || !aicc_inside(iy, p->in[1]) ||
                            !aicc_inside(ix, p->in[2]))
                            continue;
                        i = ((size_t)iz * p->in[1] + (size_t)iy) * p->in[2] + (size_t)ix;
                        s = p->flag ? ((size_t)ix * p->in[1] + (size_t)iy) * p->in[0] + (size_t)iz
                                    : i;
                        v = x[c * X + i];
                        if (at < 0 || v > best || (v != v && best == best)) {
                            best = v;
                            at = (int64_t)(c * X + s);
                        }
                    }
                    y[q] = best;
                    idx[q] = at;
                }
}"""

GLOBAL = """\
/* Global pooling over planes of n elements: the mean (avg == 1) or the max (NaN
 * propagates). 8 partial results so the loops vectorize at -O2 without reassociation. */
static void aicc_global_pool_SFX(size_t planes, size_t n, int avg, const TYPE *restrict x,
                                 TYPE *restrict y)
{
    for (size_t c = 0; c < planes; ++c) {
        const TYPE *xc = x + c * n;
        const TYPE init = avg ? (TYPE)0 : -(TYPE)INFINITY;
        TYPE acc[8], s = init;
        const size_t n8 = n - n % 8;
        size_t i = 0;
        for (size_t u = 0; u < 8; ++u)
            acc[u] = init;
        if (avg) {
            for (; i < n8; i += 8)
                for (size_t u = 0; u < 8; ++u)
                    acc[u] += xc[i + u];
            for (; i < n; ++i)
                s += xc[i];
            for (size_t u = 0; u < 8; ++u)
                s += acc[u];
            y[c] = s / (TYPE)n;
        } else {
            for (; i < n8; i += 8)
                for (size_t u = 0; u < 8; ++u) {
                    const TYPE v = xc[i + u];
                    acc[u] = (v > acc[u] || v != v) ? v : acc[u];
                }
            for (; i < n; ++i)
                s = (xc[i] > s || xc[i] != xc[i]) ? xc[i] : s;
            for (size_t u = 0; u < 8; ++u)
                s = (acc[u] > s || acc[u] != acc[u]) ? acc[u] : s;
            y[c] = s;
        }
    }
}"""


class PoolGeometry:
    def __init__(self, op, node, x_shape):
        r = len(x_shape) - 2
        if r < 1 or r > 3:
            raise ValueError(f"rank {len(x_shape)} input (1-D, 2-D and 3-D pooling only)")
        self.batch, self.c = int(x_shape[0]), int(x_shape[1])
        self.inp = [int(d) for d in x_shape[2:]]
        k = op.attr(node, "kernel_shape")
        if k is None or len(k) != r:
            raise ValueError(f"kernel_shape {k} (need {r} values)")
        self.k = [int(v) for v in k]
        self.stride = ints(op.attr(node, "strides"), r, 1)
        self.dil = ints(op.attr(node, "dilations"), r, 1)
        if min(self.k + self.stride + self.dil) < 1:
            raise ValueError("kernel_shape, strides and dilations must be positive")
        ceil = int(op.attr(node, "ceil_mode") or 0)
        mode = op.attr(node, "auto_pad") or "NOTSET"
        if mode not in AUTO_PADS:
            raise ValueError(f"auto_pad {mode!r}")
        if mode in ("SAME_UPPER", "SAME_LOWER"):
            self.pad, self.pad_end = [], []
            for i, k, s in zip(self.inp, self.k, self.stride):
                need = (-(-i // s) - 1) * s + k - i
                if need < 0:
                    raise ValueError("auto_pad SAME with a kernel smaller than the stride "
                                     "(negative padding)")
                head = need // 2 if mode == "SAME_UPPER" else (need + 1) // 2
                self.pad.append(head)
                self.pad_end.append(need - head)
        elif mode == "VALID":
            self.pad, self.pad_end = [0] * r, [0] * r
        else:
            pads = ints(op.attr(node, "pads"), 2 * r, 0)
            if len(pads) != 2 * r or min(pads) < 0:
                raise ValueError(f"pads {pads} (need {2 * r} non-negative values)")
            self.pad, self.pad_end = pads[:r], pads[r:]
        self.out = []
        for i, b, e, k, d, s in zip(self.inp, self.pad, self.pad_end, self.k, self.dil,
                                    self.stride):
            num = i + b + e - d * (k - 1) - 1
            o = num // s + 1
            if ceil:
                o = -(-num // s) + 1
                if (o - 1) * s >= i + b:
                    o -= 1
            self.out.append(o)
        if min(self.out) < 1:
            raise ValueError(f"empty output (spatial size {self.out})")

    def params(self, flag=0) -> str:
        return params_c(batch=self.batch, group=1, cin_g=self.c, cout_g=self.c, inp=self.inp,
                        out=self.out, k=self.k, stride=self.stride, dil=self.dil, pad=self.pad,
                        pad_end=self.pad_end, flag=flag)


def _check_float(g, node):
    dt = g.dtype(node.inputs[0])
    return None if dt.name in FLOATS else f"dtype {dt.name} not supported (float32, float64)"


class _Pool(Op):
    def check(self, node, g):
        reason = _check_float(g, node)
        if reason:
            return reason
        outs = [o for o in node.outputs if o]
        shapes = static_shapes(g, [node.inputs[0]] + outs)
        if shapes is None:
            return None
        try:
            geo = PoolGeometry(self, node, shapes[0])
        except ValueError as e:
            return str(e)
        want = (geo.batch, geo.c, *geo.out)
        for s in shapes[1:]:
            if s != want:
                hint = ""
                if int(self.attr(node, "ceil_mode") or 0):
                    hint = (" (ceil_mode: onnxruntime drops a last window that starts in the "
                            "trailing padding, onnx shape inference keeps it)")
                return f"output shape {list(s)} disagrees with the attributes ({list(want)}){hint}"
        return None

    def _emit(self, node, ctx, avg, flag):
        geo = PoolGeometry(self, node, ctx.in_shape(0))
        dt = ctx.in_dtype(0)
        if numel(ctx.out_shape(0)) == 0:
            ctx("/* empty output: nothing to compute */")
            return
        sfx = suffix(dt)
        kind = "AveragePool" if avg else "MaxPool"
        what = (f"{kind} {'x'.join(map(str, geo.k))} window, stride "
                f"{'x'.join(map(str, geo.stride))}, pads {geo.pad + geo.pad_end}")
        if not avg and len(node.outputs) > 1 and node.outputs[1]:
            use(ctx, dt)
            ctx.helper(f"pool.4.maxpool_idx{sfx}", typed(POOL_IDX, dt))
            ctx(f"/* {what}, with Indices (storage_order {flag}) */")
            ctx(geo.params(flag))
            ctx(f"aicc_maxpool_idx{sfx}(&prm, {ctx.inp[0]}, {ctx.out[0]}, {ctx.out[1]});")
            return
        use(ctx, dt)
        ctx.helper("pool.0.taps", TAPS)
        ctx.helper(f"pool.1.rows{sfx}", typed(ROWS, dt))
        ctx.helper(f"pool.2.divide{sfx}", typed(DIVIDE, dt))
        ctx.helper(f"pool.3.pool{sfx}", typed(POOL, dt))
        ctx(f"/* {what} */")
        ctx(geo.params(flag))
        ctx(f"aicc_pool{sfx}(&prm, {1 if avg else 0}, {ctx.inp[0]}, {ctx.out[0]});")


@register("MaxPool", since=1)
class MaxPool(_Pool):
    attrs = {"auto_pad": "NOTSET", "ceil_mode": 0, "dilations": None, "kernel_shape": None,
             "pads": None, "storage_order": 0, "strides": None}

    def check(self, node, g):
        if len(node.outputs) > 1 and node.outputs[1]:
            if int(self.attr(node, "storage_order") or 0) not in (0, 1):
                return "storage_order must be 0 or 1"
        return super().check(node, g)

    def emit(self, node, ctx):
        self._emit(node, ctx, False, int(self.attr(node, "storage_order") or 0))


@register("AveragePool", since=1)
class AveragePool(_Pool):
    attrs = {"auto_pad": "NOTSET", "ceil_mode": 0, "count_include_pad": 0, "dilations": None,
             "kernel_shape": None, "pads": None, "strides": None}

    def emit(self, node, ctx):
        self._emit(node, ctx, True, int(self.attr(node, "count_include_pad") or 0))


@register_many(["GlobalAveragePool", "GlobalMaxPool"], since=1)
class GlobalPool(Op):
    def check(self, node, g):
        reason = _check_float(g, node)
        if reason:
            return reason
        if len(g.shape(node.inputs[0])) < 3:
            return "input rank below 3"
        return None

    def emit(self, node, ctx):
        x = ctx.in_shape(0)
        dt = ctx.in_dtype(0)
        planes, n = x[0] * x[1], numel(x[2:])
        if planes == 0:
            ctx("/* empty output: nothing to compute */")
            return
        if n == 0:      # mean of nothing is NaN, max of nothing -inf
            v = "NAN" if self.op_type == "GlobalAveragePool" else "-INFINITY"
            with ctx.block(f"for (size_t i = 0; i < {planes}u; ++i)"):
                ctx(f"{ctx.out[0]}[i] = {v};")
            return
        sfx = suffix(dt)
        ctx.helper(f"pool.5.global{sfx}", typed(GLOBAL, dt))
        avg = 1 if self.op_type == "GlobalAveragePool" else 0
        ctx(f"/* {self.op_type} over {planes} planes of {n} elements */")
        ctx(f"aicc_global_pool{sfx}({planes}u, {n}u, {avg}, {ctx.inp[0]}, {ctx.out[0]});")
