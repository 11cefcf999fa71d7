"""Direct conv with the input broadcast (float32; x86-avx2 / x86-avx512): the variant
``bcast`` of kernels/conv/simd.py (NCHW Conv) and the group-1 kernel of ConvNHWC for few input
channels (conv_nhwc.py).

A register block is R consecutive output positions of one output row x V vectors of output
channels: ``acc[r][v] += x(patch entry k of position r) * W[k][v's channels]`` for k = (c, ky,
kx) ascending, each x a scalar broadcast straight from the (zero-padded) input, each W row V
vector loads from weights packed at compile time as ``[channel block][c][ky][kx][V lanes]``
(zero past Cout). The taps of one input channel are unrolled with their offsets as constants
(a runtime loop over ky when there are more than MAX_UNROLL taps), so there is no im2col, no
offset table, and the stride costs nothing: a strided conv reads its broadcasts at other
offsets. This suits what the GEMM forms do worst: stride 2 (the im2col de-interleave, the
implicit GEMM's phase planes) and few input channels (first convs: K = 27 leaves the GEMM
tiles short).

K blocks (NCHW, x86-avx2's ``kblock``): with many input channels, a register block's loop
over all of them streams every channel plane of the band and all its weights from L2 for each
block of positions. k_block cuts the channels into K blocks whose band input and weights fit
``kblock`` bytes; each output row runs every block of calls per K block in order: each block
an FMA chain from +0, added to the sum of the blocks before it in the scratch tile, bias and
the clamp after the last (the rounding of im2col's K blocks, kc products a block there: one
chain over all K drifted further from the exact sums, HRNet-W18-small's output 1.6x the
root-mean-square error against float64). These kernels use ``acc_kb`` accumulators (GCC
spilled the 10 of a 5 x 2 block there).

An output row is split into ceil(OW / R) blocks of at most R positions, as equal as they go
(runs_of): a block of a position or two leaves the FMAs waiting on their latency.

The output runs in bands of about BAND_POS positions (whole output rows). Input: per band,
the input rows it reads, zero-padded, copied into a small buffer (rows start 64-byte aligned;
NHWC as one channel of rows W * C floats wide), or the input itself when every tap is inside
it. A ConvNHWC with ``aicc_nchw_in`` reads an NCHW input (band copies per channel plane, as
Conv) and stores channel-last. Output: ConvNHWC stores the vectors into Y (the last vector
masked). NCHW: the band goes to a scratch tile ``t[position][Cout rounded up to vectors]``,
then is transposed into the channel planes in L x L register blocks (scalar at the edges).

Measured (x86-avx512, C loop, us, against the variant auto chose before): ResNet-8's first
conv 3 -> 16 @32x32 5.6 vs 9.7 (implicit), 16 -> 32 stride 2 14.3 vs 18.3 (im2col), 32 -> 64
stride 2 13.6 vs 16.3, 1x1 stride 2 2.4 vs 3.1; ResNet-18's 128 -> 256 stride 2 636 vs 756.
Losses (auto excludes them): 256 -> 512 stride 2 @14 (4.7 MB of weights streamed per band)
1331 vs 723; 3 -> 32 stride 2 onto 112x112 (the transposes of 400 K outputs) 238 vs 193.
x86-avx2: strided convs only (its rules: isa/avx2/conv.py). Whole models, ratio to
onnxruntime (interleaved): ResNet-8 x86-avx512 0.81 -> 0.74, x86-avx2 1.18 -> 1.13; DS-CNN
x86-avx512 0.69 -> 0.68.

Epilogue: + bias, then the clamp for none / Relu / Clip in registers (as conv_simd_gemm's:
max then min, a NaN passes), other activations as the shared scalar/vector pass over each
finished output run.

Rounding: each output is one FMA chain over k = (c, ky, kx) ascending from +0 (in K blocks:
one per block, the blocks' sums added in order), then + bias, then the activation:
bit-identical to the im2col variant on NCHW when K fits one K block (kc; longer K: im2col sums
its blocks apart, gemm/tile.py tile_partial, a few roundings fewer; the strided convs with
small outputs this variant takes without K blocks have K = 40 - 300).
ConvNHWC's im2col runs k in (ky, kx, c) order: the two differ by rounding only. NaN/Inf: IEEE;
padding zeros meet the weights (0 * Inf = NaN for an Inf weight, as im2col's zero patches);
the lanes past Cout multiply zero weights and are never stored.

Padded taps: with finite weights, output rows and edge column blocks whose taps reach the
padding get kernels that leave those products out (kernels/conv/bcast_edges.py; no bit changes).
DS-CNN's first conv (10 x 4 on 49 x 10, 16% of its taps on padding), x86-avx512 C A/B: the
whole model -2.4%.
"""
from __future__ import annotations

