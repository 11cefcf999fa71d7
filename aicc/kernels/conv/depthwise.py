"""Depthwise Conv (one input channel per group, any channel multiplier; 1-D and 2-D;
float32) on x86-avx2 / x86-avx512: a direct SIMD kernel over a phase-split padded plane.

Per batch item and input channel, the channel is copied into a zero-padded scratch plane split
by stride phases: padded coordinate (ey, ex) = (iy + pad_top, ix + pad_left) goes to phase
block (ey % sy, ex % sx), row ey / sy, column ex / sx, blocks of Hq x Wq. Output (oy, ox) under
tap (ky, kx) then reads entry oy * Wq + ox + toff[t] with a per-tap constant offset, for every
stride and dilation: the output is computed on a "virtual" grid of OH rows of pitch Wq
(columns OW..Wq-1 are padding garbage, OW / Wq of the lanes are useful: 3x3 stride 1 wastes two
columns, stride 2 one) as one flat run of full vectors, each the FMA chain of its taps
starting from the bias, U vectors at once (independent chains hide the FMA latency), clamped in
registers (Relu / Clip / none; other fused activations run afterwards on the finished output
plane from the shared activation table), stored into a temp row buffer and copied to the output
rows. The padding of the plane is zeroed once per step (every channel writes the same entries).
The garbage lanes read only the plane's zero-filled slack or other real entries and are never
stored.

Rounding: each output is bias + sum over taps in (ky, kx) order, one FMA per tap, then the
activation (onnxruntime sums in another order: results agree to rounding). NaN/Inf: IEEE, a NaN
or Inf input reaches the outputs whose taps cover it (0 * Inf = NaN for zero weights).
"""
from __future__ import annotations

from ..gemm.simd import ISA, flit
from ..isa.registry import ISAS, include_line
from .base_c import epilogue, use
from .simd_gemm import KEY, clamp_of



def kernel(ctx, isa: str, u: int) -> str:
    d = ISA[isa]
    L, vec = d["lanes"], d["vec"]
    mx, mn = ISAS[isa].vector["max"], ISAS[isa].vector["min"]      # float max / min
    name = f"aicc_dw_{isa}_u{u}"
    accs = [f"a{i}" for i in range(u)]
    fma = d["fma"]
    lines = [
        f"/* {isa} depthwise kernel: out[f] = clamp(bias + sum_t w[t] * src[f + toff[t]], lo, hi)",
        f" * for f in [0, nv * {L}) (nv full vectors, a multiple of {u // 2}; out has room for all",
        f" * of them), {u} vectors at once (independent FMA chains), then {u // 2}. */",
        f"static void {name}(const float *restrict src, const size_t *restrict toff, size_t T,",
        "    const float *restrict w, float bias, size_t nv, float lo, float hi, "
        "float *restrict out)",
        "{",
        f"    const {vec} vb = {d['bcast'].format(p='&bias')}, vlo = {d['bcast'].format(p='&lo')};",
        f"    const {vec} vhi = {d['bcast'].format(p='&hi')};",
        "    size_t v = 0;",
        f"    for (; v + {u}u <= nv; v += {u}u) {{",
        f"        const float *restrict s = src + v * {L}u;",
        f"        {vec} " + ", ".join(f"{a} = vb" for a in accs) + ";",
        "        for (size_t t = 0; t < T; ++t) {",
        f"            const {vec} wt = {d['bcast'].format(p='w + t')};",
        "            const float *restrict st = s + toff[t];",
    ]
    for i, a in enumerate(accs):
        ld = d["load"].format(p=f"st + {i * L}u")
        lines.append(f"            {a} = {fma.format(a='wt', b=ld, c=a)};")
    lines.append("        }")
    for i, a in enumerate(accs):
        lines.append("        " + d["store"].format(p=f"out + v * {L}u + {i * L}u",
                                                    v=f"{mn}(vhi, {mx}(vlo, {a}))") + ";")
    h = u // 2
    lines += ["    }", f"    if (v < nv) {{   /* nv is a multiple of {h}: one block of {h} */",
              f"        const float *restrict s = src + v * {L}u;",
              f"        {vec} " + ", ".join(f"{a} = vb" for a in accs[:h]) + ";",
              "        for (size_t t = 0; t < T; ++t) {",
              f"            const {vec} wt = {d['bcast'].format(p='w + t')};",
              "            const float *restrict st = s + toff[t];"]
    for i, a in enumerate(accs[:h]):
        ld = d["load"].format(p=f"st + {i * L}u")
        lines.append(f"            {a} = {fma.format(a='wt', b=ld, c=a)};")
    lines.append("        }")
    for i, a in enumerate(accs[:h]):
        lines.append("        " + d["store"].format(p=f"out + v * {L}u + {i * L}u",
                                                    v=f"{mn}(vhi, {mx}(vlo, {a}))") + ";")
    lines += ["    }", "}"]
    ctx.helper(f"gemm_{isa}.0.include", include_line(isa))   # as gemm_simd's header
    ctx.helper(f"{KEY}.4.dw.{name}", "\n".join(lines))
    return name


