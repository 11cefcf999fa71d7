"""Conv as a transposed SIMD GEMM (float32; x86-avx2 / x86-avx512), for layers with few output
positions and many output channels (the tails of CNNs: 7x7, 14x14 maps):
``Y^T[P, Cout/g] = patches[P, K] @ W^T[K, Cout/g]`` per batch item and group, so that the
output channels are the vectorized N dimension (a multiple of the panel width NR in most
networks, where P = 49 would fill 49 of 64 lanes).

* B operand: the weights transposed, packed at compile time into column panels of NR
  (``gemm.pack_b``: ``Bp[p][k][j] = W[p * NR + j][k]``, zero past Cout/g); run-time weights are
  packed into step scratch by gemm.py's packing helper.
* A operand: the patches of a tile of output positions, gathered at run time from the padded
  volume (conv_simd's pad copy, or the input itself when no padding is needed) in the
  kernels' packed-A layout (conv_simd_gemm.pack_a: K blocks of kc, row tiles of mr, k-major),
  tile by tile (positions x K entries within the tile_kb budget).
* The tile GEMM (conv_simd_gemm.tile_gemm, no bias, no activation) writes Y^T for the tile into
  scratch; the transposed copy to the NCHW output adds the bias and applies the clamp
  (``v < lo ? lo : v``, then ``v > hi ? hi : v``: NaN passes, as in the activation table)
  and then the scalar activation pass (other fused activations) on each output row. On x86
  the copy moves 8 x 8 blocks through AVX registers (tstore_helper), elsewhere it runs
  channel by channel (COPY_ROWS).

Rounding: each output is FMA chains over k ascending per K block (as in kernels/conv/simd.py), + bias, then the
activation. NaN/Inf: IEEE; zero padding of the weight panels meets only discarded lanes.
"""
from __future__ import annotations

import math

import numpy as np

from ..gemm.portable import pack_b, pack_helper
from ..gemm.simd import flit, nr_of, step_rows
from ..isa.registry import ISAS
from ..isa.x86 import AVX, SIMD
from ..move.copy import avx_block, blocked
from .base_c import epilogue, use
from .simd_gemm import GEMM_FN, KEY, clamp_of, tile_gemm

PACKP = """\
/* Patches of output positions [p0, p0 + m) x entries [k0, k1) of one group in the kernels'
 * packed-A layout: K blocks of kc (relative to k0), row tiles of mr positions, k-major:
 * a[(kb - k0) * m + i0 * kcb + kk * rows + r] = patch(p0 + i0 + r, kb + kk). k = c * kk + t:
 * channel c at c * V, tap t at toff[t], in the (padded) volume of sizes e. The positions of a
 * row tile form runs inside output rows; with stride 1 a run is one masked vector load (only
 * its own lanes are read) stored 16 floats wide: the lanes past the run are rewritten by the
 * next run or the next k, as a is written in memory order (16 floats of slack for the last). */
static void aicc_cv_packp_ISA(const aicc_conv_params *p, const float *restrict xg,
    const size_t e[3], const size_t *restrict toff, size_t ntap, size_t p0, size_t m,
    size_t k0, size_t k1, size_t mr, size_t kc, float *restrict a)
{
    const size_t OW = p->out[2], OH = p->out[1], V = e[0] * e[1] * e[2], HW = e[1] * e[2];
    const size_t s2 = p->stride[2];
    size_t off[16], rl[16], rn[16], nrun;
    for (size_t kb = k0; kb < k1; kb += kc)         /* in memory order (see the overwrites) */
        for (size_t i0 = 0; i0 < m; i0 += mr) {
            const size_t rows = m - i0 < mr ? m - i0 : mr;
            const size_t kcb = k1 - kb < kc ? k1 - kb : kc;
            float *restrict d = a + (kb - k0) * m + i0 * kcb;
            nrun = 0;
            for (size_t r = 0; r < rows; ++r) {
                const size_t q = p0 + i0 + r, ox = q % OW, oy = q / OW % OH, oz = q / OW / OH;
                off[r] = oz * p->stride[0] * HW + oy * p->stride[1] * e[2] + ox * s2;
                if (r == 0 || ox == 0) {
                    rl[nrun] = r;
                    rn[nrun++] = 0;
                }
                ++rn[nrun - 1];
            }
            size_t c = kb / ntap, t = kb % ntap;
            for (size_t kk = 0; kk < kcb; ++kk, d += rows) {
                const float *restrict s = xg + c * V + toff[t];
                if (++t == ntap) {
                    t = 0;
                    ++c;
                }
                if (s2 == 1u) {
                    for (size_t u = 0; u < nrun; ++u) {
                        float *dr = d + rl[u];
                        const float *sr = s + off[rl[u]];
                        const size_t n = rn[u];
COPYRUN
                    }
                } else {
                    for (size_t r = 0; r < rows; ++r)
                        d[r] = s[off[r]];
                }
            }
        }
}"""

