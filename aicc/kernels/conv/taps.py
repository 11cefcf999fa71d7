"""Channel-last group-1 conv (aicc.ConvNHWC) as a sum of shifted pointwise GEMMs over each
tap's valid output rectangle (float32, the SIMD GEMM's ISAs): the ``taps`` variant.

For a dilated conv on a small plane most (position, tap) pairs read padding: DeepLabV3's ASPP
convs (3x3, dilation 12 / 24 / 36, 960 -> 256 channels on a 16 x 16 plane) have 25 % / 11 % /
11 % of them inside the input; the im2col GEMM multiplies the zero rows of the others (3x
ASPP's 12.5 ms per conv on x86-avx2, where onnxruntime's NCHWc conv skips them). Here tap
(ky, kx) is the pointwise GEMM ``Y[p, :] += X[p + shift, :] @ W[:, :, ky, kx]^T`` over the
output positions p whose input position is inside X, a rectangle [oy0, oy1) x [ox0, ox1)
known at build time; a tap with an empty rectangle is left out (its weights too). Along an
output row the tap's input positions are consecutive with stride sx * Cin floats, so the
GEMM's A rows are read in place from X (no im2col); a rectangle spanning whole rows of a
plane whose rows continue each other (OW * sx == sy * W) is one run of positions.

Runs are split into balanced row tiles of at most mr positions (the SIMD GEMM's micro-kernels,
kernels/gemm/simd.py, with their ``acc`` flag: add to Y); the build writes a table of tiles
(input position, output position, rows) per tap. Loops: tap, K block of kc channels, column
block of jb output channels (a kc x jb block of the tap's packed weights stays in L1 while all
its tiles pass), tiles. The first tap is one that covers every output position when there is
one (its first K block stores), else Y starts zeroed. Then one pass y = act(y + bias) (the
GEMM's epilogue helper).

Rounding: per (tap, chain of equal length <= ks: gemm/call.py k_blocks) an FMA chain from
+0, added to Y in tap order (the full-cover tap first), then + bias, then the activation;
the im2col path's chain over (ky, kx, ci) in K blocks differs by rounding only. NaN/Inf:
IEEE for the taps inside the input; padding never multiplies a weight (0 * Inf weights give
no NaN there, unlike the im2col path, which multiplies zero rows).

Chosen (``prefer``) when at most TAPS_FRAC of the (position, tap) pairs are inside the input.
"""
from __future__ import annotations

import numpy as np

from ..gemm.call import gemm_plan, k_blocks
from ..gemm.portable import pack_b, packed_elems
from ..gemm.simd import chain_of, epilogue, kernels, nr_of, s_tag
from ..vmath.act import fused_epilogue

# DeepLabV3-MobileNetV3 ASPP (x86-avx2, AMD EPYC, one thread): at 25 % inside 3.1 ms against
# the im2col GEMM's 12.5 ms, at 11 % 1.4 ms against 12.5 ms
TAPS_FRAC = 0.5


