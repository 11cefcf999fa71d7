"""Text pieces of the SIMD micro-kernels, shared by the GEMM (kernels/gemm/simd.py) and conv
(kernels/conv/simd_gemm.py) kernel generators. A micro-kernel keeps mr rows x (panels x V vectors) of
accumulators in registers; it walks the columns of Y in steps of one or more B panels of NR =
V * lanes columns (column_loops), and each step opens its tile (tile_open: panel pointers,
accumulators, lane masks, start from Y's partial sums or zero), runs the K loop of FMAs
(tile_k_loop: the caller says how A and B are addressed), applies the caller's epilogue (its
register clamp: gemm/clamp.py), and stores (tile_store). ``d`` is an entry of gemm_simd.ISA (C
spellings of one instruction set).
"""
from __future__ import annotations

V = 2       # vectors per panel: NR = V * lanes


def _f(tpl: str, **kw) -> str:
    return tpl.format(**kw)


def yptr(r: int, c: int, L: int) -> str:
    """Address of accumulator (row r, vector c) in Y (row stride ldy, column j)."""
    return f"y + {r}u * ldy + j + {c * L}u" if r else f"y + j + {c * L}u"


def tile_open(o: list, d: dict, ind: str, nr: int, npb: int, accs: list, masked: bool) -> None:
    """A micro-kernel column step up to its K loop: the panel pointers b0.., the
    accumulators (zero: each K block is summed on its own, tile_partial adds it to Y's partial
    sums), the lane masks of a masked step."""
    L = d["lanes"]
    for p in range(npb):
        o.append(f"{ind}const float *restrict b{p} = b + (j / {nr}u + {p}u) * bs;")
    o.append(f"{ind}{d['vec']} " + ", ".join(x for row in accs for x in row) + ";")
    if masked:
        o.append(f"{ind}const size_t nc = n - j;")
        for c in range(len(accs[0])):
            o.append(f"{ind}const {d['mtype']} m{c} = " + _f(
                d["mask"], n=f"nc > {c * L}u ? (nc - {c * L}u < {L}u ? nc - {c * L}u : {L}u)"
                             f" : 0u") + ";")
    _zero(o, d, ind, accs)


def _zero(o: list, d: dict, ind: str, accs: list) -> None:
    for row in accs:
        o.append(f"{ind}" + " ".join(f"{x} = {d['zero']};" for x in row))


def tile_partial(o: list, d: dict, ind: str, accs: list, masked: bool, guard: bool) -> None:
    """After the K loop of a later K block (acc): the block's sums added to Y's partial sums
    (guard: masked Y loads only for vectors with lanes left, else zero). Each block of kc
    products is summed from zero and then added, rather than continuing Y's chain, so the
    rounding error of a K-long sum grows with about sqrt(kc + K / kc) roundings instead of
    sqrt(K); x86's chains of 32 (tile_chains) keep long sums and Winograd's channel sums below
    onnxruntime's error (MLAS blocks K by 128; docs/ACCURACY.md). One add per accumulator per
    block."""
    L = d["lanes"]
    o.append(f"{ind}if (acc) {{")
    for r, row in enumerate(accs):
        for c, x in enumerate(row):
            if not masked:
                ld = _f(d["load"], p=yptr(r, c, L))
            elif guard:
                ld = f"nc > {c * L}u ? " + _f(d["mload"], p=yptr(r, c, L), m=f"m{c}") + \
                    f" : {d['zero']}"
            else:
                ld = _f(d["mload"], p=yptr(r, c, L), m=f"m{c}")
            o.append(f"{ind}    {x} = {d['add']}({ld}, {x});")
    o.append(f"{ind}}}")


