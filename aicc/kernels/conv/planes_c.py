"""Portable Conv kernel for one input channel per group, 1-D / 2-D (depthwise convs, channel
multipliers, the first conv of a single-channel input), float32 and float64: loops the C
compiler vectorizes, for the generic target and the SIMD targets' float64 nodes.

The old row kernel (conv_kernels.DIRECT) did one multiply-add pass per tap and output row;
on DS-CNN's 25 x 5 planes those rows are 5 long and never vectorize (depthwise 3x3 of 64
channels: 84 us, 1.7 GFLOP/s on generic). Here, per input channel, the zero-padded plane
[Hp][Wp] is split into its sh x sw stride phases: phase (a, b) holds rows a, a + sh, ... and
columns b, b + sw, ... as a [Hq][Wq] plane, the phases one after the other (PQ = Hq * Wq
apart). Output (r, c) under tap (ky, kx) reads phase ((ky * dh) % sh, (kx * dw) % sw) at row
r + ky * dh / sh and column c + kx * dw / sw. Laid out as rows of Wq, every output is then its
flat index plus one constant offset per tap (``off``, computed at compile time), so a block
of 16 consecutive outputs is 16 independent sums over the taps, with any stride or dilation:
four arrays of 4, each loop of 4 one 16-byte vector at -O2 held in a register (one array of
8 was vectorized as a two-pass loop whose sums GCC kept in memory). Columns c >= OW of each
row are computed and dropped; the reads stay inside the scratch, which ends max(off) + nf
entries in (nf: OH * Wq rounded up to the block).

The scratch is zeroed once per step: every channel writes the same interior entries, so the
padding stays zero. Rounding: each output is the sum of the taps' products in (ky, kx) order
from 0, then + bias (on a scalar FPU with an ``fpu`` description each product a fused
multiply-add: tile_fpu.py). DS-CNN on generic (SSE2, 1.09 -> 0.28 ms with conv_kernels' tile
change): its first conv (1 -> 64, 10x4 stride 2) 264 -> 38 us, each depthwise 3x3 84 -> 17.
NaN/Inf: IEEE; the padding meets the weights as real zeros (0 * Inf = NaN), dropped columns
never reach the output.
"""
from __future__ import annotations

import numpy as np

from ..isa.registry import ISAS, fpu_isa
from .base_c import suffix, use

KEY = "7.planes"
BLOCK = 16      # outputs per block (the C text's four arrays of 4)

# The phase planes' fill shared with kernels/qgemm/planes.py: input plane X (element type SRC) into
# xq (DST), row py = iy + pt of phase (py % sh, column phase b) at (py / sh, (ix + pl) / sw),
# each value VALUE (of xr[ix]); rows and columns no tap reads (past hp, wp) are skipped.
PHASE_FILL = """\
for (size_t iy = 0; iy < H && iy + pt < hp; ++iy) {
    const size_t py = iy + pt;
    DST *restrict qr = xq + (py % sh) * sw * PQ + py / sh * wq;
    const SRC *restrict xr = X + iy * W;
    if (sw == 1)
        for (size_t ix = 0; ix < nx; ++ix)
            qr[pl + ix] = VALUE;
    else
        for (size_t b = 0; b < sw; ++b) {   /* phase b: ix = b - pl (mod sw) */
            const size_t i0 = (b + sw - pl % sw) % sw;
            DST *restrict d = qr + b * PQ + (i0 + pl) / sw;
            for (size_t ix = i0, k = 0; ix < nx; ix += sw, ++k)
                d[k] = VALUE;
        }
}
"""


def phase_fill(indent: int, dst: str, src: str, x: str, value: str) -> str:
    """PHASE_FILL indented, with its element types, input plane and value filled in."""
    text = (PHASE_FILL.replace("DST", dst).replace("SRC", src).replace("VALUE", value)
            .replace("X + iy", f"{x} + iy"))
    return "".join(" " * indent + line for line in text.splitlines(True)).rstrip("\n")


def extent(geo) -> tuple:
    """(k, s, d, o, hp, wp): kernel, strides, dilations, output sizes as 2-D lists (1-D convs
    with a leading 1) and the padded rows / columns any tap reads."""
    k, s, d, o = ([1] * (2 - len(geo.k)) + list(v) for v in (geo.k, geo.stride, geo.dil,
                                                            geo.out))
    hp, wp = ((o[i] - 1) * s[i] + (k[i] - 1) * d[i] + 1 for i in (0, 1))
    return k, s, d, o, hp, wp