DRIVER = """\
/* Depthwise conv driver: per batch item and input channel, the phase-split padded plane
 * (phase blocks of Hq x Wq, see kernels/conv/depthwise.py) is filled, then each of its cout_g output
 * channels is computed on the virtual grid (OH rows of pitch Wq, nv vectors into tmp) by `kern`
 * and its OW valid columns copied to the output rows; ep (may be NULL) is the scalar
 * activation on the finished output plane. The plane (np floats) is zeroed once. */
static void aicc_dw_conv(const aicc_conv_params *p, const float *restrict x,
    const float *restrict w, const float *restrict bias, float *restrict y, float *restrict pl,
    size_t np, float *restrict tmp, const size_t *restrict toff, size_t Hq, size_t Wq,
    size_t nv, float lo, float hi,
    void (*kern)(const float *, const size_t *, size_t, const float *, float, size_t, float,
                 float, float *),
    void (*ep)(float *, size_t))
{
    const size_t H = p->in[1], W = p->in[2], OH = p->out[1], OW = p->out[2];
    const size_t sy = p->stride[1], sx = p->stride[2], T = p->k[1] * p->k[2];
    const size_t C = p->group, M = p->cout_g;
    /* input rows / columns that land inside the phase blocks */
    const size_t ylim = sy * Hq > p->pad[1] ? sy * Hq - p->pad[1] : 0;
    const size_t xlim = sx * Wq > p->pad[2] ? sx * Wq - p->pad[2] : 0;
    const size_t nyy = H < ylim ? H : ylim, nxx = W < xlim ? W : xlim;
    for (size_t i = 0; i < np; ++i)
        pl[i] = 0.0f;
    for (size_t n = 0; n < p->batch; ++n)
        for (size_t c = 0; c < C; ++c) {
            const float *restrict xc = x + (n * C + c) * H * W;
            for (size_t iy = 0; iy < nyy; ++iy) {
                const size_t ey = iy + p->pad[1];
                float *restrict row = pl + ((ey % sy) * sx * Hq + ey / sy) * Wq;
                const float *restrict xr = xc + iy * W;
                if (sx == 1u) {
                    for (size_t ix = 0; ix < nxx; ++ix) row[ix + p->pad[2]] = xr[ix];
                } else {            /* phase ph holds ex = q * sx + ph, ix = ex - pad */
                    const size_t px = p->pad[2];
                    for (size_t ph = 0; ph < sx; ++ph) {
                        float *restrict d = row + ph * Hq * Wq;
                        for (size_t q = px > ph ? (px - ph + sx - 1) / sx : 0;
                             q * sx + ph < nxx + px; ++q)
                            d[q] = xr[q * sx + ph - px];
                    }
                }
            }
            for (size_t m = 0; m < M; ++m) {
                const size_t oc = c * M + m;
                float *restrict yc = y + (n * C * M + oc) * OH * OW;
                kern(pl, toff, T, w + oc * T, bias ? bias[oc] : 0.0f, nv, lo, hi, tmp);
                for (size_t oy = 0; oy < OH; ++oy) {
                    const float *restrict s = tmp + oy * Wq;
                    float *restrict d = yc + oy * OW;
                    for (size_t ox = 0; ox < OW; ++ox) d[ox] = s[ox];
                }
                if (ep)
                    ep(yc, OH * OW);
            }
        }
}"""


def supports(geo) -> bool:
    """1-D or 2-D, one input channel per group, multiplier below 4 (from 4 output channels
    per input channel the GEMM path is faster: it reuses each patch for all of them)."""
    return geo.cin_g == 1 and geo.cout_g < 4 and len(geo.k) <= 2


def emit(ctx, node, geo, isa: str, bias: str) -> None:
    L = ISA[isa]["lanes"]
    k = [1] * (2 - len(geo.k)) + list(geo.k)
    s = [1] * (2 - len(geo.k)) + list(geo.stride)
    dl = [1] * (2 - len(geo.k)) + list(geo.dil)
    o = [1] * (2 - len(geo.k)) + list(geo.out)
    (kh, kw), (sy, sx), (dy, dx), (oh, ow) = k, s, dl, o
    ey, ex = (oh - 1) * sy + (kh - 1) * dy + 1, (ow - 1) * sx + (kw - 1) * dx + 1
    hq, wq = -(-ey // sy), -(-ex // sx)
    toff = []
    for ky in range(kh):
        for kx in range(kw):
            a, b = ky * dy, kx * dx
            toff.append((((a % sy) * sx + b % sx) * hq + a // sy) * wq + b // sx)
    unroll = ISAS[isa].conv_kernels["depthwise"]["unroll"]   # vectors per step
    h = unroll // 2
    nv = -(-(oh * wq) // (L * h)) * h       # a multiple of unroll / 2 (the kernel's blocks)
    npl = sy * sx * hq * wq + wq + h * L     # slack: the last vectors read past the plane
    lo, hi, act = clamp_of(node)
    kern = kernel(ctx, isa, unroll)
    use(ctx, "float32")
    ctx.helper(f"{KEY}.5.dw.driver", DRIVER)
    ep = epilogue(ctx, node, "float32") if act else "NULL"
    plane = ctx.scratch(npl * 4, "float", "plane")
    tmp = ctx.scratch(nv * L * 4, "float", "dwout")
    ctx(f"/* Conv {geo.describe()} (depthwise, multiplier {geo.cout_g}): {isa} direct kernel on "
        f"a phase-split padded plane, {oh} rows of pitch {wq} ({ow} useful), {nv} vectors */")
    ctx(geo.params())
    ctx(f"static const size_t toff[{len(toff)}] = {{ " + ", ".join(f"{t}u" for t in toff) + " };")
    ctx(f"aicc_dw_conv(&prm, {ctx.inp[0]}, {ctx.inp[1]}, {bias}, {ctx.out[0]}, {plane}, {npl}u, "
        f"{tmp}, toff, {hq}u, {wq}u, {nv}u, {flit(lo)}, {flit(hi)}, {kern}, {ep});")