import hashlib
import math
from contextlib import nullcontext

import numpy as np

from . import bcast_edges as edges
from ..gemm.simd import ISA, _header, flit
from ..gemm.clamp import clamp_sides
from ..isa.registry import ISAS
from ..isa.x86 import include, vcopy
from ..move.transpose import transpose_c
from .base_c import epilogue, use
from .bcast_k import MAX_UNROLL, kernel
from .schedule import node_schedule, padded_extents
from .simd_gemm import KEY, clamp_of
from .transposed import lanes

BAND_POS = 64            # output positions per band (input rows padded, outputs transposed)


def _rules(isa: str) -> dict:
    """The ISA's auto rules and register blocking (its description's conv ``bcast`` entry):
    for NCHW, input channels counted as few (small_cin, 0: none), output floats at most
    (out_max; few_out_max with few input channels), weight bytes at most (w_max); for
    ConvNHWC (prefer_nhwc), input channels counted as few (nhwc_cin) and channel vectors at
    most (nhwc_nv, None: any; nhwc_nv_cin1 for one input channel); accumulators per register
    block (acc) and channel vectors per block (vmax); narrow: the ISA whose vectors a conv
    with a mostly empty last vector takes (vector_isa)."""
    return ISAS[isa].conv_kernels["bcast"]


def vector_isa(ctx, geo, isa: str, cout: int = 0) -> str:
    """The ISA whose vectors the kernels use: the ``narrow`` ISA of isa's rules when the
    target lists it and the last vector of output channels (cout, else geo's) would be at
    most half used (Cout % lanes in 1 .. the narrow ISA's lanes: x86-avx512 takes 8-lane
    vectors there). A node's ``aicc_kernel`` keeps its ISA's vectors."""
    narrow = _rules(isa).get("narrow")
    if (narrow is not None and narrow in ctx.target.kernels
            and ctx.node.attrs.get("aicc_kernel") is None         # a forced ISA stays
            and 1 <= (cout or geo.cout) % ISAS[isa].lanes <= ISAS[narrow].lanes):
        return narrow
    return isa


def regs(ctx) -> int:
    """Vector registers of the target: the most of the ISAs it lists (also for the kernels of
    a narrower ISA's vectors: 8-lane kernels on x86-avx512 plan with its 32)."""
    return max(ISAS[k].registers for k in ctx.target.kernels if k in ISAS)


def supports(geo) -> bool:
    """1-D / 2-D, group 1."""
    return len(geo.k) <= 2 and geo.group == 1


