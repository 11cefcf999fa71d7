"""The input copies of the integer convs (kernels/qgemm/conv.py) on the x86 SIMD targets: the
implicit GEMM's padded, channel-interleaved planes (pairs of int16 ``x - xzp``, or quads of
unsigned bytes ``x + FLIP`` with the zero point in the padding), their phase-split form for
strided convs, and the 3-D path's im2col panels. C templates over the activation type
(qgemm_simd.typed: _SFX, TA, FLIP)."""
from __future__ import annotations

from ...emit_c.cwriter import ctype
from .simd import flip, typed

PACK_B = """\
/* im2col of positions [p0, p0 + jn) of one group (x: its first input channel, zero point
 * subtracted, zeros in the padding and past jn up to jbp) packed into jbp / NR panels of
 * k2 int16 pairs x NR columns. t0, t1: two rows of jbp int16. */
static void aicc_qim2col_SFX(const aicc_conv_params *p, const TA *restrict x, int32_t zp,
                             size_t K, size_t p0, size_t jn, size_t jbp, size_t nr,
                             int16_t *restrict t0, int16_t *restrict t1, int16_t *restrict bp)
{
    const size_t taps = p->k[0] * p->k[1] * p->k[2], plane = p->in[0] * p->in[1] * p->in[2];
    const size_t o1n = p->out[1], o2n = p->out[2], k2 = (K + 1u) / 2u;
    for (size_t kp = 0; kp < k2; ++kp) {
        for (size_t h = 0; h < 2u; ++h) {
            int16_t *restrict t = h ? t1 : t0;
            const size_t k = 2u * kp + h;
            if (k >= K) {
                memset(t, 0, jbp * sizeof *t);
                continue;
            }
            const size_t c = k / taps, tap = k % taps;
            const size_t k0 = tap / (p->k[1] * p->k[2]), k1 = tap / p->k[2] % p->k[1],
                         k2_ = tap % p->k[2];
            const int64_t f0 = aicc_tap_off(p, 0, k0), f1 = aicc_tap_off(p, 1, k1),
                          f2 = aicc_tap_off(p, 2, k2_);
            size_t l2, h2;
            aicc_valid_range(f2, p->stride[2], p->in[2], o2n, &l2, &h2);
            const TA *xc = x + c * plane;
            for (size_t q = p0; q < p0 + jn;) {
                const size_t row = q / o2n, o2s = q % o2n;
                const size_t o2e = o2n - o2s < p0 + jn - q ? o2n : o2s + (p0 + jn - q);
                const size_t base = q - p0 - o2s;          /* t[base + o2] is position o2 */
                const int64_t i0 = (int64_t)(row / o1n * p->stride[0]) + f0,
                              i1 = (int64_t)(row % o1n * p->stride[1]) + f1;
                size_t lo = l2 > o2s ? l2 : o2s, hi = h2 < o2e ? h2 : o2e;
                if (i0 < 0 || i0 >= (int64_t)p->in[0] || i1 < 0 || i1 >= (int64_t)p->in[1]
                    || hi < lo)
                    lo = hi = o2e;
                for (size_t o2 = o2s; o2 < lo; ++o2)
                    t[base + o2] = 0;
                if (lo < hi) {
                    const TA *restrict xr = xc + ((size_t)i0 * p->in[1] + (size_t)i1) * p->in[2];
                    if (p->stride[2] == 1u) {
                        const TA *restrict xs = xr + (size_t)((int64_t)lo + f2);
                        int16_t *restrict ts = t + base + lo;
                        for (size_t j = 0; j < hi - lo; ++j)
                            ts[j] = (int16_t)((int32_t)xs[j] - zp);
                    } else {
                        for (size_t o2 = lo; o2 < hi; ++o2)
                            t[base + o2] = (int16_t)((int32_t)
                                xr[(size_t)((int64_t)(o2 * p->stride[2]) + f2)] - zp);
                    }
                }
                for (size_t o2 = hi; o2 < o2e; ++o2)
                    t[base + o2] = 0;
                q += o2e - o2s;
            }
            for (size_t j = jn; j < jbp; ++j)
                t[j] = 0;
        }
        for (size_t pn = 0; pn < jbp / nr; ++pn) {
            int16_t *restrict d = bp + (pn * k2 + kp) * nr * 2u;
            const int16_t *restrict s0 = t0 + pn * nr, *restrict s1 = t1 + pn * nr;
            for (size_t j = 0; j < nr; ++j) {
                d[2u * j] = s0[j];
                d[2u * j + 1u] = s1[j];
            }
        }
    }
}"""