DRIVER = """\
/* Transposed conv GEMM: per batch item, group and tile of nt positions, Y^T[m, Mo] =
 * patches[m, K] @ W^T (wp: per group the weights in column panels of NR, K * NR floats each;
 * K in tiles of kt), then y[oc][p] = clamp(Y^T[p][oc] + bias[oc], lo, hi) and the scalar
 * activation ep (may be NULL) on each finished output row. xp: padded volume (NULL: the
 * input has every tap inside, e its sizes). */
static void aicc_cv_convt_ISA(const aicc_conv_params *p, const float *restrict x,
    const float *restrict wp, const float *restrict bias, float *restrict y, float *restrict xp,
    const size_t e[3], const size_t *restrict toff, float *restrict abuf, float *restrict tbuf,
    size_t nt, size_t kt, size_t mr, size_t kc, float lo, float hi,
    GEMM_FN, void (*ep)(float *, size_t))
{
    const size_t X = p->in[0] * p->in[1] * p->in[2], P = p->out[0] * p->out[1] * p->out[2];
    const size_t ntap = p->k[0] * p->k[1] * p->k[2], K = p->cin_g * ntap;
    const size_t C = p->group * p->cin_g, Mo = p->cout_g, npan = (Mo + NRu - 1) / NRu;
    const size_t Vg = p->cin_g * e[0] * e[1] * e[2];
    CLAMP1_DECL
    for (size_t n = 0; n < p->batch; ++n) {
        const float *restrict xn = x + n * C * X;
        if (xp) {
            aicc_cv_pad(p, C, xn, xp, e, 0u);
            xn = xp;
        }
        for (size_t g = 0; g < p->group; ++g) {
            const float *restrict wg = wp + g * npan * K * NRu;
            for (size_t p0 = 0; p0 < P; p0 += nt) {
                const size_t m = P - p0 < nt ? P - p0 : nt;
                for (size_t k0 = 0; k0 < K; k0 += kt) {
                    const size_t k1 = K - k0 < kt ? K : k0 + kt;
                    aicc_cv_packp_ISA(p, xn + g * Vg, e, toff, ntap, p0, m, k0, k1, mr, kc,
                                      abuf);
                    gemm(m, Mo, k1 - k0, abuf, 0, wg + k0 * NRu, K * NRu, NRu, tbuf, Mo, NULL,
                         -HUGE_VALF, HUGE_VALF, k0 > 0, k1 == K);
                }
COPYOUT
            }
        }
    }
}"""


# Y^T to the NCHW output rows, + bias, clamp: per output channel, its m positions (the ISAs
# without a vector transposition: a row-by-row scalar loop, which reads the tile across rows)
COPY_ROWS = """\
                for (size_t j = 0; j < Mo; ++j) {
                    const size_t oc = g * Mo + j;
                    const float b = bias ? bias[oc] : 0.0f;
                    float *restrict yr = y + (n * p->group * Mo + oc) * P + p0;
                    for (size_t r = 0; r < m; ++r)      /* branch-free clamp (NaN passes) */
                        yr[r] = CLAMP1;
                    if (ep)
                        ep(yr, m);
                }"""

# the same in 8 x 8 register blocks (x86: aicc_cv_tstore_avx); the scalar activation after.
# ResNet-50's 512 -> 2048 1x1 conv at 7x7, x86-avx2, AMD Zen 4, against onnxruntime: the
# row-by-row loop took 0.26 of the 1.22 ratio (each Y^T read a cache line of its own)
COPY_BLOCKS = """\
                float *restrict yg = y + (n * p->group + g) * Mo * P + p0;
                aicc_cv_tstore_avx(m, Mo, tbuf, Mo, yg, P, bias ? bias + g * Mo : NULL, lo, hi);
                if (ep)
                    for (size_t j = 0; j < Mo; ++j)
                        ep(yg + j * P, m);"""