def tile_k_loop(o: list, d: dict, ind: str, accs: list, pre: list, bvec, arow,
                v: int = V, a_layout: str = "", registers: int = 0, bptr=None,
                stream=None, k0: str = "0", k1: str = "kc") -> None:
    """The K loop of a micro-kernel column step: pre (lines at the top of each iteration),
    then per k the FMAs acc[r][p * v + c] += A(r, k) * B(k, panel p, vector c), with bvec(p,
    c, k) the B vector's load expression at row k (a C expression, default "k") and arow(r)
    the address of A(r, k); v vectors per panel (default V). One panel: the v B vectors first,
    then one broadcast per row (few live registers); several: the broadcasts first, then one B
    vector at a time.

    ISAs with an FMA by vector lane (``fma_lane``: NEON's FMLA by element) load A as vectors
    instead of broadcasting it, where its layout allows (``a_layout``): "packed" (A(r, k) at
    arow(r) contiguous in r: one vector holds the A of L rows, rows past the last full vector
    broadcast) or "rows" (A(r, k) contiguous in k: k unrolled by L, one vector per row holds
    its L values of A; the k % L rest broadcast), when the accumulators, the A vectors and the
    B vectors fit in the ISA's ``registers``. The products and their order are the same: one
    fused multiply-add per (r, k, column) in ascending k.

    ISAs with a load of several consecutive vectors (``loadn``: NEON's LD1 of 2-4 registers,
    one instruction) read the packed A's full vectors of one k with one such load, and each
    panel's v B vectors of row k too when they are contiguous at bptr(p) (None: the caller's
    bvec loads, e.g. masked ones). stream = (A, panel) with packed A: the packed A at A,
    panel p's rows of v vectors contiguous from panel(p); the K loop then walks both with
    pointers, unrolled by KU (_k_loop_packed_stream; pre, arow and bvec unused).

    k0, k1: the k range (C expressions) of the broadcast loop (tile_chains' chains); the
    loops by lane run over all of [0, kc)."""
    vec, npb, L = d["vec"], len(accs[0]) // v, d["lanes"]
    mr = len(accs)
    lane = d.get("fma_lane")
    assert not lane or (k0, k1) == ("0", "kc"), "k sub-ranges are for the broadcast loop"
    if lane and a_layout == "packed" and mr >= L:
        if stream is not None:
            _k_loop_packed_stream(o, d, ind, accs, *stream[:2], v, registers, *stream[2:])
        else:
            _k_loop_lanes_packed(o, d, ind, accs, pre, bvec, arow, v, bptr)
        return
    if lane and a_layout == "rows" and mr * (len(accs[0]) + 1) + v * npb < registers:
        _k_loop_lanes_rows(o, d, ind, accs, pre, bvec, arow, v)
        o.append(f"{ind}for (; k < kc; ++k) {{")
    else:
        if d.get("ku", 1) > 1:
            o.extend(unroll_pragma(ind, d["ku"]))
        o.append(f"{ind}for (size_t k = {k0}; k < {k1}; ++k) {{")
    i2 = ind + "    "
    o.extend(i2 + ln for ln in pre)
    if npb == 1:
        for c in range(v):
            o.append(f"{i2}const {vec} w{c} = {bvec(0, c)};")
        for r, row in enumerate(accs):
            o.append(f"{i2}{{ const {vec} x = " + _f(d["bcast"], p=arow(r)) + ";")
            for c in range(v):
                o.append(f"{i2}  {row[c]} = " + _f(d["fma"], a="x", b=f"w{c}", c=row[c]) + ";")
            o.append(f"{i2}}}")
    else:
        for r in range(len(accs)):
            o.append(f"{i2}const {vec} x{r} = " + _f(d["bcast"], p=arow(r)) + ";")
        _b_vectors(o, i2, vec, accs, v, bvec,
                   lambda r, x: _f(d["fma"], a=f"x{r}", b="w", c=x))
    o.append(f"{ind}}}")


def unroll_pragma(ind: str, n: int) -> list:
    """Lines asking GCC and clang to unroll the next loop n times (``#pragma GCC unroll``:
    GCC 8 and later, clang; other compilers do not see it). The ISA's gemm ``ku``: the
    broadcast K loop of tile_k_loop unrolled so (x86-avx2: the loop of a chain of 32 exits
    every 8 iterations instead of 32; MatMul 361 x 728 x 728 1.05 -> 1.03 of onnxruntime's
    time, the models in docs/PERFORMANCE.md; the same loop written out in C was scheduled
    across its steps by GCC, which spilled accumulators: 1.08)."""
    return ["#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 8)",
            f"{ind}#pragma GCC unroll {n}", "#endif"]


