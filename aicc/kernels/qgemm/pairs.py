"""Integer GEMM of QLinearConv / ConvInteger / QLinearMatMul / MatMulInteger with constant
weights, and depthwise convs, on ISAs with a 16-bit pair multiply-accumulate in general
registers (a description's ``qpair`` entry: isa/dsp, the Arm DSP extension's SXTB16, SMLAD,
SSUB16). The portable kernels' (kernels/qgemm/portable.py) form and drivers, with the weights
kept int8 and arranged for the inner loop at build time.

Form: every output is a sum over k of ``(w - w_zp)(x - x_zp)``. The weights are constants:
``w - w_zp`` (each value must fit int8: symmetric int8 weights, zero point 0; else the portable
kernel runs) is stored as int8, K padded with zeros to Kp (a multiple of 4), per block of R
output channels one 32-bit word per 4 k and channel ([block][k / 4][R] words; R = 2 for the dot
kernel, 4 for the matrix-vector kernel), its bytes in the order k = 0, 2, 1, 3: the
description's ``lo`` (bytes 0 and 2) and ``hi`` (bytes 1 and 3) widen a word to the int16 pairs
(k0, k1) and (k2, k3). A channel count that is not a multiple of R gets zero channels. The input
is gathered per tile of positions into one row of Kp int16 ``x - x_zp`` per output position
(k contiguous; zeros in the padding and past K): 1-D / 2-D patches by COLS (int32 index
arithmetic, interior rows of 3 taps unrolled), int8 1x1 convs by COLS1 (a transposition, 2
channels x 4 positions per SXTB16 / SSUB16 / PKHBT round), others by portable.py's gatherers.
Its 32-bit words are the pairs (k0, k1), (k2, k3): ``mac2`` (SMLAD) adds both products of a
pair to a sum.

The dot kernel (aicc_qpdot2) keeps 2 channels x 2 positions in four int32 sums: per 4 k one
64-bit load of the two channels' weight words, one per position of its two pair words (LDRD),
four widenings and eight SMLADs (16 products), the loop unrolled twice (36 instructions per 32
products on the M4 with GCC 12 -O2; more blocking runs out of the 13 registers); an odd
position last, 2 channels x 1 position. A MatMul with one row of a (a fully connected layer)
runs aicc_qpgemv4, 4 channels against the one row (40 instructions per 32 products). Sums are
exact (the build proves every |sum| < 2^31, as the portable kernels require), so the order
does not matter and the outputs are the portable kernels' bit for bit; requantization, bias
and the store are the caller's ``post`` per channel row (kernels/qgemm/fixed.py on cortex-m4).

Depthwise (one input channel per group, 1-D / 2-D, at most DW_PAIRS_MAX tap pairs): per
channel, x - x_zp into the stride phases of the padded plane (kernels/conv/planes_c.py's
layout, zeroed once per step), then each output is its flat index plus one offset per tap;
taps whose offsets differ by one share an unaligned 32-bit load and one SMLAD (a tap without a
partner meets a zero weight), the weight pairs widened once per channel and held in registers.
The kernel is generated per geometry (offsets and sizes as constants): a 3x3 output is 6 loads,
6 SMLADs and its store, written straight to the plane's sums (no block buffer, no copy).
"""
from __future__ import annotations

import hashlib
import re

import numpy as np

from ...emit_c.cwriter import ctype
from ...emit_c.loops import numel
from ..conv.base_c import PARAMS, RANGE
from ..conv.planes_c import PHASE_FILL, extent, geometry
from ..isa import registry
from ..isa.registry import include_line
from . import portable as qgemm_c
from .planes import supports as planes_supports
from .requant import WRAP
from .simd import zp_expr, zp_values
from .spell import fill

TABLES = registry.table("qpair")

