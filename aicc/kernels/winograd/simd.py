"""Winograd convolution F(m x m, 3 x 3) for 2-D 3x3 stride-1 convs (float32; the SIMD targets
whose ISA description has a ``winograd`` table: x86-avx2, x86-avx512, arm-neon): ``algo:
winograd`` in kernels/conv/simd.py; ``wino_m`` 2: F(2x2,3x3) (4x4 input tiles, 2.25x fewer
multiplications than direct), 4: F(4x4,3x3) (6x6 tiles, 4x fewer), 0: auto (F(4,3) up to the
table's ``auto`` m4_c input channels, else F(2,3)); t = m + 2.

The output plane is cut into TH x TW tiles of m x m outputs (NT = TH * TW per batch item,
numbered row-major); tile j reads the t x t patch of the zero-padded input at row (j / TW) * m,
column (j % TW) * m. With U = G g G^T (per output / input channel pair, at compile time, float64
rounded once) and V = B^T d B (per input channel and tile), each output tile is Y = A^T M A
with ``M(xi)[k, j] = sum_c U(xi)[k, c] V(xi)[c, j]`` for each of the t * t positions xi: t * t
GEMMs [K x C] @ [C x tiles]. Matrices: conv_winograd_prog.cook_toom (interpolation points there).

Tiles vectorized (this module; the default form): U in the tile GEMM's A layout, one [K x C]
matrix per xi (conv_simd_gemm.pack_a), a constant. Per batch item and block of nt tiles
(block_tiles: ``wino_kb`` KiB of V and M, so they stay in L2, a multiple of the panel width NR,
but enough tiles that the weights are not re-streamed too often): per input channel, the rows
the block's tiles read copied into one zero-padded plane (extents TH * m + 2 by TW * m + 2,
zero slack before and after for the transform's over-reads; it stays in L1) and that
channel's input transform into V (t * t x [C x nt] in NR-tile panels: kernels/winograd/transforms.py);
then the t * t tile GEMMs of conv_simd_gemm (B = the V panels, Y = M [K x ntp]
row-major; V and M matrices SKEW floats apart against 4 KiB aliasing) and the output transform
(+ bias, Relu / Clip clamp in registers; other activations: a scalar pass over each finished
batch item); planes narrower than a vector of tiles on x86-avx512, TW dividing 16:
kernels/winograd/rows.py's transforms, specialized for TW). Output channels vectorized
(kernels/winograd/chan.py, ``channels_form``, ``wino_chan``): the GEMMs transposed, [tiles x C] @ [C
x K], for few tiles (less than one panel: 7x7 maps on AVX-512) and for many channels on
mid-sized planes (128@28, 256@14: faster there; on arm-neon from 32 x 32 channels on any plane,
and on planes whose tile rows do not fill whole vectors).

Run-time (non-constant) weights are not supported: ``auto`` does not pick winograd for them,
and forcing it is an error (as forcing any variant on a geometry it does not support).

Auto (conv_simd.emit, ``prefer``): winograd for supported convs with constant weights, enough
channels, both output dims >= 2 and, for few tiles, a moderate C * K (AUTO below, measured per
target with benchmarks/conv_layers.py: the ResNet-18 3x3 stride-1 layers run 1.8-2.3x faster
than with the implicit / transposed GEMM, except 512@7 on AVX-512, which stays on the GEMM;
arm-neon: by executed instructions, isa/neon/winograd.py). Tile size (``wino_m: 0``): F(4,3)
up to the table's m4_c input channels, else F(2,3); every ISA has m4_c = 0, F(2,3) only:
F(4,3)'s error, inside the tests' tolerance on single layers (below), adds up through whole
networks to more than onnxruntime's against float64 (ResNet-50 1.9x, ResNet-18 1.8x; F(2,3)
1.15x and 0.9x: docs/ACCURACY.md). F(4,3) (``wino_m: 4``, on NEON too) measured faster than
F(2,3) on every ResNet layer (conv_layers, AMD Zen 4, x86-avx512 / x86-avx2 us: 16@32 33 -> 25
/ 35 -> 29, 32@16 27 -> 26 / 28 -> 25, 64@8 27 -> 21 / 25 -> 21, 64@56 1267 -> 992 / 1374 ->
1091); ResNet-8 ratio to onnxruntime 0.76 -> 0.68, ResNet-18 0.74 -> 0.65 (x86-avx512, F(4,3)
everywhere it is winograd).

Rounding: not the FMA chain of the other variants. The transforms add and scale inputs and GEMM
results in float32, so results differ from direct convolution by more than reordering.
Measured max error against float64 direct convolution (numpy model of the float32 algorithm;
C = K = 512, 12 x 12 outputs, inputs N(0, 1) and ReLU'd, weights N(0, 1 / 9C) and He-scaled,
outputs ~N(0, 1)); "tol" is the largest |err| / (1e-5 + 1e-4 |y|), the share of the tests'
tolerance used:

  float32 direct (im2col):  1.3e-6 - 1.8e-6 abs, 7e-6 - 1.3e-5 rel (|y| > 0.1), tol 0.08 - 0.11
  F(2,3):                   1.7e-6 - 1.8e-6 abs, 1.2e-5 - 1.3e-5 rel, tol 0.10 - 0.13 (auto)
  F(4,3), points 0, +-1, 1/2, -2: 1.0e-5 - 1.1e-5 abs, tol 0.56 - 0.84 (forced only)
  F(4,3), points 0, +-1, +-2 (the usual ones): 3.1e-5 - 3.2e-5 abs, 1.5e-4 rel, tol 1.5 - 1.8

(C = K = 64, 24 x 24: F(2,3) 8e-7 abs, tol 0.06; F(4,3) 4.5e-6 - 7.3e-6 abs, tol 0.26 - 0.47.)
Against onnxruntime, on the tests' data (inputs N(0, 1) not ReLU'd, weights N(0, 1 / 9C), one
conv + ReLU, outputs up to ~6; test_conv_winograd.convs with check=False), the tol of
F(2,3) / F(4,3) (F(4,3): the range over the transform orders tried): C = 64 at 28x28 0.08 /
0.38 - 0.41; 128 at 28x28 0.19 / 0.81 - 0.92; 256 at 12x12 0.15 / 0.69 - 1.01; 512 at 12x12
0.25 / 1.10 - 1.43; 16 at 32x32 (inputs x3) 0.14 / 0.53 - 0.61. F(2,3) is as accurate as the
direct paths; F(4,3) (the better points, used here) only when forced (``wino_m: 4``). Whole models against onnxruntime (benchmarks' fixtures, 5
seeded N(0, 1) inputs): ResNet-8 0.03 - 0.05 of the tolerance (0.01 with F(2,3)), ResNet-18
0.48 (x86-avx512) / 0.29 (x86-avx2); 0.45 with F(2,3) everywhere: other steps and the inputs'
draw dominate. arm-neon, F(2,3), max abs error against float64 (ReLU'd N(0, 1) inputs, He
weights, 3 draws): ResNet layers 16@32 .. 512@7 0.8e-6 - 3.2e-6, where its im2col GEMM (one
FMA chain over 9C) has 1.5e-6 - 8.0e-6 and onnxruntime on x86 0.9e-6 - 2.4e-6; whole models
(20 seeded N(0, 1) inputs, mean of the max): ResNet-8 3.3e-7 (on the GEMM paths 3.2e-7,
onnxruntime 3.1e-7), ResNet-18 1.15e-5 (GEMM paths 1.11e-5, onnxruntime 7.0e-6).

NaN/Inf: a NaN or Inf input reaches every output of every tile whose input patch contains it
(the transforms mix all t x t values of a patch; an Inf turns into Inf - Inf = NaN in the other
positions), so neighbours of the outputs it reaches in direct convolution, in the same tiles,
become NaN too, and outputs that would be +-Inf may come out NaN. 0 * Inf for zero weights is
NaN as elsewhere. Padding, slack and lanes past the output are never stored.
"""
from __future__ import annotations

