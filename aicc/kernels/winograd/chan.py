"""Winograd conv with the output channels vectorized (kernels/winograd/simd.py's second form, chosen
by conv_winograd.channels_form): the t * t GEMMs run transposed, ``M(xi)^T [tiles x K] =
V(xi)^T [tiles x C] @ U(xi)^T [C x K]`` with K (output channels) as the vectorized N dimension:
gemm_simd's driver, A = V^T row-major (lda = C), B = U^T packed in panels of NR at build time
(gemm.pack_b). For few tiles (7x7 maps on AVX-512 have 16 F(2,3) tiles, half a panel of the
tile form) and many channels on mid-sized planes (the B panel block stays in L1 while the tiles
stream). The padded batch item is copied channel-last (xt[(r * Wp + q) * C + c];
kernels/winograd/tpad.py, transposed in registers) so the input transform reads L consecutive
channels of a patch value with one vector load (masked past C) and stores V^T rows; per block
of nt tiles (a multiple of the GEMM's mr: every block's row tiles have kernels) the input
transform, the GEMMs and the output transform, which loads L channels of M^T per position,
applies A^T M A, + bias, clamp, and writes each output channel's m x m values (clipped at OH /
OW) lane by lane; F(4,3) on x86-avx512, for 16 channels of a tile inside the output, transposed
in 128-bit lanes and stored a row of 4 at a time (_rows_out4). AMD Zen 4, x86-avx512, both
changes (ResNet-8's layers): 32 channels at 16x16 23.1 -> 19.2 us, 64 at 8x8 19.9 -> 17.0 us;
the stores alone measured no faster while the copy was the old scalar loop (which read one
value per channel at stride H * W). Rounding and NaN/Inf: as kernels/winograd/simd.py (same transforms;
the GEMM sums over c ascending in one FMA chain per K block).
"""
from __future__ import annotations

import numpy as np

from ..gemm.portable import pack_b
from ..gemm.simd import driver, nr_of, schedule
from ..isa.registry import ISAS
from .tpad import lanes4, pad_t
from .transforms import SKEW, _transform, cook_toom, vec


def _masked(isa: str) -> str:
    """Masked store of the first {n} lanes of {v} at {p} (the ISA's tail mask)."""
    g = ISAS[isa].mask
    return g["mstore"].format(p="{p}", m=g["mask"], v="{v}")


def _loads(d, names_ptrs, n, L, ind):
    return [f"{ind}const {d['v']} {nm} = {n} == {L}u ? {d['ld']}({p}) : "
            f"{d['mload'].format(p=p, n=n)};" for nm, p in names_ptrs]


def input_transform(isa: str, m: int, C: int, Wp: int, vs: int) -> tuple:
    """(name, C text); C (channels), Wp (row pitch) and vs (floats between the V^T matrices)
    are constants of the helper, so its t * t loads and stores are a pointer plus a
    displacement (as arguments GCC kept their addresses in spilled registers; with the output
    transform's: 32 channels at 16x16 on x86-avx512 19.1 -> 18.4 us, AMD Zen 4)."""
    bt, _, _ = cook_toom(m)
    t, d = m + 2, vec(isa)
    L = d["L"]
    name = f"aicc_wg{m}t_in_{isa}_{C}_{Wp}_{vs}"
    ind = "            "
    o = [f"/* Winograd F({m}x{m}, 3x3) input transform, channels vectorized ({isa}): for the "
         "tiles j0 + j, j < nb, of",
         " * the channel-last padded item xt (row pitch Wp, TW tiles per row), V^T(xi)[j][c] = "
         "(B^T d B)(xi) at",
         " * v + xi * vs + j * C + c. */",
         f"static void {name}(const float *restrict xt, size_t TW, size_t j0, size_t nb, "
         "float *restrict v)", "{",
         f"    const size_t C = {C}u, Wp = {Wp}u, vs = {vs}u;",
         "    for (size_t j = 0; j < nb; ++j) {",
         "        const size_t jj = j0 + j;",
         f"        const float *restrict s0 = xt + ((jj / TW) * {m}u * Wp + (jj % TW) * {m}u) * C;",
         f"        for (size_t c = 0; c < C; c += {L}u) {{",
         f"            const size_t nc = C - c < {L}u ? C - c : {L}u;",
         "            const float *restrict s = s0 + c;",
         "            float *restrict vj = v + j * C + c;"]
    o += _loads(d, [(f"d{r}_{q}", f"s + ({r}u * Wp + {q}u) * C") for r in range(t)
                    for q in range(t)], "nc", L, ind)
    o += _transform(isa, bt, t, "d", "w", ind)
    o.append(f"{ind}if (nc == {L}u) {{")
    o += [f"{ind}    {d['st']}(vj + {i * t + q}u * vs, w{i}_{q});" for i in range(t)
          for q in range(t)]
    o.append(f"{ind}}} else {{")
    o += [f"{ind}    " + _masked(isa).format(p=f"vj + {i * t + q}u * vs", n="nc", v=f"w{i}_{q}")
          + ";" for i in range(t) for q in range(t)]
    o += [f"{ind}}}", "        }", "    }", "}"]
    return name, "\n".join(o)