def _span(o: int, s: int, off: int, n: int) -> tuple:
    """[lo, hi) of the output indices i < o with i * s + off inside [0, n)."""
    lo = min(o, max(0, -(off // s)))            # ceil(-off / s)
    hi = min(o, max(lo, -((off - n) // s)))     # ceil((n - off) / s)
    return lo, hi


def rectangles(geo) -> list:
    """Per tap (ky, kx ascending) with a non-empty valid rectangle: (tap index, (oy0, oy1),
    (ox0, ox1), input offset of output (0, 0) in positions, may be negative)."""
    out = []
    for ky in range(geo.kh):
        offy = ky * geo.dy - geo.pt
        ry = _span(geo.oh, geo.sy, offy, geo.h)
        for kx in range(geo.kw):
            offx = kx * geo.dx - geo.pl
            rx = _span(geo.ow, geo.sx, offx, geo.w)
            if ry[0] < ry[1] and rx[0] < rx[1]:
                out.append((ky * geo.kw + kx, ry, rx, offy * geo.w + offx))
    return out


def inside_fraction(geo) -> float:
    pairs = sum((ry[1] - ry[0]) * (rx[1] - rx[0]) for _, ry, rx, _ in rectangles(geo))
    return pairs / max(1, geo.oh * geo.ow * geo.kh * geo.kw)


def supports(geo) -> bool:
    return (not geo.depthwise and geo.group == 1 and not geo.nchw_in and geo.oh * geo.ow > 0
            and geo.cin > 0 and geo.cout > 0 and bool(rectangles(geo)))


def prefer(ctx, geo) -> bool:
    if not supports(geo) or gemm_plan(ctx, np.float32, geo.cout, geo.cin).isa is None:
        return False
    return inside_fraction(geo) <= TAPS_FRAC


def _tiles(m: int, mr: int) -> list:
    """Balanced row tiles of a run of m positions, at most mr each."""
    t = -(-m // mr)
    q, r = divmod(m, t)
    return [q + 1] * r + [q] * (t - r)


def tile_table(geo, mr: int) -> tuple:
    """(taps in processing order [(tap, first tile, end tile)], tiles [(in, out, rows)], first
    tap covers everything)."""
    rects = rectangles(geo)
    full = [r for r in rects if r[1] == (0, geo.oh) and r[2] == (0, geo.ow)]
    if full:
        rects.remove(full[0])
        rects.insert(0, full[0])
    hw, ohw = geo.h * geo.w, geo.oh * geo.ow
    taps, tiles = [], []
    for tap, (oy0, oy1), (ox0, ox1), off in rects:
        first = len(tiles)
        joined = (ox0, ox1) == (0, geo.ow) and geo.ow * geo.sx == geo.sy * geo.w
        runs = [(oy0, oy1 - oy0)] if joined else [(oy, 1) for oy in range(oy0, oy1)]
        for n in range(geo.n):
            for oy, nrows in runs:
                m = nrows * (ox1 - ox0) if joined else ox1 - ox0
                o = n * ohw + oy * geo.ow + ox0
                i = n * hw + oy * geo.sy * geo.w + ox0 * geo.sx + off
                for rows in _tiles(m, mr):
                    tiles.append((i, o, rows))
                    i, o = i + rows * geo.sx, o + rows
        taps.append((tap, first, len(tiles)))
    return taps, tiles, bool(full)


def _driver(ctx, isa: str, sched: dict, rows: list, chain: int = 0) -> str:
    """chain: the kernels' chains of products within a K block (gemm/tile.py tile_chains)."""
    v = sched["v"]
    nr = nr_of(isa, v)
    ks = kernels(ctx, isa, rows, True, v, ks=chain)
    tag = ("v" + str(v) if v != 2 else "") + s_tag(chain)
    name = f"aicc_ctaps_{isa}{tag}_r{'_'.join(map(str, rows))}"
    cases = "\n".join(f"                    case {r}u: {ks[r]}(kc, x + t[0] * cin + pc, lda, b, "
                      f"bs, y + t[1] * cout + jc, cout, nc, acc, NULL, NULL); break;"
                      for r in rows)
    code = f"""\
/* Conv as shifted pointwise GEMMs (kernels/conv/taps.py): for tap q of ntap, the packed
 * weights at w + q * wstride (panels of {nr}, cin rows) and its tiles tl[3 * i] (input
 * position, output position, rows) for i in [tt[q], tt[q + 1]): Y[out + r] (+)= X[in + r *
 * sx] @ W_q over K blocks of kc channels and column blocks of jb; first0: the first tap's
 * first K block stores (it covers every position), else Y holds zeros. */
static void {name}(size_t ntap, const uint32_t *restrict tt, const uint32_t *restrict tl,
    const float *restrict x, size_t cin, size_t lda, const float *restrict w, size_t wstride,
    float *restrict y, size_t cout, size_t kcb, size_t jb, int first0)
{{
    const size_t bs = cin * {nr}u;
    for (size_t q = 0; q < ntap; ++q) {{
        const float *restrict wq = w + q * wstride;
        for (size_t pc = 0; pc < cin; pc += kcb) {{
            const size_t kc = cin - pc < kcb ? cin - pc : kcb;
            const int acc = !(first0 && q == 0 && pc == 0);
            for (size_t jc = 0; jc < cout; jc += jb) {{
                const size_t nc = cout - jc < jb ? cout - jc : jb;
                const float *restrict b = wq + (jc / {nr}u) * bs + pc * {nr}u;
                for (size_t i = tt[q]; i < tt[q + 1]; ++i) {{
                    const uint32_t *restrict t = tl + 3u * i;
                    switch (t[2]) {{
{cases}
                    default: break;
                    }}
                }}
            }}
        }}
    }}
}}"""
    ctx.helper(f"gemm_simd.5.{name}", code)
    return name


def emit(ctx, node, geo, bias) -> None:
    """The step body: Y = act(conv(X) + bias) on channel-last ctx.inp[0] / ctx.out[0]; bias a
    C expression or None."""
    plan = gemm_plan(ctx, np.float32, geo.cout, geo.cin)
    sched, isa, nb = plan.sched, plan.isa, plan.nb
    taps, tiles, first0 = tile_table(geo, sched["mr"])
    blocks = {**sched, **k_blocks(geo.cin, sched["kc"], sched.get("ks", 0))}  # as gemm_call
    kc = min(blocks["kc"], geo.cin)
    chain = chain_of({**blocks, "kc": kc})
    w = np.asarray(ctx.in_const(1), np.float32)         # [Cout, Cin, kh, kw]
    wt = w.reshape(geo.cout, geo.cin, geo.kh * geo.kw)
    wstride = packed_elems(geo.cin, geo.cout, nb)
    bp = ctx.const(np.concatenate([pack_b(np.ascontiguousarray(wt[:, :, t].T), nb).ravel()
                                   for t, _, _ in taps]), "pk")
    rows = sorted({r for _, _, r in tiles})
    fn = _driver(ctx, isa, sched, rows, chain)
    ctx.kernel = f"{isa} taps"
    ctx.schedule = {**ctx.schedule, "algo": "taps", "mr": sched["mr"], "kc": kc,
                    "jb": sched["jb"], "nb": nb, "taps": len(taps)}
    frac = inside_fraction(geo)
    ctx(f"/* ConvNHWC {geo.describe()}: {len(taps)} of {geo.kh * geo.kw} taps as shifted "
        f"pointwise GEMMs over their valid rectangles ({frac:.0%} of the im2col products), "
        f"{len(tiles)} row tiles */")
    ctx(f"static const uint32_t ctap_t[{len(taps) + 1}] = {{ "
        + ", ".join(f"{a}u" for a in [f for _, f, _ in taps] + [len(tiles)]) + " };")
    ctx(f"static const uint32_t ctap_l[{3 * len(tiles)}] = {{ "
        + ", ".join(f"{v}u" for t in tiles for v in t) + " };")
    P = geo.n * geo.oh * geo.ow
    y = ctx.out[0]
    if not first0:
        ctx(f"memset({y}, 0, {P * geo.cout * 4}u);")
    ctx(f"{fn}({len(taps)}u, ctap_t, ctap_l, {ctx.inp[0]}, {geo.cin}u, {geo.sx * geo.cin}u, {bp}, "
        f"{wstride}u, {y}, {geo.cout}u, {kc}u, {sched['jb']}u, {int(first0)});")
    act, params = fused_epilogue(node)
    if bias is not None or act is not None:
        epi = epilogue(ctx, act, params)
        ctx(f"{epi}({y}, {geo.cout}u, {P}u, {geo.cout}u, 1.0f, {bias or 'NULL'}, 0u, 1u, 1.0f);")