def _step(o: int, ind: str) -> str:
    """C of one block of 4 k at word offset o (2 channels x 2 positions, 16 products): the
    two weight words, then per half (lo: k0, k1; hi: k2, k3) the positions' pair words and
    four mac2. A widened word is used at once: few live registers (13 on the M4)."""
    lines = [f"const uint64_t w2 = *(const aicc_qw64 *)(const void *)(wp + {o});",
             f"const uint64_t xp = *(const aicc_qw64 *)(const void *)(x0 + {o});",
             f"const uint64_t xq = *(const aicc_qw64 *)(const void *)(x1 + {o});",
             "const uint32_t wa = (uint32_t)w2, wb = (uint32_t)(w2 >> 32);",
             "const int32_t p0 = (int32_t)(uint32_t)xp, q0 = (int32_t)(uint32_t)xq;",
             "int32_t a = {lo(wa)};",
             "s00 = {mac2(a, p0, s00)};", "s01 = {mac2(a, q0, s01)};",
             "a = {lo(wb)};",
             "s10 = {mac2(a, p0, s10)};", "s11 = {mac2(a, q0, s11)};",
             "const int32_t p1 = (int32_t)(uint32_t)(xp >> 32);",
             "const int32_t q1 = (int32_t)(uint32_t)(xq >> 32);",
             "a = {hi(wa)};",
             "s00 = {mac2(a, p1, s00)};", "s01 = {mac2(a, q1, s01)};",
             "a = {hi(wb)};",
             "s10 = {mac2(a, p1, s10)};", "s11 = {mac2(a, q1, s11)};"]
    return ind + "{\n" + "".join(ind + "    " + ln + "\n" for ln in lines) + ind + "}\n"


DOT = """\
#if defined(__GNUC__)
typedef uint32_t __attribute__((may_alias, aligned(4))) aicc_qw32;
typedef uint64_t __attribute__((may_alias, aligned(8))) aicc_qw64;   /* LDRD */
#else
typedef uint32_t aicc_qw32;
typedef uint64_t aicc_qw64;
#endif
#if defined(__GNUC__) && !defined(__clang__)
/* GCC's first scheduling pass hoists the loads of the unrolled loop and runs out of the M4's
 * registers (spills and reloads in the loop: 1.4 instructions per product instead of 1.2) */
#define AICC_QP_NOSCHED __attribute__((optimize("no-schedule-insns")))
#else
#define AICC_QP_NOSCHED
#endif

/* acc[r * ldc + j] = sum over k < 4 kq of w_r[k] * x[j * 4 kq + k] for the two channels r of a
 * pair and the n input rows j (kernels/qgemm/pairs.py): w holds, per 4 k, one word per channel
 * (bytes k = 0, 2, 1, 3 as int8), x rows of 4 kq int16 (4-byte aligned). Two positions at a
 * time in int32 sums (the caller proved that none overflows), stored as uint32. */
static AICC_QP_NOSCHED void aicc_qpdot2(size_t kq, const uint32_t *restrict w,
                                        const int16_t *restrict x, size_t n,
                                        uint32_t *restrict acc, size_t ldc)
{
    const uint32_t *const wend = w + 2u * kq;
    size_t j = 0;
    for (; j + 2u <= n; j += 2u) {
        const aicc_qw32 *x0 = (const aicc_qw32 *)(const void *)(x + j * 4u * kq);
        const aicc_qw32 *x1 = x0 + 2u * kq;
        const uint32_t *wp = w;
        int32_t s00 = 0, s01 = 0, s10 = 0, s11 = 0;
        if (kq & 1u) {
@STEP1@            wp += 2;
            x0 += 2;
            x1 += 2;
        }
        while (wp != wend) {      /* 8 k per pass */
@STEP0@@STEP2@            wp += 4;
            x0 += 4;
            x1 += 4;
        }
        acc[j] = (uint32_t)s00;
        acc[j + 1u] = (uint32_t)s01;
        acc[ldc + j] = (uint32_t)s10;
        acc[ldc + j + 1u] = (uint32_t)s11;
    }
    if (j < n) {
        const aicc_qw32 *x0 = (const aicc_qw32 *)(const void *)(x + j * 4u * kq);
        int32_t s0 = 0, s1 = 0;
        for (const uint32_t *wp = w; wp != wend; wp += 2, x0 += 2) {
            const int32_t p0 = (int32_t)x0[0], p1 = (int32_t)x0[1];
            s0 = {mac2(lo(wp[0]), p0, s0)};
            s0 = {mac2(hi(wp[0]), p1, s0)};
            s1 = {mac2(lo(wp[1]), p0, s1)};
            s1 = {mac2(hi(wp[1]), p1, s1)};
        }
        acc[j] = (uint32_t)s0;
        acc[ldc + j] = (uint32_t)s1;
    }
}""".replace("@STEP1@", _step(0, " " * 12)).replace("@STEP0@", _step(0, " " * 12)) \
    .replace("@STEP2@", _step(2, " " * 12))


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


