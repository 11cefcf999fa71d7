"""Depthwise Conv (one input channel per group, any channel multiplier; 1-D and 2-D;
float32) on x86-avx2 / x86-avx512 and arm-neon (the ISAs whose conv table has a
``depthwise`` entry): a direct SIMD kernel over a phase-split padded plane.

Per batch item and input channel, the channel is copied into a zero-padded scratch plane split
by stride phases: padded coordinate (ey, ex) = (iy + pad_top, ix + pad_left) goes to phase
block (ey % sy, ex % sx), row ey / sy, column ex / sx, blocks of Hq x Wq. Output (oy, ox) under
tap (ky, kx) then reads entry oy * Wq + ox + toff[t] with a per-tap constant offset, for every
stride and dilation: the output is computed on a "virtual" grid of OH rows of pitch Wq
(columns OW..Wq-1 are padding garbage, OW / Wq of the lanes are useful: 3x3 stride 1 wastes two
columns, stride 2 one) as one flat run of full vectors, each the FMA chain of its taps
starting from zero, then + bias, U vectors at once (independent chains hide the FMA latency),
clamped in registers (Relu / Clip / none; other fused activations run afterwards on the
finished output plane from the shared activation table), stored into a temp row buffer and
copied to the output rows. The padding of the plane is zeroed once per step (every channel
writes the same entries).
The garbage lanes read only the plane's zero-filled slack or other real entries and are never
stored.

The description's depthwise entry shapes the code: ``unroll`` (vectors per step); ``taps``:
convs of at most that many taps run ``kernel_taps`` (weights in registers, no tap loop, the
clamp's max / min only where the bound is finite) instead of ``kernel``'s tap loop; ``load2``
(a de-interleaving load): the driver fills the plane's rows (stride 1 and 2) and copies the
output rows with vector copies, and is inlined into each step (its geometry then folds to
constants: on arm-neon MobileNetV2's 7x7 planes took ~1270 executed instructions per channel
through the shared driver, ~460 inlined). Without them (x86) ``kernel`` and the shared
scalar-copy driver.

Rounding: each output is the sum over taps in (ky, kx) order from +0, one FMA per tap, then
+ bias, then the activation: onnxruntime's depthwise kernels bit for bit (3x3 - 9x9 layers,
x86-avx2). A chain started from the bias carries its magnitude in every partial sum and
rounds coarser: 1.4x (5x5) and 1.6x (9x9) onnxruntime's root-mean-square error against float64
with biases as large as the outputs (tests/ops/test_accuracy_depthwise.py). NaN/Inf: IEEE, a NaN
or Inf input reaches the outputs whose taps cover it (0 * Inf = NaN for zero weights).
"""
from __future__ import annotations

import math

from ..gemm.simd import ISA, flit
from ..isa.registry import ISAS, include_line
from .base_c import epilogue, use
from .simd_gemm import KEY, clamp_of



def kernel(ctx, isa: str, u: int) -> str:
    d = ISA[isa]
    L, vec = d["lanes"], d["vec"]
    mx, mn = d["max"], d["min"]      # float max / min
    name = f"aicc_dw_{isa}_u{u}"
    accs = [f"a{i}" for i in range(u)]
    fma, z, add = d["fma"], d["zero"], ISAS[isa].vector["add"]
    lines = [
        f"/* {isa} depthwise kernel: out[f] = clamp(sum_t w[t] * src[f + toff[t]] + bias, lo, hi)",
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
        f"        {vec} " + ", ".join(f"{a} = {z}" for a in accs) + ";",
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
                                                    v=f"{mn}(vhi, {mx}(vlo, {add}({a}, vb)))")
                     + ";")
    h = u // 2
    lines += ["    }", f"    if (v < nv) {{   /* nv is a multiple of {h}: one block of {h} */",
              f"        const float *restrict s = src + v * {L}u;",
              f"        {vec} " + ", ".join(f"{a} = {z}" for a in accs[:h]) + ";",
              "        for (size_t t = 0; t < T; ++t) {",
              f"            const {vec} wt = {d['bcast'].format(p='w + t')};",
              "            const float *restrict st = s + toff[t];"]
    for i, a in enumerate(accs[:h]):
        ld = d["load"].format(p=f"st + {i * L}u")
        lines.append(f"            {a} = {fma.format(a='wt', b=ld, c=a)};")
    lines.append("        }")
    for i, a in enumerate(accs[:h]):
        lines.append("        " + d["store"].format(p=f"out + v * {L}u + {i * L}u",
                                                    v=f"{mn}(vhi, {mx}(vlo, {add}({a}, vb)))")
                     + ";")
    lines += ["    }", "}"]
    ctx.helper(f"gemm_{isa}.0.include", include_line(isa))   # as gemm_simd's header
    ctx.helper(f"{KEY}.4.dw.{name}", "\n".join(lines))
    return name