def prefer_nhwc(ctx, geo, isa: str) -> bool:
    """ConvNHWC (group 1, not pointwise): few input channels (first convs, where the im2col
    GEMM's K is short: DS-CNN's 10x4 conv of 1 -> 64 channels, 4.3 -> 3.6 us on avx512), on
    avx2 only up to 4 channel vectors (nhwc_nv: MobileNetV2's 3 -> 32 stride 2), 8 for one
    input channel (DS-CNN's). False on an ISA whose description has no ``bcast`` kernels."""
    if "bcast" not in ISAS[isa].conv_kernels:
        return False
    a = _rules(isa)
    L = ISA[vector_isa(ctx, geo, isa)]["lanes"]
    nv = -(-geo.cout // L)
    nv_max = a.get("nhwc_nv_cin1") if geo.cin == 1 else None
    return (supports(geo) and geo.cin <= a["nhwc_cin"] and nv <= (nv_max or a["nhwc_nv"] or nv)
            and lanes(geo.cout, L) >= 0.75)


def prefer(ctx, geo, isa: str) -> bool:
    """NCHW auto rule (_rules): constant weights, a strided conv, one of few input channels
    or a 1-D conv (``one_d``: temporal convs, whose short rows leave the GEMM tiles short),
    whose output channels fill the lanes, with a small output (the transposes to NCHW cost
    ~0.4 cycles a float: a first conv of K = 27 onto 224x224 x 32 loses to im2col;
    few_out_max for few input channels) and weights that stay in L2 (every band streams
    them)."""
    a = _rules(isa)
    few = geo.cin <= a["small_cin"]
    out_max = a["few_out_max" if few else "out_max"]
    one_d = len(geo.k) == 1 and a.get("one_d", False)
    L = _fill_lanes(ctx, geo, isa)
    if not (L and (few or max(geo.stride) > 1 or one_d)):
        return False
    if math.prod(geo.out) * geo.cout <= out_max and _wbytes(geo) <= a["w_max"]:
        return True
    # outputs of any size: strided convs of more than one tap whose input channels run in K
    # blocks (k_block) and whose weights stay in L2 (k_block and kb_w_max)
    return (max(geo.stride) > 1 and math.prod(geo.k) > 1
            and _wbytes(geo) <= a.get("kb_w_max", 0)
            and k_block(Geo2(geo, padded_extents(geo), False), -(-geo.cout // L) * L,
                        a) is not None)


def prefer_s1(ctx, geo, isa: str) -> str | None:
    """Where auto takes a stride-1 conv of more than one tap for the broadcast kernels, by the
    ISA's rule ``s1_taps``: "im2col" (instead of im2col, x86-avx2), "first" (before the
    transposed and implicit GEMMs too, x86-avx512) or None; for constant weights of at most
    w_max bytes whose output channels fill the lanes, output rows of at least s1_ow positions.
    The broadcast kernels read the padded rows in place, where im2col copies every patch
    (Inception-v3's 1 x 7 and 5 x 5 convs; measured in the rules' comments)."""
    a = _rules(isa)
    how = a.get("s1_taps")
    if not how or max(geo.stride) > 1 or math.prod(geo.k) == 1 or geo.out[-1] < a["s1_ow"]:
        return None
    return how if _fill_lanes(ctx, geo, isa) and _wbytes(geo) <= a["w_max"] else None


def _fill_lanes(ctx, geo, isa: str) -> int:
    """The lanes of the vectors the conv takes (vector_isa) when the broadcast kernels can
    take it, its weights constant and its output channels filling >= 75% of those lanes;
    else 0."""
    L = ISA[vector_isa(ctx, geo, isa)]["lanes"]
    ok = supports(geo) and ctx.in_const(1) is not None and lanes(geo.cout, L) >= 0.75
    return L if ok else 0


def _wbytes(geo) -> int:
    """The float32 weights' bytes."""
    return 4 * geo.cout * geo.cin_g * math.prod(geo.k)


def blocking(isa: str, cout: int, ow: int, nregs: int = 0, kblocked: bool = False) -> tuple:
    """(V channel vectors per block, R positions per block): V up to vmax, R the output row
    split into equal blocks of at most acc / V positions (vmax and acc of the ISA with nregs
    registers, else of isa; acc_kb for kernels of K blocks where the ISA sets it)."""
    nv = -(-cout // ISA[isa]["lanes"])
    a = _rules(next((k for k, d in ISAS.items() if d.registers == nregs), isa))
    v = min(nv, a["vmax"])
    v = -(-nv // -(-nv // v))                  # equal channel blocks
    acc = a.get("acc_kb", a["acc"]) if kblocked else a["acc"]
    rmax = max(1, acc // v)
    return v, -(-ow // -(-ow // rmax))


def runs_of(ow: int, r: int) -> list:
    """[(x0, x1, positions per block)]: an output row of ow positions in ceil(ow / r) blocks
    of at most r positions, as equal as they go (the longer ones first). A block of a few
    positions has few accumulator chains, and FMA latency, not throughput, bounds it: 56
    positions as 11 x 5 + 1 ran the 1-position block at 2 chains (64 -> 64 3x3 stride 2 onto
    56 x 56, AMD Zen 4, x86-avx2, ratio to onnxruntime with K blocks: 1.06 as 11 x 5 + 1, 0.98
    as 14 x 4)."""
    n = -(-ow // r)
    base, extra = divmod(ow, n)
    head = [(0, extra * (base + 1), base + 1)] if extra else []
    return head + [(extra * (base + 1), ow, base)]


class Geo2:
    """The conv as 2-D (1-D: a unit height), its bands, and the strides (floats) of the
    input the kernels read: cs channel, rs row, xs column."""

    def __init__(self, geo, ext, nhwc: bool):
        two = lambda v, f: ([f] + list(v)) if len(v) == 1 else list(v)   # noqa: E731
        self.kh, self.kw = two(geo.k, 1)
        self.sy, self.sx = two(geo.stride, 1)
        self.dy, self.dx = two(geo.dil, 1)
        self.oh, self.ow = two(geo.out, 1)
        self.h, self.w = two(geo.inp, 1)
        self.pt, self.pl = two(geo.pad, 0)
        self.eh, self.ew = two(ext, 1) if ext else (self.h, self.w)
        self.cin, self.cout, self.batch = geo.cin, geo.cout, geo.batch
        # a band of whole output rows, about BAND_POS positions, reads rb input rows (padded:
        # copied into a buffer)
        self.band = max(1, min(BAND_POS // self.ow, self.oh))
        self.rb = (self.band - 1) * self.sy + (self.kh - 1) * self.dy + 1
        self.padded = bool(ext)
        f = self.cin if nhwc else 1              # floats per position in a row
        # a padded row: `lead` floats of slack so that the input's first value lands on a
        # 64-byte boundary (aligned row copies), rows rounded up to 16 floats
        self.lead = -self.pl * f % 16 if ext else 0
        self.rs = -(-(self.lead + self.ew * f) // 16) * 16 if ext else self.w * f
        self.xs = f
        if nhwc:
            self.cs = 1
        else:
            self.cs = self.rb * self.rs if ext else self.h * self.w
        self.taps = [(ky, kx) for ky in range(self.kh) for kx in range(self.kw)]

    def tap(self, ky, kx) -> int:
        return ky * self.dy * self.rs + kx * self.dx * self.xs


def pack(w: np.ndarray, v: int, lanes: int) -> np.ndarray:
    """[Cout, Cin, kh, kw] -> [blocks][Cin][kh][kw][v * lanes], zero past Cout."""
    w = w.reshape(w.shape[:2] + (1,) * (4 - w.ndim) + w.shape[2:])   # 1-D: unit height
    co = w.shape[0]
    wb = v * lanes
    nb = -(-co // wb)
    wp = np.zeros((nb * wb,) + w.shape[1:], np.float32)
    wp[:co] = w
    return np.ascontiguousarray(wp.reshape(nb, wb, *w.shape[1:]).transpose(0, 2, 3, 4, 1))


def emit(ctx, node, geo, isa: str, bias: str, nhwc: bool = False,
         nchw_in: bool = False) -> None:
    """Step body. nhwc: X [N, H, W, C] and Y [N, OH, OW, Cout] (ConvNHWC); with nchw_in, X
    [N, C, H, W] (ConvNHWC's aicc_nchw_in: the kernels read the input by its strides, so
    only the band copy sees the layout)."""
    xin = nhwc and not nchw_in                   # the input's layout is channel-last
    if not supports(geo):
        raise ValueError("conv algo 'bcast' needs a 1-D/2-D conv with group 1")
    w = ctx.in_const(1)
    if w is None:
        raise ValueError("conv algo 'bcast' needs constant weights")
    kmax = node_schedule(ctx, isa)["edge_kernels"]     # of isa, before vector_isa narrows it
    rules = _rules(isa)                                # so are the K-block rules
    isa = vector_isa(ctx, geo, isa)
    L = ISA[isa]["lanes"]
    g = Geo2(geo, padded_extents(geo), xin)
    kb = None if nhwc else k_block(g, -(-g.cout // L) * L, rules)
    v, r = blocking(isa, g.cout, g.ow, regs(ctx), kb is not None)
    wb = v * L                                   # channels per block
    nb = -(-g.cout // wb)
    lo, hi, act = clamp_of(node)
    clamp = clamp_sides(lo, hi)
    has_b = bias != "NULL"
    ctx.kernel = f"{isa} bcast"
    wp = ctx.const(pack(np.asarray(w, np.float32), v, L), "wbc")
    # the kernels' text depends on the geometry, the bias and the clamp (two same-shaped
    # convs, one with Relu, must not share a name)
    tag = hashlib.sha1(repr((sorted(g.__dict__.items()), isa, has_b, clamp, nhwc)).encode()
                       ).hexdigest()[:8]
    use(ctx, "float32")
    include(ctx, isa)
    vcopy(ctx)                                   # the band copies
    if not nhwc:
        ctx.helper(f"{KEY}.5.tr_{isa}", transpose_c(isa))
    runs, classes = edges.plan(g, runs_of(g.ow, r), len(g.taps) <= MAX_UNROLL,
                               bool(np.isfinite(np.asarray(w)).all()), kmax)
    calls = {}              # padded kernel rows -> [(channel block, ox run, kernel name)]
    for rows in [frozenset()] + [rows for rows, _oys in classes]:
        calls[rows] = []
        for cb in range(nb):
            nch = min(wb, g.cout - cb * wb)
            nv, mask = -(-nch // L), nch % L
            if mask and (has_b or nhwc):
                _header(ctx, isa)                # the lane-mask table (no mask registers)
            for x0, x1, rr, cols in runs:
                name, text = kernel(isa, g, rr, nv, wb, tag, has_b, clamp, mask, nhwc,
                                    regs(ctx), (rows, cols), kblocks=kb is not None)
                ctx.helper(f"{KEY}.5.{name}", text)
                calls[rows].append((cb, x0, x1, rr, name))
    P, ldt = g.oh * g.ow, nb * wb
    ctx(f"/* Conv {geo.describe()}: {isa} direct, input broadcast: blocks of {r} positions x "
        f"{wb} output channels, {g.cin} x {len(g.taps)} taps each; bands of {g.band} output "
        "rows */")
    x, y = ctx.inp[0], ctx.out[0]
    X = g.h * g.w * g.cin
    xb = ctx.scratch((1 if xin else g.cin) * g.rb * g.rs * 4, "float", "xband") \
        if g.padded else None
    tb = None if nhwc else ctx.scratch(g.band * g.ow * ldt * 4, "float", "ytile")
    ep = epilogue(ctx, node, "float32") if act else "NULL"
    ys = g.cout if nhwc else ldt
    with ctx.block(f"for (size_t n = 0; n < {g.batch}u; ++n)"):
        ctx(f"const float *restrict xn = {x} + n * {X}u;")
        with ctx.block(f"for (size_t oy0 = 0; oy0 < {g.oh}u; oy0 += {g.band}u)"):
            ctx(f"const size_t nrow = {g.oh}u - oy0 < {g.band}u ? {g.oh}u - oy0 : {g.band}u;")
            if g.padded:
                pad_band(ctx, g, "xn", xb, xin)
                ctx(f"const float *restrict xv = {xb} + {g.lead}u;")
            else:
                ctx(f"const float *restrict xv = xn + oy0 * {g.sy * g.rs}u;")
            with ctx.block("for (size_t oy = oy0; oy < oy0 + nrow; ++oy)"):
                ctx(f"const float *restrict xr = xv + (oy - oy0) * {g.sy * g.rs}u;")
                if nhwc:
                    ctx(f"float *restrict yr = {y} + (n * {g.oh}u + oy) * {g.ow * g.cout}u;")
                else:
                    ctx(f"float *restrict yr = {tb} + (oy - oy0) * {g.ow * ldt}u;")
                for k, (rows, oys) in enumerate(classes):   # rows reaching the padding
                    cond = " || ".join(f"oy == {oy}u" for oy in oys)
                    with ctx.block(f"{'else ' if k else ''}if ({cond})"):
                        row_calls(ctx, g, calls[rows], wp, wb, bias, has_b, ys, lo, hi, kb)
                if classes:
                    with ctx.block("else"):
                        row_calls(ctx, g, calls[frozenset()], wp, wb, bias, has_b, ys,
                                  lo, hi, kb)
                else:
                    row_calls(ctx, g, calls[frozenset()], wp, wb, bias, has_b, ys, lo, hi,
                              kb)
            if not nhwc:
                ctx(f"aicc_cb_tr_{isa}({tb}, nrow * {g.ow}u, {ldt}u, {g.cout}u, "
                    f"{y} + n * {g.cout * P}u + oy0 * {g.ow}u, {P}u);")
                if ep != "NULL":
                    with ctx.block(f"for (size_t c = 0; c < {g.cout}u; ++c)"):
                        ctx(f"{ep}({y} + (n * {g.cout}u + c) * {P}u + oy0 * {g.ow}u, "
                            f"nrow * {g.ow}u);")
        if nhwc and ep != "NULL":
            ctx(f"{ep}({y} + n * {P * g.cout}u, {P * g.cout}u);")


def k_block(g: Geo2, ldt: int, rules: dict) -> int | None:
    """Input channels per K block, None for one block: as many as keep a block's band input
    rows and its weights for all ldt outputs within the ISA's ``kblock`` bytes (0: never), so
    that they stay in L1 across the channel and position blocks that reuse them (in one
    block, every position block streams its weights and all the band's input planes from
    L2). Only for strided convs with at least ``kb_cin`` input channels, ``kb_ow`` positions
    an output row (Inception-v3's 192 -> 192 3x3 stride 2 onto 8 x 8, two position blocks a
    row: 0.45 -> 0.53 ms on x86-avx2 in K blocks of one channel) and more than ``kb_set``
    bytes of band input and weights (ResNet-8's 16 -> 32 3x3 stride 2 onto 16 x 16, 46 KB,
    all in L1 / L2 anyway: 24 -> 28 us in K blocks).

    Stride 1, where the ISA's rules set ``s1_chain``: K blocks of s1_chain // taps channels
    (at least one) when the sum has at least ``s1_kmin`` products (cin x taps), so that its
    chains are about as long as the GEMM's (ks: 32) and its rounding error no larger than
    im2col's; shorter sums stay one chain (the same bits as im2col's single K block)."""
    if max(g.sy, g.sx) == 1:
        chain, k = rules.get("s1_chain", 0), g.cin * len(g.taps)
        if not chain or k < rules["s1_kmin"]:
            return None
        kb = max(1, chain // len(g.taps))
        return kb if kb < g.cin else None
    budget = rules.get("kblock", 0)
    if not budget or g.cin < rules["kb_cin"] or g.ow < rules["kb_ow"]:
        return None
    per = 4 * (g.rb * (g.rs if g.padded else g.w) + len(g.taps) * ldt)
    if per * g.cin <= rules["kb_set"]:
        return None
    kb = max(1, budget // per)
    return kb if kb < g.cin else None


def row_calls(ctx, g: Geo2, calls, wp, wb, bias, has_b, ys, lo, hi, kb=None) -> None:
    """One output row's kernel calls [(channel block, ox run, kernel name)]; with K blocks of
    kb input channels (k_block), all the calls for each block in order."""
    xs, ws = (f" + c0 * {g.cs}u", f" + c0 * {len(g.taps) * wb}u") if kb else ("", "")
    more = ", nc, fl" if kb else ""
    with ctx.block(f"for (size_t c0 = 0; c0 < {g.cin}u; c0 += {kb}u)") if kb else nullcontext():
        if kb:
            ctx(f"const size_t nc = {g.cin}u - c0 < {kb}u ? {g.cin}u - c0 : {kb}u;")
            ctx(f"const unsigned fl = (c0 ? 1u : 0u) | (c0 + nc == {g.cin}u ? 2u : 0u);")
        for cb, x0, x1, rr, name in calls:
            wcb = f"{wp} + {cb * g.cin * len(g.taps) * wb}u{ws}"
            bcb = f"{bias} + {cb * wb}u" if has_b else "NULL"
            args = (f"{wcb}, {bcb}, yr + ox * {ys}u + {cb * wb}u, {ys}u, {flit(lo)}, "
                    f"{flit(hi)}{more}")
            if x1 - x0 == rr:
                ctx(f"{{ const size_t ox = {x0}u; "
                    f"{name}(xr{xs} + ox * {g.sx * g.xs}u, {args}); }}")
            else:
                with ctx.block(f"for (size_t ox = {x0}u; ox < {x1}u; ox += {rr}u)"):
                    ctx(f"{name}(xr{xs} + ox * {g.sx * g.xs}u, {args});")


def pad_band(ctx, g: Geo2, x: str, xb: str, nhwc: bool) -> None:
    """The zero-padded input rows of the band of output rows from oy0 (nrow of them) into xb,
    with constant sizes, by simd.VCOPY's vector moves (GCC expanded the constant-size memcpy
    as rep movsq on x86-avx2: 5.6 of MobileNetV1-0.25's first conv's 15.2 us; the model 147.9
    -> 144.6 us): NCHW per channel plane, NHWC as one plane of rows W * C floats wide."""
    c = 1 if nhwc else g.cin
    ew, w, pl = g.ew * g.xs, g.w * g.xs, g.pl * g.xs     # in floats (xs per position)
    cw = max(0, min(w, ew - pl))                 # floats of an input row inside the extent
    tail = ew - pl - cw
    ctx(f"const long iy0 = (long)(oy0 * {g.sy}u) - {g.pt}L;")
    ctx(f"const size_t nin = (nrow - 1u) * {g.sy}u + {(g.kh - 1) * g.dy + 1}u;")
    with ctx.block(f"for (size_t c = 0; c < {c}u; ++c)"):
        with ctx.block("for (size_t rr = 0; rr < nin; ++rr)"):
            ctx("const long iy = iy0 + (long)rr;")
            ctx(f"float *restrict d = {xb} + (c * {g.rb}u + rr) * {g.rs}u + {g.lead}u;")
            with ctx.block(f"if (iy < 0 || iy >= {g.h}L)"):
                ctx(f"aicc_vzero(d, {ew}u);")
                ctx("continue;")
            if pl:
                ctx(f"aicc_vzero(d, {pl}u);")
            ctx(f"aicc_vcopy(d + {pl}u, {x} + (c * {g.h}u + (size_t)iy) * {w}u, {cw}u);")
            if tail:
                ctx(f"aicc_vzero(d + {pl + cw}u, {tail}u);")
