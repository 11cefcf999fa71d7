"""Conv on the x86 SIMD targets (float32; x86-avx2 / x86-avx512): variant choice, schedule,
and the GEMM path ``Y[Cout/g, P] = W[Cout/g, K] @ col[K, P]`` per batch item and group, with
the output positions P (the large dimension) as the vectorized N dimension.

Variants (``emit``; the target's ``schedule: conv: algo`` or a node's ``aicc_schedule: {algo:
...}`` forces one, ``auto`` picks):

* ``depthwise`` (conv_depthwise.py): one input channel per group, 1-D/2-D, multiplier < 4;
  ``dwchan`` (conv_depthwise_c.py): multiplier 1, channels vectorized through channel-last
  copies; forced only (measured slower than ``depthwise`` on every MobileNet shape, e.g.
  576 channels 14x14 stride 2: 52 vs 17 us on avx512; with constant weights the
  layout-nhwc pass runs such convs channel-last without the copies, ops/conv_nhwc_dw.py).
* ``winograd`` (conv_winograd.py): 2-D 3x3, stride 1, dilation 1, group 1, constant weights:
  Winograd F(2x2,3x3) or F(4x4,3x3) (``wino_m``), t * t GEMMs on transformed tiles, 2.25x /
  4x fewer multiplications (auto: F(2,3) when channels and output tiles pass
  conv_winograd.AUTO; F(4,3) only when forced, it is less accurate).
* ``transposed`` (conv_simd_t.py): output channels vectorized, for few positions / many
  channels (auto: when Cout/g fills clearly more vector lanes than P, e.g. 7x7 maps).
* ``implicit`` (conv_simd_i.py): 1-D/2-D, no im2col: the padded input (split into phase
  planes for stride > 1) is the B operand, read through a per-k offset table on a virtual
  grid (auto: when at most ``implicit_pct`` % of the lanes are padding garbage).
* ``direct``: 1x1 kernel, stride 1, no padding: the input [C, P] of a group is the B operand
  itself, read in column panels with row stride P (the micro-kernel's ``rs``); the last partial
  panel is read with masked loads, so nothing past the tensor is touched.
* ``im2col``: every other geometry. The batch item is copied into a zero-padded scratch
  volume (2 * NR floats of zero slack after it) so that every tap lands inside; then per tile
  of ``nt`` positions x ``kt`` patch entries (``tile_kb``), the patches are packed into column
  panels of NR (2 vectors), ``col[(j / NR) * kt * NR + k * NR + j % NR]`` (zero past the tile's
  last position), and the tile runs as a GEMM (K tiles accumulate into Y). In the padded volume
  a patch value's offset is (channel/tap offset) + (position offset), so a panel is a few runs
  of consecutive positions of one output row, each a vector copy (stride 1) or a vector
  de-interleave (stride 2).

Weights are packed at compile time (``ctx.const``; run-time weights into step scratch) in the
kernels' A layout, in the order the tile GEMM streams them (conv_simd_gemm.pack_a). The tile
GEMM and micro-kernels (conv_simd_gemm.py) fuse bias and the activation (in registers for
none / Relu / Clip, else a scalar pass from the shared activation table). Schedule: ``mr``
(rows per micro-tile, lowered per node to equal row tiles), ``kc`` (K block), ``jb`` (column
block), ``tile_kb`` (im2col / patch / output tile budget), ``implicit_pct``, ``wino_m``
(Winograd output tile 2 or 4), ``wino_kb`` (Winograd tile-block budget), ``wino_chan``
(Winograd form: 0 tiles vectorized, 2 output channels, 1 auto); defaults in SCHED, target yaml
``schedule: conv:``, node ``aicc_schedule``.

Rounding: each output is one FMA chain over k ascending from +0 (K blocks and K tiles store and
reload the exact partial sums), then + bias, then the activation: the result does not depend
on the schedule or the variant (except depthwise: bias first, then the taps; and transposed:
the same chain, bias added after), except for ``winograd``: its transforms change the
arithmetic, so its results depend on the variant and on ``wino_m`` (F(2,3): errors as the
direct chain; F(4,3): about 5x larger, up to ~0.8 of the tests' tolerance at C = 512; measured
figures in conv_winograd.py). It differs from onnxruntime (also FMA, other order) by
rounding only. NaN/Inf: IEEE (0 * Inf = NaN for zero weights); the clamp propagates NaN
(max/min return the NaN operand as the scalar ``x < lo ? lo : x`` does); padding zeros never
meet a real input value; masked-off or slack lanes are never stored. ``winograd``: a NaN/Inf
input spreads to every output of the tiles whose input patch contains it (Inf - Inf = NaN in
the transforms), not only to the outputs whose receptive field holds it.
"""
from __future__ import annotations

import math
import re

from . import conv_simd_i, conv_simd_t, conv_winograd
from .conv_kernels import use
from .conv_simd_gemm import GEMM_FN, KEY, clamp_of, packed_weights, tile_gemm
from .gemm_simd import ISA, flit, nr_of