PAD = """\
/* x - zp of cin channels (h x w planes) zero-padded to hp x wp (pt rows above, pl columns on
 * the left) with the channels interleaved in pairs: d[((c2 * hp + i) * wp + j) * 2 + e] =
 * x[2 c2 + e][i - pt][j - pl] - zp (zero in the padding and for a missing odd channel); then
 * slack zeros (the implicit GEMM's last panel reads up to NR positions past the planes). */
static void aicc_qpad_SFX(const TA *restrict x, size_t cin, size_t h, size_t w, int32_t zp,
                          size_t hp, size_t wp, size_t pt, size_t pl, size_t slack,
                          int16_t *restrict d)
{
    const size_t c2n = (cin + 1u) / 2u, plane = h * w;
    for (size_t c2 = 0; c2 < c2n; ++c2) {
        const TA *x0 = x + 2u * c2 * plane;
        const int pair = 2u * c2 + 1u < cin;
        int16_t *dp = d + c2 * hp * wp * 2u;
        for (size_t i = 0; i < hp; ++i) {
            int16_t *restrict dr = dp + i * wp * 2u;
            if (i < pt || i >= pt + h) {
                memset(dr, 0, wp * 2u * sizeof *dr);
                continue;
            }
            memset(dr, 0, pl * 2u * sizeof *dr);
            memset(dr + (pl + w) * 2u, 0, (wp - pl - w) * 2u * sizeof *dr);
            int16_t *restrict o = dr + pl * 2u;
            const TA *restrict r0 = x0 + (i - pt) * w;
            if (pair) {
                const TA *restrict r1 = r0 + plane;
                for (size_t j = 0; j < w; ++j) {
                    o[2u * j] = (int16_t)((int32_t)r0[j] - zp);
                    o[2u * j + 1u] = (int16_t)((int32_t)r1[j] - zp);
                }
            } else {
                for (size_t j = 0; j < w; ++j) {
                    o[2u * j] = (int16_t)((int32_t)r0[j] - zp);
                    o[2u * j + 1u] = 0;
                }
            }
        }
    }
    memset(d + c2n * hp * wp * 2u, 0, slack * sizeof *d);
}"""



PADS = """\
/* Strided convs, pair form: the padded input of cin channels (x - zp as int16) split into
 * sh x sw phases, each phase a set of hq x wq planes with the channels interleaved in pairs:
 * for phase (py, px) = ph, d[(((ph * c2n + c / 2) * hq + i) * wq + j) * 2 + c % 2] =
 * xpad[c][i sh + py][j sw + px] - zp; zero in the padding, past the input and for a missing
 * odd channel. */
static void aicc_qpads_SFX(const TA *restrict x, size_t cin, size_t h, size_t w, int32_t zp,
                           size_t sh, size_t sw, size_t hq, size_t wq, size_t pt, size_t pl,
                           size_t slack, int16_t *restrict d)
{
    const size_t c2n = (cin + 1u) / 2u, plane = h * w;
    memset(d, 0, (sh * sw * c2n * hq * wq * 2u + slack) * sizeof *d);
    for (size_t py = 0; py < sh; ++py)
        for (size_t px = 0; px < sw; ++px)
            for (size_t c = 0; c < cin; ++c) {
                int16_t *restrict dp = d + ((py * sw + px) * c2n + c / 2u) * hq * wq * 2u + c % 2u;
                const size_t j0 = px >= pl ? 0u : (pl - px + sw - 1u) / sw;  /* j sw + px >= pl */
                for (size_t i = 0; i < hq; ++i) {
                    const size_t r = i * sh + py;
                    if (r < pt || r - pt >= h)
                        continue;
                    const TA *restrict xr = x + c * plane + (r - pt) * w;
                    for (size_t j = j0; j < wq && j * sw + px - pl < w; ++j)
                        dp[(i * wq + j) * 2u] = (int16_t)((int32_t)xr[j * sw + px - pl] - zp);
                }
            }
}"""

QUAD_ROW = """\
/* o[4 j + e] = s_e[j st] + FLIP for j < n: one row of four channels as unsigned-byte quads
 * (called with constant strides 1 and 2, which the compiler specializes and vectorizes). */
static void aicc_qquadrow_SFX(size_t n, size_t st, const TA *restrict s0, const TA *restrict s1,
                              const TA *restrict s2, const TA *restrict s3,
                              uint8_t *restrict o)
{
    for (size_t j = 0; j < n; ++j) {
        o[4u * j] = (uint8_t)((int32_t)s0[j * st] + FLIP);
        o[4u * j + 1u] = (uint8_t)((int32_t)s1[j * st] + FLIP);
        o[4u * j + 2u] = (uint8_t)((int32_t)s2[j * st] + FLIP);
        o[4u * j + 3u] = (uint8_t)((int32_t)s3[j * st] + FLIP);
    }
}"""

