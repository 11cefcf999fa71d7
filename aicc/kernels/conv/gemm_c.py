"""The portable conv GEMM (generic target, float64, and float32 convs no SIMD variant takes):
im2col of a tile of output positions x a block of patch entries into step scratch (panels of
8 positions), then conv_kernels' 4x8 register tile over the weights packed at compile time as
[group][block of 4 output channels][k][4].

Tiles (``gemm_tiles``): the col tile holds at most COL_BUDGET elements. When all positions
fit with the whole patch (K), one tile of positions covers the conv; otherwise tiles of
positions with the whole K, as long as a tile keeps at least MIN_NT positions (the weights of
every block of 4 output channels are then used by 8 register tiles each time they are read).
Convs with a long K and few positions (ResNet-18's last stage: K = 4608, 49 positions) would
get tiles of 8 positions and read all their weights (9.4 MB) again for each; they split K
instead: blocks of kt patch entries (a multiple of 64, the tile's summation block) with as
many positions as fit, each block's products added into Y, bias with the first block and the
fused epilogue after the last.

Rounding: each output is the sum of its K products in blocks of 64 (the tile), the blocks of
one K block summed in order, the K blocks added to Y in order, the bias added to the first.
NaN and Inf propagate as IEEE arithmetic gives (no -ffast-math).
"""
from __future__ import annotations

from .base_c import COL_BUDGET, patch_loops

# positions per tile below which a conv splits K instead (8 register tiles per weight read)
MIN_NT = 64

# aicc_im2col's valid runs at stride 1 in whole panels of 8 positions: a fixed-length copy,
# which -O2 vectorizes (ResNet-8 on generic: 1.18 -> 1.05 ms); the loop after it takes the rest
CHUNKS8 = """\
                        if (SW == 1) {
                            for (; o < b && (j & 7) != 0; ++o, ++j)
                                c[(j >> 3) * K8 + (j & 7)] = xr[(size_t)((int64_t)o + ox)];
                            for (; o + 8 <= b; o += 8, j += 8) {
                                const TYPE *s = xr + (size_t)((int64_t)o + ox);
                                TYPE *d = c + (j >> 3) * K8;
                                for (size_t u = 0; u < 8; ++u)
                                    d[u] = s[u];
                            }
                        }
"""

IM2COL = """\
/* im2col of output positions [p0, p0 + nt) and patch entries [k0, k0 + kn) of one group: the
 * patch values in panels of 8 positions, col[(j / 8) * kn * 8 + (k - k0) * 8 + j % 8] with
 * k = ((ic * kD + z) * kH + y) * kW + x. Padding and the unused lanes of the last panel are
 * zero. */
static void aicc_im2col_SFX(const aicc_conv_params *p, const TYPE *restrict x, size_t p0,
                            size_t nt, size_t k0, size_t kn, TYPE *restrict col)
{
    const size_t OW = p->out[2], OHW = p->out[1] * OW, SW = p->stride[2];
    const size_t X = p->in[0] * p->in[1] * p->in[2];
    const size_t taps = p->k[0] * p->k[1] * p->k[2], K8 = kn * 8, ke = k0 + kn;
    const size_t ntp = (nt + 7) / 8 * 8;
    size_t k = 0;
    if (taps == 1 && X == p->out[0] * OHW && p->pad[0] == 0 && p->pad[1] == 0 &&
        p->pad[2] == 0 && p->stride[0] == 1 && p->stride[1] == 1 && SW == 1) {
        aicc_pack8_SFX(x + k0 * X, kn, X, p0, nt, col);   /* 1x1, stride 1, unpadded */
        return;
    }
""" + patch_loops(
    "TYPE", "if (k < k0 || k >= ke)\n"
    "                        continue;\n"
    "                    TYPE *c = col + (k - k0) * 8;", "c[(j >> 3) * K8 + (j & 7)]", "SRC",
    "                    for (; j < ntp; ++j)\n"
    "                        c[(j >> 3) * K8 + (j & 7)] = 0;\n", CHUNKS8) + "}"