def output_transform(isa: str, m: int, ms: int) -> tuple:
    """(name, C text); ms (floats between the M^T matrices) a constant of the helper, as the
    input transform's strides."""
    _, _, at = cook_toom(m)
    t, d = m + 2, vec(isa)
    L = d["L"]
    name = f"aicc_wg{m}t_out_{isa}_{ms}"
    ind = "            "
    o = [f"/* Winograd F({m}x{m}, 3x3) output transform, channels vectorized ({isa}): tiles j0 + "
         "j, j < nb;",
         " * M^T(xi)[j][k] at mm + xi * ms + j * K + k;",
         " * Y = A^T M A, + bias[k] (may be NULL), clamped to [lo, hi], into y[K][OH][OW] "
         f"(tile j: rows (j / TW) * {m},",
         f" * columns (j % TW) * {m}; outputs past OH / OW are not stored). */",
         f"static void {name}(const float *restrict mm, size_t K, size_t OH, size_t OW, "
         "size_t TW,",
         "    size_t j0, size_t nb, const float *restrict bias, float lo, float hi, "
         "float *restrict y)", "{",
         f"    const size_t P = OH * OW, ms = {ms}u;",
         f"    const {d['v']} vlo = {d['set1']}(lo), vhi = {d['set1']}(hi);",
         "    for (size_t j = 0; j < nb; ++j) {",
         f"        const size_t oy = (j0 + j) / TW * {m}u, ox = (j0 + j) % TW * {m}u;",
         f"        for (size_t k = 0; k < K; k += {L}u) {{",
         f"            const size_t nk = K - k < {L}u ? K - k : {L}u;",
         "            const float *restrict s = mm + j * K + k;"]
    o += _loads(d, [(f"m{r}_{q}", f"s + {r * t + q}u * ms") for r in range(t)
                    for q in range(t)], "nk", L, ind)
    o += _transform(isa, at, t, "m", "z", ind)
    o.append(f"{ind}{d['v']} vb = {d['set1']}(0.0f);")
    o.append(f"{ind}if (bias)")
    o.append(f"{ind}    vb = nk == {L}u ? {d['ld']}(bias + k) : "
             f"{d['mload'].format(p='bias + k', n='nk')};")
    for i in range(m):
        for q in range(m):
            o.append(f"{ind}const {d['v']} c{i}_{q} = {d['min']}(vhi, {d['max']}(vlo, "
                     f"bias ? {d['add']}(z{i}_{q}, vb) : z{i}_{q}));")
    if m == 4 and ISAS[isa].winograd.get("chan_rows4"):
        o += _rows_out4(isa, ind)
    if m == 2 and "chan_rows2" in ISAS[isa].winograd:
        o += _rows_out2(isa, ind)
    o.append(f"{ind}float buf[{m * m}][{L}];")
    o += [f"{ind}{d['st']}(buf[{i * m + q}], c{i}_{q});" for i in range(m) for q in range(m)]
    o += [f"{ind}for (size_t i = 0; i < {m}u && oy + i < OH; ++i)",
          f"{ind}    for (size_t q = 0; q < {m}u && ox + q < OW; ++q) {{",
          f"{ind}        float *restrict dst = y + k * P + (oy + i) * OW + ox + q;",
          f"{ind}        for (size_t l = 0; l < nk; ++l) dst[l * P] = buf[i * {m}u + q][l];",
          f"{ind}    }}", "        }", "    }", "}"]
    return name, "\n".join(o)


