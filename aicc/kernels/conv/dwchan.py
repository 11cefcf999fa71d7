"""Channel-vectorized depthwise Conv (multiplier 1, 1-D/2-D, float32; x86-avx2 / x86-avx512)
for small planes (the 7x7 .. 3x3 maps at the end of MobileNets), where one plane fills at most
a few vectors and kernels/conv/depthwise.py's per-channel FMA chains and row copies dominate.

Per batch item the input is transposed into a zero-padded channel-last scratch volume
``xt[Hp][Wp][Cp]`` (Cp: channels rounded up to the vector width; padding and the extra
channels stay zero: the volume is zeroed once per step and every batch item writes the same
entries). Weights are transposed at compile time to ``wt[tap][Cp]`` (run-time weights: in the
step). Each output position is then, per block of channel vectors, a chain of FMAs over the
taps (4 vectors at once: independent chains), ``ot[p][c]``; the transposed copy to the NCHW
output adds the bias and applies the clamp (``v < lo ? lo : v``, then ``v > hi ? hi : v``;
NaN passes) and the scalar activation pass (other fused activations) on each output row.

Rounding: each output is the sum over taps in (ky, kx) order from +0, one FMA per tap, then
+ bias, then the activation. NaN/Inf: IEEE; zero padding meets only real zeros and the
padding channels are never stored.
"""
from __future__ import annotations

import numpy as np

from ..gemm.simd import ISA, flit
from ..isa.registry import ISAS, include_line
from .base_c import epilogue, use
from .simd_gemm import KEY, clamp_of


def _driver(isa: str) -> str:
    d = ISA[isa]
    L, vec = d["lanes"], d["vec"]
    ld, st, fma, zero = d["load"], d["store"], d["fma"], d["zero"]
    accs = [f"a{i}" for i in range(4)]
    c1 = ISAS[isa].conv_kernels["clamp1"]                         # the scalar clamp
    clamp = c1["expr"].format(x="ot[q * Cp + c] + bv", br="\n" + " " * 28)
    ind = " " * 20
    four = "\n".join(ind + a + " = " + fma.format(a=ld.format(p=f"w + {i * L}u"),
                                                b=ld.format(p=f"s + {i * L}u"), c=a) + ";"
                     for i, a in enumerate(accs))
    one = fma.format(a=ld.format(p="wt + t * Cp + cv"), b=ld.format(p="b + toff[t] * Cp + cv"),
                     c="a")
    stores = "\n".join(f"                {st.format(p=f'o + cv + {i * L}u', v=a)};"
                       for i, a in enumerate(accs))
    return f"""\
/* {isa} channel-vectorized depthwise conv (multiplier 1, see kernels/conv/dwchan.py): xt is the
 * channel-last padded volume [Hp][Wp][Cp] (zeroed here once), wt the taps [T][Cp], ot the
 * channel-last output [P][Cp]; toff[t]: tap offset in positions of xt. */
static void aicc_dwc_{isa}(const aicc_conv_params *p, const float *restrict x,
    const float *restrict wt, const float *restrict bias, float *restrict y,
    float *restrict xt, float *restrict ot, const size_t *restrict toff, size_t Hp, size_t Wp,
    size_t Cp, float lo, float hi, void (*ep)(float *, size_t))
{{
    const size_t C = p->group, H = p->in[1], W = p->in[2], OH = p->out[1], OW = p->out[2];
    const size_t P = OH * OW, T = p->k[1] * p->k[2], sy = p->stride[1], sx = p->stride[2];
    const size_t ny = Hp > p->pad[1] ? (Hp - p->pad[1] < H ? Hp - p->pad[1] : H) : 0;
    const size_t nx = Wp > p->pad[2] ? (Wp - p->pad[2] < W ? Wp - p->pad[2] : W) : 0;
    {c1['decl']}
    for (size_t i = 0; i < Hp * Wp * Cp; ++i)
        xt[i] = 0.0f;
    for (size_t n = 0; n < p->batch; ++n) {{
        for (size_t c = 0; c < C; ++c)
            for (size_t iy = 0; iy < ny; ++iy) {{
                const float *restrict xr = x + ((n * C + c) * H + iy) * W;
                float *restrict d = xt + ((iy + p->pad[1]) * Wp + p->pad[2]) * Cp + c;
                for (size_t ix = 0; ix < nx; ++ix)
                    d[ix * Cp] = xr[ix];
            }}
        for (size_t oy = 0; oy < OH; ++oy)
            for (size_t ox = 0; ox < OW; ++ox) {{
                const float *restrict b = xt + (oy * sy * Wp + ox * sx) * Cp;
                float *restrict o = ot + (oy * OW + ox) * Cp;
                size_t cv = 0;
                for (; cv + {4 * L}u <= Cp; cv += {4 * L}u) {{
                    {vec} {", ".join(f"{a} = {zero}" for a in accs)};
                    for (size_t t = 0; t < T; ++t) {{
                        const float *restrict w = wt + t * Cp + cv;
                        const float *restrict s = b + toff[t] * Cp + cv;
{four}
                    }}
{stores}
                }}
                for (; cv < Cp; cv += {L}u) {{
                    {vec} a = {zero};
                    for (size_t t = 0; t < T; ++t)
                        a = {one};
                    {st.format(p='o + cv', v='a')};
                }}
            }}
        for (size_t c = 0; c < C; ++c) {{
            const float bv = bias ? bias[c] : 0.0f;
            float *restrict yc = y + (n * C + c) * P;
            for (size_t q = 0; q < P; ++q)      /* branch-free clamp (NaN passes) */
                yc[q] = {clamp};
            if (ep)
                ep(yc, P);
        }}
    }}
}}"""