def isa_for(ctx):
    """The pair kernels' ISA for ctx's node (isa/registry.py's rule over the ``qpair`` ISAs)."""
    return registry.isa_for(ctx, TABLES)


SPELL = """\
/* The pair operations in the description's spellings (isa/{isa}: qpair). */
static inline int32_t aicc_qp_lo_{isa}(uint32_t x)
{
    return {lo};
}

static inline int32_t aicc_qp_hi_{isa}(uint32_t x)
{
    return {hi};
}

static inline int32_t aicc_qp_mac2_{isa}(int32_t a, int32_t b, int32_t c)
{
    return {mac2};
}

static inline uint32_t aicc_qp_sub2_{isa}(int32_t a, int32_t b)
{
    return (uint32_t){sub2};
}"""


def _dot(ctx, isa: str) -> str:
    """Name of the dot kernel of isa (its #include, prelude and spellings as helpers)."""
    sp = TABLES[isa]
    ctx.helper(f"qpair.0.include.{isa}", include_line(isa))
    ctx.helper(f"qpair.1.spell.{isa}", fill(SPELL, isa=isa, lo=fill(sp["lo"], x="x"),
                                             hi=fill(sp["hi"], x="x"),
                                             mac2=fill(sp["mac2"], a="a", b="b", c="c"),
                                             sub2=fill(sp["sub2"], a="a", b="b")))
    code = re.sub(r"\{(lo|hi)\(([^(){}]*)\)\}", rf"aicc_qp_\1_{isa}(\2)", DOT)
    code = re.sub(r"\b(lo|hi)\(", rf"aicc_qp_\1_{isa}(", code)
    code = re.sub(r"\{mac2\(((?:[^{}()]|\([^()]*\))*)\)\}", rf"aicc_qp_mac2_{isa}(\1)", code)
    ctx.helper(f"qpair.2.dot.{isa}", code.replace("aicc_qpdot2", f"aicc_qpdot2_{isa}"))
    return f"aicc_qpdot2_{isa}"


def _spelled(ctx, isa: str, key: str, code: str, dt) -> str:
    """Name of helper code (qgemm_c.typed) with its {lo(..)}, {hi(..)}, {sub2(..)} in isa's
    spellings (after _dot: the inline functions and typedefs)."""
    code = re.sub(r"\{sub2\(((?:[^{}()]|\([^()]*\))*)\)\}", rf"aicc_qp_sub2_{isa}(\1)", code)
    code = re.sub(r"\b(lo|hi)\(", rf"aicc_qp_\1_{isa}(", code)
    sfx = "_u8" if np.dtype(dt).name == "uint8" else "_s8"
    code = code.replace("_SFX", f"_{isa}{sfx}").replace("const T ", f"const {ctype(dt)} ")
    ctx.helper(f"qpair.4.{key}.{isa}{sfx}", code)         # after the typedefs (qpair.2)
    return code.split("static void ", 1)[1].split("(", 1)[0]