PLANES = f"""\
/* Conv with one input channel per group, 1-D / 2-D, as flat sums over stride phases of the
 * padded plane (see kernels/conv/planes_c.py). xq: phase planes, zeroed by the caller; acc: nf
 * outputs laid out in rows of wq; off[t]: the offset of tap t from the output's flat index. */
static void aicc_conv_planes_SFX(const aicc_conv_params *p, const TYPE *restrict x,
                                 const TYPE *restrict w, const TYPE *restrict bias,
                                 TYPE *restrict y, TYPE *restrict xq, TYPE *restrict acc,
                                 const size_t *restrict off, size_t hp, size_t wp, size_t hq,
                                 size_t wq, void (*ep)(TYPE *, size_t))
{{
    const size_t H = p->in[1], W = p->in[2], OH = p->out[1], OW = p->out[2], P = OH * OW;
    const size_t sh = p->stride[1], sw = p->stride[2], pt = p->pad[1], pl = p->pad[2];
    const size_t KK = p->k[1] * p->k[2], PQ = hq * wq;
    const size_t nf = (OH * wq + {BLOCK - 1}u) / {BLOCK}u * {BLOCK}u;
    const size_t nx = wp > pl ? (W < wp - pl ? W : wp - pl) : 0;
    for (size_t n = 0; n < p->batch; ++n)
        for (size_t g = 0; g < p->group; ++g) {{
            const TYPE *xc = x + (n * p->group + g) * H * W;
{phase_fill(12, "TYPE", "TYPE", "xc", "xr[ix]")}
            for (size_t m = 0; m < p->cout_g; ++m) {{
                const size_t oc = g * p->cout_g + m;
                const TYPE *wc = w + oc * KK;
                const TYPE bv = bias ? bias[oc] : (TYPE)0;
                TYPE *yc = y + (n * p->group * p->cout_g + oc) * P;
                for (size_t i = 0; i < nf; i += {BLOCK}u) {{
BLOCK_SUMS
                }}
                for (size_t r = 0; r < OH; ++r)
                    for (size_t c = 0; c < OW; ++c)
                        yc[r * OW + c] = acc[r * wq + c] + bv;
                if (ep)
                    ep(yc, P);
            }}
        }}
}}"""


def supports(geo) -> bool:
    """One input channel per group and at most 2 spatial dims."""
    return geo.cin_g == 1 and len(geo.k) <= 2


def geometry(geo):
    """(hp, wp, hq, wq, offsets, scratch elements, nf) of the phase planes."""
    k, s, d, o, hp, wp = extent(geo)
    hq, wq = -(-hp // s[0]), -(-wp // s[1])
    pq = hq * wq
    off = [((ky * d[0]) % s[0] * s[1] + (kx * d[1]) % s[1]) * pq
           + (ky * d[0]) // s[0] * wq + (kx * d[1]) // s[1]
           for ky in range(k[0]) for kx in range(k[1])]
    nf = -(-o[0] * wq // BLOCK) * BLOCK
    return hp, wp, hq, wq, off, max(s[0] * s[1] * pq, max(off) + nf), nf


ARRAYS = """\
                    TYPE a0[4] = {0}, a1[4] = {0}, a2[4] = {0}, a3[4] = {0};
                    for (size_t t = 0; t < KK; ++t) {
                        const TYPE wt = wc[t];
                        const TYPE *restrict s = xq + off[t] + i;
                        for (size_t u = 0; u < 4u; ++u) {
                            a0[u] += wt * s[u];
                            a1[u] += wt * s[4u + u];
                            a2[u] += wt * s[8u + u];
                            a3[u] += wt * s[12u + u];
                        }
                    }
                    for (size_t u = 0; u < 4u; ++u) {
                        acc[i + u] = a0[u];
                        acc[i + 4u + u] = a1[u];
                        acc[i + 8u + u] = a2[u];
                        acc[i + 12u + u] = a3[u];
                    }
"""


def _scalars(fma: str) -> str:
    """The block of 16 sums as scalars, each product a fused multiply-add (a scalar FPU:
    GCC kept the arrays of 4 in memory there, a load and a store per product)."""
    ss = range(BLOCK)
    decl = "\n".join("                    TYPE " + ", ".join(f"a{j} = 0" for j in ss[q:q + 8])
                      + ";" for q in (0, 8))
    body = "\n".join(f"                        a{j} = {fma.format(a='wt', b=f's[{j}]', c=f'a{j}')};"
                      for j in ss)
    out = "\n".join(f"                    acc[i + {j}u] = a{j};" for j in ss)
    return f"""{decl}
                    for (size_t t = 0; t < KK; ++t) {{
                        const TYPE wt = wc[t];
                        const TYPE *restrict s = xq + off[t] + i;
{body}
                    }}
{out}
"""


def planes(fma: str | None) -> str:
    """PLANES with its block of sums: arrays of 4 the compiler vectorizes (``a += w * x``), or,
    on a scalar FPU with fused multiply-add (isa/registry.fpu_isa), scalars
    ``a = fma(w, x, a)``."""
    return PLANES.replace("BLOCK_SUMS\n", _scalars(fma) if fma else ARRAYS)


def emit(ctx, geo, dt, bias: str, ep: str) -> None:
    """The step: zero the phase planes, then one kernel call."""
    hp, wp, hq, wq, off, nxq, nf = geometry(geo)
    fpu = fpu_isa(ctx, dt)
    use(ctx, dt, (KEY, planes(ISAS[fpu].fpu["fma"] if fpu else None)), isa=fpu)
    ct = ctx.out_ctype(0)
    xq = ctx.scratch(nxq * dt.itemsize, ct, "xq")
    acc = ctx.scratch(nf * dt.itemsize, ct, "acc")
    kind = "depthwise" if geo.cout_g == 1 else f"{geo.cout_g} outputs per input channel"
    phases = int(np.prod(geo.stride))
    ctx(f"/* Conv {geo.describe()} ({kind}): flat sums over {phases} stride phase(s) "
        f"[{hq}][{wq}] of the padded plane */")
    ctx(geo.params())
    ctx(f"static const size_t off[{len(off)}] = {{ " + ", ".join(f"{v}u" for v in off) + " };")
    with ctx.block(f"for (size_t i = 0; i < {nxq}u; ++i)"):
        ctx(f"{xq}[i] = 0;")
    ctx(f"aicc_conv_planes{'_' + fpu if fpu else ''}{suffix(dt)}(&prm, {ctx.inp[0]}, {ctx.inp[1]}, {bias}, {ctx.out[0]}, "
        f"{xq}, {acc}, off, {hp}u, {wp}u, {hq}u, {wq}u, {ep});")
