"""The GEMM paths of a float32 conv on the x86 SIMD targets (kernels/conv/simd.py chooses them):
``direct`` (1x1, stride 1, unpadded: the input of a group is the B operand, column panels
with row stride P) and ``im2col`` (the batch item copied into a zero-padded volume, then per
tile of positions x patch entries the patches packed into column panels of NR and the tile
run through conv_simd_gemm's tile GEMM; K tiles accumulate into Y). See kernels/conv/simd.py for the
layouts, the rounding and NaN/Inf.
"""
from __future__ import annotations

import math
import re

from ..gemm.simd import ISA, flit, nr_of
from ..isa.registry import ISAS
from .base_c import use
from .simd_gemm import GEMM_FN, KEY, clamp_of, packed_weights, tile_gemm

PACK = """\
/* im2col of output positions [p0, p0 + nt) x patch entries [k0, k1) of one group into
 * column panels of NR: col[(j / NR) * (k1 - k0) * NR + (k - k0) * NR + j % NR], zero past nt.
 * k = c * kk + t: channel c, tap t at offset toff[t] in the padded volume (sizes e, V per
 * channel, 2 * NR floats of slack after it). A panel is copied as runs of consecutive
 * positions of one output row (one run, a strided vector copy, unless it crosses a row).
 * Stride-1 and stride-2 runs are copied NR floats wide in lane order (each overwrites lanes past
 * its end, which the next run or the zero fill past nl rewrites; col has NR floats of slack
 * for the last row, the reads stay in the volume's slack). */
static void aicc_cv_pack_ISA(const aicc_conv_params *p, const float *restrict xg,
    const size_t e[3], const size_t *restrict toff, size_t kk, size_t p0, size_t nt, size_t k0,
    size_t k1, float *restrict col)
{
    const size_t OW = p->out[2], OH = p->out[1], V = e[0] * e[1] * e[2], HW = e[1] * e[2];
    const size_t s2 = p->stride[2], nk = k1 - k0;
    size_t ox = p0 % OW, oy = p0 / OW % OH, oz = p0 / OW / OH;
    for (size_t j0 = 0; j0 < nt; j0 += NRu) {
        const size_t nl = nt - j0 < NRu ? nt - j0 : NRu;
        size_t rl[NR], rn[NR], ro[NR], nrun = 0;     /* runs: first lane, length, offset */
        for (size_t l = 0; l < nl; ++l) {
            if (l == 0 || ox == 0) {
                rl[nrun] = l;
                rn[nrun] = 0;
                ro[nrun++] = oz * p->stride[0] * HW + oy * p->stride[1] * e[2] + ox * s2;
            }
            ++rn[nrun - 1];
            if (++ox == OW) {
                ox = 0;
                if (++oy == OH) {
                    oy = 0;
                    ++oz;
                }
            }
        }
        float *restrict d = col + (j0 / NRu) * nk * NRu;
        size_t c = k0 / kk, t = k0 % kk;
        for (size_t k = k0; k < k1; ++k, d += NRu) {
            const float *restrict s = xg + c * V + toff[t];
            if (++t == kk) {
                t = 0;
                ++c;
            }
            if (nrun == 1u && nl == NRu) {
                s += ro[0];
                if (s2 == 1u) {
                    COPY(d, s, NRu)
                } else if (s2 == 2u) {
                    STRIDE2(d, s, NRu)
                } else {
                    for (size_t l = 0; l < NRu; ++l) d[l] = s[l * s2];
                }
                continue;
            }
            for (size_t r = 0; r < nrun; ++r) {
                float *dr = d + rl[r];
                const float *sr = s + ro[r];
                if (s2 == 1u) {
                    COPY(dr, sr, rn[r])
                } else if (s2 == 2u) {
                    STRIDE2(dr, sr, rn[r])
                } else {
                    for (size_t l = 0; l < rn[r]; ++l) dr[l] = sr[l * s2];
                }
            }
            for (size_t l = nl; l < NRu; ++l) d[l] = 0.0f;
        }
    }
}"""

