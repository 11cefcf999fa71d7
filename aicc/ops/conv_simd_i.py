"""Implicit-GEMM Conv for stride-1 1-D/2-D convs (float32; x86-avx2 / x86-avx512): no im2col.

The batch item is copied into the zero-padded volume of conv_simd.py (pitch Wp = padded width
extent). With stride 1, output position (oy, ox) is the "virtual" column f = oy * Wp + ox and
patch entry k = (channel c, tap (ky, kx)) reads ``xp[koff[k] + f]`` with ``koff[k] = c * V +
ky * dh * Wp + kx * dw``: for every k, consecutive f are consecutive floats. So the GEMM's B
operand is the padded volume itself, B(k, j) = b[koff[k] + j] (the micro-kernel's table
variant, vector loads straight from the volume), over virtual tiles of nt columns. Columns
ox in [OW, Wp) are the padding's garbage (Wp - OW of every Wp lanes: 2 of 58 for 3x3 on
56 wide); the tile GEMM writes its virtual tile (bias and clamp in registers) to scratch and
only the valid columns are copied to the output rows, then the scalar activation (if any)
runs on them. The garbage lanes read the volume (or its zero slack) and are never stored.

Auto choice (conv_simd.emit): stride 1, not a direct 1x1, at most 10% garbage lanes.
Rounding, NaN/Inf: as the im2col path (same FMA chain per output, k ascending).
"""
from __future__ import annotations

import math

from .conv_kernels import epilogue, use
from .conv_simd_gemm import GEMM_FN_TABLE, KEY, clamp_of, packed_weights, tile_gemm
from .gemm_simd import flit, nr_of

DRIVER = """\
/* Implicit-GEMM conv (stride 1, see conv_simd_i.py): per batch item, the padded volume xp
 * (sizes e, 2 * NR floats of zero slack); per group and virtual tile of nt columns (f = oy *
 * e[2] + ox), tmp[M][nt] = W @ B with B(k, j) = xp[koff[k] + f0 + j] (bias and clamp in the
 * kernels), then the columns with ox < OW are copied to y and ep (may be NULL) applied. */
static void aicc_cv_convi_ISA(const aicc_conv_params *p, const float *restrict x,
    const float *restrict w, const float *restrict bias, float *restrict y, float *restrict xp,
    const size_t e[3], const size_t *restrict koff, float *restrict tmp, size_t nt, float lo,
    float hi, GEMM_FN, void (*ep)(float *, size_t))
{
    const size_t X = p->in[0] * p->in[1] * p->in[2], OW = p->out[2], OH = p->out[1];
    const size_t P = OH * OW, Wp = e[2], F = OH * Wp, M = p->cout_g;
    const size_t K = p->cin_g * p->k[0] * p->k[1] * p->k[2], C = p->group * p->cin_g;
    const size_t Vg = p->cin_g * e[0] * e[1] * e[2];
    for (size_t n = 0; n < p->batch; ++n) {
        aicc_cv_pad(p, C, x + n * C * X, xp, e, 2u * NRu);
        for (size_t g = 0; g < p->group; ++g) {
            const float *restrict wg = w + g * M * K;
            const float *restrict bg = bias ? bias + g * M : NULL;
            float *restrict yg = y + (n * p->group + g) * M * P;
            for (size_t f0 = 0; f0 < F; f0 += nt) {
                const size_t m = F - f0 < nt ? F - f0 : nt;
                gemm(M, m, K, wg, 0, xp + g * Vg + f0, NRu, koff, tmp, nt, bg, lo, hi, 0, 1);
                for (size_t oy = f0 / Wp; oy < OH && oy * Wp < f0 + m; ++oy) {
                    const size_t a = oy * Wp > f0 ? oy * Wp : f0;         /* virtual span */
                    const size_t b = oy * Wp + OW < f0 + m ? oy * Wp + OW : f0 + m;
                    if (a >= b)
                        continue;
                    for (size_t j = 0; j < M; ++j) {
                        const float *restrict s = tmp + j * nt + (a - f0);
                        float *restrict d = yg + j * P + oy * OW + (a - oy * Wp);
                        for (size_t i = 0; i < b - a; ++i) d[i] = s[i];
                        if (ep)
                            ep(d, b - a);
                    }
                }
            }
        }
    }
}"""


def waste(geo) -> float:
    """Fraction of the virtual columns that are padding garbage."""
    ow = geo.out[-1]
    wp = ow + (geo.k[-1] - 1) * geo.dil[-1]
    return 1.0 - ow / wp


def supports(geo) -> bool:
    return len(geo.k) <= 2 and set(geo.stride) == {1}


def emit(ctx, node, geo, isa: str, sched: dict, bias: str, pad_c: str, ext) -> None:
    """Step body (pad_c: conv_simd's pad helper text; ext the padded extents)."""
    nr = nr_of(isa)
    K = geo.cin_g * math.prod(geo.k)
    mo = geo.cout_g
    e3 = [1] * (3 - len(ext)) + list(ext)
    dl3 = [1] * (3 - len(ext)) + list(geo.dil)
    k3 = [1] * (3 - len(ext)) + list(geo.k)
    vol = math.prod(e3)
    F = math.prod(geo.out[:-1]) * e3[2]
    budget = sched["tile_kb"] * 1024 // 4
    jb = sched["jb"]
    nt = max(jb, budget // mo // jb * jb)
    nt = min(nt, -(-F // nr) * nr)
    lo, hi, act = clamp_of(node)
    gemm = tile_gemm(ctx, isa, sched, mo, None, table=True)
    ep = epilogue(ctx, node, "float32") if act else "NULL"
    wp = packed_weights(ctx, geo, sched["mr"], sched["kc"])
    use(ctx, "float32")
    ctx.helper(f"{KEY}.1.pad", pad_c)
    ctx.helper(f"{KEY}.3.convi_{isa}", DRIVER.replace("GEMM_FN", GEMM_FN_TABLE)
               .replace("NR", str(nr)).replace("ISA", isa))
    koff = [c * vol + kz * dl3[0] * e3[1] * e3[2] + ky * dl3[1] * e3[2] + kx * dl3[2]
            for c in range(geo.cin_g) for kz in range(k3[0]) for ky in range(k3[1])
            for kx in range(k3[2])]
    xp = ctx.scratch((geo.cin * vol + 2 * nr) * 4, "float", "xpad")
    tmp = ctx.scratch(mo * nt * 4, "float", "ytile")
    ctx(f"/* Conv {geo.describe()}: {isa} implicit GEMM [{mo} x {K}] @ padded input "
        f"[{K} x {F} virtual columns, {geo.out[-1]} of every {e3[2]} used] per group, tiles of "
        f"{nt} columns */")
    ctx(geo.params())
    ctx("static const size_t e[3] = { " + ", ".join(f"{v}u" for v in e3) + " };")
    ctx(f"static const size_t koff[{K}] = {{ " + ", ".join(f"{t}u" for t in koff) + " };")
    ctx(f"aicc_cv_convi_{isa}(&prm, {ctx.inp[0]}, {wp}, {bias}, {ctx.out[0]}, {xp}, e, koff, "
        f"{tmp}, {nt}u, {flit(lo)}, {flit(hi)}, {gemm}, {ep});")