def _rows_out4(isa: str, ind) -> list:
    """F(4,3), L channels of a tile inside the output (``chan_rows4``): per tile row i, the
    four vectors c{i}_q (L channels each of output column q) transposed in 128-bit lanes
    (unpack, then shuffle: lane b of u{i}_e holds channel 4 b + e's 4 outputs of the row),
    each row of 4 outputs of a channel stored with one 128-bit store (``store_part[4]``),
    instead of L x 16 scalar stores."""
    L, st4 = ISAS[isa].lanes, ISAS[isa].winograd["store_part"][4]
    o = [f"{ind}if (nk == {L}u && oy + 4u <= OH && ox + 4u <= OW) {{",
         f"{ind}    float *restrict yk = y + k * P + oy * OW + ox;"]
    for i in range(4):
        o += lanes4(isa, [f"c{i}_{q}" for q in range(4)], f"t{i}_",
                    [f"u{i}_{e}" for e in range(4)], ind + "    ")
        for b in range(L // 4):
            for e in range(4):
                o.append(f"{ind}    " + st4.format(p=f"yk + {4 * b + e}u * P + {i}u * OW",
                                                    v=f"u{i}_{e}", i=b) + ";")
    o += [f"{ind}    continue;", f"{ind}}}"]
    return o


def _rows_out2(isa: str, ind) -> list:
    """F(2,3) on 4-lane vectors (``chan_rows2``: the stores of a vector's low / high pair),
    the 4 channels of a tile inside the output: the 2 x 2 outputs c{i}_q transposed (lanes4:
    u_e = channel e's y00, y01, y10, y11) and each output row of a channel stored as one pair,
    instead of 16 scalar stores through a buffer."""
    lo, hi = ISAS[isa].winograd["chan_rows2"]
    o = [f"{ind}if (nk == 4u && oy + 2u <= OH && ox + 2u <= OW) {{",
         f"{ind}    float *restrict yk = y + k * P + oy * OW + ox;"]
    o += lanes4(isa, ["c0_0", "c0_1", "c1_0", "c1_1"], "t", [f"u{e}" for e in range(4)],
                ind + "    ")
    for e in range(4):
        o.append(f"{ind}    {lo.format(p=f'yk + {e}u * P', v=f'u{e}')};")
        o.append(f"{ind}    {hi.format(p=f'yk + {e}u * P + OW', v=f'u{e}')};")
    o += [f"{ind}    continue;", f"{ind}}}"]
    return o


DRIVER = """\
/* Winograd F(Mx M, 3x3) conv, output channels vectorized (kernels/winograd/chan.py): per batch item
 * the channel-last padded copy xt (extents e[1] x e[2]), then per block of nt tiles: V^T =
 * input transform (T2 matrices [nt x C]), M^T(xi) = V^T(xi) @ U^T(xi) (gemm: gemm_simd's
 * driver, plain sums; U^T(xi) packed in panels of NR at u + xi * C * Kp), output transform
 * (+ bias, clamp [lo, hi]); ep (may be NULL): the scalar activation over the batch item. */
static void DRV(const aicc_conv_params *p, const float *restrict x,
    const float *restrict u, const float *restrict bias, float *restrict y, float *restrict xt,
    const size_t e[3], float *restrict v, float *restrict mm, size_t nt, float lo, float hi,
    void (*ep)(float *, size_t))
{
    const size_t C = p->cin_g, K = p->cout_g, OH = p->out[1], OW = p->out[2];
    const size_t X = p->in[0] * p->in[1] * p->in[2], P = OH * OW;
    const size_t TW = (OW + Mu - 1u) / Mu, NT = (OH + Mu - 1u) / Mu * TW;
    const size_t vs = nt * C + SKEWu, ms = nt * K + SKEWu, Kp = (K + NRu - 1u) / NRu * NRu;
    for (size_t n = 0; n < p->batch; ++n) {
        float *restrict yn = y + n * K * P;
        aicc_wgt_pad(p, C, x + n * C * X, xt, e[1], e[2]);
        for (size_t j0 = 0; j0 < NT; j0 += nt) {
            const size_t nb = NT - j0 < nt ? NT - j0 : nt;
            IN(xt, TW, j0, nb, v);     /* C, e[2], vs: constants of IN */
            for (size_t xi = 0; xi < T2u; ++xi)
                GEMM(nb, K, C, v + xi * vs, C, u + xi * C * Kp, 1.0f, NULL, 0u, 0u, 0.0f,
                     mm + xi * ms, 0);
            OUT(mm, K, OH, OW, TW, j0, nb, bias, lo, hi, yn);     /* ms: a constant of OUT */
        }
        if (ep)
            ep(yn, K * P);
    }
}"""


def block_tiles(budget_kb: int, t: int, C: int, K: int, n: int, mr: int) -> int:
    """Tiles per block: V^T and M^T (t * t * (C + K) floats per tile) in about budget_kb KiB,
    at least C * K / (C + K) (the weights are streamed once per block), a multiple of mr (so
    every block's row tiles are mr and, for the last, n % mr), at most all n tiles."""
    per = t * t * (C + K) * 4
    nt = max(budget_kb * 1024 // per, C * K // (C + K), mr)
    nt = -(-nt // mr) * mr
    return n if n <= nt else nt


def emit(ctx, geo, isa: str, m: int, u, bias: str, lohi, ep: str, key: str,
         budget_kb: int) -> None:
    """Step body; u: transformed weights [t * t][K][C] (float32); lohi: C literals of the
    clamp; ep: the scalar activation helper or NULL; key: the helper key prefix; budget_kb: the
    tile-block budget (wino_kb)."""
    t, nr = m + 2, nr_of(isa)
    C, K = geo.cin, geo.cout
    th, tw = -(-geo.out[0] // m), -(-geo.out[1] // m)
    n = th * tw
    over = dict((ctx.target.schedule or {}).get("gemm") or {})
    mr = schedule(isa, over)["mr"]
    nt = block_tiles(budget_kb, t, C, K, n, mr)
    if nt == n:                                             # one block: balanced row tiles
        mr = -(-n // -(-n // mr))
    sched = schedule(isa, {**over, "mr": mr})
    gemm = driver(ctx, isa, sched, None, {}, n)     # row tiles of mr and n % mr: every block
    up = ctx.const(np.concatenate([_pack_b(u[xi].T, nr) for xi in range(t * t)]), "wino")
    pad_name, pad_code = pad_t(isa)
    ctx.helper(f"{key}.1.{pad_name}", pad_code)
    names = []
    e3 = [1, th * m + 2, tw * m + 2]
    vs, ms = nt * C + SKEW, nt * K + SKEW
    for name, code in (input_transform(isa, m, C, e3[2], vs), output_transform(isa, m, ms)):
        ctx.helper(f"{key}.1.{name}", code)
        names.append(name)
    drv = f"aicc_wg{m}t_conv_{gemm[len('aicc_sg_'):]}_{C}_{e3[2]}_{vs}_{ms}"
    ctx.helper(f"{key}.3.{drv}", DRIVER.replace("Mx M", f"{m}x{m}").replace("Mu", f"{m}u")
               .replace("T2", str(t * t)).replace("SKEW", str(SKEW)).replace("NR", str(nr))
               .replace("DRV", drv).replace("aicc_wgt_pad", pad_name)
               .replace("IN", names[0]).replace("OUT", names[1]).replace("GEMM", gemm))
    xt = ctx.scratch(C * e3[1] * e3[2] * 4, "float", "xpad")
    v = ctx.scratch(t * t * vs * 4, "float", "wgv")
    mm = ctx.scratch(t * t * ms * 4, "float", "wgm")
    ctx(f"/* Conv {geo.describe()}: {isa} Winograd F({m}x{m}, 3x3), {th} x {tw} tiles, output "
        f"channels vectorized: {t * t} GEMMs [{nt} x {C}] @ [{C} x {K}] per block of tiles */")
    ctx(geo.params())
    ctx("static const size_t e[3] = { " + ", ".join(f"{d}u" for d in e3) + " };")
    ctx(f"{drv}(&prm, {ctx.inp[0]}, {up}, {bias}, {ctx.out[0]}, {xt}, e, "
        f"{v}, {mm}, {nt}u, {lohi[0]}, {lohi[1]}, {ep});")


def _pack_b(b2, nr: int) -> np.ndarray:
    """[C, K] into panels of nr columns: out[(p * C + c) * nr + j] = b2[c, p * nr + j]."""
    return pack_b(np.ascontiguousarray(b2, np.float32), nr).reshape(-1)
