"""Portable integer GEMM of QLinearConv, ConvInteger, QLinearMatMul and MatMulInteger on the
targets without SIMD kernels for them (generic, arm-neon; on x86 the nodes that qgemm_simd /
qgemm_conv do not take; on cortex-m4 those that kernels/qgemm/pairs.py's SMLAD kernels do not
take, which also use COLS16, ROWS16 and the tile sizes here).

Form: every output is a dot product over k of two int16 rows, ``a[k] = w - w_zp`` (weights)
and ``b[k] = x - x_zp`` (the input), both in [-255, 255], zero-padded to Kp (a multiple of
the target's int16 lanes, ``gran``: 8 on 16-byte vectors). ``aicc_idot4`` computes blocks of 4 x 2 outputs in eight int32 sums over k: plain C
that GCC -O2 vectorizes as dot products (x86 SSE2 ``pmaddwd``: 8 products per instruction;
AArch64 ``smlal``/``smlal2``; Cortex-M4 keeps the sums in registers, one ``mla`` each), six
row loads per 8 k for 64 products. The weights stay in their 1-byte type in read-only memory:
a block of 4 rows is widened to int16 in scratch once per tile of outputs. The input is
gathered per tile into one row of Kp int16 per output position (im2col with k contiguous; taps
in the padding give 0, as the padding value is the zero point) or per row of a MatMul's A.

Exactness: the sums are int32 without wrapping, taken only when the build proves every
``|sum| < 2^31`` (``bound``: the constant weights and zero points, else their dtypes' ranges,
times the input's largest ``|x - x_zp|``), so they equal the modulo-2^32 sums of qlinear.py's
loops; the bias and the outputs are then as there. Otherwise qlinear.py's loops run.
"""
from __future__ import annotations

import numpy as np

from . import cpad as qgemm_cpad
from ...emit_c.cwriter import ctype
from ...emit_c.loops import numel
from ..conv.base_c import PARAMS, RANGE, patch_loops
from .requant import WRAP, irange, span, sums_fit
from .simd import conv_weights, zp_const, zp_expr

GRAN_MAX = 32       # Kp = K rounded up to the target's int16 lanes (gran): the dot loop's
                    # count is then a multiple of the vector length, as GCC -O2 needs
COL_ELEMS = 1 << 15  # input rows per tile: at most 64 KiB of int16 (at least 2 rows)
LIMIT = (1 << 31) - 1

DOT = """\
/* acc[r * ldc + j] = sum over k < Kp of a[r * Kp + k] * b[j * Kp + k], for r < 4, j < n
 * (Kp = kb * GRAN): 4 weight rows against n input rows, 4 x 2 outputs at a time in int32
 * sums (the caller proved that none overflows), stored as uint32. */
static void aicc_idot4(size_t kb, const int16_t *restrict a, const int16_t *restrict b,
                       size_t n, uint32_t *restrict acc, size_t ldc)
{
    const size_t Kp = kb * GRANu;
    const int16_t *a0 = a, *a1 = a + Kp, *a2 = a + 2u * Kp, *a3 = a + 3u * Kp;
    size_t j = 0;
    for (; j + 2u <= n; j += 2u) {
        const int16_t *b0 = b + j * Kp, *b1 = b0 + Kp;
        int32_t s00 = 0, s01 = 0, s10 = 0, s11 = 0, s20 = 0, s21 = 0, s30 = 0, s31 = 0;
        for (size_t k = 0; k < kb * GRANu; ++k) {
            const int32_t x0 = b0[k], x1 = b1[k];
            s00 += a0[k] * x0;
            s01 += a0[k] * x1;
            s10 += a1[k] * x0;
            s11 += a1[k] * x1;
            s20 += a2[k] * x0;
            s21 += a2[k] * x1;
            s30 += a3[k] * x0;
            s31 += a3[k] * x1;
        }
        acc[j] = (uint32_t)s00;
        acc[j + 1u] = (uint32_t)s01;
        acc[ldc + j] = (uint32_t)s10;
        acc[ldc + j + 1u] = (uint32_t)s11;
        acc[2u * ldc + j] = (uint32_t)s20;
        acc[2u * ldc + j + 1u] = (uint32_t)s21;
        acc[3u * ldc + j] = (uint32_t)s30;
        acc[3u * ldc + j + 1u] = (uint32_t)s31;
    }
    if (j < n) {
        const int16_t *b0 = b + j * Kp;
        int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (size_t k = 0; k < kb * GRANu; ++k) {
            const int32_t x0 = b0[k];
            s0 += a0[k] * x0;
            s1 += a1[k] * x0;
            s2 += a2[k] * x0;
            s3 += a3[k] * x0;
        }
        acc[j] = (uint32_t)s0;
        acc[ldc + j] = (uint32_t)s1;
        acc[2u * ldc + j] = (uint32_t)s2;
        acc[3u * ldc + j] = (uint32_t)s3;
    }
}"""