import numpy as np

from . import chan as conv_winograd_t
from ..conv.base_c import epilogue, use
from ..conv.simd_gemm import GEMM_FN, KEY, clamp_of, pack_a, tile_gemm
from ..gemm.simd import flit, nr_of
from ..isa.registry import ISAS, table
from ..isa.x86 import vcopy
from .rows import input_transform_rows, output_transform_rows, rows_of
from .transforms import SKEW, cook_toom, input_transform, output_transform

# auto, per ISA (the ``auto`` entry of its winograd table, measured there with
# benchmarks/conv_layers.py): minimum input / output channels; with at most `few` F(2,3) tiles
# per batch item only up to C * K = few_ck (the transformed weights, 16/9 of the weight bytes,
# are then the bottleneck). Output planes of one row or column stay on the GEMM paths. Fewer
# than c_few input channels (first layers) only on planes of at least `plane` outputs a side:
# with F(4,3) (auto below 64 channels) those run faster than the GEMM / broadcast paths (AMD
# Zen 4, x86-avx512: 12 -> 16 at 32x32 40 -> 18 us; ties at 3 -> 16 at 112x112, slower at 8x8
# and below and for C = 1).
AUTO = {name: w["auto"] for name, w in table("winograd").items()}

# The padded input goes channel by channel through one plane buffer that stays in L1, right
# before that channel's input transform, instead of as a whole padded volume first (C planes
# written to L2, read back by the transforms): Intel Xeon (Emerald Rapids), x86-avx512, 16@32
# F(4,3), C loop 20.5 -> 17.4 us; ResNet-8 ratio to onnxruntime (A/B, each bundle run right
# after onnxruntime, both orders) x86-avx512 0.68 -> 0.64, x86-avx2 1.00 -> 0.96; results
# bitwise the same.
DRIVER = """\
/* Winograd F(Mx M, 3x3) conv (kernels/winograd/simd.py): per batch item and block of nt tiles, per
 * input channel: the padded rows [r0, r1) the block's tiles read copied into the one padded
 * plane xp = xs + SL (sizes e; its padding, and SL floats before and after it for the input
 * transform's over-reads, zeroed once per call and never written), then that channel's V =
 * input transform (T2 matrices [C x ntp] in panels, vs apart); then M(xi) = U(xi) @ V(xi) (u:
 * per xi a [K x C] matrix packed by pack_a; gemm: conv_simd_gemm's tile GEMM, plain sums),
 * output transform (+ bias, clamp [lo, hi]); ep (may be NULL): the scalar activation over the
 * batch item's outputs. */
static void aicc_DRV(const aicc_conv_params *p, const float *restrict x,
    const float *restrict u, const float *restrict bias, float *restrict y, float *restrict xs,
    const size_t e[3], float *restrict v, float *restrict mm, size_t nt, float lo, float hi,
    GEMM_FN, void (*ep)(float *, size_t))
{
    const size_t C = p->cin_g, K = p->cout_g, OH = p->out[1], OW = p->out[2];
    const size_t H = p->in[1], W = p->in[2], pt = p->pad[1], pl = p->pad[2];
    const size_t X = H * W, P = OH * OW, Wp = e[2];
    const size_t TW = (OW + Mu - 1u) / Mu, NT = (OH + Mu - 1u) / Mu * TW;
    const size_t ntp = NTPu, vs = C * ntp + SKEWu, ms = MSu;     /* ntp: nt rounded up to NR */
    float *restrict xp = xs + SLu;
    aicc_vzero(xs, e[1] * Wp + 2u * SLu);
    for (size_t n = 0; n < p->batch; ++n) {
        float *restrict yn = y + n * K * P;
        for (size_t j0 = 0; j0 < NT; j0 += nt) {
            const size_t nb = NT - j0 < nt ? NT - j0 : nt;
            const size_t r0 = j0 / TW * Mu, r1 = ((j0 + nb - 1u) / TW + 1u) * Mu + 2u;
            const size_t i0 = r0 > pt ? r0 - pt : 0u;       /* input rows [i0, i1) */
            const size_t i1 = r1 <= pt ? 0u : r1 - pt < H ? r1 - pt : H;
            for (size_t c = 0; c < C; ++c) {
                const float *restrict xc = x + (n * C + c) * X;
                for (size_t i = i0; i < i1; ++i)     /* Wp >= OW + 2 = pl + W + pr */
                    aicc_vcopy(xp + (i + pt) * Wp + pl, xc + i * W, W);
                aicc_wgM_in_ISA(xp, Wp, C, TW, j0, nb, v + c * NRu, vs);
            }
            for (size_t xi = 0; xi < T2u; ++xi)
                gemm(K, nb, C, u + xi * K * C, 0, v + xi * vs, C * NRu, NRu, mm + xi * ms, ntp,
                     NULL, -HUGE_VALF, HUGE_VALF, 0, 0);     /* fin 0: plain sums */
            aicc_wgM_out_ISA_MS_NTP(mm, K, OH, OW, TW, j0, nb, bias, lo, hi, yn);
        }
        if (ep)
            ep(yn, K * P);
    }
}"""