# conv schedule defaults per ISA (target yaml `schedule: conv:` and aicc_schedule override)
SCHED = {
    "avx2": dict(mr=6, kc=256, jb=64, tile_kb=192, implicit_pct=5, algo="auto", wino_m=2,
                 wino_kb=768, wino_chan=1),
    "avx512": dict(mr=12, kc=256, jb=64, tile_kb=192, implicit_pct=13, algo="auto", wino_m=2,
                   wino_kb=768, wino_chan=1),
}
ALGOS = ("auto", "direct", "im2col", "implicit", "depthwise", "dwchan", "transposed",
         "winograd")


def schedule(isa: str, *overrides) -> dict:
    s = dict(SCHED[isa])
    for over in overrides:
        for k, v in (over or {}).items():
            if k in s:
                s[k] = str(v) if k == "algo" else int(v)
    nr = nr_of(isa)
    s["mr"] = max(1, min(s["mr"], 14 if isa == "avx512" else 6))
    s["kc"] = max(1, s["kc"])
    s["jb"] = max(nr, s["jb"] // nr * nr)
    s["tile_kb"] = max(1, s["tile_kb"])
    s["wino_kb"] = max(1, s["wino_kb"])
    if s["wino_m"] not in (2, 4):
        raise ValueError(f"conv schedule wino_m {s['wino_m']} (2 or 4)")
    if s["wino_chan"] not in (0, 1, 2):
        raise ValueError(f"conv schedule wino_chan {s['wino_chan']} (0 tiles, 1 auto, "
                         "2 channels vectorized)")
    if s["algo"] not in ALGOS:
        raise ValueError(f"conv schedule algo {s['algo']!r} (one of {', '.join(ALGOS)})")
    return s


PAD = """\
/* Zero-padded copy of the C channels of one batch item: xp[c][e0][e1][e2] with padded
 * coordinate = input coordinate + pad (per spatial dim); e[d] = (out - 1) * stride +
 * (k - 1) * dilation + 1 covers every tap of every output position. `slack` zeros follow. */
static void aicc_cv_pad(const aicc_conv_params *p, size_t C, const float *restrict x,
                        float *restrict xp, const size_t e[3], size_t slack)
{
    size_t lo[3], hi[3];
    for (int d = 0; d < 3; ++d) {       /* padded coordinates [lo, hi) hold input values */
        lo[d] = p->pad[d] < e[d] ? p->pad[d] : e[d];
        hi[d] = p->pad[d] + p->in[d] < e[d] ? p->pad[d] + p->in[d] : e[d];
    }
    for (size_t c = 0; c < C; ++c)
        for (size_t z = 0; z < e[0]; ++z)
            for (size_t r = 0; r < e[1]; ++r) {
                float *restrict d = xp + ((c * e[0] + z) * e[1] + r) * e[2];
                if (z < lo[0] || z >= hi[0] || r < lo[1] || r >= hi[1]) {
                    for (size_t i = 0; i < e[2]; ++i) d[i] = 0.0f;
                    continue;
                }
                const float *restrict s = x + ((c * p->in[0] + (z - p->pad[0])) * p->in[1] +
                                               (r - p->pad[1])) * p->in[2];
                size_t i = 0;
                for (; i < lo[2]; ++i) d[i] = 0.0f;
                for (; i < hi[2]; ++i) d[i] = s[i - p->pad[2]];
                for (; i < e[2]; ++i) d[i] = 0.0f;
            }
    for (size_t i = 0; i < slack; ++i)
        xp[C * e[0] * e[1] * e[2] + i] = 0.0f;
}"""

# copy of NR floats d[0 .. NR) = s[0 .. NR) (vector moves: no memmove call per panel row)
COPYNR = {      # the second vector only when the run is longer than one (CNT)
    "avx2": "_mm256_storeu_ps(DST, _mm256_loadu_ps(SRC)); "
            "if (CNT > 8u) _mm256_storeu_ps(DST + 8u, _mm256_loadu_ps(SRC + 8u));",
    "avx512": "_mm512_storeu_ps(DST, _mm512_loadu_ps(SRC)); "
              "if (CNT > 16u) _mm512_storeu_ps(DST + 16u, _mm512_loadu_ps(SRC + 16u));",
}

# stride-2 gather of NR floats d[l] = s[2 * l] (reads s[0 .. 2 * NR - 1]: one past the last)
STRIDE2 = {
    "avx2": """\
for (size_t h = 0; h < CNT; h += 8u) {
    const __m256 a = _mm256_loadu_ps(SRC + 2u * h), b = _mm256_loadu_ps(SRC + 2u * h + 8u);
    const __m256 q = _mm256_shuffle_ps(a, b, 0x88);
    _mm256_storeu_ps(DST + h, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(q),
                                                                      0xD8)));
}""",
    "avx512": """\
const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
for (size_t h = 0; h < CNT; h += 16u)
    _mm512_storeu_ps(DST + h, _mm512_permutex2var_ps(_mm512_loadu_ps(SRC + 2u * h), ev,
                                                     _mm512_loadu_ps(SRC + 2u * h + 16u)));""",
}

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


def balanced(sched: dict, m: int) -> dict:
    """The schedule with mr lowered to split m rows into equal row tiles (same tile count:
    64 rows with mr 12 run as 11, 11, 11, 11, 10, 10 instead of 12 x 5 + 4)."""
    tiles = -(-m // sched["mr"])
    return {**sched, "mr": -(-m // tiles)} if m > 0 else sched


def extents(geo) -> list:
    """Input extent each spatial dim's taps cover: (out - 1) * stride + (k - 1) * dil + 1."""
    return [(o - 1) * s + (k - 1) * d + 1
            for o, s, k, d in zip(geo.out, geo.stride, geo.k, geo.dil)]


def plan(ctx, dt):
    """(isa, conv schedule) of the first SIMD variant in the target's kernel list (or the
    node's aicc_kernel), None for the portable kernels (also for float64)."""
    node, target = ctx.node, ctx.target
    if str(dt) != "float32":
        return None
    forced = node.attrs.get("aicc_kernel")
    for name in target.kernels:
        if forced and name != forced:
            continue
        if name in ISA:
            return name, schedule(name, (target.schedule or {}).get("conv"),
                                  node.attrs.get("aicc_schedule"))
        if name == "generic":
            break
    return None


def is_direct(geo) -> bool:
    """1x1 kernel, stride 1, no padding: positions are input offsets (B is the input)."""
    return set(geo.k) == {1} and set(geo.stride) == {1} and not (any(geo.pad) or
                                                                 any(geo.pad_end))


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


def emit(ctx, node, geo, isa: str, sched: dict, bias: str) -> None:
    """Step body of a float32 conv on a SIMD target: the depthwise kernel for one input
    channel per group (1-D/2-D, small multiplier), the GEMM paths otherwise (or as forced)."""
    from . import conv_depthwise, conv_depthwise_c
    algo = sched["algo"]
    if algo == "dwchan":
        if not conv_depthwise_c.supports(geo):
            raise ValueError("conv algo 'dwchan' needs a depthwise conv (group = channels), "
                             "multiplier 1, 1-D/2-D")
        ctx.kernel = f"{isa} dwchan"
        conv_depthwise_c.emit(ctx, node, geo, isa, bias)
        return
    if algo == "depthwise" or (algo == "auto" and conv_depthwise.supports(geo)):
        if geo.cin_g != 1 or len(geo.k) > 2:
            raise ValueError("conv algo 'depthwise' needs one input channel per group, 1-D/2-D")
        ctx.kernel = f"{isa} depthwise"
        conv_depthwise.emit(ctx, node, geo, isa, bias)
        return
    if algo == "winograd" or (algo == "auto" and conv_winograd.prefer(ctx, geo, isa)):
        conv_winograd.emit(ctx, node, geo, isa, sched, bias, PAD, balanced)
        return
    if algo == "transposed" or (algo == "auto" and conv_simd_t.prefer(geo, isa, is_direct(geo))):
        ext = extents(geo)
        if not (any(geo.pad) or any(e > i for e, i in zip(ext, geo.inp))):
            ext = None                  # every tap inside the input: no padded copy
        ctx.kernel = f"{isa} transposed"
        conv_simd_t.emit(ctx, node, geo, isa, sched, bias, PAD, ext)
        return
    nr = nr_of(isa)
    K = geo.cin_g * math.prod(geo.k)
    P = math.prod(geo.out)
    sched = balanced(sched, geo.cout_g)
    if algo == "implicit" or (algo == "auto" and conv_simd_i.supports(geo) and not is_direct(geo)
                              and conv_simd_i.prefer(geo, nr, sched["implicit_pct"])):
        if not conv_simd_i.supports(geo):
            raise ValueError("conv algo 'implicit' needs a 1-D/2-D conv")
        ctx.kernel = f"{isa} implicit"
        conv_simd_i.emit(ctx, node, geo, isa, sched, bias, PAD, extents(geo))
        return
    direct = algo == "direct" or (algo == "auto" and is_direct(geo))
    if direct and not is_direct(geo):
        raise ValueError("conv algo 'direct' needs a 1x1 kernel, stride 1 and no padding")
    ctx.kernel = f"{isa} {'direct' if direct else 'im2col'}"
    lo, hi, act = clamp_of(node)
    gemm = tile_gemm(ctx, isa, sched, geo.cout_g, act)
    wp = packed_weights(ctx, geo, sched["mr"], sched["kc"])
    use(ctx, "float32")
    ctx.helper(f"{KEY}.1.pad", PAD)
    half = ISA[isa]["lanes"]
    pack = re.sub(r"( *)STRIDE2\((\w+), (\w+), ([\w\[\]]+)\)", lambda m: "\n".join(
        m.group(1) + ln for ln in STRIDE2[isa].replace("DST", m.group(2))
        .replace("SRC", m.group(3)).replace("CNT", f"({m.group(4)} > {half}u ? NRu : {half}u)")
        .split("\n")), PACK)
    pack = re.sub(r"COPY\((\w+), (\w+), ([\w\[\]]+)\)", lambda m: COPYNR[isa]
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
    ext = extents(geo)
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