ROWS16 = """\
/* n rows of K values (row j at s + j * ld) minus their zero point (zp[j * zs]) as int16:
 * d[j * Kp + k], zero for k in [K, Kp) and for the rows j in [n, pad). */
static void aicc_irows16_SFX(size_t K, size_t Kp, size_t n, size_t pad, const T *restrict s,
                             size_t ld, const T *restrict zp, size_t zs, int16_t *restrict d)
{
    for (size_t j = 0; j < pad; ++j) {
        int16_t *restrict dj = d + j * Kp;
        size_t k = 0;
        if (j < n) {
            const T *restrict sj = s + j * ld;
            const int32_t z = (int32_t)zp[j * zs];
            for (; k < K; ++k)
                dj[k] = (int16_t)((int32_t)sj[k] - z);
        }
        for (; k < Kp; ++k)
            dj[k] = 0;
    }
}"""

COLS16 = """\
/* Input patches of output positions [p0, p0 + nt) of one group, one row of Kp int16 per
 * position: col[j * Kp + k] = x - xzp at patch entry k = ((ic * kD + z) * kH + y) * kW + x,
 * 0 for taps in the padding and for k >= K. x: the group's first input channel. */
static void aicc_icols16_SFX(const aicc_conv_params *p, const T *restrict x, int32_t xzp,
                             size_t p0, size_t nt, size_t Kp, int16_t *restrict col)
{
    const size_t OW = p->out[2], OHW = p->out[1] * OW, SW = p->stride[2];
    const size_t X = p->in[0] * p->in[1] * p->in[2];
    const size_t K = p->cin_g * p->k[0] * p->k[1] * p->k[2];
    size_t k = 0;
    for (size_t j = 0; j < nt; ++j)
        for (size_t q = K; q < Kp; ++q)
            col[j * Kp + q] = 0;
    if (K == p->cin_g && X == p->out[0] * OHW && p->pad[0] == 0 && p->pad[1] == 0 &&
        p->pad[2] == 0 && p->stride[0] == 1 && p->stride[1] == 1 && SW == 1) {
        for (size_t ic = 0; ic < K; ++ic) {     /* 1x1, stride 1, unpadded */
            const T *restrict xr = x + ic * X + p0;
            for (size_t j = 0; j < nt; ++j)
                col[j * Kp + ic] = (int16_t)((int32_t)xr[j] - xzp);
        }
        return;
    }
""" + patch_loops("T", "int16_t *restrict c = col + k;", "c[j * Kp]",
                  "(int16_t)((int32_t)SRC - xzp)") + "}"