def kernel_taps(ctx, isa: str, u: int, T: int, lo: float, hi: float) -> str:
    """The kernel (same signature and result as ``kernel``) for T taps fixed at compile time
    (the description's depthwise entry offers it up to ``taps``): the T weights broadcast
    into registers once, one source pointer per tap advanced with the output, no tap loop;
    the clamp's max / min only for a finite lo / hi."""
    d = ISA[isa]
    L, vec = d["lanes"], d["vec"]
    mx, mn = d["max"], d["min"]
    fin_lo, fin_hi = math.isfinite(lo), math.isfinite(hi)
    name = f"aicc_dw_{isa}_u{u}_t{T}_c{int(fin_lo)}{int(fin_hi)}"
    h = u // 2
    lines = [
        f"/* {isa} depthwise kernel of {T} taps: out[f] = clamp(sum_t w[t] * "
        "src[f + toff[t]] + bias) (clamp: " + ("max lo, " if fin_lo else "") +
        ("min hi" if fin_hi else "") + ("none" if not (fin_lo or fin_hi) else "") + ")",
        f" * for f in [0, nv * {L}) (nv a multiple of {h}), {u} vectors at once, then {h}; the",
        " * weights stay in registers, tap t reads through its own pointer. */",
        f"static void {name}(const float *restrict src, const size_t *restrict toff, size_t T,",
        "    const float *restrict w, float bias, size_t nv, float lo, float hi, "
        "float *restrict out)",
        "{",
        "    (void)T;" + ("" if fin_lo else " (void)lo;") + ("" if fin_hi else " (void)hi;"),
        f"    const {vec} vb = {d['bcast'].format(p='&bias')};",
    ]
    if fin_lo:
        lines.append(f"    const {vec} vlo = {d['bcast'].format(p='&lo')};")
    if fin_hi:
        lines.append(f"    const {vec} vhi = {d['bcast'].format(p='&hi')};")
    for t in range(T):
        lines.append(f"    const {vec} w{t} = {d['bcast'].format(p=f'w + {t}u')};")
    for t in range(T):
        lines.append(f"    const float *restrict s{t} = src + toff[{t}];")

    def clamp(a):
        if fin_lo:
            a = f"{mx}(vlo, {a})"
        if fin_hi:
            a = f"{mn}(vhi, {a})"
        return a

    def block(n, ind):
        accs = [f"a{i}" for i in range(n)]
        out = [ind + f"{vec} " + ", ".join(f"{a} = {d['zero']}" for a in accs) + ";"]
        for t in range(T):
            for i, a in enumerate(accs):
                b = d["load"].format(p=f"s{t} + {i * L}u")
                out.append(ind + f"{a} = " + d["fma"].format(a=f"w{t}", b=b, c=a) + ";")
            out.append(ind + f"s{t} += {n * L}u;")
        for i, a in enumerate(accs):
            out.append(ind + d["store"].format(
                p=f"out + {i * L}u", v=clamp(f"{ISAS[isa].vector['add']}({a}, vb)")) + ";")
        out.append(ind + f"out += {n * L}u;")
        return out

    lines += ["    size_t v = 0;", f"    for (; v + {u}u <= nv; v += {u}u) {{"]
    lines += block(u, "        ")
    lines += ["    }", f"    if (v < nv) {{   /* nv is a multiple of {h}: one block of {h} */"]
    lines += block(h, "        ")
    lines += ["    }", "}"]
    ctx.helper(f"gemm_{isa}.0.include", include_line(isa))
    ctx.helper(f"{KEY}.4.dw.{name}", "\n".join(lines))
    return name


DRIVER = """\
/* Depthwise conv driver: per batch item and input channel, the phase-split padded plane
 * (phase blocks of Hq x Wq, see kernels/conv/depthwise.py) is filled, then each of its cout_g output
 * channels is computed on the virtual grid (OH rows of pitch Wq, nv vectors into tmp) by `kern`
 * and its OW valid columns copied to the output rows; ep (may be NULL) is the scalar
 * activation on the finished output plane. The plane (np floats) is zeroed once. */
STORAGE void aicc_dw_conv(const aicc_conv_params *p, const float *restrict x,
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
                FILL_ROW else {            /* phase ph holds ex = q * sx + ph, ix = ex - pad */
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
                    COPY_ROW
                }
                if (ep)
                    ep(yc, OH * OW);
            }
        }
}"""

# DRIVER's row copies, element by element: FILL_ROW fills one input row xr into the phase
# blocks at stride 1 (other strides follow it in DRIVER), COPY_ROW copies the OW valid columns
# of a virtual-grid row s to the output row d
SCALAR_FILL = """\
if (sx == 1u) {
                    for (size_t ix = 0; ix < nxx; ++ix) row[ix + p->pad[2]] = xr[ix];
                }"""