def slack(nr: int) -> int:
    """Zero floats before and after the padded plane: the input transform reads up to L * m
    (<= 2 NR) floats before it and L * m + 4 after it."""
    return 2 * nr + 4


def supports(geo) -> bool:
    """2-D, 3x3 kernel, stride 1, dilation 1, one group."""
    return (len(geo.k) == 2 and geo.k == [3, 3] and set(geo.stride) == {1}
            and set(geo.dil) == {1} and geo.group == 1)


def tiles_of(geo, m: int) -> tuple:
    """(TH, TW): output tiles per column and row."""
    return -(-geo.out[0] // m), -(-geo.out[1] // m)


def prefer(ctx, geo, isa: str) -> bool:
    """auto: winograd for a supported conv with constant weights (see AUTO)."""
    if not supports(geo) or ctx.in_const(1) is None or min(geo.out) < 2:
        return False
    a = AUTO[isa]
    th, tw = tiles_of(geo, 2)
    return (geo.cin >= a["c"] and geo.cout >= a["k"]
            and (geo.cin >= a["c_few"] or min(geo.out) >= a["plane"])
            and (th * tw > a["few"] or geo.cin * geo.cout <= a["few_ck"]))


def transformed_weights(w, m: int) -> np.ndarray:
    """U[xi][k][c] = (G w[k, c] G^T)[xi // t][xi % t] (float64, rounded once to float32)."""
    _, g, _ = cook_toom(m)
    gm = np.array([[float(v) for v in row] for row in g])
    u = np.einsum("ai,kcij,bj->abkc", gm, np.asarray(w, np.float64), gm)
    t = m + 2
    return u.reshape(t * t, w.shape[0], w.shape[1]).astype(np.float32)


def block_tiles(sched, nr: int, t: int, C: int, K: int, NT: int) -> int:
    """Tiles per block: V and M (t * t * (C + K) floats per tile) in about wino_kb KiB (the
    nearest multiple of NR, at least NR), but at least C * K / (C + K) tiles (then the
    transformed weights, streamed once per block, are at most the V and M traffic: for many
    channels fewer blocks beat V and M staying in L2), at most all NT tiles."""
    per = t * t * (C + K) * 4
    nt = max(nr, (sched["wino_kb"] * 1024 // per + nr // 2) // nr * nr,
             -(-(C * K // (C + K)) // nr) * nr)
    return NT if NT <= nt else nt


def channels_form(sched, isa: str, nr: int, n: int, C: int, K: int, tw: int,
                  narrow: bool = False) -> bool:
    """Output channels vectorized (kernels/winograd/chan.py) instead of tiles: wino_chan 0 never,
    2 always, 1 (auto) when the n tiles of a batch item leave the one tile panel (NR lanes)
    emptier than the K output channels leave their last panel (e.g. 7x7 maps on AVX-512) and
    do not fill whole vectors of the narrow-plane helpers (narrow: conv_winograd_rows applies;
    n >= L = NR / 2), or for C * K >= chan_ck with K filling >= 90% of its panels and
    chan_tiles[0] to chan_tiles[1] tiles, or (chan_cross) when the tile rows (TW a row) do not
    fill whole vectors of tiles. chan_* are the ISA's (``auto`` of its winograd table). x86
    (chan_ck 128 * 128, 32 to 400 tiles): 128@28, 256@14, 512@14 10-25% faster than with tiles
    vectorized; 64@56 about the same; 128@56 10% slower; 512@7 on AVX2, 16 tiles, 1.8x slower.
    Since the input goes through the one-plane copy (DRIVER), 16 tiles of a 16 x 16 plane run
    faster on the tiles' narrow-plane helpers (Intel Xeon, x86-avx512, C loop, us, channels /
    tiles: 32@16 F(4,3) 14.4 / 13.4, 48@16 36.4 / 24.8, 16 -> 64 at 16x16 20.0 / 13.2, 128@8
    F(2,3) 102.8 / 92.6); 9 tiles (12 x 12, no narrow helpers) stay on channels (x86-avx512
    32@12 7.8 / 15.3; x86-avx2 14.0 / 27.1). arm-neon: isa/neon/winograd.py."""
    if sched["wino_chan"] != 1:
        return sched["wino_chan"] == 2
    a = AUTO[isa]
    fill = K / (-(-K // nr) * nr)
    rows = narrow and n >= nr // 2
    lo, hi = a["chan_tiles"]
    return ((n < nr and n / nr < fill and not rows) or
            (C * K >= a["chan_ck"] and fill >= 0.9 and lo <= n <= hi) or
            (a["chan_cross"] and tw % (nr // 2) != 0))


def emit(ctx, node, geo, isa: str, sched: dict, bias: str, balanced) -> None:
    """Step body (balanced: conv_simd.balanced)."""
    if not supports(geo):
        raise ValueError("conv algo 'winograd' needs a 2-D 3x3 conv, stride 1, dilation 1, "
                         "group 1")
    w = ctx.in_const(1)
    if w is None:
        raise ValueError("conv algo 'winograd' needs constant weights")
    m = sched["wino_m"] or (4 if geo.cin <= AUTO[isa]["m4_c"] else 2)
    t = m + 2
    nr = nr_of(isa)
    C, K = geo.cin, geo.cout
    th, tw = tiles_of(geo, m)
    lo, hi, act = clamp_of(node)
    ep = epilogue(ctx, node, "float32") if act else "NULL"
    u = transformed_weights(w, m)
    use(ctx, "float32")
    vcopy(ctx, isa)              # the row copies and zeroing (both forms)
    if "helpers" in ISAS[isa].winograd:    # inline helpers the ISA's spellings call
        ctx.helper(f"{KEY}.0.wg_{isa}", ISAS[isa].winograd["helpers"])
    narrow = rows_of(isa, m, tw) > 1     # narrow planes: transforms specialized for TW
    chan = channels_form(sched, isa, nr, th * tw, C, K, tw, narrow)
    ctx.kernel = f"{isa} winograd F({m}x{m},3x3)" + (" channels" if chan else "")
    if chan:
        conv_winograd_t.emit(ctx, geo, isa, m, u, bias, (flit(lo), flit(hi)), ep, KEY,
                             sched["wino_kb"])
        return
    nt = block_tiles(sched, nr, t, C, K, th * tw)
    ntp = -(-nt // nr) * nr
    sched = balanced(sched, K)
    gemm = tile_gemm(ctx, isa, sched, K, None)
    up = ctx.const(np.concatenate([pack_a(u[xi], 1, sched["mr"], sched["kc"])
                                   for xi in range(t * t)]), "wino")
    ms = K * ntp + SKEW             # floats between the M matrices (constants of the helpers)
    for name, code in (input_transform(isa, m), output_transform(isa, m, ms, ntp)):
        ctx.helper(f"{KEY}.1.{name}", code)
    tws = f"_tw{tw}" if narrow else ""
    drv = f"wg{m}_conv_{isa}{tws}_{ms}_{ntp}"
    text = DRIVER.replace("_ISA(", f"_ISA{tws}(").replace("_ISA_MS_NTP(", f"_ISA{tws}_{ms}_{ntp}(")
    text = text.replace("GEMM_FN", GEMM_FN).replace("Mx M", f"{m}x{m}").replace(
        "Mu", f"{m}u").replace("T2", str(t * t)).replace("SKEW", str(SKEW)).replace(
        "SL", str(slack(nr))).replace("NTP", str(ntp)).replace("MSu", f"{ms}u").replace(
        "NR", str(nr))
    if narrow:
        for name, code in (input_transform_rows(isa, m, tw),
                           output_transform_rows(isa, m, tw, ms, ntp)):
            ctx.helper(f"{KEY}.2.{name}", code)
    ctx.helper(f"{KEY}.3.{drv}", text.replace("DRV", drv).replace("wgM", f"wg{m}").replace(
        "ISA", isa))
    e3 = [1, th * m + 2, tw * m + 2]
    xp = ctx.scratch((e3[1] * e3[2] + 2 * slack(nr)) * 4, "float", "xpad")
    v = ctx.scratch(t * t * (C * ntp + SKEW) * 4, "float", "wgv")
    mm = ctx.scratch(t * t * ms * 4, "float", "wgm")
    ctx(f"/* Conv {geo.describe()}: {isa} Winograd F({m}x{m}, 3x3), {th} x {tw} tiles in blocks "
        f"of {nt}: {t * t} GEMMs [{K} x {C}] @ [{C} x {nt}] per block */")
    ctx(geo.params())
    ctx("static const size_t e[3] = { " + ", ".join(f"{d}u" for d in e3) + " };")
    ctx(f"aicc_{drv}(&prm, {ctx.inp[0]}, {up}, {bias}, {ctx.out[0]}, {xp}, e, {v}, "
        f"{mm}, {nt}u, {flit(lo)}, {flit(hi)}, {gemm}, {ep});")