def tstore_helper(ctx, isa: str) -> None:
    """Register aicc_cv_tstore_avx: dst[c * ds + r] = clamp(src[r * ss + c] + bias[c]) in the
    AVX 8 x 8 register blocks of kernels/move/copy.py (then + bias and the clamp in registers:
    max / min return the second operand when one is NaN, so NaN passes as in the scalar
    clamp1), column panels of 64, scalar edges."""
    d = SIMD[AVX]
    c1 = ISAS[isa].conv_kernels["clamp1"]
    bias = "bias ? " + d["set1"] + "(bias[cb + {i}u]) : " + d["zero"]
    block = avx_block(lambda i, v: f"{d['st']}(d + {i}u * ds, {d['min']}(whi, {d['max']}(wlo, "
                      f"{d['add']}({v}, {bias.format(i=i)}))));")
    blocked(ctx, "aicc_cv_tstore_avx", "float", 8, """\
/* dst[c * ds + r] = min(hi, max(lo, src[r * ss + c] + bias[c])) (r < R, c < C; bias may be
 * NULL: + 0) in 8 x 8 AVX register blocks (the transposition of aicc_tr_f32_avx, then + bias
 * and the clamp in registers; NaN passes), column panels of 64, scalar edges. */""", block,
             params=", const float *restrict bias, float lo, float hi",
             pre=f"    const {d['v']} wlo = {d['set1']}(lo), whi = {d['set1']}(hi);\n"
                 f"    {c1['decl']}\n",
             edge=c1["expr"].format(x="src[r * ss + c] + (bias ? bias[c] : 0.0f)", br=" "),
             key=f"{KEY}.1.tstore_avx")


