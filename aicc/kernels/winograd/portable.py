"""Winograd F(2x2,3x3) / F(4x4,3x3) in portable C (float32 convs off the SIMD paths; the x86
SIMD form is kernels/winograd/simd.py, whose matrices, transformed weights and geometry rule this module
shares).

Per batch item, the output tiles (m x m outputs each, numbered row-major, TW per row) go in
blocks of nb tiles (a multiple of 8, so that V fits ``wino_kb`` KiB). Per block:

1. per input channel and panel of 8 tiles: the 8 t x t input patches gathered from the input
   plane (zero outside it: the padding), and V = B^T d B computed for the 8 lanes in one loop
   (straight-line code from conv_winograd_prog's programs, which the C compiler vectorizes
   across the lanes); V(xi) for each of the t * t positions xi is stored as the conv GEMM's
   col panels (conv_gemm_c: [panel][c][8]);
2. per block of 4 output channels: for each xi the GEMM M(xi) = U(xi) @ V(xi) over the block's
   panels with conv_kernels' 4x8 register tile (U = G g G^T per xi, packed at compile time as
   [xi][block of 4][c][4]) into a small buffer (panels x t * t x 4 x 8), then per panel and
   output channel Y = A^T M A + bias, scattered into the output (outputs past the plane are
   not stored);
3. after the batch item, the fused activation (ep) over its outputs.

Auto (the target's ``schedule: conv_c: {algo: auto}``: generic; cortex-m4, and arm-neon for
the convs it gives the portable kernels, keep im2col unless a build YAML sets it, since it
grows the weights (arm-neon's float convs run kernels/conv/simd.py, whose NEON Winograd is
kernels/winograd/simd.py); a node's ``aicc_schedule: {algo: winograd | im2col}`` forces
either): 2-D 3x3 stride-1 convs of one group
with constant float32 weights, at least AUTO_C input and AUTO_K output channels and at least
MIN_TILES tiles of F(2,3) per batch item (two full panels of 8; ResNet-18's 7 x 7 stage has
16). Tile size ``wino_m``: 0 (auto) and 2 take F(2,3), 4 F(4,3). F(4,3) runs ResNet-18's
64-channel 56 x 56 convs 1.55x faster than F(2,3) (AMD Zen 4: 2.35 against 3.65 ms; im2col 6.7)
but, without the x86 kernels' FMA, is less accurate than there: the largest error as a share of
the tests' tolerance (rtol 1e-4, atol 1e-5) against onnxruntime on ResNet-style layers (16 to
64 channels, 8 x 8 to 56 x 56, inputs N(0, 1) or x3, weights N(0, 1 / 9C)) was 0.17-1.28 with
F(4,3) (x86-avx2's F(4,3): 0.15-0.64), 0.04-0.12 with F(2,3) and 0.04-0.13 with im2col. So auto
keeps to F(2,3), as accurate as im2col; F(4,3) is for a build YAML that asks for it.

Size: the transformed weights replace the packed ones in the weights image (16/9 of them for
F(2,3), 4x for F(4,3): ResNet-18 on generic 46.8 -> 76.1 MB, ResNet-8 312 -> 470 KB); scratch:
V (t * t x C x nb floats) and the M buffer (ResNet-8's arena 455 -> 524 KB, ResNet-18's 4.01 MB
unchanged).

Rounding: the transforms' arithmetic (float32 adds and multiplies by the matrix entries, no
FMA) replaces the direct sum's, so results differ from im2col + GEMM by more than summation
order (the figures above). The GEMM sums over channels as the 4x8 tile does (blocks of 64).

NaN/Inf: a NaN or Inf input reaches every output of the tiles whose patch holds it (the
transforms mix all t x t values; Inf - Inf = NaN), so outputs of those tiles that direct
convolution would keep finite become NaN, and outputs that would be +-Inf may come out NaN.
"""
from __future__ import annotations

from . import prog
from ..conv.base_c import COL_BUDGET, TILE, pack_weights, use
from .simd import supports, tiles_of, transformed_weights
from .transforms import float_lit

LANES = 8              # tiles per panel: the 4x8 register tile's columns
AUTO_C, AUTO_K = 8, 8  # auto: at least this many input / output channels
U_BIG_KB = 1024        # transformed weights above this: blocks of at least C K / (C + K) tiles
MIN_TILES = 16         # auto: at least this many F(2,3) tiles per batch item (2 full panels)