def arrange(wk: np.ndarray, rows_per: int = 2) -> np.ndarray | None:
    """The pair layout of constant weights wk ([groups, rows, K] int64 values w - w_zp) as
    uint32 words [groups][rows / R][Kp / 4][R] for blocks of R = rows_per channels (2: the dot
    kernel, 4: the matrix-vector kernel; rows and K padded with zeros), or None when a value
    does not fit int8."""
    if wk.size and (wk.min() < -128 or wk.max() > 127):
        return None
    g, rows, k = wk.shape
    rp, kp = -(-rows // rows_per) * rows_per, -(-k // 4) * 4
    w = np.zeros((g, rp, kp), np.int8)
    w[:, :rows, :k] = wk
    w = w.reshape(g, rp // rows_per, rows_per, kp // 4, 4)[..., [0, 2, 1, 3]]
    w = np.ascontiguousarray(w.transpose(0, 1, 3, 2, 4))        # [g][block][k/4][R][4]
    return w.reshape(-1).view("<u4").astype(np.uint32)


def _pointwise(geo) -> bool:
    """1x1, stride 1, unpadded: each position's patch is a column of the input."""
    return (all(v == 1 for v in geo.k) and all(v == 1 for v in geo.stride)
            and not any(geo.pad) and not any(geo.pad_end))


def conv_weights(ctx, op, geo) -> np.ndarray | None:
    """A conv's pair-arranged weights (arrange), None when not constant or not int8-sized."""
    if ctx.in_const(op.W) is None or (ctx.has_input(op.WZ) and ctx.in_const(op.WZ) is None):
        return None
    w = np.asarray(ctx.in_const(op.W)).astype(np.int64).reshape(geo.cout, -1)
    w = w - zp_values(ctx, op.WZ, geo.cout)[:, None]
    return arrange(w.reshape(geo.group, geo.cout_g, -1))


def emit_conv(ctx, op, geo, words: np.ndarray, post) -> None:
    """Conv through aicc_qpdot2 (the portable driver's loops: batch item, group, tile of output
    positions; patches from the NCHW input); ``post(ch, src, n, dst)`` as portable.emit_conv's.
    words: conv_weights."""
    isa = isa_for(ctx)
    ta = ctx.in_dtype(op.X)
    K, P = geo.cin_g * numel(geo.k), numel(geo.out)
    kp = -(-K // 4) * 4
    tile = max(2, min(P, qgemm_c.COL_ELEMS // kp))
    pairs = (geo.cout_g + 1) // 2
    ctx.kernel = f"{isa} qpdot2"
    ctx.helper("conv.0.params", PARAMS)
    ctx.helper("conv.1.range", RANGE)
    ctx.helper("qlinear.0.wrap", WRAP)
    dot = _dot(ctx, isa)
    pw = _pointwise(geo) and ta == np.int8 and len(geo.k) <= 2
    if pw:
        cols1 = _spelled(ctx, isa, "qpcols1", COLS1, ta)
    elif len(geo.k) <= 2 and not _pointwise(geo):
        cols = qgemm_c.typed(ctx, "qpcols", COLS, ta)
    else:       # 3-D; uint8 1x1 stride 1 unpadded: portable.py's gather
        cols = qgemm_c.cols16(ctx, ta)
    wq = ctx.const(words, "wq")
    col = ctx.scratch(tile * kp * 2, "int16_t", "col")
    acc = ctx.scratch(2 * tile * 4, "uint32_t", "acc")
    ctx(f"/* {geo.describe()}: int8 x int16 pair dot products [{geo.cout_g} x {K}] . [{K}] per "
        f"output, tiles of {tile} positions (K padded to {kp}), patches from the NCHW input */")
    if not pw:
        ctx(geo.params())
    ctx(f"const int32_t xzp = {zp_expr(ctx, op.XZ)};")
    inP = numel(geo.inp)
    with ctx.block(f"for (size_t nb = 0; nb < {geo.batch}u; ++nb)"):
        with ctx.block(f"for (size_t gi = 0; gi < {geo.group}u; ++gi)"):
            with ctx.block(f"for (size_t p0 = 0; p0 < {P}u; p0 += {tile}u)"):
                ctx(f"const size_t nt = {P}u - p0 < {tile}u ? {P}u - p0 : {tile}u;")
                xg = f"{ctx.inp[op.X]} + (nb * {geo.cin}u + gi * {geo.cin_g}u) * {inP}u"
                if pw:
                    ctx(f"{cols1}({K}u, {P}u, {xg}, xzp, p0, nt, {kp}u, {col});")
                else:
                    ctx(f"{cols}(&prm, {xg}, xzp, p0, nt, {kp}u, {col});")
                with ctx.block(f"for (size_t c2 = 0; c2 < {pairs}u; ++c2)"):
                    ctx(f"{dot}({kp // 4}u, {wq} + (gi * {pairs}u + c2) * {kp // 2}u, "
                        f"{col}, nt, {acc}, {tile}u);")
                    rows = "2u" if geo.cout_g % 2 == 0 else \
                        f"c2 + 1u < {pairs}u ? 2u : 1u"
                    with ctx.block(f"for (size_t r = 0; r < ({rows}); ++r)"):
                        ctx(f"const size_t oc = gi * {geo.cout_g}u + 2u * c2 + r;")
                        post("oc", f"({acc} + r * {tile}u)", "nt",
                             f"(nb * {geo.cout}u + oc) * {P}u + p0")


def matmul_weights(ctx, op, m: int, k: int, n: int, b_t: np.ndarray) -> np.ndarray | None:
    """A MatMul's arranged b (b_t: b transposed, [n][k]) minus its zero point (per tensor or
    per column), for the matrix-vector kernel when a has one row (m = 1), else the dot kernel;
    None when not int8-sized."""
    bz = zp_values(ctx, op.BZ, n) if ctx.has_input(op.BZ) else np.zeros(n, np.int64)
    w = np.asarray(b_t).astype(np.int64) - np.asarray(bz, np.int64).reshape(-1, 1)
    return arrange(w.reshape(1, n, k), 4 if m == 1 else 2)


GEMV = """\
/* acc[c] = sum over k < 4 kq of w_c[k] * x[k] for the 4 nq channels c (kernels/qgemm/pairs.py):
 * w holds, per block of 4 channels and 4 k, one word per channel (bytes k = 0, 2, 1, 3 as
 * int8), x one row of 4 kq int16; both 8-byte aligned (64-bit loads: constants and scratch
 * start at the target's alignment). Four int32 sums per block (the caller
 * proved that none overflows), stored as uint32. */
static AICC_QP_NOSCHED void aicc_qpgemv4(size_t kq, size_t nq, const uint32_t *restrict w,
                                         const int16_t *restrict x, uint32_t *restrict acc)
{
    const aicc_qw32 *const xe = (const aicc_qw32 *)(const void *)(x + 4u * kq);
    for (size_t q = 0; q < nq; ++q, acc += 4) {
        const aicc_qw32 *xp = (const aicc_qw32 *)(const void *)x;
        int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        if (kq & 1u) {
@STEP@            w += 4;
            xp += 2;
        }
        while (xp != xe) {        /* 8 k per pass */
@STEP@@STEP2@            w += 8;
            xp += 4;
        }
        acc[0] = (uint32_t)s0;
        acc[1] = (uint32_t)s1;
        acc[2] = (uint32_t)s2;
        acc[3] = (uint32_t)s3;
    }
}"""


def _gemv_step(o: int, ind: str) -> str:
    """C of one block of 4 k (4 channels x 1 position, 16 products) at weight word 4 o / pair
    word 2 o: per channel its word, both halves' mac2."""
    lines = [f"const uint64_t x{o} = *(const aicc_qw64 *)(const void *)(xp + {2 * o});",
             f"const int32_t p0 = (int32_t)(uint32_t)x{o}, p1 = (int32_t)(uint32_t)(x{o} >> 32);"]
    for c in (0, 2):        # two words per 64-bit load (LDRD)
        lines += [f"const uint64_t v{c} = *(const aicc_qw64 *)(const void *)(w + {4 * o + c});"]
        for h, sh in ((c, ""), (c + 1, " >> 32")):
            lines += [f"const uint32_t w{h} = (uint32_t)(v{c}{sh});",
                      f"s{h} = {{mac2(lo(w{h}), p0, s{h})}};",
                      f"s{h} = {{mac2(hi(w{h}), p1, s{h})}};"]
    return ind + "{\n" + "".join(ind + "    " + ln + "\n" for ln in lines) + ind + "}\n"


def _gemv(ctx, isa: str) -> str:
    """Name of the matrix-vector kernel of isa (after _dot: its spellings and typedefs)."""
    _dot(ctx, isa)
    code = GEMV.replace("@STEP@", _gemv_step(0, " " * 12), 1) \
        .replace("@STEP@", _gemv_step(0, " " * 12)).replace("@STEP2@", _gemv_step(1, " " * 12))
    code = re.sub(r"\b(lo|hi)\(", rf"aicc_qp_\1_{isa}(", code)
    code = re.sub(r"\{mac2\(((?:[^{}()]|\([^()]*\))*)\)\}", rf"aicc_qp_mac2_{isa}(\1)", code)
    ctx.helper(f"qpair.2.gemv.{isa}", code.replace("aicc_qpgemv4", f"aicc_qpgemv4_{isa}"))
    return f"aicc_qpgemv4_{isa}"


def emit_matmul(ctx, op, m: int, k: int, n: int, words: np.ndarray, post) -> None:
    """y[m][n] = a[m][k] @ b through aicc_qpdot2, or aicc_qpgemv4 when m = 1
    (portable.emit_matmul's loops and ``post``); words: matmul_weights."""
    isa = isa_for(ctx)
    ta = ctx.in_dtype(op.A)
    kp = -(-k // 4) * 4
    ctx.helper("qlinear.0.wrap", WRAP)
    rows16a = qgemm_c.rows16(ctx, ta)
    wq = ctx.const(words, "wq")
    az, _ = qgemm_c.zp_ptr(ctx, op.AZ, ta, 1, "az0")
    if m == 1:
        gemv = _gemv(ctx, isa)
        ctx.kernel = f"{isa} qpgemv4"
        nq = -(-n // 4)
        col = ctx.scratch(kp * 2, "int16_t", "col")
        acc = ctx.scratch(4 * nq * 4, "uint32_t", "acc")
        ctx(f"/* int8 x int16 pair dot products: [1 x {k}] @ [{k} x {n}], b arranged at build "
            f"time in blocks of 4 columns (K padded to {kp}) */")
        ctx(f"{rows16a}({k}u, {kp}u, 1u, 1u, {ctx.inp[op.A]}, {k}u, {az}, 0u, {col});")
        ctx(f"{gemv}({kp // 4}u, {nq}u, {wq}, {col}, {acc});")
        with ctx.block(f"for (size_t j = 0; j < {n}u; ++j)"):
            post("j", f"({acc} + j)", "1u", "j", f"{n}u")
        return
    tile = max(2, min(m, qgemm_c.COL_ELEMS // kp))
    pairs = (n + 1) // 2
    ctx.kernel = f"{isa} qpdot2"
    dot = _dot(ctx, isa)
    col = ctx.scratch(tile * kp * 2, "int16_t", "col")
    acc = ctx.scratch(2 * tile * 4, "uint32_t", "acc")
    ctx(f"/* int8 x int16 pair dot products: [{m} x {k}] @ [{k} x {n}], b arranged at build "
        f"time, tiles of {tile} rows (K padded to {kp}) */")
    with ctx.block(f"for (size_t i0 = 0; i0 < {m}u; i0 += {tile}u)"):
        ctx(f"const size_t nt = {m}u - i0 < {tile}u ? {m}u - i0 : {tile}u;")
        ctx(f"{rows16a}({k}u, {kp}u, nt, nt, {ctx.inp[op.A]} + i0 * {k}u, {k}u, {az}, 0u, "
            f"{col});")
        with ctx.block(f"for (size_t c2 = 0; c2 < {pairs}u; ++c2)"):
            ctx(f"{dot}({kp // 4}u, {wq} + c2 * {kp // 2}u, {col}, nt, {acc}, {tile}u);")
            rows = "2u" if n % 2 == 0 else f"c2 + 1u < {pairs}u ? 2u : 1u"
            with ctx.block(f"for (size_t r = 0; r < ({rows}); ++r)"):
                ctx("const size_t j = 2u * c2 + r;")
                post("j", f"({acc} + r * {tile}u)", "nt", f"i0 * {n}u + j", f"{n}u")


# -- depthwise ------------------------------------------------------------------------------------

DW_PAIRS_MAX = 8        # tap pairs held in registers (3x3: 6)

DW = """\
/* Depthwise conv of one channel (kernels/qgemm/pairs.py): acc[r * OW + c] = sum over the taps
 * of (w - wzp) (x - xzp), @GEO@. x - xzp is written as int16 into the
 * stride phases of the padded plane xq (kernels/conv/planes_c.py's layout: every output is its
 * flat index r * wq + c plus one offset per tap; the padding stays zero: the caller zeroes xq
 * once per step). Taps whose offsets differ by one are paired (one unaligned 32-bit load, one
 * mac2 for two products); a tap without a partner meets a zero weight. */
static void NAME(const TA *restrict x, int32_t xzp, const TB *restrict w, int32_t wzp,
                 int16_t *restrict xq, uint32_t *restrict acc)
{
    const size_t H = @H@u, W = @W@u, sh = @SH@u, sw = @SW@u, pt = @PT@u, pl = @PL@u;
    const size_t hp = @HP@u, wq = @WQ@u, PQ = @PQ@u, nx = @NX@u;
@FILL@
@WEIGHTS@
    for (size_t r = 0; r < @OH@u; ++r) {
        const int16_t *restrict s = xq + r * wq;
        uint32_t *restrict a = acc + r * @OW@u;
        for (size_t c = 0; c < @OW@u; ++c, ++s) {
            uint32_t v;
            int32_t t = 0;
@TAPS@
            a[c] = (uint32_t)t;
        }
    }
}"""


def dw_pairs(geo):
    """(pairs, off, planes geometry) of a depthwise conv: pairs [(t, t2 or None)] of taps
    whose phase-plane offsets differ by one, greedily in tap order; None when more than
    DW_PAIRS_MAX pairs."""
    g = geometry(geo)
    off = g[4]
    used, pairs = set(), []
    for t in range(len(off)):
        if t in used:
            continue
        used.add(t)
        t2 = next((u for u in range(len(off)) if u not in used and off[u] == off[t] + 1), None)
        if t2 is not None:
            used.add(t2)
        pairs.append((t, t2))
    return (pairs, off, g) if len(pairs) <= DW_PAIRS_MAX else None


def dw_usable(ctx, geo) -> bool:
    """A pair ISA, one input channel per group, at most 2 spatial dims, few tap pairs."""
    return isa_for(ctx) is not None and planes_supports(geo) and dw_pairs(geo) is not None


def _dw_fill(sp: dict, sw: int) -> str:
    """The phase planes' fill of an int8 input whose column stride sw is 1 or 2 (PHASE_FILL's
    values): 4 columns per 32-bit load, lo / hi to the int16 pairs of columns (0, 2) and
    (1, 3), the zero point off both halves (sub2); stride 1 repacks them to (0, 1), (2, 3)
    (PKHBT / PKHTB) for the row, stride 2 stores them as they are to the two column phases;
    the last nx % 4 columns one at a time."""
    lo, hi = fill(sp["lo"], x="v"), fill(sp["hi"], x="v")
    e, o = fill(sp["sub2"], a=lo, b="zz"), fill(sp["sub2"], a=hi, b="zz")
    head = ["const int32_t zz = (int32_t)(((uint32_t)xzp & 0xffffu) * 0x10001u);",
            "for (size_t iy = 0; iy < H && iy + pt < hp; ++iy) {",
            "    const size_t py = iy + pt;",
            "    int16_t *restrict qr = xq + (py % sh) * sw * PQ + py / sh * wq;",
            "    const TA *restrict xr = x + iy * W;",
            "    size_t ix = 0;"]
    if sw == 1:
        body = ["    for (; ix + 4u <= nx; ix += 4u) {",
                "        uint32_t v;",
                "        memcpy(&v, xr + ix, sizeof v);",
                f"        const uint32_t e = (uint32_t){e}, o = (uint32_t){o};",
                "        const uint32_t a = (e & 0xffffu) | o << 16;",
                "        const uint32_t b = e >> 16 | (o & 0xffff0000u);",
                "        memcpy(qr + pl + ix, &a, sizeof a);",
                "        memcpy(qr + pl + ix + 2u, &b, sizeof b);",
                "    }",
                "    for (; ix < nx; ++ix)",
                "        qr[pl + ix] = (int16_t)((int32_t)xr[ix] - xzp);"]
    else:       # even columns to phase pl % 2, odd ones to the other
        body = ["    int16_t *restrict de = qr + pl % 2u * PQ + pl / 2u;",
                "    int16_t *restrict dd = qr + (1u - pl % 2u) * PQ + (1u + pl) / 2u;",
                "    for (; ix + 4u <= nx; ix += 4u) {",
                "        uint32_t v;",
                "        memcpy(&v, xr + ix, sizeof v);",
                f"        const uint32_t e = (uint32_t){e}, o = (uint32_t){o};",
                "        memcpy(de + ix / 2u, &e, sizeof e);",
                "        memcpy(dd + ix / 2u, &o, sizeof o);",
                "    }",
                "    for (; ix < nx; ++ix)",
                "        (ix & 1u ? dd : de)[ix / 2u] = (int16_t)((int32_t)xr[ix] - xzp);"]
    return "\n".join("    " + ln for ln in head + body + ["}"])


def emit_dw(ctx, typed, geo, x: str, w: str, wz: str, acc: str, post, xdt=None) -> None:
    """Per batch item and output channel: the channel kernel, then ``post`` (qlinear's) on its
    plane. typed: qlinear._typed bound to the operand types; x, w: input / weight pointers;
    wz: the C of the channel's weight zero point (``oc``); acc: numel(out) uint32 of scratch;
    xdt: the input's dtype (int8: the packed fill); xzp declared by the caller."""
    isa = isa_for(ctx)
    pairs, off, (hp, wp, hq, wq, _, nxq, nf) = dw_pairs(geo)
    k, s, d, o, _, _ = extent(geo)
    pad = [0] * (2 - len(geo.k)) + list(geo.pad)
    inp = [1] * (2 - len(geo.k)) + list(geo.inp)
    H, W = inp
    pt, pl = pad[0], pad[1]
    nx = max(0, min(W, wp - pl)) if wp > pl else 0
    sp = TABLES[isa]
    if xdt is not None and np.dtype(xdt) == np.int8 and s[1] in (1, 2) and "sub2" in sp:
        fill_c = _dw_fill(sp, s[1])
    else:
        fill_c = "".join("    " + ln for ln in PHASE_FILL.replace("DST", "int16_t")
                         .replace("SRC", "TA")
                         .replace("VALUE", "(int16_t)((int32_t)xr[ix] - xzp)")
                         .replace("X + iy", "x + iy").splitlines(True)).rstrip("\n")

    def wv(t):
        return "0" if t is None else f"((int32_t)w[{t}] - wzp)"
    weights = "\n".join(
        f"    const int32_t w{i} = (int32_t)((uint32_t)(uint16_t){wv(a)} | "
        f"(uint32_t){wv(b)} << 16);" for i, (a, b) in enumerate(pairs))
    taps = "\n".join(
        f"            memcpy(&v, s + {off[a]}u, sizeof v);\n"
        f"            t = {fill(sp['mac2'], a=f'w{i}', b='(int32_t)v', c='t')};"
        for i, (a, b) in enumerate(pairs))
    kdesc = "x".join(str(v) for v in geo.k)
    text = (DW.replace("@GEO@", f"{kdesc} taps, output [{o[0]}][{o[1]}], stride "
                       f"{s[0]}x{s[1]}, phases [{hq}][{wq}]")
            .replace("@FILL@", fill_c).replace("@WEIGHTS@", weights).replace("@TAPS@", taps)
            .replace("@H@", str(H)).replace("@W@", str(W)).replace("@SH@", str(s[0]))
            .replace("@SW@", str(s[1])).replace("@PT@", str(pt)).replace("@PL@", str(pl))
            .replace("@HP@", str(hp)).replace("@WQ@", str(wq)).replace("@PQ@", str(hq * wq))
            .replace("@NX@", str(nx)).replace("@OH@", str(o[0])).replace("@OW@", str(o[1])))
    text = typed(text)
    name = f"aicc_qpdw_{hashlib.sha1(text.encode()).hexdigest()[:8]}_{isa}"
    ctx.helper(f"qpair.0.include.{isa}", include_line(isa))
    ctx.helper(f"qpair.3.dw.{name}", text.replace("NAME", name))
    ctx.kernel = f"{isa} qpdw"
    xq = ctx.scratch((nxq + 2) * 2, "int16_t", "xq")
    P = numel(geo.out)
    in_p = numel(geo.inp)
    ctx(f"/* {geo.describe()}: int16 pair sums over the stride phases [{hq}][{wq}] of the "
        f"padded plane, {len(pairs)} tap pairs */")
    with ctx.block(f"for (size_t i = 0; i < {nxq + 2}u; ++i)"):
        ctx(f"{xq}[i] = 0;")
    with ctx.block(f"for (size_t nb = 0; nb < {geo.batch}u; ++nb)"):
        with ctx.block(f"for (size_t oc = 0; oc < {geo.cout}u; ++oc)"):
            ctx(f"const size_t gi = oc / {geo.cout_g}u;")
            ctx(f"{name}({x} + (nb * {geo.cin}u + gi) * {in_p}u, xzp, {w} + oc * {len(off)}u, "
                f"{wz}, {xq}, {acc});")
            post("oc", acc, f"{P}u", f"(nb * {geo.cout}u + oc) * {P}u")