def geometry(geo, isa):
    """(kh, kw, sy, sx, dy, dx, oh, ow, Hp, Wp, Cp) with 1-D as 2-D."""
    L = ISA[isa]["lanes"]
    k = [1] * (2 - len(geo.k)) + list(geo.k)
    s = [1] * (2 - len(geo.k)) + list(geo.stride)
    dl = [1] * (2 - len(geo.k)) + list(geo.dil)
    o = [1] * (2 - len(geo.k)) + list(geo.out)
    hp = (o[0] - 1) * s[0] + (k[0] - 1) * dl[0] + 1
    wp = (o[1] - 1) * s[1] + (k[1] - 1) * dl[1] + 1
    return (*k, *s, *dl, *o, hp, wp, -(-geo.group // L) * L)


def supports(geo) -> bool:
    return geo.cin_g == 1 and geo.cout_g == 1 and len(geo.k) <= 2


def emit(ctx, node, geo, isa: str, bias: str) -> None:
    kh, kw, sy, sx, dy, dx, oh, ow, hp, wp, cp = geometry(geo, isa)
    C, T = geo.group, kh * kw
    lo, hi, act = clamp_of(node)
    use(ctx, "float32")
    ctx.helper(f"gemm_{isa}.0.include", include_line(isa))   # as gemm_simd's header
    ctx.helper(f"{KEY}.5.dwc_{isa}", _driver(isa))
    ep = epilogue(ctx, node, "float32") if act else "NULL"
    w = ctx.in_const(1)
    if w is not None:
        wt = np.zeros((T, cp), np.float32)
        wt[:, :C] = np.asarray(w, np.float32).reshape(C, T).T
        wv = ctx.const(wt, "wtap")
    else:
        wv = ctx.scratch(T * cp * 4, "float", "wtap")
        ctx("/* run-time weights: transposed to [tap][channel] */")
        with ctx.block(f"for (size_t t = 0; t < {T}u; ++t)"):
            with ctx.block(f"for (size_t c = 0; c < {cp}u; ++c)"):
                ctx(f"{wv}[t * {cp}u + c] = c < {C}u ? {ctx.inp[1]}[c * {T}u + t] : 0.0f;")
    toff = [ky * dy * wp + kx * dx for ky in range(kh) for kx in range(kw)]
    xt = ctx.scratch(hp * wp * cp * 4, "float", "xt")
    ot = ctx.scratch(oh * ow * cp * 4, "float", "ot")
    ctx(f"/* Conv {geo.describe()} (depthwise): {isa} channel-vectorized kernel, channel-last "
        f"padded copy [{hp}][{wp}][{cp}] */")
    ctx(geo.params())
    ctx(f"static const size_t toff[{T}] = {{ " + ", ".join(f"{t}u" for t in toff) + " };")
    ctx(f"aicc_dwc_{isa}(&prm, {ctx.inp[0]}, {wv}, {bias}, {ctx.out[0]}, {xt}, {ot}, toff, "
        f"{hp}u, {wp}u, {cp}u, {flit(lo)}, {flit(hi)}, {ep});")
