"""Implicit-GEMM Conv for 1-D/2-D convs (float32; x86-avx2 / x86-avx512): no im2col.

Stride 1: the batch item is copied into the zero-padded volume of kernels/conv/simd.py (pitch Wp =
padded width extent). Output position (oy, ox) is the "virtual" column f = oy * Wp + ox and
patch entry k = (channel c, tap (ky, kx)) reads ``xp[koff[k] + f]`` with ``koff[k] = c * V +
ky * dh * Wp + kx * dw``: for every k, consecutive f are consecutive floats. So the GEMM's B
operand is the padded volume itself, B(k, j) = b[koff[k] + j] (the micro-kernel's table
variant, vector loads straight from the volume), over virtual tiles of nt columns.

Stride s > 1 (per dim): the padded input is split into phase planes, plane (py, px) holding
the padded rows py, py + sh, ... and columns px, px + sw, ... (only the phases some tap
meets: (ky * dh) % sh, (kx * dw) % sw), each Hq x Wq with Wq = OW + max (kx * dw) // sw and
Hq = OH + max (ky * dh) // sh + 1. Tap (ky, kx) then reads its plane at row oy + (ky * dh)
// sh, column ox + (kx * dw) // sw: again consecutive floats for consecutive ox, so ``koff[k]
= c * V + plane * Hq * Wq + (ky * dh) // sh * Wq + (kx * dw) // sw`` on a virtual grid of
pitch Wq. A 3x3 stride-2 conv on 32 x 32 reads 16 + 1 of every 17 lanes; a 1x1 stride-2
conv copies one plane, the even rows and columns, and wastes none.

Columns ox in [OW, pitch) are garbage (2 of 58 for 3x3 stride 1 on 56 wide); the tile GEMM
writes its virtual tile (bias and clamp in registers) to scratch and only the valid columns
are copied to the output rows, then the scalar activation (if any) runs on them. The garbage
lanes read the volume, the last plane's extra zero row (strided) or the zero slack after the
volume (as many floats as the widest tap reach past a row, plus 2 * NR), and are never stored.

Auto choice (conv_simd.emit): not a direct 1x1, at most ``implicit_pct`` % garbage lanes.
Rounding, NaN/Inf: as the im2col path (same FMA chain per output, k ascending; padding zeros
never meet a real input value).
"""
from __future__ import annotations

import math

from ..gemm.simd import flit, nr_of
from ..isa.registry import ISAS
from .base_c import epilogue, use
from .simd_gemm import GEMM_FN_TABLE, KEY, clamp_of, packed_weights, tile_gemm

DRIVER = """\
/* Implicit-GEMM conv (see kernels/conv/implicit.py): per batch item, the padded volume xp (sizes e;
 * ph != NULL: e[0] phase planes (ph[2t], ph[2t + 1]) of e[1] x e[2] per channel; slack zero
 * floats after it); per group and virtual tile of nt columns (f = oy * e[2] + ox),
 * tmp[M][nt] = W @ B with B(k, j) = xp[koff[k] + f0 + j] (bias and clamp in the kernels),
 * then the columns with ox < OW are copied to y and ep (may be NULL) applied. */
static void aicc_cv_convi_ISA(const aicc_conv_params *p, const float *restrict x,
    const float *restrict w, const float *restrict bias, float *restrict y, float *restrict xp,
    const size_t e[3], const size_t *restrict koff, const size_t *restrict ph, size_t slack,
    float *restrict tmp, size_t nt, float lo, float hi, GEMM_FN, void (*ep)(float *, size_t))
{
    const size_t X = p->in[0] * p->in[1] * p->in[2], OW = p->out[2], OH = p->out[1];
    const size_t P = OH * OW, Wp = e[2], F = OH * Wp, M = p->cout_g;
    const size_t K = p->cin_g * p->k[0] * p->k[1] * p->k[2], C = p->group * p->cin_g;
    const size_t Vg = p->cin_g * e[0] * e[1] * e[2];
    for (size_t n = 0; n < p->batch; ++n) {
        if (ph)
            aicc_cv_pad_ph_ISA(p, C, x + n * C * X, xp, e, ph, slack);
        else
            aicc_cv_pad(p, C, x + n * C * X, xp, e, slack);
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


PAD_PH = """\
/* Phase planes of the zero-padded C channels of one 1-D/2-D batch item (stride > 1, see
 * kernels/conv/implicit.py): xp[c][t][r][q] = padded input (row r * sh + ph[2t], column q * sw +
 * ph[2t + 1]), e = (planes, rows, columns); `slack` zeros follow. Stride 2 along the row: a
 * vector de-interleave that reads only the floats it keeps (masked or scalar tail). */