GEMM = """\
/* Conv as GEMM over im2col tiles (see aicc_im2col and kernels/conv/gemm_c.py): per tile of output
 * positions and block of kt patch entries, every block of 4 output channels is computed as
 * 4x8 register tiles and stored (first K block, with the bias) or added (the others) into Y;
 * after the last K block the fused epilogue (ep, may be NULL) runs on the finished rows.
 * wp: weights packed per group and block of 4 output channels as [k][4] (zero weights pad
 * the last block). */
static void aicc_conv_gemm_SFX(const aicc_conv_params *p, const TYPE *restrict x,
                               const TYPE *restrict wp, const TYPE *restrict bias,
                               TYPE *restrict y, TYPE *restrict col, size_t kt,
                               void (*ep)(TYPE *, size_t))
{
    const size_t K = p->cin_g * p->k[0] * p->k[1] * p->k[2];
    const size_t X = p->in[0] * p->in[1] * p->in[2], P = p->out[0] * p->out[1] * p->out[2];
    const size_t nb = (p->cout_g + 3) / 4;
    for (size_t n = 0; n < p->batch; ++n)
        for (size_t g = 0; g < p->group; ++g) {
            const TYPE *xg = x + (n * p->group + g) * p->cin_g * X;
            TYPE *yg = y + (n * p->group + g) * p->cout_g * P;
            for (size_t p0 = 0; p0 < P; p0 += p->tile) {
                const size_t nt = P - p0 < p->tile ? P - p0 : p->tile;
                for (size_t k0 = 0; k0 < K; k0 += kt) {
                    const size_t kn = K - k0 < kt ? K - k0 : kt;
                    aicc_im2col_SFX(p, xg, p0, nt, k0, kn, col);
                    for (size_t b = 0; b < nb; ++b) {
                        const size_t m0 = 4 * b, rows = p->cout_g - m0 < 4 ? p->cout_g - m0 : 4;
                        const TYPE *wb = wp + (g * nb + b) * K * 4 + k0 * 4;
                        for (size_t j = 0; j < nt; j += 8) {
                            const size_t cols = nt - j < 8 ? nt - j : 8;
                            TYPE acc[4][8];
                            aicc_tile4x8_SFX(kn, wb, col + j * kn, acc);
                            for (size_t r = 0; r < rows; ++r) {
                                TYPE *yr = yg + (m0 + r) * P + p0 + j;
                                if (k0 > 0) {
                                    for (size_t u = 0; u < cols; ++u)
                                        yr[u] += acc[r][u];
                                    continue;
                                }
                                const TYPE bv = bias ? bias[g * p->cout_g + m0 + r] : (TYPE)0;
                                if (cols == 8)      /* a fixed loop, vectorized */
                                    for (size_t u = 0; u < 8; ++u)
                                        yr[u] = acc[r][u] + bv;
                                else
                                    for (size_t u = 0; u < cols; ++u)
                                        yr[u] = acc[r][u] + bv;
                            }
                        }
                        if (ep && k0 + kn == K)
                            for (size_t r = 0; r < rows; ++r)
                                ep(yg + (m0 + r) * P + p0, nt);
                    }
                }
            }
        }
}"""


def gemm_tiles(K: int, P: int) -> tuple:
    """(positions per tile, patch entries per K block) of the conv GEMM (module doc): nt a
    multiple of 8, kt == K or a multiple of 64, nt * kt <= COL_BUDGET (at least 8 x 64)."""
    K, budget = max(K, 1), COL_BUDGET
    whole = (P + 7) // 8 * 8
    nt = min(whole, budget // K // 8 * 8)
    if nt >= min(whole, MIN_NT):
        return nt, K
    nt = min(whole, MIN_NT)
    blocks = -(-K // max(64, budget // nt // 64 * 64))   # K blocks, then balanced
    kt = min(K, -(-K // blocks) + 63) // 64 * 64 if blocks > 1 else K
    return max(8, min(whole, budget // kt // 8 * 8)), kt