RQROW = """\
/* Requantization of n uint32 sums (portable): y[q] = saturate(rint(int32(acc[q] + bias) * m)
 * + zp) to [lo, hi], the values of aicc_qround_double (one float64 product, half to even).
 * For a finite m the product is finite (|int32| * |m| < 2^31 * 2^128) and rounding commutes
 * with the clamp to the integers [lo - zp, hi - zp], so blocks of 16 clamp first, then round by
 * (c + 1.5 * 2^52) - 1.5 * 2^52 (exact: |c| < 2^51; t is rounded to double by its assignment):
 * no call and no branch, vectorized at -O2 (GCC 12, clang 14, AArch64 GCC). The int32 value of
 * the sum without an implementation-defined conversion: its low 31 bits minus 2^31 times its
 * sign bit. The n % 16 rest, and every sum when m is NaN or infinite, via aicc_qround_double. */
static void aicc_rqrow_c_SFX(size_t n, const uint32_t *restrict acc, uint32_t bias, float mlt,
                             int32_t zp, int32_t lo, int32_t hi, YT *restrict y)
{
    const double m = (double)mlt, z = (double)zp, L = (double)lo - z, H = (double)hi - z;
    const size_t n16 = m - m == 0.0 ? n / 16u * 16u : 0u;
    for (size_t q = 0; q < n16; q += 16u)
        for (size_t u = 0; u < 16u; ++u) {
            const uint32_t a = acc[q + u] + bias;
            const double v = ((double)(int32_t)(a & 0x7fffffffu) - 0x1p31 * (double)(a >> 31)) * m;
            const double c0 = v < L ? L : v;
            double c = c0 > H ? H : c0;
            c = v != v ? v : c;     /* never NaN; keeps GCC from threading the clamps */
            const double t = c + 0x1.8p52;
            y[q + u] = (YT)(int32_t)((t - 0x1.8p52) + z);
        }
    for (size_t q = n16; q < n; ++q)
        y[q] = (YT)aicc_qround_double((double)aicc_u32_i32(acc[q] + bias) * m, zp, lo, hi);
}"""


RQROW_F = """\
/* aicc_rqrow_c's values in float32, for sums the build proved within 2^24 in magnitude: the
 * sum's int32 value from its low 31 bits minus 2^31 times its sign bit in int32 arithmetic
 * (no implementation-defined conversion), exact in float32; p = fl32(a * m), clamped to
 * [lo - zp, hi - zp] and rounded half to even by (c + 1.5 * 2^23) - 1.5 * 2^23. For
 * |m| <= 64 no rounding boundary lies strictly between p and the exact product (the
 * half-integers below 2^22 are floats), so that is rint(a * m) unless p is itself a
 * half-integer: a block of 16 with one is redone in float64 (kernels/qgemm/requant.py's checked form,
 * with the block in place of fma's exact error). Four lanes per 16-byte vector instead of
 * float64's two (MobileNetV2 int8 on generic, SSE2: a third of its time was requantization).
 * Other multipliers (NaN, Inf, |m| > 64) and the n % 16 rest: aicc_rqrow_c's loop. */
static void aicc_rqrow_f_SFX(size_t n, const uint32_t *restrict acc, uint32_t bias, float m,
                             int32_t zp, int32_t lo, int32_t hi, YT *restrict y)
{
    const float z = (float)zp, L = (float)(lo - zp), H = (float)(hi - zp);
    const size_t n16 = m - m == 0.0f && m <= 64.0f && m >= -64.0f ? n / 16u * 16u : 0u;
    for (size_t q = 0; q < n16; q += 16u) {
        int tie = 0;
        for (size_t u = 0; u < 16u; ++u) {
            const uint32_t a = acc[q + u] + bias;
            const int32_t neg = (int32_t)(a >> 31), low = (int32_t)(a & 0x7fffffffu);
            const float v = (float)(low - ((0 - neg) & 0x7fffffff) - neg) * m;
            const float c0 = v < L ? L : v, c1 = c0 > H ? H : c0;
            const float c = v != v ? v : c1;    /* never NaN: keeps GCC from threading the
                                                 * clamps into branches (constant L, H) */
            const float t = c + 0x1.8p23f, r = t - 0x1.8p23f, d = c - r;
            tie |= d * d == 0.25f;      /* |d| <= 0.5: a half-integer c */
            y[q + u] = (YT)(int32_t)(r + z);
        }
        if (tie)
            for (size_t u = 0; u < 16u; ++u)
                y[q + u] = (YT)aicc_qround_double(
                    (double)aicc_u32_i32(acc[q + u] + bias) * (double)m, zp, lo, hi);
    }
    for (size_t q = n16; q < n; ++q)
        y[q] = (YT)aicc_qround_double((double)aicc_u32_i32(acc[q] + bias) * (double)m, zp, lo,
                                      hi);
}"""


