"""C text of kernels/conv/bcast.py's block kernels: R output positions x V output-channel vectors,
the taps of each input channel unrolled with constant offsets (a loop over kernel rows past
MAX_UNROLL taps), each input value broadcast into the FMAs of the positions it serves
(see kernels/conv/bcast.py for the layout, the epilogue and the rounding). g: conv_bcast.Geo2."""
from __future__ import annotations

import hashlib

from ..gemm.simd import ISA
from ..gemm.clamp import clamp_expr
from ..isa.registry import ISAS
from .bcast_edges import NONE

MAX_UNROLL = 48          # taps per input channel unrolled in full (else ky runs in a loop)
# a block kernel kept a call (GCC and Clang): inlined into the step's loops of constant trip
# counts, GCC -O3 unrolled the calls into each other and spilled the accumulators (AMD Zen 4,
# x86-avx2, 64 channels in 4 groups, 3x3 onto 28x28: 0.25 -> 0.14 ms as calls)
NOINLINE = "__attribute__((noinline)) "


def _shares(g, r: int, nv: int, nregs: int) -> bool:
    """Whether a block's kernel broadcasts each input value of a kernel row once for all its
    taps (_row_shared): some input value serves two taps of the row (the stride is below the
    row's span), and the row's kw * nv weight vectors fit beside the accumulators, the
    broadcast and two spare registers (AMD Zen 4, x86-avx2, C loop, us, tap-major -> shared:
    3 -> 8 stride 2 onto 48x48, 10 positions x 1 vector, 15 registers: 16.7 -> 15.2; 16 -> 32
    stride 2 onto 16x16, 4 positions x 2 vectors, 16 registers: 27.2 -> 28.0, so not taken)."""
    distinct = {kx * g.dx + i * g.sx for i in range(r) for kx in range(g.kw)}
    return len(distinct) < r * g.kw and r * nv + g.kw * nv + 3 <= nregs


def _row_shared(g, taps, ky: int, r: int, nv: int, acc, wstep: int, src: str, d,
                bc, cols=frozenset()) -> list:
    """One kernel row's taps [(t, kx)] for the r positions, by input value: the row's weight
    vectors loaded once, then each input value the row reads broadcast once and multiplied
    into every (position, tap) it serves, in increasing offset order, so each accumulator
    still takes its taps kx ascending (the FMA chain of the tap-major form, bit for bit).
    Stride 2, 3 taps: 2 r + 1 broadcasts instead of 3 r."""
    L, vec = d["lanes"], d["vec"]
    uses = {}
    for i in range(r):
        for _t, kx in taps:
            if (i, kx) not in cols:          # cols: padded (position, kx), left out
                uses.setdefault(g.tap(ky, kx) + i * g.sx * g.xs, []).append((i, kx))
    used = {kx for us in uses.values() for _i, kx in us}
    o = ["        {"]
    for t, kx in taps:
        for j in range(nv if kx in used else 0):
            o.append(f"            const {vec} w{kx}_{j} = "
                     + d["load"].format(p=f"w + {t * wstep + j * L}u") + ";")
    for off in sorted(uses):
        o.append(f"            {{ const {vec} x = {bc(x=f'{src}[{off}u]')};")
        for i, kx in uses[off]:
            for j in range(nv):
                o.append(f"              {acc[i][j]} = "
                         + d["fma"].format(a="x", b=f"w{kx}_{j}", c=acc[i][j]) + ";")
        o.append("            }")
    o.append("        }")
    return o


