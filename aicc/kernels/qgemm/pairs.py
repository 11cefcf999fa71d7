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
Depthwise convs: kernels/qgemm/pairs_dw.py; the patch gatherers' C: pairs_gather.py.
"""
from __future__ import annotations

import re

import numpy as np

from ...emit_c.cwriter import ctype
from ...emit_c.loops import numel
from ..conv.base_c import PARAMS, RANGE
from ..isa import registry
from ..isa.registry import include_line
from . import portable as qgemm_c
from .requant import WRAP
from .simd import zp_expr, zp_values
from .pairs_gather import COLS, COLS1
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


TYPES = """\
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
#endif"""

DOT = """\
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


def _spellings(ctx, isa: str) -> None:
    """isa's #include, prelude, spellings and the kernels' word types as helpers."""
    sp = TABLES[isa]
    ctx.helper(f"qpair.0.include.{isa}", include_line(isa))
    ctx.helper(f"qpair.1.spell.{isa}", fill(SPELL, isa=isa, lo=fill(sp["lo"], x="x"),
                                             hi=fill(sp["hi"], x="x"),
                                             mac2=fill(sp["mac2"], a="a", b="b", c="c"),
                                             sub2=fill(sp["sub2"], a="a", b="b")))
    ctx.helper("qpair.1.types", TYPES)


def _dot(ctx, isa: str) -> str:
    """Name of the dot kernel of isa (after _spellings)."""
    _spellings(ctx, isa)
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
    """Name of the matrix-vector kernel of isa (after _spellings)."""
    _spellings(ctx, isa)
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