DRIVER = """\
/* Conv through the tile GEMM `gemm`: per batch item and group, Y[cout_g, P] = W[cout_g, K] @
 * col[K, P]. direct (1x1, stride 1, unpadded): the input itself is B. Else the batch item is
 * copied into the padded volume xp (sizes e, 2 * NR floats of slack) and im2col tiles of nt
 * positions x kt patch entries are packed into col (tap offsets toff[kk]). w: [M][K] per group
 * packed in row tiles (conv_simd_gemm.pack_a); bias [Cout] or NULL; activation clamp [lo, hi]
 * (and gemm's scalar pass). */
static void aicc_cv_conv_ISA(const aicc_conv_params *p, const float *restrict x,
    const float *restrict w, const float *restrict bias, float *restrict y, float *restrict xp,
    const size_t e[3], const size_t *restrict toff, float *restrict col, size_t nt, size_t kt,
    float lo, float hi, int direct,
    GEMM_FN)
{
    const size_t X = p->in[0] * p->in[1] * p->in[2], P = p->out[0] * p->out[1] * p->out[2];
    const size_t kk = p->k[0] * p->k[1] * p->k[2], K = p->cin_g * kk, C = p->group * p->cin_g;
    const size_t Vg = p->cin_g * e[0] * e[1] * e[2];
    for (size_t n = 0; n < p->batch; ++n) {
        const float *restrict xn = x + n * C * X;
        if (!direct)
            aicc_cv_pad(p, C, xn, xp, e, 2u * NRu);
        for (size_t g = 0; g < p->group; ++g) {
            const float *restrict wg = w + g * p->cout_g * K;
            const float *restrict bg = bias ? bias + g * p->cout_g : NULL;
            float *restrict yg = y + (n * p->group + g) * p->cout_g * P;
            if (direct) {
                gemm(p->cout_g, P, K, wg, 0, xn + g * Vg, NRu, X, yg, P, bg, lo, hi, 0, 1);
                continue;
            }
            for (size_t p0 = 0; p0 < P; p0 += nt) {
                const size_t m = P - p0 < nt ? P - p0 : nt;
                for (size_t k0 = 0; k0 < K; k0 += kt) {
                    const size_t k1 = K - k0 < kt ? K : k0 + kt;
                    aicc_cv_pack_ISA(p, xp + g * Vg, e, toff, kk, p0, m, k0, k1, col);
                    gemm(p->cout_g, m, k1 - k0, wg, k0, col, (k1 - k0) * NRu, NRu,
                         yg + p0, P, bg, lo, hi, k0 > 0, k1 == K);
                }
            }
        }
    }
}"""


# the L1 data cache the direct path's aliasing rule (aliased) assumes: 64 sets of 64-byte
# lines (32 KiB 8-way on AMD Zen, 48 KiB 12-way on Intel since Ice Lake: the same 64 sets)
L1_LINE, L1_SETS = 64, 64


# with at most twice alias_rows rows a set, the packed path wins only for this many output
# channels: its copy of the input serves all of them (aliased)
PACK_MIN_M = 256


