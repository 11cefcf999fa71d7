"""C text of the pooling kernels (MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool,
LpPool); the op semantics are documented in pool.py and lp_pool.py.

The texts use TYPE/_SFX (see conv_kernels.typed) and are written for floats; ``ptyped``
also instantiates them for int8/uint8 (MaxPool): -(TYPE)INFINITY becomes the type's minimum
and the NaN tests x != x / x == x become 0 / 1.
"""
from __future__ import annotations

import re

import numpy as np

from ..conv.base_c import typed

_LOWEST = {"int8": "INT8_MIN", "uint8": "0"}


def ptyped(code: str, dtype) -> str:
    """typed() for floats; for int8/uint8 with the float-only parts replaced (see above)."""
    dt = np.dtype(dtype)
    if dt.kind != "f":
        code = code.replace("-(TYPE)INFINITY", _LOWEST[dt.name])
        code = re.sub(r"\b(\w+(?:\[[^\]]*\])?) != \1(?![\w\[])", "0", code)
        code = re.sub(r"\b(\w+) == \1\b", "1", code)
    return typed(code, dtype)


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