def _b_vectors(o, i2, vec, accs, v, bvec, fma):
    """One B vector at a time (w = bvec(p, c)), then fma(r, acc) into each row's accumulator
    of that vector."""
    for p in range(len(accs[0]) // v):
        for c in range(v):
            o.append(f"{i2}{{ const {vec} w = {bvec(p, c)};")
            for r, row in enumerate(accs):
                x = row[p * v + c]
                o.append(f"{i2}  {x} = {fma(r, x)};")
            o.append(f"{i2}}}")


def _loadn(d: dict, n: int) -> bool:
    """The ISA loads n consecutive vectors with one instruction (``loadn``, n in nmax)."""
    return "loadn" in d and 2 <= n <= d["loadn_max"]


def _k_loop_lanes_packed(o, d, ind, accs, pre, bvec, arow, v, bptr=None):
    """tile_k_loop with A packed across rows: per k, mr // L vectors of A (one multi-vector
    load where the ISA has it) and one FMA by lane per accumulator; the mr % L last rows
    broadcast. B: one multi-vector load per panel where bptr gives its contiguous vectors
    (NEON 12 x 8: LD1 of 3, LD1 of 2, 24 FMLA, the loop: 28 instructions per 96 multiply-adds)."""
    vec, L, mr = d["vec"], d["lanes"], len(accs)
    full = mr // L
    o.append(f"{ind}for (size_t k = 0; k < kc; ++k) {{")
    i2 = ind + "    "
    o.extend(i2 + ln for ln in pre)
    if _loadn(d, full):
        o.append(f"{i2}const " + _f(d["vecn"], n=full) + " xa = " +
                 _f(d["loadn"], n=full, p=arow(0)) + ";")
        xa = [_f(d["val"], t="xa", i=g) for g in range(full)]
    else:
        for g in range(full):
            o.append(f"{i2}const {vec} xa{g} = " + _f(d["load"], p=arow(g * L)) + ";")
        xa = [f"xa{g}" for g in range(full)]
    for r in range(full * L, mr):
        o.append(f"{i2}const {vec} x{r} = " + _f(d["bcast"], p=arow(r)) + ";")
    fma = lambda r, x: (  # noqa: E731
        _f(d["fma_lane"], a=xa[r // L], b="w", c=x, lane=r % L) if r < full * L
        else _f(d["fma"], a=f"x{r}", b="w", c=x))
    if bptr is None or not _loadn(d, v):
        _b_vectors(o, i2, vec, accs, v, bvec, fma)
    else:
        for p in range(len(accs[0]) // v):
            o.append(f"{i2}{{ const " + _f(d["vecn"], n=v) + " wb = " +
                     _f(d["loadn"], n=v, p=bptr(p)) + ";")
            for c in range(v):
                o.append(f"{i2}  {{ const {vec} w = " + _f(d["val"], t="wb", i=c) + ";")
                for r, row in enumerate(accs):
                    o.append(f"{i2}    {row[p * v + c]} = {fma(r, row[p * v + c])};")
                o.append(f"{i2}  }}")
            o.append(f"{i2}}}")
    o.append(f"{ind}}}")


KU = 8      # k steps per iteration of the packed-A K loop on pointers
PAIR_SLACK = 4   # registers its pairs of k leave free (_k_loop_packed_stream)


def _k_loop_packed_stream(o, d, ind, accs, abase, panel, v, registers=0, kmul=1):
    """The packed-A K loop on pointers: per k one load of A's full vectors (LD1 of several
    registers where the ISA has it; the mr % L last rows broadcast), per panel one load of its
    v B vectors, each pointer advanced after its load (post-indexed loads), and the FMAs by
    lane in _k_loop_lanes_packed's order (the same products and sums, ascending k); KU k per
    iteration (counted down), then the kc % KU rest (none when every kc is a multiple of
    kmul, itself a multiple of KU: the kernels named _k8). In the KU-k iterations, when the
    accumulators and the operands of two consecutive k leave PAIR_SLACK of the ``registers``
    free, operands whose vectors of two k fit one load (NEON 8 x 8: A's and B's 2 x 2
    vectors) are loaded per pair of k (12 x 8 would use 31 of 32: GCC spills). The ISA's
    ``kstep`` opens each k: it keeps the pointers in registers and the loads of one k from
    being hoisted above the previous k's FMAs (GCC otherwise spills accumulators to hold them,
    or folds the pointer steps into offsets that LD1 lacks). NEON 12 x 8: per k LD1 of 3, LD1
    of 2, 24 FMLA, and the loop's 2 instructions per KU k (transformer 128 x 128 x 128 with its
    packing and epilogues: 0.292 executed instructions per multiply-add instead of 0.3125 with
    one k per iteration; KU 4 gained nothing, register copies)."""
    npb = len(accs[0]) // v
    o.append(f"{ind}const float *restrict ap = {abase};")
    o.extend(f"{ind}const float *restrict bp{p} = {panel(p)};" for p in range(npb))
    L, mr = d["lanes"], len(accs)
    live = mr * len(accs[0]) + 2 * (mr // L + mr % L) + 2 * v * npb
    nk = 2 if live + PAIR_SLACK <= registers else 1
    o.append(f"{ind}for (size_t k = kc / {KU}u; k != 0u; --k) {{")
    for _ in range(KU // nk):
        o.append(f"{ind}    {{")
        o.extend(f"{ind}        {ln}" for ln in _stream_ks(d, accs, v, nk))
        o.append(f"{ind}    }}")
    o.append(f"{ind}}}")
    if kmul % KU:        # kc a multiple of KU (kmul): no rest (GCC copies the accumulators
        o.append(f"{ind}for (size_t k = kc % {KU}u; k != 0u; --k) {{")   # between the loops)
        o.extend(f"{ind}    {ln}" for ln in _stream_ks(d, accs, v, 1))
        o.append(f"{ind}}}")


def _stream_ks(d, accs, v, nk):
    """Lines of nk (1 or 2) consecutive k of _k_loop_packed_stream."""
    vec, L, mr, nr = d["vec"], d["lanes"], len(accs), v * d["lanes"]
    full, npb = mr // L, len(accs[0]) // v
    step = (lambda ps: [_f(d["kstep"], p=x) + ";" for x in ps]) if d.get("kstep") else \
        (lambda ps: [])
    a2 = nk == 2 and mr == full * L and _loadn(d, 2 * full)   # A of 2 k contiguous
    b2 = [nk == 2 and _loadn(d, 2 * v) for _ in range(npb)]
    body = step(["ap"] + [f"bp{p}" for p in range(npb)])
    ws2 = {}
    for p in range(npb):
        if b2[p]:
            body.append(f"const {_f(d['vecn'], n=2 * v)} wb{p} = "
                        f"{_f(d['loadn'], n=2 * v, p=f'bp{p}')};")
            body.append(f"bp{p} += {2 * nr}u;")
            ws2[p] = [_f(d["val"], t=f"wb{p}", i=c) for c in range(2 * v)]
    if a2:
        body.append(f"const {_f(d['vecn'], n=2 * full)} xa = "
                    f"{_f(d['loadn'], n=2 * full, p='ap')};")
        body.append(f"ap += {2 * mr}u;")
    for q in range(nk):
        if q and not a2:
            body += step(["ap"])
        sfx = f"_{q}" if nk > 1 else ""
        if a2:
            xa = [_f(d["val"], t="xa", i=q * full + g) for g in range(full)]
        elif _loadn(d, full):
            body.append(f"const {_f(d['vecn'], n=full)} xa{sfx} = "
                        f"{_f(d['loadn'], n=full, p='ap')};")
            xa = [_f(d["val"], t=f"xa{sfx}", i=g) for g in range(full)]
        else:
            body += [f"const {vec} xa{g}{sfx} = " + _f(d["load"], p=f"ap + {g * L}u") + ";"
                     for g in range(full)]
            xa = [f"xa{g}{sfx}" for g in range(full)]
        body += [f"const {vec} x{r}{sfx} = " + _f(d["bcast"], p=f"ap + {r}u") + ";"
                 for r in range(full * L, mr)]
        if not a2:
            body.append(f"ap += {mr}u;")
        for p in range(npb):
            if b2[p]:
                ws = ws2[p][q * v:(q + 1) * v]
            elif _loadn(d, v):
                body.append(f"const {_f(d['vecn'], n=v)} wb{p}{sfx} = "
                            f"{_f(d['loadn'], n=v, p=f'bp{p}')};")
                ws = [_f(d["val"], t=f"wb{p}{sfx}", i=c) for c in range(v)]
            else:
                body += [f"const {vec} wb{p}_{c}{sfx} = " +
                         _f(d["load"], p=f"bp{p} + {c * L}u") + ";" for c in range(v)]
                ws = [f"wb{p}_{c}{sfx}" for c in range(v)]
            if not b2[p]:
                body.append(f"bp{p} += {nr}u;")
            for c in range(v):
                for r, row in enumerate(accs):
                    x = row[p * v + c]
                    body.append(f"{x} = " + (
                        _f(d["fma_lane"], a=xa[r // L], b=ws[c], c=x, lane=r % L)
                        if r < full * L else _f(d["fma"], a=f"x{r}{sfx}", b=ws[c], c=x)) + ";")
    return body


def _k_loop_lanes_rows(o, d, ind, accs, pre, bvec, arow, v):
    """tile_k_loop with A rows contiguous in k: k in steps of L, one vector of A per row, L
    FMAs by lane per accumulator and step; leaves k at the first of the k % L rest (the
    caller's broadcast loop continues from it)."""
    vec, L = d["vec"], d["lanes"]
    o.append(f"{ind}size_t k = 0;")
    o.append(f"{ind}for (; k + {L}u <= kc; k += {L}u) {{")
    i2 = ind + "    "
    o.extend(i2 + ln for ln in pre)
    for r in range(len(accs)):
        o.append(f"{i2}const {vec} xa{r} = " + _f(d["load"], p=arow(r)) + ";")
    for q in range(L):
        kq = f"k + {q}u" if q else "k"
        _b_vectors(o, i2, vec, accs, v, lambda p, c: bvec(p, c, kq),
                   lambda r, x: _f(d["fma_lane"], a=f"xa{r}", b="w", c=x, lane=q))
    o.append(f"{ind}}}")


def chain_sums(d: dict, vectors: int) -> str:
    """The declaration of tile_chains' stack tile ``ps`` for a kernel whose column steps hold
    at most ``vectors`` accumulators, at the top of the kernel: zeroed once, so compilers see
    it initialized (gcc -O2's -Wmaybe-uninitialized) at no cost per chain."""
    return f"    float ps[{vectors * d['lanes']}] = {{0}};"


def tile_chains(o: list, d: dict, ind: str, accs: list, masked: bool, guard: bool, ks: int,
                k_loop) -> None:
    """The K loop and tile_partial of a micro-kernel column step whose K block of kc holds
    several chains of ks products: each chain summed from zero in registers (k_loop(ind, k0,
    k1) appends the K loop of [k0, k1)) and added to the partial sums, which wait between
    chains in the stack tile ``ps`` (chain_sums, at the kernel's top; full vectors: lanes past
    n never reach Y) rather than in Y's rows, ldy apart (for N a multiple of 1024 in one L1
    set and 4 KiB apart: up to 6% of a GEMM's time, docs/PERFORMANCE.md). The first chain
    starts from Y's partial sums (a later K block); the last chain's sums stay in the
    registers for the caller's epilogue and store. The same roundings as K blocks of ks
    (chains from +0, added in order: tile_partial), with K blocks as long as the cache allows
    (fewer passes over Y and calls; gemm/call.py k_blocks). ks = 0: one chain over the block."""
    if not ks:
        k_loop(ind, "0", "kc")
        tile_partial(o, d, ind, accs, masked, guard)
        return
    i2 = ind + "    "
    L = d["lanes"]
    flat = [x for row in accs for x in row]
    ps = lambda i: f"ps + {i * L}u"   # noqa: E731
    o.append(f"{ind}for (size_t ks0 = 0;;) {{")
    o.append(f"{i2}const size_t ks1 = kc - ks0 > {ks}u ? ks0 + {ks}u : kc;")
    k_loop(i2, "ks0", "ks1")
    o.append(f"{i2}if (ks0) {{")
    o += [f"{i2}    {x} = {d['add']}({_f(d['load'], p=ps(i))}, {x});" for i, x in enumerate(flat)]
    o.append(f"{i2}}} else")
    tile_partial(o, d, i2, accs, masked, guard)
    o.append(f"{i2}if (ks1 == kc) break;")
    o += [f"{i2}" + _f(d["store"], p=ps(i), v=x) + ";" for i, x in enumerate(flat)]
    _zero(o, d, i2, accs)
    o.append(f"{i2}ks0 = ks1;")
    o.append(f"{ind}}}")


def tile_store(o: list, d: dict, ind: str, accs: list, masked: bool) -> None:
    """Store the accumulators to Y (masked: only the lanes before n)."""
    L = d["lanes"]
    for r, row in enumerate(accs):
        for c, x in enumerate(row):
            if masked:
                o.append(f"{ind}if (nc > {c * L}u) " + _f(d["mstore"], p=yptr(r, c, L),
                                                         m=f"m{c}", v=x) + ";")
            else:
                o.append(f"{ind}" + _f(d["store"], p=yptr(r, c, L), v=x) + ";")


def column_loops(o: list, body, np_: int, nr: int, half: int = 0) -> None:
    """The column walk of a micro-kernel: np_ panels at a time, then one panel, then a masked
    tail; body(panels, masked, indent) appends one step; closes the function. half (the
    lanes of one vector): a tail of at most that many columns runs on one vector per row,
    body(1, True, indent, 1), rather than on the whole panel's."""
    g = np_ * nr
    o.append(f"    for (; j + {g}u <= n; j += {g}u) {{")
    body(np_, False, "        ")
    o.append("    }")
    if np_ > 1:
        o.append(f"    for (; j + {nr}u <= n; j += {nr}u) {{")
        body(1, False, "        ")
        o.append("    }")
    if half:
        o.append(f"    if (j < n && n - j <= {half}u) {{")
        body(1, True, "        ", 1)
        o.append("    } else if (j < n) {")
    else:
        o.append("    if (j < n) {")
    body(1, True, "        ")
    o.append("    }")
    o.append("}")
