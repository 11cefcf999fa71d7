"""Integer GEMM of QLinearConv / ConvInteger / QLinearMatMul / MatMulInteger with constant
int8-sized weights on ISAs that dot a vector of int8 into a scalar (a description's ``qvdot``
entry: isa/helium, MVE's VMLADAVA.S8, 16 products per instruction). The pair kernels
(kernels/qgemm/pairs.py) stay the fallback.

Form: every output is ``sum_k (w - w_zp)(x - x_zp) = sum_k (w - w_zp) x - x_zp * cs`` with the
column sums ``cs = sum_k (w - w_zp)`` of the constant weights computed at build time, so the
inputs stay int8 (no widening). ``w - w_zp`` (each value must fit int8, else the pair or
portable kernels run) is stored as int8, K padded with zero weights to Kp (a multiple of the
lanes L), per block of 2 output channels [block][Kp / L][2][L] (an odd channel count gets a
zero channel). The inputs are rows of K int8 per output position (k contiguous): a MatMul's
int8 rows of a as they are; uint8 inputs as ``x - 128`` (x_zp - 128 in the correction). Conv
patches (1-D / 2-D; 3-D convs take the pair kernel) have k in the order (ky, kx, ic), the
weights rearranged to match at build time: a 1x1 conv's tile of patches is its input tile
transposed (the description's ``scatter``: a VSTRB scatter of 8 values), others copy the
group's input once channel-last with its padding (Hp x Wp x C, the zero point in the padding),
then per patch row one ``copy`` of kW * C contiguous bytes (at dilation 1). A row's
last K % L values are a predicated load (``loadz``: zeros past K, nothing read there), so rows
need no padding.

The dot kernel (aicc_qvdot2) keeps 2 channels x 2 positions in four int32 sums: per L k two
loads of weights, two of inputs and four ``mac`` (4 L products: 10 instructions per 64 on the
M55 with GCC 12.2 -O2, with the low-overhead loop), an odd position last with 2 channels x 1;
K <= 2 L holds the block's weights in registers and takes one position at a time (1 or 2
input loads, 2 or 4 ``mac`` and the stores: no loop over k).
The sums are modulo 2^32 and exact (the build proves |sum| < 2^31 as for the portable kernels),
so the outputs equal the portable kernels' bit for bit; requantization, bias and the store are
the caller's ``post`` per channel row (kernels/qgemm/fixed.py on the Cortex-M targets).
"""
from __future__ import annotations

import numpy as np

from ...emit_c.loops import numel
from ..isa import registry
from ..isa.registry import include_line
from . import portable as qgemm_c
from .requant import WRAP
from .simd import zp_expr, zp_values
from .spell import fill

TABLES = registry.table("qvdot")

SPELL = """\
/* The vector dot-product operations in the description's spellings (isa/ISA: qvdot). */
static inline VT aicc_qv_load_ISA(const int8_t *p)
{
    return LOAD;
}

static inline VT aicc_qv_loadz_ISA(const int8_t *p, size_t n)
{
    return LOADZ;
}

static inline int32_t aicc_qv_mac_ISA(int32_t c, VT a, VT b)
{
    return MAC;
}"""