static AICC_UNUSED void aicc_cv_pad_ph_ISA(const aicc_conv_params *p, size_t C,
    const float *restrict x, float *restrict xp, const size_t e[3],
    const size_t *restrict ph, size_t slack)
{
    const size_t H = p->in[1], W = p->in[2], sh = p->stride[1], sw = p->stride[2];
    for (size_t c = 0; c < C; ++c)
        for (size_t t = 0; t < e[0]; ++t) {
            const int64_t off = (int64_t)ph[2 * t + 1] - (int64_t)p->pad[2];
            size_t lo, hi;
            aicc_valid_range(off, sw, W, e[2], &lo, &hi);   /* columns inside the input */
            for (size_t r = 0; r < e[1]; ++r) {
                float *restrict d = xp + ((c * e[0] + t) * e[1] + r) * e[2];
                const int64_t iy = (int64_t)(r * sh + ph[2 * t]) - (int64_t)p->pad[1];
                size_t q = 0;
                if (iy < 0 || iy >= (int64_t)H) {
                    for (; q < e[2]; ++q) d[q] = 0.0f;
                    continue;
                }
                const float *restrict s = x + (c * H + (size_t)iy) * W;
                for (; q < lo; ++q) d[q] = 0.0f;
                if (hi > lo) {
                    const float *restrict s0 = s + (size_t)((int64_t)(lo * sw) + off);
                    const size_t n = hi - lo;
                    if (sw == 2u) {
DEINTERLEAVE
                    } else {
                        for (size_t i = 0; i < n; ++i) d[lo + i] = s0[i * sw];
                    }
                    q = hi;
                }
                for (; q < e[2]; ++q) d[q] = 0.0f;
            }
        }
    for (size_t i = 0; i < slack; ++i)
        xp[C * e[0] * e[1] * e[2] + i] = 0.0f;
}"""


def pad_ph(isa: str) -> str:
    """PAD_PH with the ISA's stride-2 de-interleave (its description's ``deinterleave``)."""
    ind = " " * 24
    body = "\n".join(ind + ln if ln else ln
                     for ln in ISAS[isa].conv_kernels["deinterleave"].split("\n"))
    return PAD_PH.replace("DEINTERLEAVE", body).replace("ISA", isa)


def _hw(geo, field) -> tuple:
    """(H, W) values of a per-spatial-dim field of a 1-D / 2-D geometry (H = 1 for 1-D)."""
    v = list(getattr(geo, field))
    return (v[-2] if len(v) > 1 else 1), v[-1]


def pitch(geo) -> int:
    """Virtual grid pitch: output columns plus the widest tap reach in (phase) columns."""
    sw, dw, kw, ow = (_hw(geo, f)[1] for f in ("stride", "dil", "k", "out"))
    return ow + (kw - 1) * dw // sw


def grid(geo, ext) -> tuple:
    """(e, tap offsets, phases, reach): the volume's sizes e (3 values), each tap's offset in
    a channel's volume (ky-major), the phase list (None for stride 1) and the widest read
    past a row (the zero slack it needs)."""
    (sh, sw), (dh, dw), (kh, kw), (oh, ow) = (_hw(geo, f) for f in ("stride", "dil", "k", "out"))
    wq = pitch(geo)                     # stride 1: the padded width extent
    if (sh, sw) == (1, 1):
        e = [1] * (3 - len(ext)) + list(ext)
        taps = [ky * dh * wq + kx * dw for ky in range(kh) for kx in range(kw)]
        return e, taps, None, wq - ow
    phases = sorted({((ky * dh) % sh, (kx * dw) % sw) for ky in range(kh) for kx in range(kw)})
    hq = oh + (kh - 1) * dh // sh + 1
    taps = [phases.index(((ky * dh) % sh, (kx * dw) % sw)) * hq * wq + (ky * dh) // sh * wq
            + (kx * dw) // sw for ky in range(kh) for kx in range(kw)]
    return [len(phases), hq, wq], taps, phases, wq - ow


def waste(geo) -> float:
    """Fraction of the virtual columns that are padding garbage."""
    return 1.0 - geo.out[-1] / pitch(geo)


def prefer(geo, nr: int, pct: int) -> bool:
    """Auto choice: at most pct % of the virtual lanes are garbage, and the virtual columns
    fill at most pct % more panels of nr than im2col's packed positions would (a stride-2
    conv to 8 x 8 has 72 virtual columns, 3 panels of 32, against 64 positions in 2).
    Strided convs only with a 1x1 kernel, or with at most 4 input channels per group and a
    patch at least as long as the output channels (K >= Cout: the copy of each virtual tile
    to the output then costs less than the im2col packing it saves). Measured on avx512
    against im2col. In the networks: the MobileNetV1-0.25 stem (3->8, 3x3 s2 on 96x96) 11.5
    -> 9.2 us, ResNet-18's (3->64, 7x7 s2 on 224x224) 1217 -> 1175 us, but MobileNetV2's
    (3->32, K = 27) 141-148 -> 180-198 us. Alone: 1x1 stride 2 16->32 on 32x32 2.75 -> 1.90
    us, 3x3 stride 2 with 16..64 channels 5-35% slower (16->32 on 32x32: 13.1 -> 13.8 us;
    32->64 on 16x16: 12.8 -> 17.4 us)."""
    K = geo.cin_g * math.prod(geo.k)
    if max(geo.stride) > 1 and not (max(geo.k) == 1 or (geo.cin_g <= 4 and K >= geo.cout_g)):
        return False
    panels = -(-math.prod(geo.out[:-1]) * pitch(geo) // nr)
    packed = -(-math.prod(geo.out) // nr)
    return 100 * waste(geo) <= pct and 100 * panels <= (100 + pct) * packed


def supports(geo) -> bool:
    return len(geo.k) <= 2


def emit(ctx, node, geo, isa: str, sched: dict, bias: str, pad_c: str, ext) -> None:
    """Step body (pad_c: conv_simd's pad helper text; ext the padded extents)."""
    nr = nr_of(isa)
    K = geo.cin_g * math.prod(geo.k)
    mo = geo.cout_g
    e3, taps, phases, reach = grid(geo, ext)
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
    ctx.helper(f"{KEY}.1.pad_ph_{isa}", pad_ph(isa))
    ctx.helper(f"{KEY}.3.convi_{isa}", DRIVER.replace("GEMM_FN", GEMM_FN_TABLE)
               .replace("NR", str(nr)).replace("ISA", isa))
    koff = [c * vol + t for c in range(geo.cin_g) for t in taps]
    slack = 2 * nr + reach
    xp = ctx.scratch((geo.cin * vol + slack) * 4, "float", "xpad")
    tmp = ctx.scratch(mo * nt * 4, "float", "ytile")
    grid_c = (f"{geo.out[-1]} of every {e3[2]} used" if phases is None else
              f"{len(phases)} phase plane(s) of {e3[1]} x {e3[2]}, {geo.out[-1]} of every "
              f"{e3[2]} used")
    ctx(f"/* Conv {geo.describe()}: {isa} implicit GEMM [{mo} x {K}] @ padded input "
        f"[{K} x {F} virtual columns, {grid_c}] per group, tiles of {nt} columns */")
    ctx(geo.params())
    ctx("static const size_t e[3] = { " + ", ".join(f"{v}u" for v in e3) + " };")
    ctx(f"static const size_t koff[{K}] = {{ " + ", ".join(f"{t}u" for t in koff) + " };")
    ph = "NULL"
    if phases is not None:
        ctx(f"static const size_t ph[{2 * len(phases)}] = {{ "
            + ", ".join(f"{v}u" for pq in phases for v in pq) + " };")
        ph = "ph"
    ctx(f"aicc_cv_convi_{isa}(&prm, {ctx.inp[0]}, {wp}, {bias}, {ctx.out[0]}, {xp}, e, koff, "
        f"{ph}, {slack}u, {tmp}, {nt}u, {flit(lo)}, {flit(hi)}, {gemm}, {ep});")