def float_rows(ctx, op, geo, bias) -> bool:
    """Whether a QLinearConv's rows may use RQROW_F: its sums fit 2^24 (constant weights,
    weight and input zero points, and bias when present)."""
    w = ctx.in_const(op.W)
    if w is None or np.asarray(w).size == 0 or (ctx.has_input(op.WZ) and
                                                ctx.in_const(op.WZ) is None):
        return False
    b = None if bias is None else (False if ctx.in_const(8) is None else ctx.in_const(8))
    return sums_fit(conv_weights(ctx, op, geo), ctx.in_dtype(op.X).name,
                    zp_const(ctx, op.XZ), b)


def requant_row_f32(ctx, ydt) -> str:
    """Name of RQROW_F for output dtype ydt (needs the float64 helper, as requant_row)."""
    ctx.helper("qlinear.0.wrap", WRAP)
    return _typed(ctx, "4.rqrowf", RQROW_F.replace("YT", ctype(ydt)), ydt)


def requant_row(ctx, ydt) -> str:
    """Name of the portable requantization of a row of sums to output dtype ydt (RQROW); needs
    quantize.round_helper's float64 form and WRAP. (Targets with ``requant: integer``
    requantize with kernels/qgemm/fixed.py's row instead: ops/qlinear.py chooses.)"""
    ctx.helper("qlinear.0.wrap", WRAP)
    return _typed(ctx, "4.rqrow", RQROW.replace("YT", ctype(ydt)), ydt)


def _dot(ctx) -> None:
    g = gran(ctx)
    ctx.helper(f"qlinear.3.dot.g{g}", DOT.replace("GRAN", str(g)))


def _sfx(dt) -> str:
    return "_u8" if np.dtype(dt).name == "uint8" else "_s8"


def _typed(ctx, key: str, code: str, dt) -> str:
    name = code.split("static void ", 1)[1].split("(", 1)[0].replace("_SFX", _sfx(dt))
    ctx.helper(f"qlinear.3.{key}{_sfx(dt)}", code.replace("_SFX", _sfx(dt))
               .replace("const T ", f"const {ctype(dt)} "))
    return name


def bound(ctx, w_k: int, wz_k: int, rows: int, k: int, x_k: int, xz_k: int,
          w_rows=None) -> int:
    """The largest |sum over k of (w - w_zp)(x - x_zp)| of any output. w_rows(w): the constant
    weights as [rows, k] (default: a reshape)."""
    dx = span(ctx.in_dtype(x_k).name, zp_const(ctx, xz_k))
    w = ctx.in_const(w_k)
    z = ctx.in_const(wz_k) if ctx.has_input(wz_k) else np.zeros((1,), np.int64)
    if w is None or z is None:
        lo, hi = irange(ctx.in_dtype(w_k).name)
        return k * (hi - lo) * dx
    w = np.asarray(w, np.int64)
    w = w.reshape(rows, k) if w_rows is None else w_rows(w)
    z = np.asarray(z, np.int64).reshape(-1, 1)
    return int(np.abs(w - z).sum(axis=1).max(initial=0)) * dx


