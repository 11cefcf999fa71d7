"""Portable integer depthwise convs (QLinearConv / ConvInteger with one input channel per
group, 1-D / 2-D) as flat sums over the stride phases of the padded plane: kernels/conv/planes_c.py's
layout (its geometry, offsets and blocks of 16 outputs) in int16 / int32.

qlinear.py's plane kernel (aicc_iconv) adds one tap at a time into a uint32 plane in memory:
9 passes over the outputs of a 3x3 conv, and on MobileNetV2's 112 x 112 planes (49 KB of
sums) from L2; a third of MobileNetV2 int8's time on generic. Here, per channel, x - x_zp is
written once as int16 into its phase planes (the padding stays zero: the scratch is zeroed
once per step, every channel writes the same entries), and each block of 16 outputs sums the
taps' products (w - w_zp) * (x - x_zp), int16 by int16, in two int32 arrays of 8 (a loop of 8
int16 lanes is one 16-byte vector at -O2: the products widen to two vectors of int32 sums held
in registers). |w - w_zp|, |x - x_zp| <= 255, so the sums are exact in int32 while
T * 255^2 < 2^31 (``supports``): the modulo-2^32 sums of aicc_iconv, the same values.
"""
from __future__ import annotations

from ...emit_c.loops import numel
from ..conv.planes_c import BLOCK, geometry, phase_fill

KEY = "qlinear.2.planes"

PLANES = f"""\
/* Integer conv of one (batch, output channel) plane with one input channel per group as flat
 * sums over the stride phases of its padded plane (kernels/qgemm/planes.py): acc[p] over the
 * output positions, as uint32. x: this group's input channel; w: this output channel's taps;
 * xq: the phase planes (int16, zeroed by the caller); at: nf int32 sums in rows of wq. */
static void aicc_iconvq_SFX(const aicc_conv_params *p, const TA *restrict x, int32_t xzp,
                            const TB *restrict w, int32_t wzp, int16_t *restrict xq,
                            int32_t *restrict at, const size_t *restrict off, size_t hp,
                            size_t wp, size_t hq, size_t wq, uint32_t *restrict acc)
{{
    const size_t H = p->in[1], W = p->in[2], OH = p->out[1], OW = p->out[2];
    const size_t sh = p->stride[1], sw = p->stride[2], pt = p->pad[1], pl = p->pad[2];
    const size_t KK = p->k[1] * p->k[2], PQ = hq * wq;
    const size_t nf = (OH * wq + {BLOCK - 1}u) / {BLOCK}u * {BLOCK}u;
    const size_t nx = wp > pl ? (W < wp - pl ? W : wp - pl) : 0;
{phase_fill(4, "int16_t", "TA", "x", "(int16_t)((int32_t)xr[ix] - xzp)")}
    for (size_t i = 0; i < nf; i += {BLOCK}u) {{
        int32_t a0[8] = {{0}}, a1[8] = {{0}};
        for (size_t t = 0; t < KK; ++t) {{
            const int16_t wt = (int16_t)((int32_t)w[t] - wzp);
            const int16_t *restrict s = xq + off[t] + i;
            for (size_t u = 0; u < 8u; ++u) {{
                a0[u] += wt * s[u];
                a1[u] += wt * s[8u + u];
            }}
        }}
        for (size_t u = 0; u < 8u; ++u) {{
            at[i + u] = a0[u];
            at[i + 8u + u] = a1[u];
        }}
    }}
    for (size_t r = 0; r < OH; ++r)
        for (size_t c = 0; c < OW; ++c)
            acc[r * OW + c] = (uint32_t)at[r * wq + c];
}}"""


def supports(geo) -> bool:
    """One input channel per group, at most 2 spatial dims, and sums exact in int32."""
    return geo.cin_g == 1 and len(geo.k) <= 2 and numel(geo.k) * 255 * 255 < 2 ** 31


def emit(ctx, typed, fn_sfx: str, geo, x: str, w: str, wz: str, acc: str, post) -> None:
    """Per batch item and output channel: the kernel, then ``post`` (qlinear's) on the plane.
    typed: qlinear._typed bound to the operand types; x, w: the input / weight pointers."""
    hp, wp, hq, wq, off, nxq, nf = geometry(geo)
    in_p = numel(geo.inp)
    fn = f"aicc_iconvq{fn_sfx}"
    ctx.helper(f"{KEY}{fn_sfx}", typed(PLANES))
    xq = ctx.scratch(nxq * 2, "int16_t", "xq")
    at = ctx.scratch(nf * 4, "int32_t", "at")
    P = numel(geo.out)
    ctx(f"/* {geo.describe()}: flat int32 sums over the stride phases [{hq}][{wq}] of the "
        "padded plane */")
    ctx(geo.params())
    ctx(f"static const size_t off[{len(off)}] = {{ " + ", ".join(f"{v}u" for v in off) + " };")
    with ctx.block(f"for (size_t i = 0; i < {nxq}u; ++i)"):
        ctx(f"{xq}[i] = 0;")
    with ctx.block(f"for (size_t nb = 0; nb < {geo.batch}u; ++nb)"):
        with ctx.block(f"for (size_t oc = 0; oc < {geo.cout}u; ++oc)"):
            ctx(f"const size_t gi = oc / {geo.cout_g}u;")
            ctx(f"{fn}(&prm, {x} + (nb * {geo.cin}u + gi) * {in_p}u, xzp, "
                f"{w} + oc * {len(off)}u, {wz}, {xq}, {at}, off, {hp}u, {wp}u, {hq}u, {wq}u, "
                f"{acc});")
            post("oc", acc, f"{P}u", f"(nb * {geo.cout}u + oc) * {P}u")