DOT = """\
/* acc[r * ldc + j] = sum over k < K of w_r[k] * x[j * ldx + k] - zx * cs[r] (modulo 2^32) for
 * the two channels r of a block and the n input rows j (kernels/qgemm/vdot.py): w holds, per L
 * k, L int8 of channel 0, then of channel 1 (zeros past K); x rows of K int8 (the last K % L
 * loaded predicated). The sums start at -zx * cs[r]; K <= 2 L: the weights loaded once, a
 * position at a time; else two positions at a time. */
static void aicc_qvdot2_ISA(size_t K, const int8_t *restrict w, const int8_t *restrict x,
                            size_t ldx, size_t n, uint32_t *restrict acc, size_t ldc,
                            const int32_t *restrict cs, int32_t zx)
{
    const size_t kb = K / Lu, kt = K % Lu;
    const int32_t z0 = (int32_t)(0u - (uint32_t)zx * (uint32_t)cs[0]);
    const int32_t z1 = (int32_t)(0u - (uint32_t)zx * (uint32_t)cs[1]);
    size_t j = 0;
    if (kb == 0u) {
        const VT w0 = aicc_qv_load_ISA(w), w1 = aicc_qv_load_ISA(w + Lu);
        for (; j < n; ++j, x += ldx) {
            const VT a = aicc_qv_loadz_ISA(x, kt);
            acc[j] = (uint32_t)aicc_qv_mac_ISA(z0, w0, a);
            acc[ldc + j] = (uint32_t)aicc_qv_mac_ISA(z1, w1, a);
        }
        return;
    }
    if (K <= 2u * Lu) {
        const VT w0 = aicc_qv_load_ISA(w), w1 = aicc_qv_load_ISA(w + Lu);
        const VT v0 = aicc_qv_load_ISA(w + 2u * Lu), v1 = aicc_qv_load_ISA(w + 3u * Lu);
        const size_t k1 = K - Lu;
        for (; j < n; ++j, x += ldx) {
            const VT a = aicc_qv_load_ISA(x), b = aicc_qv_loadz_ISA(x + Lu, k1);
            acc[j] = (uint32_t)aicc_qv_mac_ISA(aicc_qv_mac_ISA(z0, w0, a), v0, b);
            acc[ldc + j] = (uint32_t)aicc_qv_mac_ISA(aicc_qv_mac_ISA(z1, w1, a), v1, b);
        }
        return;
    }
    for (; j + 2u <= n; j += 2u) {
        const int8_t *x0 = x + j * ldx, *x1 = x0 + ldx;
        const int8_t *wp = w;
        int32_t s00 = z0, s01 = z0, s10 = z1, s11 = z1;
        for (size_t b = 0; b < kb; ++b, wp += 2u * Lu, x0 += Lu, x1 += Lu) {
            const VT a = aicc_qv_load_ISA(x0), c = aicc_qv_load_ISA(x1);
            const VT w0 = aicc_qv_load_ISA(wp), w1 = aicc_qv_load_ISA(wp + Lu);
            s00 = aicc_qv_mac_ISA(s00, w0, a);
            s01 = aicc_qv_mac_ISA(s01, w0, c);
            s10 = aicc_qv_mac_ISA(s10, w1, a);
            s11 = aicc_qv_mac_ISA(s11, w1, c);
        }
        if (kt) {
            const VT a = aicc_qv_loadz_ISA(x0, kt), c = aicc_qv_loadz_ISA(x1, kt);
            const VT w0 = aicc_qv_load_ISA(wp), w1 = aicc_qv_load_ISA(wp + Lu);
            s00 = aicc_qv_mac_ISA(s00, w0, a);
            s01 = aicc_qv_mac_ISA(s01, w0, c);
            s10 = aicc_qv_mac_ISA(s10, w1, a);
            s11 = aicc_qv_mac_ISA(s11, w1, c);
        }
        acc[j] = (uint32_t)s00;
        acc[j + 1u] = (uint32_t)s01;
        acc[ldc + j] = (uint32_t)s10;
        acc[ldc + j + 1u] = (uint32_t)s11;
    }
    if (j < n) {
        const int8_t *x0 = x + j * ldx;
        const int8_t *wp = w;
        int32_t s0 = z0, s1 = z1;
        for (size_t b = 0; b < kb; ++b, wp += 2u * Lu, x0 += Lu) {
            const VT a = aicc_qv_load_ISA(x0);
            s0 = aicc_qv_mac_ISA(s0, aicc_qv_load_ISA(wp), a);
            s1 = aicc_qv_mac_ISA(s1, aicc_qv_load_ISA(wp + Lu), a);
        }
        if (kt) {
            const VT a = aicc_qv_loadz_ISA(x0, kt);
            s0 = aicc_qv_mac_ISA(s0, aicc_qv_load_ISA(wp), a);
            s1 = aicc_qv_mac_ISA(s1, aicc_qv_load_ISA(wp + Lu), a);
        }
        acc[j] = (uint32_t)s0;
        acc[ldc + j] = (uint32_t)s1;
    }
}"""

def isa_for(ctx):
    """The vector dot kernels' ISA for ctx's node (isa/registry.py's rule over the ``qvdot``
    ISAs)."""
    return registry.isa_for(ctx, TABLES)


def _lanes(isa: str) -> int:
    return int(TABLES[isa]["lanes"])