def gran(ctx) -> int:
    """K's padding: the target's int16 lanes (8 on 16-byte vectors), at least 2 (Cortex-M4:
    no vectors, little waste for short K), at most GRAN_MAX."""
    return max(2, min(GRAN_MAX, ctx.target.vector_bytes // 2))


def _kp(k: int, g: int) -> int:
    return -(-k // g) * g


def tile_rows(ctx, k: int, n: int) -> int:
    """Input rows (positions) per tile for K = k and n rows in all."""
    return max(2, min(n, COL_ELEMS // _kp(k, gran(ctx))))


def _emit_blocks(ctx, rows: int, kp: int, nt: str, tile: int, w_rows: str, zp: tuple,
                 wdt, acc: str, wv: str, col: str, store) -> None:
    """Per block of 4 weight rows (starting at w_rows + m0 * K): widen them, run the dot
    kernel against the nt input rows in col, then ``store(r_expr, acc_row)`` per row."""
    rows16 = _typed(ctx, "rows16", ROWS16, wdt)
    with ctx.block(f"for (size_t m0 = 0; m0 < {rows}u; m0 += 4u)"):
        ctx(f"const size_t mr = {rows}u - m0 < 4u ? {rows}u - m0 : 4u;")
        ctx(f"{rows16}(K, {kp}u, mr, 4u, {w_rows} + m0 * K, K, {zp[0]}, {zp[1]}, {wv});")
        ctx(f"aicc_idot4({kp // gran(ctx)}u, {wv}, {col}, {nt}, {acc}, {tile}u);")
        with ctx.block("for (size_t r = 0; r < mr; ++r)"):
            store("r", f"({acc} + r * {tile}u)")


def typed(ctx, key: str, code: str, dt) -> str:
    """Name of helper code (``_SFX``, ``const T``) for dtype dt, registered under key."""
    return _typed(ctx, key, code, dt)


def cols16(ctx, dt) -> str:
    """Name of the patch gatherer (COLS16) for input dtype dt."""
    return _typed(ctx, "cols16", COLS16, dt)


def rows16(ctx, dt) -> str:
    """Name of the row widener (ROWS16) for dtype dt."""
    return _typed(ctx, "rows16", ROWS16, dt)


def zp_ptr(ctx, k: int, dt, n: int, name: str) -> tuple:
    """(pointer, stride) of a zero point input k (per tensor or per row of n), a static zero
    when absent."""
    if not ctx.has_input(k):
        ctx(f"static const {ctype(dt)} {name} = 0;")
        return f"&{name}", "0u"
    per = numel(ctx.in_shape(k)) > 1 and n > 1
    return ctx.inp[k], "1u" if per else "0u"


def emit_conv(ctx, op, geo, post) -> None:
    """Conv through the dot kernel, per batch item, group and tile of output positions;
    ``post(ch, src, n, dst)`` writes n outputs from uint32 sums src[q] to out[dst + q] for
    output channel ch (C expressions). Patches from the NCHW input, or from a padded
    channel-last copy (kernels/qgemm/cpad.py) where that applies."""
    ta, tb = ctx.in_dtype(op.X), ctx.in_dtype(op.W)
    pad = qgemm_cpad.plan(ctx, op, geo, gran(ctx))
    K, P = (pad.k if pad else geo.cin_g * numel(geo.k)), numel(geo.out)
    kp, tile = _kp(K, gran(ctx)), tile_rows(ctx, K, P)
    ctx.kernel = "generic idot4"
    ctx.helper("conv.0.params", PARAMS)
    ctx.helper("conv.1.range", RANGE)
    ctx.helper("qlinear.0.wrap", WRAP)
    _dot(ctx)
    col = ctx.scratch(tile * kp * 2, "int16_t", "col")
    wv = ctx.scratch(4 * kp * 2, "int16_t", "wv")
    acc = ctx.scratch(4 * tile * 4, "uint32_t", "acc")
    how = (f"patches from a padded channel-last copy [{pad.hp}][{pad.wp}][{pad.cp}]" if pad
           else "patches from the NCHW input")
    ctx(f"/* {geo.describe()}: int16 dot products [{geo.cout_g} x {K}] . [{K}] per output, "
        f"tiles of {tile} positions (K padded to {kp}), {how} */")
    ctx(geo.params())
    ctx(f"const size_t K = {K}u;")
    ctx(f"const int32_t xzp = {zp_expr(ctx, op.XZ)};")
    zp, zs = zp_ptr(ctx, op.WZ, tb, geo.cout, "wz0")
    inP = numel(geo.inp)
    wrows = ctx.inp[op.W]
    if pad:
        xpad, colsT = qgemm_cpad.helpers(ctx, _typed, ta, gran(ctx))
        n_xp = pad.hp * pad.wp * pad.cp
        xp = ctx.scratch(n_xp * 2, "int16_t", "xp")
        wrows = ctx.const(pad.weights, "wtap")
        ctx(f"static const size_t off[{pad.taps}] = {{ "
            + ", ".join(f"{v}u" for v in pad.off) + " };")
        with ctx.block(f"for (size_t i = 0; i < {n_xp}u; ++i)"):
            ctx(f"{xp}[i] = 0;")
    else:
        cols = _typed(ctx, "cols16", COLS16, ta)
    with ctx.block(f"for (size_t nb = 0; nb < {geo.batch}u; ++nb)"):
        if pad:
            ctx(f"{xpad}(&prm, {ctx.inp[op.X]} + nb * {geo.cin * inP}u, xzp, {pad.cp}u, "
                f"{pad.hp}u, {pad.wp}u, {xp});")
        with ctx.block(f"for (size_t gi = 0; gi < {geo.group}u; ++gi)"):
            with ctx.block(f"for (size_t p0 = 0; p0 < {P}u; p0 += {tile}u)"):
                ctx(f"const size_t nt = {P}u - p0 < {tile}u ? {P}u - p0 : {tile}u;")
                if pad:
                    ctx(f"{colsT}(&prm, {xp}, off, {pad.taps}u, {pad.cp}u, {pad.wp}u, p0, nt, "
                        f"{col});")
                else:
                    ctx(f"{cols}(&prm, {ctx.inp[op.X]} + (nb * {geo.cin}u + gi * "
                        f"{geo.cin_g}u) * {inP}u, xzp, p0, nt, {kp}u, {col});")
                oc0 = f"gi * {geo.cout_g}u"
                zpb = f"{zp} + ({oc0}) * {zs}"

                def store(r, src):
                    ctx(f"const size_t oc = {oc0} + m0 + {r};")
                    post("oc", src, "nt", f"(nb * {geo.cout}u + oc) * {P}u + p0")
                _emit_blocks(ctx, geo.cout_g, kp, "nt", tile, f"{wrows} + ({oc0}) * K",
                             (zpb + " + m0 * " + zs, zs), tb, acc, wv, col, store)


def emit_matmul(ctx, op, m: int, k: int, n: int, b_t: np.ndarray, post) -> None:
    """y[m][n] = a[m][k] @ b through the dot kernel (m: every row of a's matrices, which
    share the constant b; b_t: b transposed, [n][k]); ``post(ch, src, cnt, dst, step)`` writes cnt
    outputs for column ch from src[q] to out[dst + q * step]."""
    ta, tb = ctx.in_dtype(op.A), ctx.in_dtype(op.B)
    kp, tile = _kp(k, gran(ctx)), tile_rows(ctx, k, m)
    ctx.kernel = "generic idot4"
    ctx.helper("qlinear.0.wrap", WRAP)
    _dot(ctx)
    rows16a = _typed(ctx, "rows16", ROWS16, ta)
    bt = ctx.const(b_t, "bt")
    col = ctx.scratch(tile * kp * 2, "int16_t", "col")
    wv = ctx.scratch(4 * kp * 2, "int16_t", "wv")
    acc = ctx.scratch(4 * tile * 4, "uint32_t", "acc")
    ctx(f"/* int16 dot products: [{m} x {k}] @ [{k} x {n}], b transposed at build "
        f"time, tiles of {tile} rows (K padded to {kp}) */")
    ctx(f"const size_t K = {k}u;")
    az, _ = zp_ptr(ctx, op.AZ, ta, 1, "az0")
    bz, bzs = zp_ptr(ctx, op.BZ, tb, n, "bz0")
    with ctx.block(f"for (size_t i0 = 0; i0 < {m}u; i0 += {tile}u)"):
        ctx(f"const size_t nt = {m}u - i0 < {tile}u ? {m}u - i0 : {tile}u;")
        ctx(f"{rows16a}(K, {kp}u, nt, nt, {ctx.inp[op.A]} + i0 * K, K, {az}, 0u, {col});")

        def store(r, src):
            ctx(f"const size_t j = m0 + {r};")
            post("j", src, "nt", f"i0 * {n}u + j", f"{n}u")
        _emit_blocks(ctx, n, kp, "nt", tile, bt, (f"{bz} + m0 * {bzs}", bzs), tb, acc, wv,
                     col, store)
