"""The C of the pair kernels' patch gatherers (kernels/qgemm/pairs.py): COLS for 1-D / 2-D
patches in int32 index arithmetic, COLS1 for int8 1x1 convs as a transposition. The
description's pair operations appear as {lo(..)}, {hi(..)}, {sub2(..)} (pairs._spelled fills
them); T is the input type, _SFX the helper's suffix.
"""
from __future__ import annotations

COLS = """\
/* Input patches of output positions [p0, p0 + nt) of one group of a 1-D / 2-D conv, one row of
 * Kp int16 per position (kernels/qgemm/pairs.py): col[j * Kp + (ic * kH + ky) * kW + kx] =
 * x - xzp at that tap, 0 in the padding and for k >= K; x: the group's first input channel.
 * Position by position in int32 index arithmetic (no 64-bit division): a patch wholly inside
 * the input is copied row by row (3 taps per row unrolled, 3x3 a channel at a time); at the
 * border, rows of 3 taps know the columns inside the input per position, other widths find
 * the columns [a, b) inside it once per position; each row is tested once. */
#ifndef AICC_QP_NOMEMSET
#if defined(__GNUC__) && !defined(__clang__)
/* GCC otherwise turns the few zeros of a border row into a memset call */
#define AICC_QP_NOMEMSET __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define AICC_QP_NOMEMSET
#endif
#endif
static void aicc_qpcols_SFX(const aicc_conv_params *p, const T *restrict x, int32_t xzp,
                            size_t p0, size_t nt, size_t Kp, int16_t *restrict col)
    AICC_QP_NOMEMSET;

static void aicc_qpcols_SFX(const aicc_conv_params *p, const T *restrict x, int32_t xzp,
                            size_t p0, size_t nt, size_t Kp, int16_t *restrict col)
{
    const int32_t H = (int32_t)p->in[1], W = (int32_t)p->in[2], C = (int32_t)p->cin_g;
    const int32_t KH = (int32_t)p->k[1], KW = (int32_t)p->k[2], OW = (int32_t)p->out[2];
    const int32_t SH = (int32_t)p->stride[1], SW = (int32_t)p->stride[2];
    const int32_t DH = (int32_t)p->dil[1], DW = (int32_t)p->dil[2];
    const int32_t PT = (int32_t)p->pad[1], PL = (int32_t)p->pad[2];
    const int32_t K = C * KH * KW, HW = H * W;
    int32_t oy = (int32_t)p0 / OW, ox = (int32_t)p0 % OW;
    for (size_t j = 0; j < nt; ++j) {
        int16_t *restrict c = col + j * Kp;
        const int32_t iy0 = oy * SH - PT, ix0 = ox * SW - PL;
        if (iy0 >= 0 && iy0 + (KH - 1) * DH < H && ix0 >= 0 && ix0 + (KW - 1) * DW < W) {
            const T *restrict xc = x + iy0 * W + ix0;
            if (KW == 3 && DW == 1 && KH == 3) {
                const int32_t R = DH * W;       /* 3x3: a channel's 9 taps unrolled */
                for (int32_t ic = 0; ic < C; ++ic, xc += HW, c += 9) {
                    c[0] = (int16_t)((int32_t)xc[0] - xzp);
                    c[1] = (int16_t)((int32_t)xc[1] - xzp);
                    c[2] = (int16_t)((int32_t)xc[2] - xzp);
                    c[3] = (int16_t)((int32_t)xc[R] - xzp);
                    c[4] = (int16_t)((int32_t)xc[R + 1] - xzp);
                    c[5] = (int16_t)((int32_t)xc[R + 2] - xzp);
                    c[6] = (int16_t)((int32_t)xc[2 * R] - xzp);
                    c[7] = (int16_t)((int32_t)xc[2 * R + 1] - xzp);
                    c[8] = (int16_t)((int32_t)xc[2 * R + 2] - xzp);
                }
            } else if (KW == 3 && DW == 1)
                for (int32_t ic = 0; ic < C; ++ic, xc += HW) {
                    const T *restrict xr = xc;
                    for (int32_t ky = 0; ky < KH; ++ky, xr += DH * W, c += 3) {
                        c[0] = (int16_t)((int32_t)xr[0] - xzp);
                        c[1] = (int16_t)((int32_t)xr[1] - xzp);
                        c[2] = (int16_t)((int32_t)xr[2] - xzp);
                    }
                }
            else
                for (int32_t ic = 0; ic < C; ++ic, xc += HW) {
                    const T *restrict xr = xc;
                    for (int32_t ky = 0; ky < KH; ++ky, xr += DH * W)
                        for (int32_t kx = 0; kx < KW; ++kx)
                            *c++ = (int16_t)((int32_t)xr[kx * DW] - xzp);
                }
        } else if (KW == 3 && DW == 1) {
            /* border, 3 taps a row: the columns inside the input known per position, each
             * row tested once, each tap a conditional load (IT blocks, no branch) */
            const int v0 = ix0 >= 0 && ix0 < W, v1 = ix0 + 1 >= 0 && ix0 + 1 < W;
            const int v2 = ix0 + 2 >= 0 && ix0 + 2 < W;
            for (int32_t ic = 0; ic < C; ++ic)
                for (int32_t ky = 0, iy = iy0; ky < KH; ++ky, iy += DH, c += 3) {
                    const T *restrict xr = x + ic * HW + iy * W + ix0;
                    const int in = iy >= 0 && iy < H;
                    c[0] = in && v0 ? (int16_t)((int32_t)xr[0] - xzp) : (int16_t)0;
                    c[1] = in && v1 ? (int16_t)((int32_t)xr[1] - xzp) : (int16_t)0;
                    c[2] = in && v2 ? (int16_t)((int32_t)xr[2] - xzp) : (int16_t)0;
                }
        } else {
            int32_t a = 0, b = KW;      /* taps kx in [a, b) inside the row */
            while (a < KW && ix0 + a * DW < 0)
                ++a;
            while (b > a && ix0 + (b - 1) * DW >= W)
                --b;
            for (int32_t ic = 0; ic < C; ++ic) {
                const T *restrict xr = x + ic * HW + iy0 * W + ix0;
                for (int32_t ky = 0, iy = iy0; ky < KH; ++ky, iy += DH, xr += DH * W,
                         c += KW) {
                    int32_t kx = 0;
                    if (iy >= 0 && iy < H) {
                        for (; kx < a; ++kx)
                            c[kx] = 0;
                        for (; kx < b; ++kx)
                            c[kx] = (int16_t)((int32_t)xr[kx * DW] - xzp);
                    }
                    for (; kx < KW; ++kx)
                        c[kx] = 0;
                }
            }
        }
        for (int32_t k = K; k < (int32_t)Kp; ++k)
            *c++ = 0;
        if (++ox == OW) {
            ox = 0;
            ++oy;
        }
    }
}"""