SCALAR_COPY = "for (size_t ox = 0; ox < OW; ++ox) d[ox] = s[ox];"


# DRIVER's row copies as vectors (``driver``): FILL1 / FILL2 fill one input row xr into the
# phase blocks (stride 1; stride 2: even and odd entries de-interleaved), COPY_OUT copies the
# OW valid columns of a virtual-grid row s to the output row d (the last vector overlapping
# the one before it)
FILL1 = """\
if (sx == 1u) {
                    float *restrict d = row + p->pad[2];
                    if (nxx >= {L}u) {      /* the last vector overlaps the one before it */
                        size_t ix = 0;
                        for (; ix + {L}u < nxx; ix += {L}u) {store1};
                        {store_last};
                    } else {
                        for (size_t ix = 0; ix < nxx; ++ix) d[ix] = xr[ix];
                    }
                }"""
FILL2 = """ else if (sx == 2u) {{   /* ex = ix + pad: even ix to phase pad % 2, odd ix the other */
                    const size_t px = p->pad[2];
                    float *restrict de = row + (px % 2u) * Hq * Wq + px / 2u;
                    float *restrict dd = row + ((px + 1u) % 2u) * Hq * Wq + (px + 1u) / 2u;
                    size_t j = 0;
                    for (; 2u * j + {L2}u <= nxx; j += {L}u) {{
                        const {vecs2} e = {load2};
                        {store_e};
                        {store_o};
                    }}
                    for (; 2u * j < nxx; ++j) {{
                        de[j] = xr[2u * j];
                        if (2u * j + 1u < nxx) dd[j] = xr[2u * j + 1u];
                    }}
                }}"""
COPY_OUT = """\
if (OW >= {L}u) {{
                        size_t ox = 0;
                        for (; ox + {L}u < OW; ox += {L}u) {copy};
                        {copy_last};
                    }} else {{
                        for (size_t ox = 0; ox < OW; ++ox) d[ox] = s[ox];
                    }}"""


def driver(isa: str) -> str:
    """DRIVER, its row copies as vectors when the description's depthwise entry spells the
    de-interleaving load ``load2``."""
    spec = ISAS[isa].conv_kernels["depthwise"]
    if "load2" not in spec:
        return _driver(SCALAR_FILL, SCALAR_COPY, "static")
    d = ISA[isa]
    L = d["lanes"]

    def cp(dst, src):
        return d["store"].format(p=dst, v=d["load"].format(p=src))

    fill = (FILL1.replace("{L}", str(L)).replace("{store1}", cp("d + ix", "xr + ix"))
            .replace("{store_last}", cp(f"d + nxx - {L}u", f"xr + nxx - {L}u")) +
            FILL2.format(L=L, L2=2 * L, vecs2=spec["vecs2"],
                         load2=spec["load2"].format(p="xr + 2u * j"),
                         store_e=d["store"].format(p="de + j", v="e.val[0]"),
                         store_o=d["store"].format(p="dd + j", v="e.val[1]")))
    out = COPY_OUT.format(L=L, copy=cp("d + ox", "s + ox"),
                          copy_last=cp(f"d + OW - {L}u", f"s + OW - {L}u"))
    return _driver(fill, out, "static inline AICC_INLINE")


def _driver(fill: str, copy: str, storage: str) -> str:
    return (DRIVER.replace("FILL_ROW", fill).replace("COPY_ROW", copy)
            .replace("STORAGE", storage))


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
    spec = ISAS[isa].conv_kernels["depthwise"]
    if len(toff) <= spec.get("taps", 0):
        kern = kernel_taps(ctx, isa, unroll, len(toff), lo, hi)
    else:
        kern = kernel(ctx, isa, unroll)
    use(ctx, "float32")
    ctx.helper(f"{KEY}.5.dw.driver", driver(isa))
    ep = epilogue(ctx, node, "float32") if act else "NULL"
    plane = ctx.scratch(npl * 4, "float", "plane")
    tmp = ctx.scratch(nv * L * 4, "float", "dwout")
    ctx(f"/* Conv {geo.describe()} (depthwise, multiplier {geo.cout_g}): {isa} direct kernel on "
        f"a phase-split padded plane, {oh} rows of pitch {wq} ({ow} useful), {nv} vectors */")
    ctx(geo.params())
    ctx(f"static const size_t toff[{len(toff)}] = {{ " + ", ".join(f"{t}u" for t in toff) + " };")
    ctx(f"aicc_dw_conv(&prm, {ctx.inp[0]}, {ctx.inp[1]}, {bias}, {ctx.out[0]}, {plane}, {npl}u, "
        f"{tmp}, toff, {hq}u, {wq}u, {nv}u, {flit(lo)}, {flit(hi)}, {kern}, {ep});")