def aliased(geo, sched) -> bool:
    """Whether the direct path's B rows collide in L1: more than the schedule's alias_rows
    (0: never) of a K block's kc input channels, P floats apart, start in one L1 set, and
    either more than twice as many or at least PACK_MIN_M output channels. With P a multiple
    of 1024 (32 x 32, 64 x 64 maps) every row of a block maps to the same set and the block is
    read from L2. AMD EPYC (Zen 4), x86-avx2, thread CPU time against onnxruntime, direct /
    packed (im2col): 768 -> 768 channels at 32 x 32 1.51 / 1.06; 256 at 64 x 64 1.66 / 1.02,
    128 at 64 x 64 1.39 / 1.00; 8 rows a set: 512 at 16 x 16 1.03 / 0.96, but 32 -> 32, 32 ->
    128 and 64 -> 64 at 112 x 112 0.84 / 0.94, 0.81 / 0.88, 1.01 / 1.05; at 28 x 28 and 56 x
    56 (2 rows a set at most) 1.00 / 1.05 and 1.01 / 1.00."""
    limit = sched.get("alias_rows", 0)
    if not limit:
        return False
    stride = math.prod(geo.inp) * 4          # bytes between input channels
    rows = min(sched["kc"], geo.cin_g)
    sets = [(k * stride // L1_LINE) % L1_SETS for k in range(rows)]
    worst = max(sets.count(x) for x in set(sets))
    return worst > 2 * limit or (worst > limit and geo.cout_g >= PACK_MIN_M)


def tiles(sched, nr, K, P) -> tuple:
    """(positions, patch entries) per im2col tile: the col tile (tile_kb KiB) holds at least
    min(P, 4 jb) positions, and all of K or a multiple of kc."""
    budget = sched["tile_kb"] * 1024 // 4
    pr = -(-P // nr) * nr
    nt = min(pr, max(budget // K // nr * nr, 4 * sched["jb"], nr))
    kc = sched["kc"]
    if K * nt <= budget:
        return nt, K
    kt = max(kc, budget // nt // kc * kc)      # K tiles: multiples of kc (pack_a's blocks)
    parts, blocks = -(-K // kt), -(-K // kc)
    return nt, -(-blocks // parts) * kc        # balanced


def emit(ctx, node, geo, isa: str, sched: dict, bias: str, direct: bool, pad_c: str,
         ext) -> None:
    """Step body: direct (1x1 stride 1 unpadded: the input is the B operand) or im2col
    tiles; sched balanced over the output channels; pad_c: conv_simd's pad helper; ext: its
    padded extents (conv_simd.extents)."""
    nr = nr_of(isa)
    K = geo.cin_g * math.prod(geo.k)
    P = math.prod(geo.out)
    ctx.kernel = f"{isa} {'direct' if direct else 'im2col'}"
    lo, hi, act = clamp_of(node)
    gemm = tile_gemm(ctx, isa, sched, geo.cout_g, act, dense=not direct)
    wp = packed_weights(ctx, geo, sched["mr"], sched["kc"])
    use(ctx, "float32")
    ctx.helper(f"{KEY}.1.pad", pad_c)
    half = ISA[isa]["lanes"]
    # the ISA's panel copies (stride 1: copy_nr, stride 2: stride2) in place of COPY / STRIDE2
    copies = ISAS[isa].conv_kernels
    pack = re.sub(r"( *)STRIDE2\((\w+), (\w+), ([\w\[\]]+)\)", lambda m: "\n".join(
        m.group(1) + ln for ln in copies["stride2"].replace("DST", m.group(2))
        .replace("SRC", m.group(3)).replace("CNT", f"({m.group(4)} > {half}u ? NRu : {half}u)")
        .split("\n")), PACK)
    pack = re.sub(r"COPY\((\w+), (\w+), ([\w\[\]]+)\)", lambda m: copies["copy_nr"]
                  .replace("DST", m.group(1)).replace("SRC", m.group(2))
                  .replace("CNT", m.group(3)), pack)
    ctx.helper(f"{KEY}.1.pack_{isa}", pack.replace("NR", str(nr)).replace("ISA", isa))
    ctx.helper(f"{KEY}.3.conv_{isa}", DRIVER.replace("GEMM_FN", GEMM_FN)
               .replace("NR", str(nr)).replace("ISA", isa))
    ctx(f"/* Conv {geo.describe()}: {isa} GEMM [{geo.cout_g} x {K}] @ [{K} x {P}] per group, "
        + ("1x1 stride 1: the input is the B operand */" if direct else
           "im2col tiles of {} positions x {} patch entries */".format(*tiles(sched, nr, K, P))))
    ctx(geo.params())
    if direct:
        ctx(f"static const size_t e[3] = {{ {geo.inp[-3] if len(geo.inp) > 2 else 1}u, "
            f"{geo.inp[-2] if len(geo.inp) > 1 else 1}u, {geo.inp[-1]}u }};")
        ctx(f"aicc_cv_conv_{isa}(&prm, {ctx.inp[0]}, {wp}, {bias}, {ctx.out[0]}, NULL, "
            f"e, NULL, NULL, {P}u, {K}u, {flit(lo)}, {flit(hi)}, 1, {gemm});")
        return
    nt, kt = tiles(sched, nr, K, P)
    e3 = [1] * (3 - len(ext)) + ext
    dl3 = [1] * (3 - len(ext)) + list(geo.dil)
    k3 = [1] * (3 - len(ext)) + list(geo.k)
    toff = [kz * dl3[0] * e3[1] * e3[2] + ky * dl3[1] * e3[2] + kx * dl3[2]
            for kz in range(k3[0]) for ky in range(k3[1]) for kx in range(k3[2])]
    xp = ctx.scratch((geo.cin * math.prod(ext) + 2 * nr) * 4, "float", "xpad")
    col = ctx.scratch((-(-nt // nr) * kt + 1) * nr * 4, "float", "col")
    ctx("static const size_t e[3] = { " + ", ".join(f"{v}u" for v in e3) + " };")
    ctx(f"static const size_t toff[{len(toff)}] = {{ " + ", ".join(f"{t}u" for t in toff) + " };")
    ctx(f"aicc_cv_conv_{isa}(&prm, {ctx.inp[0]}, {wp}, {bias}, {ctx.out[0]}, {xp}, e, "
        f"toff, {col}, {nt}u, {kt}u, {flit(lo)}, {flit(hi)}, 0, {gemm});")