def lanes(n: int, nr: int) -> float:
    """Fraction of the vector lanes an N of n fills in panels of nr."""
    return n / (-(-n // nr) * nr)


# how many more lanes the transposed GEMM must fill than the positions-as-columns paths, against
# the direct 1x1 path (which packs nothing) and the others; measured on Zen 5: 7x7 maps gain,
# 14x14 maps lose. An ISA's conv table may set its own (``transposed_margin``).
MARGIN = {"direct": 0.15, "other": 0.05}


def prefer(geo, isa: str, direct: bool) -> bool:
    """The transposed GEMM fills clearly more lanes (output channels vs positions); against
    the direct 1x1 path, which packs nothing, by a wider margin (MARGIN)."""
    nr = nr_of(isa)
    margin = ISAS[isa].conv_kernels.get("transposed_margin", MARGIN)
    return (lanes(geo.cout_g, nr) > lanes(math.prod(geo.out), nr)
            + margin["direct" if direct else "other"])


def tiles(sched, K: int, P: int) -> tuple:
    """(positions, K entries) per tile: all positions up to 4 * 64, a multiple of mr; K whole
    or a multiple of kc within the tile_kb budget."""
    mr, kc = sched["mr"], sched["kc"]
    budget = sched["tile_kb"] * 1024 // 4
    nt = P if P <= 256 else 256 // mr * mr
    if K * nt <= budget:
        return nt, K
    kt = max(kc, budget // nt // kc * kc)
    parts, blocks = -(-K // kt), -(-K // kc)
    return nt, min(K, -(-blocks // parts) * kc)


def emit(ctx, node, geo, isa: str, sched: dict, bias: str, pad_c: str, ext) -> None:
    """Step body of the transposed path (pad_c: conv_simd's pad helper text; ext the padded
    extents, or None when the input itself has every tap inside)."""
    nr = nr_of(isa)
    K = geo.cin_g * math.prod(geo.k)
    P = math.prod(geo.out)
    mo = geo.cout_g
    if P <= 256:                         # one tile of all positions: equal row tiles
        tl = -(-P // sched["mr"])
        sched = {**sched, "mr": step_rows(P, -(-P // tl), sched["mr"],
                                          sched.get("row_step", 1))}
    nt, kt = tiles(sched, K, P)
    lo, hi, act = clamp_of(node)
    ms = sorted({nt, P - (-(-P // nt) - 1) * nt})
    # the column blocks (weight panels) outside the K blocks, and the micro-kernels' prefetch
    # of the next panel, where the ISA's description asks for them (transposed_cols_outer,
    # transposed_prefetch: measured there)
    gemm = tile_gemm(ctx, isa, sched, ms, None, dense=True,
                     cols_outer=ISAS[isa].conv_kernels.get("transposed_cols_outer", False),
                     prefetch="transposed_prefetch"
                     if "transposed_prefetch" in ISAS[isa].conv_kernels else "tile_prefetch")
    ep = epilogue(ctx, node, "float32") if act else "NULL"
    use(ctx, "float32")
    ctx.helper(f"{KEY}.1.pad", pad_c)
    # COPYRUN: the ISA's copy of a stride-1 run (its description's copy_run)
    run = "\n".join(" " * 24 + ln for ln in ISAS[isa].conv_kernels["copy_run"].split("\n"))
    ctx.helper(f"{KEY}.1.packp_{isa}", PACKP.replace("COPYRUN", run).replace("ISA", isa))
    c1 = ISAS[isa].conv_kernels["clamp1"]                         # the scalar clamp
    if ISAS[isa].move:
        tstore_helper(ctx, isa)
        copy, decl = COPY_BLOCKS, ""
    else:
        copy = COPY_ROWS.replace("CLAMP1", c1["expr"].format(x="tbuf[r * Mo + j] + b",
                                                              br="\n" + " " * 36))
        decl = f"    {c1['decl']}\n"
    ctx.helper(f"{KEY}.3.convt_{isa}", DRIVER.replace("GEMM_FN", GEMM_FN).replace("NR", str(nr))
               .replace("ISA", isa).replace("    CLAMP1_DECL\n", decl).replace("COPYOUT", copy))
    npan = -(-mo // nr)
    w = ctx.in_const(1)
    if w is not None:
        wg = np.asarray(w, np.float32).reshape(geo.group, mo, K)
        wp = ctx.const(np.stack([pack_b(np.ascontiguousarray(m.T), nr) for m in wg]), "wpack")
    else:
        wp = ctx.scratch(geo.group * npan * K * nr * 4, "float", "wpack")
        fn = pack_helper(ctx, np.float32, nr)
        ctx("/* run-time weights: transposed into column panels for the kernels */")
        with ctx.block(f"for (size_t g = 0; g < {geo.group}u; ++g)"):
            ctx(f"{fn}({K}u, {mo}u, {ctx.inp[1]} + g * {mo * K}u, 1u, {K}u, "
                f"{wp} + g * {npan * K * nr}u);")
    inp = list(geo.inp)
    e3 = [1] * (3 - len(inp)) + (list(ext) if ext else inp)
    dl3 = [1] * (3 - len(inp)) + list(geo.dil)
    k3 = [1] * (3 - len(inp)) + list(geo.k)
    toff = [kz * dl3[0] * e3[1] * e3[2] + ky * dl3[1] * e3[2] + kx * dl3[2]
            for kz in range(k3[0]) for ky in range(k3[1]) for kx in range(k3[2])]
    xp = ctx.scratch(geo.cin * math.prod(ext) * 4, "float", "xpad") if ext else "NULL"
    abuf = ctx.scratch((nt * kt + 16) * 4, "float", "patch")
    tbuf = ctx.scratch(nt * mo * 4, "float", "yt")
    ctx(f"/* Conv {geo.describe()}: {isa} transposed GEMM [{P} x {K}] @ [{K} x {mo}] per group "
        f"(output channels vectorized), tiles of {nt} positions x {kt} patch entries */")
    ctx(geo.params())
    ctx("static const size_t e[3] = { " + ", ".join(f"{v}u" for v in e3) + " };")
    ctx(f"static const size_t toff[{len(toff)}] = {{ " + ", ".join(f"{t}u" for t in toff) + " };")
    ctx(f"aicc_cv_convt_{isa}(&prm, {ctx.inp[0]}, {wp}, {bias}, {ctx.out[0]}, {xp}, e, toff, "
        f"{abuf}, {tbuf}, {nt}u, {kt}u, {sched['mr']}u, {sched['kc']}u, {flit(lo)}, {flit(hi)}, "
        f"{gemm}, {ep});")