def kernel(isa: str, g, r: int, nv: int, wstep: int, tag: str, bias: bool, clamp: tuple,
           mask: int, mstore: bool, nregs: int, skip: tuple = NONE,
           call: bool = False, kblocks: bool = False) -> tuple:
    """(name, C text) of the block kernel of r positions x nv channel vectors: a = the block's
    first position in the (padded) input, w = its channel block (wstep floats per k), b = its
    bias (unless not bias), y = out (position stride ys). mask: lanes of the last vector
    inside Cout (0: all): its bias is a masked load and, when mstore, its store is masked.
    clamp: (lo finite, hi finite), the sides of [lo, hi] applied. skip: (kernel rows, (position,
    kx) pairs) on the padding, left out (conv_bcast_edges; rows only with unrolled taps).
    nregs: the target's vector registers (_shares). call: never inlined (NOINLINE).
    kblocks: the kernel runs one block of input channels (K blocks, bcast.k_block): two more
    arguments, nc (channels of the block) and fl (bit 0: add the sums of the blocks before,
    stored in y; bit 1: the last block, + bias and the clamp). Each block is an FMA chain from
    +0 and the blocks' sums are added in order (as im2col's K blocks: one chain over a K of
    hundreds of products drifts further from the exact sum); no masked store."""
    d, I = ISA[isa], ISAS[isa]
    L, vec = d["lanes"], d["vec"]
    assert not (kblocks and mstore)
    name = f"aicc_cb_{isa}_{tag}_r{r}v{nv}" + (f"m{mask}{'s' if mstore else ''}" if mask else "")
    name += "_kb" if kblocks else ""
    rows, cols = skip
    if rows or cols:
        name += "_e" + hashlib.sha1(repr((sorted(rows), sorted(cols))).encode()).hexdigest()[:6]
    bc = I.conv_kernels["splat"].format      # bc(x=lvalue): its float in every lane
    acc = [[f"c{i}_{j}" for j in range(nv)] for i in range(r)]
    ln = [f"static {NOINLINE if call else ''}void {name}(const float *restrict a, "
          "const float *restrict w,",
          "    const float *restrict b, float *restrict y, size_t ys, float lo, float hi"
          + (", size_t nc, unsigned fl)" if kblocks else ")"), "{",
          f"    {vec} " + ", ".join(f"{c} = {d['zero']}" for row in acc for c in row) + ";",
          "    (void)b; (void)lo; (void)hi;"]
    unroll = len(g.taps) <= MAX_UNROLL
    taps = g.taps if unroll else [(0, kx) for kx in range(g.kw)]
    src = "a" if unroll else "ar"
    body = []
    shared = _shares(g, r, nv, nregs)
    for t, (ky, kx) in enumerate(taps):
        if ky in rows:
            continue
        if shared:
            if kx == 0:
                body += _row_shared(g, [(t + q, q) for q in range(g.kw)], ky, r, nv, acc,
                                    wstep, src, d, bc, cols)
            continue
        pos = [i for i in range(r) if (i, kx) not in cols]
        if not pos:
            continue
        body.append("        {")
        for j in range(nv):
            body.append(f"            const {vec} w{j} = "
                        + d["load"].format(p=f"w + {t * wstep + j * L}u") + ";")
        for i in pos:
            off = g.tap(ky, kx) + i * g.sx * g.xs
            body.append(f"            {{ const {vec} x = {bc(x=f'{src}[{off}u]')};")
            for j in range(nv):
                body.append(f"              {acc[i][j]} = "
                            + d["fma"].format(a="x", b=f"w{j}", c=acc[i][j]) + ";")
            body.append("            }")
        body.append("        }")
    count = "nc" if kblocks else f"{g.cin}u"
    ln.append(f"    for (size_t c = 0; c < {count}; ++c, a += {g.cs}u) {{")
    if unroll:
        ln += body
        ln.append(f"        w += {len(taps) * wstep}u;")
    else:
        ln.append("        const float *restrict ar = a;")
        ln.append(f"        for (size_t ky = 0; ky < {g.kh}u; ++ky, ar += {g.dy * g.rs}u, "
                  f"w += {g.kw * wstep}u) {{")
        ln += ["    " + s for s in body]
        ln.append("        }")
    ln.append("    }")
    if kblocks:
        ln.append("    if (fl & 1u) {")
        add = I.vector["add"]
        ln += [f"        {acc[i][j]} = {add}("
               + d["load"].format(p=f"y + {i}u * ys + {j * L}u") + f", {acc[i][j]});"
               for i in range(r) for j in range(nv)]
        ln.append("    }")
        ln.append("    if (fl & 2u) {")
    if mask and (bias or mstore):
        ln.append(f"    const {d['mtype']} mk = " + d["mask"].format(n=f"{mask}u") + ";")
    if bias:
        for j in range(nv):
            ld = (d["mload"].format(p=f"b + {j * L}u", m="mk") if mask and j == nv - 1 else
                  d["load"].format(p=f"b + {j * L}u"))
            ln.append(f"    {{ const {vec} bv = {ld};")
            for i in range(r):
                ln.append(f"      {acc[i][j]} = {I.vector['add']}({acc[i][j]}, bv);")
            ln.append("    }")
    if any(clamp):
        ln.append("    {" + "".join(f" const {vec} v{s} = {I.vector['set1']}({s});"
                                     for s, on in zip(("lo", "hi"), clamp) if on))
        mn, mx = I.vector["min"], I.vector["max"]           # float min / max
        for row in acc:
            for c in row:
                ln.append(f"      {c} = {clamp_expr(c, clamp, mn, mx)};")
        ln.append("    }")
    if kblocks:
        ln.append("    }")
    for i in range(r):
        for j in range(nv):
            ptr = f"y + {i}u * ys + {j * L}u"
            if mask and mstore and j == nv - 1:
                ln.append("    " + d["mstore"].format(p=ptr, m="mk", v=acc[i][j]) + ";")
            else:
                ln.append("    " + d["store"].format(p=ptr, v=acc[i][j]) + ";")
    ln.append("}")
    return name, "\n".join(ln)