def spellings(ctx, isa: str) -> None:
    """isa's #include, its qvdot prelude (fill, copy, scatter) and spellings as helpers."""
    sp = TABLES[isa]
    ctx.helper(f"qvdot.0.include.{isa}", include_line(isa))
    spell = SPELL.replace("LOADZ", fill(sp["loadz"], p="p", n="n")) \
        .replace("LOAD", fill(sp["load"], p="p")).replace("MAC", fill(sp["mac"], c="c", a="a",
                                                                       b="b"))
    ctx.helper(f"qvdot.1.spell.{isa}", spell.replace("VT", sp["vtype"]).replace("ISA", isa) +
               "\n\n" + sp["prelude"])


def _dot(ctx, isa: str) -> str:
    """Name of the dot kernel of isa (after its spellings)."""
    spellings(ctx, isa)
    ctx.helper(f"qvdot.2.dot.{isa}", DOT.replace("VT", TABLES[isa]["vtype"]).replace("ISA", isa)
               .replace("Lu", f"{_lanes(isa)}u"))
    return f"aicc_qvdot2_{isa}"


def _scatter(isa: str, dt) -> str:
    """Name of isa's row scatter for input dtype dt (uint8: as v - 128)."""
    return TABLES[isa]["scatter_u8" if np.dtype(dt).name == "uint8" else "scatter_s8"]