PADQ = """\
/* Quad form: the padded input of cin channels as unsigned bytes (x + FLIP), split into sh x sw
 * phases (one when not strided), each c4n planes of hq x wq with the channels interleaved in
 * fours: for phase ph = py * sw + px,
 * d[(((ph * c4n + c4) * hq + i) * wq + j) * 4 + e] = x[4 c4 + e][i sh + py - pt][j sw + px - pl];
 * zu (the zero point + FLIP) in the padding, for missing channels (zero weights) and in the
 * slack. Written one row of four channels at a time (a per-channel, per-byte loop took half
 * of a strided conv), zu only where no input lands (a memset of everything first rewrote a
 * 1x1 conv's whole input). zrow: w elements of scratch. */
static void aicc_qpadq_SFX(const TA *restrict x, size_t cin, size_t h, size_t w, uint8_t zu,
                           size_t sh, size_t sw, size_t hq, size_t wq, size_t pt, size_t pl,
                           size_t slack, uint8_t *restrict d, TA *restrict zrow)
{
    const size_t c4n = (cin + 3u) / 4u, plane = h * w;
    for (size_t j = 0; j < w; ++j)
        zrow[j] = (TA)((int32_t)zu - FLIP);
    for (size_t c4 = 0; c4 < c4n; ++c4) {
        const TA *r[4];
        size_t rs[4];
        for (size_t e = 0; e < 4u; ++e) {      /* channels past cin read zrow, step 0 */
            const int real = 4u * c4 + e < cin;
            r[e] = real ? x + (4u * c4 + e) * plane : zrow;
            rs[e] = real ? w : 0u;
        }
        for (size_t py = 0; py < sh; ++py)
            for (size_t px = 0; px < sw; ++px) {
                /* columns j0 <= j < j1 read input column j sw + px - pl, in [0, w) */
                const size_t j0 = px >= pl ? 0u : (pl - px + sw - 1u) / sw;
                size_t j1 = w + pl > px ? (w - 1u + pl - px) / sw + 1u : 0u;
                j1 = j1 < wq ? j1 : wq;
                for (size_t i = 0; i < hq; ++i) {
                    uint8_t *restrict o = d + (((py * sw + px) * c4n + c4) * hq + i) * wq * 4u;
                    const size_t ri = i * sh + py - pt;        /* the input row (unsigned) */
                    if (i * sh + py < pt || ri >= h || j1 <= j0) {
                        memset(o, zu, wq * 4u);
                        continue;
                    }
                    const size_t b = j0 * sw + px - pl, n = j1 - j0;
                    const TA *s0 = r[0] + ri * rs[0] + b, *s1 = r[1] + ri * rs[1] + b;
                    const TA *s2 = r[2] + ri * rs[2] + b, *s3 = r[3] + ri * rs[3] + b;
                    memset(o, zu, j0 * 4u);
                    if (sw == 1u)
                        aicc_qquadrow_SFX(n, 1u, s0, s1, s2, s3, o + j0 * 4u);
                    else if (sw == 2u)
                        aicc_qquadrow_SFX(n, 2u, s0, s1, s2, s3, o + j0 * 4u);
                    else
                        aicc_qquadrow_SFX(n, sw, s0, s1, s2, s3, o + j0 * 4u);
                    memset(o + j1 * 4u, zu, (wq - j1) * 4u);
                }
            }
    }
    memset(d + sh * sw * c4n * hq * wq * 4u, zu, slack);
}"""


def pad_call(ctx, ta, g, hw, s, q, p, tl, slack, xin, xp, cin) -> str:
    """Register the copy helper for group size g (2 pairs, 4 quads) and return the C call that
    copies input ``xin`` (cin channels of hw = (H, W)) into ``xp``: phase planes of q = (hq,
    wq) for stride s = (sh, sw) (quads: also unstrided, one phase of the padded planes); pairs
    without stride: planes of p = (hp, wp); tl = (pt, pl) the leading pads. The quad form
    expects ``zu`` (zero point + FLIP) in scope, the pair form ``xzp``."""
    (H, W), (sh, sw), (hq, wq), (hp, wp), (pt, pl) = hw, s, q, p, tl
    if g == 4:
        for key, text in (("4.0.quadrow", QUAD_ROW), ("4.1.padq", PADQ)):
            code, sfx = typed(text, ta, flip(ctx, ta))
            ctx.helper(f"qlinear.{key}{sfx}", code)
        zrow = ctx.scratch(W * ta.itemsize, ctype(ta), "qz")
        return (f"aicc_qpadq{sfx}({xin}, {cin}u, {H}u, {W}u, (uint8_t)zu, {sh}u, {sw}u, "
                f"{hq}u, {wq}u, {pt}u, {pl}u, {slack}u, {xp}, {zrow});")
    if sh * sw > 1:
        code, sfx = typed(PADS, ta)
        ctx.helper(f"qlinear.4.1.pads{sfx}", code)
        return (f"aicc_qpads{sfx}({xin}, {cin}u, {H}u, {W}u, xzp, {sh}u, {sw}u, {hq}u, "
                f"{wq}u, {pt}u, {pl}u, {slack}u, {xp});")
    code, sfx = typed(PAD, ta)
    ctx.helper(f"qlinear.4.1.pad{sfx}", code)
    return (f"aicc_qpad{sfx}({xin}, {cin}u, {H}u, {W}u, xzp, {hp}u, {wp}u, {pt}u, "
            f"{pl}u, {slack}u, {xp});")