COLS1 = """\
/* Patches of a 1x1, stride 1, unpadded conv with int8 input (kernels/qgemm/pairs.py):
 * col[j * Kp + ic] = x[ic * P + p0 + j] - xzp for j < nt, ic < K, 0 for ic in [K, Kp): a
 * transposition, 2 channels x 4 positions at a time: one 32-bit load per channel, lo / hi
 * (SXTB16) to int16 pairs, the zero point off both halves (sub2), repacked (PKHBT / PKHTB)
 * into one (ic, ic + 1) word per position; the rest one value at a time. */
static void aicc_qpcols1_SFX(size_t K, size_t P, const T *restrict x, int32_t xzp, size_t p0,
                             size_t nt, size_t Kp, int16_t *restrict col)
{
    const int32_t zz = (int32_t)(((uint32_t)xzp & 0xffffu) * 0x10001u);
    const size_t n4 = nt / 4u * 4u;
    size_t ic = 0;
    for (; ic + 2u <= K; ic += 2u) {
        const T *restrict xa = x + ic * P + p0, *restrict xb = xa + P;
        aicc_qw32 *restrict c = (aicc_qw32 *)(void *)(col + ic);
        size_t j = 0;
        for (; j < n4; j += 4u, c += Kp * 2u) {
            uint32_t wa, wb;
            memcpy(&wa, xa + j, 4);
            memcpy(&wb, xb + j, 4);
            const uint32_t a02 = {sub2(lo(wa), zz)}, a13 = {sub2(hi(wa), zz)};
            const uint32_t b02 = {sub2(lo(wb), zz)}, b13 = {sub2(hi(wb), zz)};
            c[0] = (a02 & 0xffffu) | b02 << 16;
            c[Kp / 2u] = (a13 & 0xffffu) | b13 << 16;
            c[Kp] = a02 >> 16 | (b02 & 0xffff0000u);
            c[Kp / 2u * 3u] = a13 >> 16 | (b13 & 0xffff0000u);
        }
        for (; j < nt; ++j) {
            col[j * Kp + ic] = (int16_t)((int32_t)xa[j] - xzp);
            col[j * Kp + ic + 1u] = (int16_t)((int32_t)xb[j] - xzp);
        }
    }
    for (; ic < Kp; ++ic)
        for (size_t j = 0; j < nt; ++j)
            col[j * Kp + ic] = ic < K ? (int16_t)((int32_t)x[ic * P + p0 + j] - xzp) : 0;
}"""