def arrange(wk: np.ndarray, lanes: int) -> tuple | None:
    """(int8 words [groups][rows / 2][Kp / L][2][L], int32 column sums [groups][rows'] with
    rows' = rows rounded up to even) of constant weights wk ([groups, rows, K] int64 values
    w - w_zp; rows and K padded with zeros), or None when a value does not fit int8."""
    if wk.size and (wk.min() < -128 or wk.max() > 127):
        return None
    g, rows, k = wk.shape
    rp, kp = -(-rows // 2) * 2, -(-k // lanes) * lanes
    w = np.zeros((g, rp, kp), np.int8)
    w[:, :rows, :k] = wk
    cs = w.astype(np.int64).sum(axis=2).astype(np.int32)
    w = w.reshape(g, rp // 2, 2, kp // lanes, lanes).transpose(0, 1, 3, 2, 4)
    return np.ascontiguousarray(w).reshape(-1), cs.reshape(-1)


def _pointwise(geo) -> bool:
    """1x1, stride 1, unpadded: each position's patch is a column of the input."""
    return (all(v == 1 for v in geo.k) and all(v == 1 for v in geo.stride)
            and not any(geo.pad) and not any(geo.pad_end))


def conv_weights(ctx, op, geo) -> tuple | None:
    """A 1-D / 2-D conv's arranged weights (arrange, k in the order ky, kx, ic of the
    channel-last patches) and column sums, None when not constant, not int8-sized or 3-D."""
    if ctx.in_const(op.W) is None or (ctx.has_input(op.WZ) and ctx.in_const(op.WZ) is None):
        return None
    if len(geo.k) > 2:
        return None
    w = np.asarray(ctx.in_const(op.W)).astype(np.int64).reshape(geo.cout, geo.cin_g, -1)
    w = (w - zp_values(ctx, op.WZ, geo.cout)[:, None, None]).transpose(0, 2, 1)
    return arrange(w.reshape(geo.group, geo.cout_g, -1), _lanes(isa_for(ctx)))


def _zx(ctx, k, dt) -> str:
    """C of the input zero point in the rows' int8 domain (uint8: minus 128)."""
    z = zp_expr(ctx, k)
    return f"{z} - 128" if np.dtype(dt).name == "uint8" else z


def _patches(ctx, isa: str, geo, Wp: int, xt: str, col: str) -> None:
    """C of the patches of output positions [p0, p0 + nt) from the channel-last image xt
    (rows of Wp pixels of C int8): col[j * K + (ky * kW + kx) * C + ic], per patch row one
    ``copy`` of kW * C contiguous bytes (dilation 1), else kW copies of C; the sizes and
    strides literals, so the compiler unrolls the copies."""
    C, copy = geo.cin_g, TABLES[isa]["copy"]
    (KH, KW), (SH, SW), (DH, DW) = (([1] + v)[-2:] for v in (geo.k, geo.stride, geo.dil))
    OW = geo.out[-1]
    with ctx.block(""):
        ctx(f"size_t oy = p0 / {OW}u, ox = p0 % {OW}u;")
        ctx(f"int8_t *restrict c = {col};")
        with ctx.block("for (size_t j = 0; j < nt; ++j)"):
            ctx(f"const int8_t *restrict r = {xt} + (oy * {SH * Wp * C}u + ox * {SW * C}u);")
            with ctx.block(f"for (size_t ky = 0; ky < {KH}u; ++ky, r += {DH * Wp * C}u)"):
                if DW == 1:
                    ctx(f"{copy}(r, {KW * C}u, c);")
                    ctx(f"c += {KW * C}u;")
                else:
                    with ctx.block(f"for (size_t kx = 0; kx < {KW}u; ++kx, c += {C}u)"):
                        ctx(f"{copy}(r + kx * {DW * C}u, {C}u, c);")
            with ctx.block(f"if (++ox == {OW}u)"):
                ctx("ox = 0;")
                ctx("++oy;")


def emit_conv(ctx, op, geo, arranged: tuple, post) -> None:
    """Conv through aicc_qvdot2 (loops: batch item, group, tile of output positions);
    ``post(ch, src, n, dst)`` as portable.emit_conv's. arranged: conv_weights. A 1x1 conv's
    tile of patches is its input transposed (the description's scatter); other convs first
    copy the group's input channel-last with its padding (scatter), then copy each patch's
    rows from there (_patches)."""
    isa = isa_for(ctx)
    ta = ctx.in_dtype(op.X)
    K, P, C = geo.cin_g * numel(geo.k), numel(geo.out), geo.cin_g
    kp = -(-K // _lanes(isa)) * _lanes(isa)
    tile = max(2, min(P, qgemm_c.COL_ELEMS // K))
    blocks = (geo.cout_g + 1) // 2
    ctx.kernel = f"{isa} qvdot2"
    ctx.helper("qlinear.0.wrap", WRAP)
    dot = _dot(ctx, isa)
    scatter = _scatter(isa, ta)
    pw = _pointwise(geo)
    wq = ctx.const(arranged[0], "wq")
    cs = ctx.const(arranged[1], "wcs")
    col = ctx.scratch(tile * K, "int8_t", "col")
    acc = ctx.scratch(2 * tile * 4, "uint32_t", "acc")
    inP = numel(geo.inp)
    ctx(f"/* {geo.describe()}: int8 vector dot products [{geo.cout_g} x {K}] . [{K}] per "
        f"output, tiles of {tile} positions, patches channel-last from the NCHW input */")
    if not pw:
        (H, W), (PT, PL) = ([1] + geo.inp)[-2:], ([0] + geo.pad)[-2:]
        Hp, Wp = H + PT + ([0] + geo.pad_end)[-2], W + PL + ([0] + geo.pad_end)[-1]
        padded = (Hp, Wp) != (H, W)
        xt = ctx.scratch(Hp * Wp * C, "int8_t", "xt")
    ctx(f"const int32_t zx = {_zx(ctx, op.XZ, ta)};")
    with ctx.block(f"for (size_t nb = 0; nb < {geo.batch}u; ++nb)"):
        with ctx.block(f"for (size_t gi = 0; gi < {geo.group}u; ++gi)"):
            xg = f"{ctx.inp[op.X]} + (nb * {geo.cin}u + gi * {C}u) * {inP}u"
            if not pw:
                if padded:
                    ctx(f"{TABLES[isa]['fill']}({xt}, {Hp * Wp * C}u, (int8_t)zx);")
                with ctx.block(f"for (size_t ic = 0; ic < {C}u; ++ic)"):
                    with ctx.block(f"for (size_t iy = 0; iy < {H}u; ++iy)"):
                        ctx(f"{scatter}({xg} + (ic * {H}u + iy) * {W}u, {W}u, "
                            f"{xt} + ((iy + {PT}u) * {Wp}u + {PL}u) * {C}u + ic, {C}u);")
            with ctx.block(f"for (size_t p0 = 0; p0 < {P}u; p0 += {tile}u)"):
                ctx(f"const size_t nt = {P}u - p0 < {tile}u ? {P}u - p0 : {tile}u;")
                if pw:
                    with ctx.block(f"for (size_t ic = 0; ic < {K}u; ++ic)"):
                        ctx(f"{scatter}({xg} + ic * {P}u + p0, nt, {col} + ic, {K}u);")
                else:
                    _patches(ctx, isa, geo, Wp, xt, col)
                with ctx.block(f"for (size_t c2 = 0; c2 < {blocks}u; ++c2)"):
                    ctx(f"{dot}({K}u, {wq} + (gi * {blocks}u + c2) * {2 * kp}u, {col}, {K}u, "
                        f"nt, {acc}, {tile}u, {cs} + (gi * {blocks}u + c2) * 2u, zx);")
                    rows = "2u" if geo.cout_g % 2 == 0 else f"c2 + 1u < {blocks}u ? 2u : 1u"
                    with ctx.block(f"for (size_t r = 0; r < ({rows}); ++r)"):
                        ctx(f"const size_t oc = gi * {geo.cout_g}u + 2u * c2 + r;")
                        post("oc", f"({acc} + r * {tile}u)", "nt",
                             f"(nb * {geo.cout}u + oc) * {P}u + p0")


def matmul_weights(ctx, op, k: int, n: int, b_t: np.ndarray) -> tuple | None:
    """A MatMul's arranged b (b_t: b transposed, [n][k]) minus its zero point (per tensor or
    per column) and column sums; None when not int8-sized."""
    bz = zp_values(ctx, op.BZ, n) if ctx.has_input(op.BZ) else np.zeros(n, np.int64)
    w = np.asarray(b_t).astype(np.int64) - np.asarray(bz, np.int64).reshape(-1, 1)
    return arrange(w.reshape(1, n, k), _lanes(isa_for(ctx)))


def emit_matmul(ctx, op, m: int, k: int, n: int, arranged: tuple, post) -> None:
    """y[m][n] = a[m][k] @ b through aicc_qvdot2 (portable.emit_matmul's ``post``); int8 rows
    of a read in place, uint8 rows converted per tile. arranged: matmul_weights."""
    isa = isa_for(ctx)
    ta = ctx.in_dtype(op.A)
    kp = -(-k // _lanes(isa)) * _lanes(isa)
    ctx.helper("qlinear.0.wrap", WRAP)
    dot = _dot(ctx, isa)
    u8 = np.dtype(ta).name == "uint8"
    wq = ctx.const(arranged[0], "wq")
    cs = ctx.const(arranged[1], "wcs")
    blocks = (n + 1) // 2
    ctx.kernel = f"{isa} qvdot2"
    tile = max(1, min(m, qgemm_c.COL_ELEMS // k))
    ctx(f"/* int8 vector dot products: [{m} x {k}] @ [{k} x {n}], b arranged at build time, "
        f"tiles of {tile} rows */")
    ctx(f"const int32_t zx = {_zx(ctx, op.AZ, ta)};")
    if u8:
        col = ctx.scratch(tile * k, "int8_t", "col")
    if m == 1:          # every channel's sum, then the stores
        acc = ctx.scratch(2 * blocks * 4, "uint32_t", "acc")
        xs = ctx.inp[op.A]
        if u8:
            ctx(f"{_scatter(isa, ta)}({xs}, {k}u, {col}, 1u);")
            xs = col
        with ctx.block(f"for (size_t c2 = 0; c2 < {blocks}u; ++c2)"):
            ctx(f"{dot}({k}u, {wq} + c2 * {2 * kp}u, {xs}, {k}u, 1u, {acc} + 2u * c2, 1u, "
                f"{cs} + 2u * c2, zx);")
        with ctx.block(f"for (size_t j = 0; j < {n}u; ++j)"):
            post("j", f"({acc} + j)", "1u", "j", f"{n}u")
        return
    acc = ctx.scratch(2 * tile * 4, "uint32_t", "acc")
    with ctx.block(f"for (size_t i0 = 0; i0 < {m}u; i0 += {tile}u)"):
        ctx(f"const size_t nt = {m}u - i0 < {tile}u ? {m}u - i0 : {tile}u;")
        xs = f"{ctx.inp[op.A]} + i0 * {k}u"
        if u8:
            ctx(f"{_scatter(isa, ta)}({xs}, nt * {k}u, {col}, 1u);")
            xs = col
        with ctx.block(f"for (size_t c2 = 0; c2 < {blocks}u; ++c2)"):
            ctx(f"{dot}({k}u, {wq} + c2 * {2 * kp}u, {xs}, {k}u, nt, {acc}, {tile}u, "
                f"{cs} + 2u * c2, zx);")
            rows = "2u" if n % 2 == 0 else f"c2 + 1u < {blocks}u ? 2u : 1u"
            with ctx.block(f"for (size_t r = 0; r < ({rows}); ++r)"):
                ctx("const size_t j = 2u * c2 + r;")
                post("j", f"({acc} + r * {tile}u)", "nt", f"i0 * {n}u + j", f"{n}u")