def schedule(ctx) -> dict:
    """The target's ``schedule: conv_c`` (algo: off when absent; wino_m, wino_kb) under the
    node's ``aicc_schedule`` (algo, wino_m, wino_kb)."""
    tgt = dict((ctx.target.schedule or {}).get("conv_c") or {})
    s = {"algo": tgt.get("algo", "im2col"), "wino_m": int(tgt.get("wino_m", 0)),
         "wino_kb": int(tgt.get("wino_kb", COL_BUDGET * 4 // 1024))}
    node = ctx.node.attrs.get("aicc_schedule") or {}
    for k in ("algo", "wino_m", "wino_kb"):
        if k in node:
            s[k] = node[k] if k == "algo" else int(node[k])
    ctx.schedule = dict(s)
    return s


def chosen(ctx, geo, dt) -> dict | None:
    """The schedule when this conv runs as portable Winograd, else None (im2col and the
    other portable kernels). float32 only: other dtypes keep their kernels whatever the
    schedule says (as on the x86 targets, whose conv schedules apply to float32). Forcing it
    on a float32 conv it cannot take is an error."""
    if str(dt) != "float32":
        return None
    s = schedule(ctx)
    if s["algo"] == "winograd":
        if not supports(geo) or ctx.in_const(1) is None:
            raise ValueError("conv algo 'winograd' needs a 2-D 3x3 conv, stride 1, dilation "
                             "1, group 1 and constant weights")
        return s
    if (s["algo"] != "auto" or not supports(geo) or ctx.in_const(1) is None
            or min(geo.out) < 2 or geo.cin < AUTO_C or geo.cout < AUTO_K):
        return None
    th, tw = tiles_of(geo, 2)
    return s if th * tw >= MIN_TILES else None


def lincomb(isa, out: str, terms, ind: str) -> str:
    """`const float out = sum c * src` over (Fraction c, src) terms, +-1 as add / sub (no
    FMA: the same arithmetic on every target)."""
    terms = [(c, s) for c, s in terms if c != 0]
    terms.sort(key=lambda cs: cs[0] != 1)           # start from a +1 term when there is one
    c0, s0 = terms[0]
    e = s0 if c0 == 1 else f"{float_lit(c0)} * {s0}"
    for c, s in terms[1:]:
        e = (f"({e}) + {s}" if c == 1 else f"({e}) - {s}" if c == -1
             else f"({e}) + {float_lit(c)} * {s}")
    return f"{ind}const float {out} = {e};"


def _transform(mat, n_in: int, src, ind: str) -> list:
    """out{i}_{j} = sum_r mat[i][r] (sum_s mat[j][s] src(r, s)) for an n_in x n_in input:
    the rows' 1-D transforms (h), then the columns'."""
    n_out = len(mat)
    o = []
    for r in range(n_in):
        o += prog.emit(lincomb, "c", mat, [src(r, s) for s in range(n_in)],
                       [f"h{r}_{j}" for j in range(n_out)], f"hp{r}_", ind)
    for j in range(n_out):
        o += prog.emit(lincomb, "c", mat, [f"h{r}_{j}" for r in range(n_in)],
                       [f"o{i}_{j}" for i in range(n_out)], f"vp{j}_", ind)
    return o


def _lane_function(mat, t: int, head: list, load, store, pre=(), post=()) -> str:
    """A C function (head: its comment and signature lines) whose loop over the 8 lanes of a
    panel loads the t x t inputs (load(a, b): the expression), computes out = mat in mat^T
    and stores each of its len(mat) x len(mat) values (store(i, j, value): the statement);
    pre / post: lines before and after the loop."""
    ind = " " * 8
    n = len(mat)
    body = [f"{ind}const float g{a}_{b} = {load(a, b)};" for a in range(t) for b in range(t)]
    body += _transform(mat, t, lambda r, s: f"g{r}_{s}", ind)
    body += [f"{ind}{store(i, j, f'o{i}_{j}')}" for i in range(n) for j in range(n)]
    return "\n".join([*head, "{", *pre, f"    for (size_t l = 0; l < {LANES}u; ++l) {{",
                      *body, "    }", *post, "}"])


def input_transform(m: int) -> tuple:
    """(name, C text): V = B^T d B for the 8 lanes of a panel; d[(a * t + b) * 8 + l] holds
    the patch of lane l, V(xi) of lane l goes to v[xi * vs + l]."""
    bt, _, _ = prog.cook_toom(m)
    t = m + 2
    name = f"aicc_wgp{m}_in"
    return name, _lane_function(bt, t, [
        f"/* Winograd F({m}x{m}, 3x3) input transform (kernels/winograd/portable.py) of one channel's",
        " * panel of 8 tiles: per lane, V = B^T d B, into w (local: the lane loop vectorizes),",
        " * then copied to v + xi * vs. */",
        f"static void {name}(const float *restrict d, float *restrict v, size_t vs)"],
        lambda a, b: f"d[{(a * t + b) * LANES}u + l]",
        lambda i, j, val: f"w[{(i * t + j) * LANES}u + l] = {val};",
        pre=[f"    float w[{t * t * LANES}u];"],
        post=[f"    for (size_t xi = 0; xi < {t * t}u; ++xi)",
              f"        for (size_t l = 0; l < {LANES}u; ++l)",
              f"            v[xi * vs + l] = w[xi * {LANES}u + l];"])


def output_transform(m: int) -> tuple:
    """(name, C text): Y = A^T M A + bv for the 8 lanes of row r of a panel's M buffer
    (mb[(xi * 4 + r) * 8 + l]); y[(a * m + b) * 8 + l] the m x m outputs of lane l."""
    _, _, at = prog.cook_toom(m)
    t = m + 2
    name = f"aicc_wgp{m}_out"
    return name, _lane_function(at, t, [
        f"/* Winograd F({m}x{m}, 3x3) output transform (kernels/winograd/portable.py) of row r of a",
        " * panel's M buffer: per lane, Y = A^T M A + bv. */",
        f"static void {name}(const float *restrict mb, size_t r, float bv, float *restrict y)"],
        lambda a, b: f"mb[{((a * t + b) * 4) * LANES}u + r * {LANES}u + l]",
        lambda i, j, val: f"y[{(i * m + j) * LANES}u + l] = {val} + bv;")


DRIVER = """\
/* Winograd F(Mx M, 3x3) conv in portable C (kernels/winograd/portable.py): per batch item and block of
 * nb tiles (a multiple of 8): per channel and panel of 8 tiles the patches gathered (zero
 * outside the input) and transformed into V (T2 col-panel matrices [C x nb], vs apart);
 * per block of 4 output channels the T2 GEMMs M(xi) = U(xi) @ V(xi) by the 4x8 tile into mb
 * ([panel][xi][4][8]), then per panel the output transform (+ bias) scattered into y; ep
 * (may be NULL): the activation over the batch item's outputs. u: [xi][block of 4][c][4]. */
static void aicc_wgpM_conv(const aicc_conv_params *p, const float *restrict x,
                           const float *restrict u, const float *restrict bias,
                           float *restrict y, float *restrict v, float *restrict mb, size_t nb,
                           void (*ep)(float *, size_t))
{
    const size_t C = p->cin_g, K = p->cout_g, OH = p->out[1], OW = p->out[2];
    const size_t H = p->in[1], W = p->in[2], X = H * W, P = OH * OW, nkb = (K + 3u) / 4u;
    const size_t TW = (OW + Mu - 1u) / Mu, NT = (OH + Mu - 1u) / Mu * TW, vs = C * nb;
    float d[T2u * 8u], o[Mu * Mu * 8u];
    for (size_t n = 0; n < p->batch; ++n) {
        const float *restrict xn = x + n * C * X;
        float *restrict yn = y + n * K * P;
        for (size_t j0 = 0; j0 < NT; j0 += nb) {
            const size_t np = ((NT - j0 < nb ? NT - j0 : nb) + 7u) / 8u;    /* panels */
            for (size_t c = 0; c < C; ++c) {
                const float *restrict xc = xn + c * X;
                for (size_t q = 0; q < np; ++q) {
                    for (size_t l = 0; l < 8u; ++l) {
                        const size_t j = j0 + q * 8u + l;
                        const int64_t r0 = (int64_t)(j / TW * Mu) - (int64_t)p->pad[1];
                        const int64_t c0 = (int64_t)(j % TW * Mu) - (int64_t)p->pad[2];
                        if (j < NT && r0 >= 0 && c0 >= 0 && r0 + Tu <= (int64_t)H &&
                            c0 + Tu <= (int64_t)W) {
                            const float *restrict s = xc + (size_t)r0 * W + (size_t)c0;
                            for (size_t a = 0; a < Tu; ++a)
                                for (size_t b = 0; b < Tu; ++b)
                                    d[(a * Tu + b) * 8u + l] = s[a * W + b];
                            continue;
                        }
                        for (size_t a = 0; a < Tu; ++a)
                            for (size_t b = 0; b < Tu; ++b) {
                                const int64_t ia = r0 + (int64_t)a, ib = c0 + (int64_t)b;
                                d[(a * Tu + b) * 8u + l] =
                                    j < NT && ia >= 0 && ia < (int64_t)H && ib >= 0 &&
                                    ib < (int64_t)W ? xc[(size_t)ia * W + (size_t)ib] : 0.0f;
                            }
                    }
                    aicc_wgpM_in(d, v + q * C * 8u + c * 8u, vs);
                }
            }
            for (size_t kb = 0; kb < nkb; ++kb) {
                const size_t m0 = 4u * kb, rows = K - m0 < 4u ? K - m0 : 4u;
                for (size_t xi = 0; xi < T2u; ++xi)
                    for (size_t q = 0; q < np; ++q)
                        aicc_tile4x8_f32(C, u + (xi * nkb + kb) * C * 4u,
                                         v + xi * vs + q * C * 8u,
                                         (float (*)[8])(mb + (q * T2u + xi) * 32u));
                for (size_t q = 0; q < np; ++q)
                    for (size_t r = 0; r < rows; ++r) {
                        float *restrict yk = yn + (m0 + r) * P;
                        aicc_wgpM_out(mb + q * T2u * 32u, r, bias ? bias[m0 + r] : 0.0f, o);
                        for (size_t l = 0; l < 8u; ++l) {
                            const size_t j = j0 + q * 8u + l;
                            const size_t ty = j / TW * Mu, tx = j % TW * Mu;
                            if (j >= NT)
                                break;
                            for (size_t a = 0; a < Mu && ty + a < OH; ++a)
                                for (size_t b = 0; b < Mu && tx + b < OW; ++b)
                                    yk[(ty + a) * OW + tx + b] = o[(a * Mu + b) * 8u + l];
                        }
                    }
            }
        }
        if (ep)
            ep(yn, K * P);
    }
}"""


def block_tiles(kb: int, t: int, C: int, K: int, NT: int) -> int:
    """Tiles per block, a multiple of 8: V (t * t * C floats per tile) within kb KiB (at least
    8 tiles), at most all NT tiles rounded up to 8; when the transformed weights U (read once
    per block) exceed U_BIG_KB, at least C * K / (C + K) tiles, so that U weighs no more than
    V. Measured (AMD Zen 4, ResNet-18 on generic, ms per conv): 512 channels at 7 x 7 (U
    16 MiB, 16 tiles) 6.95 in 2 blocks, 5.25 in one; 256 at 14 x 14 (U 4 MiB) 4.6 -> 4.4 in
    one block of 56 instead of 4 of 16; 64 at 56 x 56, F(4,3) (U 0.56 MiB) 2.97 with 24 tiles,
    3.65 with 32."""
    nb = max(LANES, kb * 1024 // (t * t * C * 4) // LANES * LANES)
    if t * t * C * K * 4 > U_BIG_KB * 1024:
        nb = max(nb, -(-(C * K // (C + K)) // LANES) * LANES)
    return min(nb, -(-NT // LANES) * LANES)


def emit(ctx, geo, s: dict, bias: str, ep: str) -> None:
    """Step body of a conv that ``chosen`` gave schedule s."""
    m = s["wino_m"] or 2
    if m not in (2, 4):
        raise ValueError(f"wino_m {m} (2 or 4)")
    t = m + 2
    C, K = geo.cin, geo.cout
    th, tw = tiles_of(geo, m)
    nb = block_tiles(s["wino_kb"], t, C, K, th * tw)
    use(ctx, "float32", TILE)
    for name, code in (input_transform(m), output_transform(m)):
        ctx.helper(f"conv.9.wgp{m}.1.{name}", code)
    ctx.helper(f"conv.9.wgp{m}.2.drv", DRIVER.replace("Mx M", f"{m}x{m}").replace(
        "Mu", f"{m}u").replace("T2u", f"{t * t}u").replace("Tu", f"{t}u").replace(
        "wgpM", f"wgp{m}"))
    u = transformed_weights(ctx.in_const(1), m)          # [t * t, K, C]
    # [xi][block of 4 output channels][c][4]: the conv GEMM's packing, xi as the group
    up = ctx.const(pack_weights(u.reshape(t * t * K, C), t * t), "wino")
    v = ctx.scratch(t * t * C * nb * 4, "float", "wgv")
    mb = ctx.scratch(nb // LANES * t * t * 32 * 4, "float", "wgm")
    ctx.kernel = f"winograd F({m}x{m},3x3)"
    ctx(f"/* Conv {geo.describe()}: portable Winograd F({m}x{m}, 3x3), {th} x {tw} tiles in "
        f"blocks of {nb}: {t * t} GEMMs [{K} x {C}] @ [{C} x {nb}] per block */")
    ctx(geo.params())
    ctx(f"aicc_wgp{m}_conv(&prm, {ctx.inp[0]}, {up}, {bias}, {ctx.out[0]}, {v}, {mb}, {nb}u, "
        f"{ep});")
