"""C text of the SIMD GEMM (float32): AVX2+FMA, AVX-512F and NEON register-blocked
micro-kernels, the blocked driver and the fused tile epilogue. Used by gemm.py / matmul.py
when the target lists the kernel variant (``kernels: [avx2, ...]`` in configs/targets/*.yaml).

Layout (GotoBLAS/BLIS-style, our own code):

* B is packed in column panels of NR = 2 vectors (16 floats for AVX2, 32 for AVX-512, 8 for
  NEON; 1 or 3 vectors for narrow N, see panel_vectors),
  ``Bp[(p*K + k)*NR + j] = B[k, p*NR + j]``, zero past N (gemm.pack_b, at compile time for
  constant weights). A K block [pc, pc+kc) of a panel is contiguous: no repacking per block.
* A is read in place, row-major with unit stride along k (``A[i*lda + k]``): the mr row
  streams prefetch well, and the kernels reach ~95% of the FMA peak at 512^3 (AVX2 and
  AVX-512, AMD Zen 5) without packing A into MR-row panels, so A is not packed; a transposed
  A is first transposed into step scratch by the emitter. Except on ISAs whose description
  has ``pack_a`` (NEON): GEMMs of at least pack_a rows and pack_n columns pack each M block
  of a K block into scratch (pack_a_text: row tiles of pack_a rows, k-major, once per K block
  when M fits one M block), and the packed-A kernels read the A of one k and a panel's B row
  with one multi-vector load each (NEON 12 x 8: LD1 of 3, LD1 of 2, 24 FMLA by element and
  the loop, 28 instructions per 96 multiply-adds, against 80 per 256 for 8 x 8 with A rows
  in place; the 4 x 4 packing costs ~1.2 instructions per element of A, which pays from
  ~40 columns on).
* Loops: K blocks of KC (partial sums stay in Y between blocks), M blocks of MC rows, column
  blocks of JB (the B block kc x JB stays in L1/L2 while the row tiles stream), row tiles of
  MR rows. A row tile runs the micro-kernel for its row count mr (1..MR, no zero-padded
  rows): mr x NR accumulators in registers; kernels with few rows process np adjacent panels
  at once so that at least ~8 independent FMA chains hide the FMA latency (1 row: 4 panels).
  With a single row tile (M < MR) there is no B reuse to block for: the column block is all
  of N, so the 1- and 2-row kernels can take their panel groups.
* Edges: the last panel of N is handled with masked loads/stores (lanes past N are never
  touched); rows are exact (one kernel per row count); K is a loop bound.
* Epilogue: after the last K block of a tile, while the tile is in L1, ``y = act(alpha * y +
  beta * C(i, j))`` (activation from kernels/vmath/act.py; C read through strides, NULL when absent).

Rounding: within a K block every output element is one chain of fused multiply-adds in
ascending k, ``acc = fma(a[i,k], b[k,j], acc)`` starting from +0 (NEON's FMLA by element, k
in steps of 4, computes the same chain); each later block's chain is added to the partial sum
in Y (gemm/tile.py tile_partial). K blocks of equal length up to kc; on x86 (schedule ks)
each K block is several chains of equal length up to ks = 32 (gemm/tile.py tile_chains), whose
sums are added to Y one after the other: the roundings of K blocks of ks, with long K
blocks for the cache (call.k_blocks; docs/ACCURACY.md). This differs from the
generic kernel (separate multiply and add, two roundings per step) and from onnxruntime by
rounding only: relative differences of a few ulp times sqrt(ks + K / ks) on well-conditioned
data, inside the test tolerance rtol 1e-4 / atol 1e-5 (long K needs a looser atol, as for
generic). NaN/Inf propagate as IEEE arithmetic (Inf * 0 = NaN), the same as
the generic kernel; zero padding of B never meets a real output element.
"""
from __future__ import annotations

import hashlib
import math

from ..isa.registry import ISAS, include_line, table
from ..isa.x86 import lane_mask_table
from .epilogue import epilogue, flit, register_clamp
from .pack import pack_a_text
from .clamp import tile_clamp
from .tile import (KU, V, _f, chain_sums, column_loops, tile_chains, tile_k_loop, tile_open,
                   tile_partial, tile_store)

# ``nc``, columns per L2 block of B (nc x kc floats): all of M passes each block while it is
# in L2. With the N panels inside the M blocks instead, a B larger than L2 was streamed from
# memory once per M block: [128 x 768] @ [768 x 3072] (9 MB of weights) took 3.3 ms
# interleaved with onnxruntime, which reads them once (2.9 ms). 512 x 256 floats: 512 KB
# (avx512 CPUs have 1-2 MB of L2); 256 x 256: 256 KB (AVX2 cores from Haswell on: 256 KB and
# more). The values are in each ISA's description (isa/<name>/__init__.py, gemm nc).

# kernels of several panels at once (few rows: B is read once, from L2 or further) prefetch
# their panels' rows this many k ahead. benchmarks.gemm_kernels (B = 1 MB in L2, Intel Xeon),
# x86-avx512, us: M = 2 12.0 -> 9.25 (16 ahead 9.4, 32 9.7, 64 10.7), 4 12.6 -> 11.2, 8 26.1
# -> 23.6, 1 and 16 unchanged. Per ISA, ``pf_rows``: only kernels of at least this many rows
# prefetch so (one row streams each weight once, which the hardware prefetchers follow; the
# prefetches take load slots): AMD EPYC (Zen 4), interleaved with onnxruntime, us, prefetch /
# none: x86-avx512 M = 1 16.8 / 15.1 (8 prefetches per k for 8 loads), M = 4, 8, 16 the same;
# x86-avx2 (4 per k) M = 1 15.7 / 15.9, so it keeps them.
PF_AHEAD = 8

# ``pf_next``: the cache level (_MM_HINT_*) of a one-panel kernel's prefetch of the next panel,
# a whole kernel call ahead. T1 (L2) on avx512: the next panel comes from L3 without holding
# one of L1's few miss buffers for the whole trip, and a B already in L2 is left to the
# loads. Intel Xeon, x86-avx512, interleaved with onnxruntime, time T1 / T0 (two
# rounds): GEMM 8 x 512 x 512 0.93-0.94, 16 x 512 x 512 0.95-0.97, 512^3 0.97-0.98,
# [128 x 768] @ [768 x 3072] 0.96-0.97, ResNet-18 / MobileNetV2 / transformer 0.99, DS-CNN and
# MobileNetV1 1.00, ResNet-8 1.00-1.01 (its weights stay in L2; with the conv tile GEMM's
# prefetch as well: 1.01); x86-avx512-amx's schedule:
# 0.97-1.00. On x86-avx2 it gained nothing (0.98-1.02), so T0 stays there.

# per instruction set: C spellings and default schedule parameters (isa/<name>.py)
ISA = table("gemm")


def nr_of(isa: str, v: int = V) -> int:
    """Columns per B panel: v vectors (default V = 2)."""
    return v * ISA[isa]["lanes"]


def panel_vectors(isa: str, n: int) -> int:
    """Vectors per B panel for a GEMM of n columns: V = 2 unless fewer columns go to waste:
    1 when n fits in one vector (N = 16 on avx512: half of a 2-vector panel was zeros), 3 when
    3-vector panels pad n less (N = 24 on avx2, 48 or 144 on avx512)."""
    lanes = ISA[isa]["lanes"]
    if n <= lanes:
        return 1
    pad = lambda v: -(-n // (v * lanes)) * v * lanes   # noqa: E731
    return 3 if pad(3) < pad(V) else V


# most rows a micro-kernel of v vectors per panel keeps: its accumulators plus the v B vectors
# and a broadcast fit in the registers (avx512: 32, avx2: 16)
MR_MAX = table("gemm_mr_max")


def panels_at_once(mr: int, isa: str, v: int = V) -> int:
    """Adjacent panels a kernel of mr rows processes together: at least ~8 accumulators
    (2 * mr per panel) and two panels as long as their accumulators fit in the ISA's
    ``acc_max`` (3/4 of the registers: 24 of avx512's 32, 12 of avx2's 16). Measured on GEMM
    Mx512x512 (avx512, weights from L3): M = 3 / 4 / 5 / 6 from 17.0 / 16.2 / 16.7 / 17.9 us
    with one panel to 13.4 / 13.3 / 13.4 / 14.9 us with two; avx2 M = 3 from 19.7 to 15.5 us
    (12 accumulators of its 16 registers). Panels of v != 2 vectors: enough panels for 8
    accumulators, within acc_max."""
    acc_max = ISA[isa]["acc_max"]
    if v != V:
        acc = mr * v
        return max(1, min(-(-8 // acc), acc_max // acc))
    if mr == 1:
        return 4
    return 2 if 2 * mr * V <= acc_max else 1


WIDE = 1 << 16     # column block of a GEMM with a single row tile (M < MR): no blocking


def schedule(isa: str, overrides: dict | None = None, v: int = V) -> dict:
    """Tile parameters (mr, kc, mc, jb, nc) of an ISA, with overrides (target yaml / node), and
    prefetch_kb: the micro-kernels prefetch the next panel when the packed B is larger. v:
    vectors per B panel (panel_vectors); mr counts rows of 2-vector panels and scales to keep
    the accumulators (avx512 12 rows -> 24 of 1 vector, 8 of 3)."""
    s = {k: ISA[isa][k] for k in ("mr", "kc", "ks", "mc", "jb", "nc", "prefetch_kb", "pack_a")
         if k in ISA[isa]}
    for k, val in (overrides or {}).items():
        if k in s:
            s[k] = int(val)
    nr = nr_of(isa, v)
    if s.get("pack_a"):
        # the packed-A tiles' rows (call.gemm_call): pack_a scaled as mr, or an mr override
        # (pack_a: 0 turns packing off)
        mr = int(overrides["mr"]) if "mr" in (overrides or {}) else s["pack_a"] * V // v
        s["pack_a"] = max(1, min(mr, MR_MAX[isa][v]))
    s["mr"] = max(1, min(s["mr"] * V // v, MR_MAX[isa][v]))
    s["v"] = v
    s["kc"] = max(1, s["kc"])
    if "ks" in s:
        s["ks"] = max(1, min(s["ks"], s["kc"]))
    s["mc"] = max(s["mr"], s["mc"] // s["mr"] * s["mr"])
    s["jb"] = max(nr, s["jb"] // nr * nr)
    s["nc"] = max(s["jb"], s["nc"] // s["jb"] * s["jb"])
    return s


def _header(ctx, isa: str) -> None:
    ctx.helper(f"gemm_{isa}.0.include", include_line(isa))
    if not ISAS[isa].masked:      # the tails' lane-mask vectors (the ISA's gemm "mask")
        ctx.helper(f"gemm_{isa}.1.mtab", lane_mask_table(isa, f"aicc_sg_{isa}_mtab"))


def _par(e: str) -> str:
    """A C expression in parentheses unless it is a name."""
    return e if e.isidentifier() else f"({e})"


def _vtag(v: int) -> str:
    """Name suffix of kernels with v != V vectors per panel."""
    return "" if v == V else f"v{v}"


def _k_tag(packed: bool, kmul: int) -> str:
    """Name tag of the packed-A kernels without a K rest (every kc a multiple of KU)."""
    return f"_k{KU}" if packed and kmul % KU == 0 else ""


def s_tag(ks: int) -> str:
    """Name tag of the kernels summing chains of ks products (0: none)."""
    return f"s{ks}" if ks else ""


def chain_of(sched: dict) -> int:
    """The chains of products the micro-kernels sum within a K block (gemm/tile.py
    tile_chains): the schedule's ks when shorter than its kc and A is read in place, else 0
    (one chain per block)."""
    ks = sched.get("ks", 0)
    return ks if 0 < ks < sched["kc"] and not sched.get("pack") else 0


def _kernel_text(isa: str, mr: int, prefetch: bool = True, v: int = V,
                 packed: bool = False, kmul: int = 1, ks: int = 0) -> tuple:
    """A micro-kernel of mr rows; packed: A packed k-major (pack_a_text: A(r, k) = a[k * mr +
    r], lda unused), read by tile_k_loop's "packed" layout, else A rows in place. kmul: every
    kc it is called with is a multiple of kmul (packed: a multiple of tile.KU leaves out the
    K loop's rest). ks: chains of ks products within a K block (gemm/tile.py tile_chains;
    0: one chain per block; A rows in place only)."""
    assert not (ks and packed)
    d = ISA[isa]
    L, vec, nr = d["lanes"], d["vec"], nr_of(isa, v)
    np_ = panels_at_once(mr, isa, v)
    ku = KU if _k_tag(packed, kmul) else 1
    name = (f"aicc_sg_{isa}_k{mr}{'' if prefetch else 'np'}{_vtag(v)}{'pa' if packed else ''}"
            f"{_k_tag(packed, kmul)}{s_tag(ks)}")
    o = []
    what = f"A(r, k) = a[k * {mr} + r] (packed)" if packed else "A(r, k) = a[r * lda + k]"
    o.append(f"/* {isa} micro-kernel, {mr} row(s): Y[0:{mr}, 0:n] (+)= A[0:{mr}, 0:kc] @ B, B in "
             f"panels of {nr}\n * (panel p at b + p*bs, row k at +k*{nr}); "
             f"{np_} panel(s) at once, the last partial panel masked.\n"
             + (f" * {what}.\n" if packed else "") +
             " * acc != 0: add to the partial sums already in Y (a later K block). */")
    o.append(f"static void {name}(size_t kc, const float *restrict a, size_t lda,")
    o.append("    const float *restrict b, size_t bs, float *restrict y, size_t ldy, size_t n, "
             "int acc,")
    o.append("    const float *restrict bias, const float *restrict lohi)")
    o.append("{")
    if packed:
        o.append("    (void)lda;" + (" (void)ldy;" if mr == 1 else ""))
    else:
        for r in range(mr):
            o.append(f"    const float *restrict a{r} = a + {r}u * lda;" if r else
                     "    const float *restrict a0 = a;")
        if mr == 1:
            o.append("    (void)lda; (void)ldy;")
    o.append("    size_t j = 0;")
    if ks:
        o.append(chain_sums(d, mr * np_ * v))

    def body(np_b: int, masked: bool, ind: str):
        cols = np_b * v
        accs = [[f"c{r}_{c}" for c in range(cols)] for r in range(mr)]
        tile_open(o, d, ind, nr, np_b, accs, masked)
        # one panel, full: the same rows of the next panel (each of its cache lines: 2 on
        # avx512, where one line per row left [128 x 768] @ [768 x 3072] 3.1 ms against 2.7 ms
        # interleaved with onnxruntime), toward L1 (avx2) or L2 (avx512: ISA pf_next) while
        # this one computes (weights cold in L3 after the rest of a network ran); integer
        # arithmetic: the last panel's "next" is past the array, a prefetch there is
        # harmless. Only for a B larger than prefetch_kb (schedule; default 0: always). Intel
        # Xeon (to L1), interleaved with onnxruntime: 512^3 (1 MB of B) 1.25 ms
        # without, 1.32 with; [128 x 768] @ [768 x 3072] (9 MB) 3.2 with, 3.3-3.4 without;
        # MobileNetV2 (pointwise weights <= 1 MB, cold) ratio 0.91 with, 0.94 without.
        # Several panels at once (few rows): their own rows PF_AHEAD k ahead instead, to L1.
        ahead, hint = ("bs", d["pf_next"]) if np_b == 1 else (f"{PF_AHEAD * nr}u", "T0")
        pre = [_f(d["prefetch"], p=f"(uintptr_t)(b{p} + k * {nr}u + {q}u) + {ahead} * "
                                  "sizeof(float)", hint=hint) + ";"
               for p in range(np_b) for q in range(0, nr, 16)] \
            if prefetch and not masked and (np_b == 1 or mr >= d["pf_rows"]) else []
        # B panels are zero padded past N: plain loads in the masked step too
        bvec = lambda p, c, k="k": _f(d["load"], p=f"b{p} + {_par(k)} * {nr}u + {c * L}u")  # noqa
        if packed:
            # without prefetches: the K loop on pointers, unrolled (tile.py)
            tile_k_loop(o, d, ind, accs, [f"const float *restrict ak = a + k * {mr}u;"] + pre,
                        bvec, lambda r: f"ak + {r}u", v, a_layout="packed",
                        bptr=lambda p: f"b{p} + k * {nr}u",
                        stream=None if pre else ("a", lambda p: f"b{p}", ku),
                        registers=ISAS[isa].registers)
            tile_partial(o, d, ind, accs, masked, guard=True)
        else:
            tile_chains(o, d, ind, accs, masked, True, ks, lambda i, k0, k1: tile_k_loop(
                o, d, i, accs, pre, bvec, lambda r: f"a{r} + k", v, a_layout="rows",
                registers=ISAS[isa].registers, k0=k0, k1=k1))
        # fused epilogue (the last K block, see driver): + bias[j] per column, then the
        # clamp min(hi, max(lo, v)) (NaN passes, as the activation table's Relu / Clip)
        add = d["add"]
        o.append(f"{ind}if (bias) {{")
        for c in range(cols):
            bp = f"bias + j + {c * L}u"
            ld = (f"nc > {c * L}u ? " + _f(d["mload"], p=bp, m=f"m{c}") + f" : {d['zero']}"
                  if masked else _f(d["load"], p=bp))
            o.append(f"{ind}    {{ const {vec} bv = {ld};")
            for r in range(mr):
                o.append(f"{ind}      {accs[r][c]} = {add}({accs[r][c]}, bv);")
            o.append(f"{ind}    }}")
        o.append(f"{ind}}}")
        o.append(f"{ind}if (lohi)")
        tile_clamp(o, d, ind + "    ", accs)
        tile_store(o, d, ind, accs, masked)

    column_loops(o, body, np_, nr)
    return name, "\n".join(o)


def row_counts(m: int, sched: dict) -> list:
    """The row-tile sizes a GEMM of m rows meets: MR for full tiles and m % MR (MC is a
    multiple of MR, so every M block ends on the same remainder)."""
    mr = sched["mr"]
    rows = {mr} if m >= mr else set()
    if m % mr:
        rows.add(m % mr)
    return sorted(rows)


def kernels(ctx, isa: str, rows, prefetch: bool = True, v: int = V,
            packed: bool = False, kmul: int = 1, ks: int = 0) -> dict:
    _header(ctx, isa)
    names = {}
    for mr in rows:
        name, text = _kernel_text(isa, mr, prefetch, v, packed, kmul, ks)
        ctx.helper(f"gemm_{isa}.2.k{mr:02d}{'' if prefetch else 'np'}{_vtag(v)}"
                   f"{'pa' if packed else ''}{_k_tag(packed, kmul)}{s_tag(ks)}", text)
        names[mr] = name
    return names


def step_rows(m: int, mr: int, cap: int, step: int) -> int:
    """mr (the balanced rows of m's tiles, <= cap), or mr rounded up to a multiple of step
    (the lanes of a packed A's vectors: rows past the last full vector are broadcast one at
    a time) when that costs fewer instructions per k and panel by the estimate 2 r + 4 +
    r % step for a tile of r rows (its FMAs, loads and loop, one broadcast per row past the
    vectors; NEON): 64 rows as 12 x 5 + 4 rather than 11 x 4 + 10 x 2, 49 as 12 x 4 + 1
    rather than 10 x 4 + 9."""
    up = min(cap, -(-mr // step) * step)
    if step <= 1 or up == mr:
        return mr

    def cost(r):
        return sum(2 * t + 4 + t % step for t in [r] * (m // r) + [m % r] * (m % r > 0))
    return up if cost(up) < cost(mr) else mr


POST_AFFINE = """\
/* Y(r, j) = Y(r, j) * mul[j] + add[j] on the mr x nc tile at y (row stride ldy): a batch
 * norm after the GEMM's activation (pass fuse-post-affine), a multiply and then an add as the
 * BatchNormalization node rounds them (bundles compile as C99: no contraction into an FMA). */
static void aicc_sg_post_affine(float *restrict y, size_t ldy, size_t mr, size_t nc,
    const float *restrict mul, const float *restrict add)
{
    for (size_t r = 0; r < mr; ++r) {
        float *restrict yr = y + r * ldy;
        for (size_t j = 0; j < nc; ++j)
            yr[j] = yr[j] * mul[j] + add[j];
    }
}"""


def driver(ctx, isa: str, sched: dict, act, params, m: int, fused: bool = False,
           affine: bool = False) -> str:
    """The blocked GEMM driver for this ISA/schedule/epilogue and the row tiles of an
    m-row GEMM (only those kernels are emitted); returns its name. ``fused``: alpha = beta =
    1, C absent or one value per column (crs = 0, ccs = 1) and a register clamp activation:
    the kernels add C and clamp in registers after the last K block (the same roundings as
    the epilogue function: y + c, then the clamp), no epilogue pass. sched ``pack``: each
    M block of each K block is packed (pack_a_text) into the scratch Ap (one more argument,
    min(M, mc) x min(K, kc) floats) and run by the packed-A kernels. ``affine``: two more
    arguments, pm and pa, a per-column multiply and add applied to each tile after its
    activation (POST_AFFINE)."""
    mr_max, kc, mc, jb, nc = sched["mr"], sched["kc"], sched["mc"], sched["jb"], sched["nc"]
    v = sched.get("v", V)
    nr = nr_of(isa, v)
    packed = bool(sched.get("pack"))
    rows = row_counts(m, sched)
    prefetch = bool(sched.get("prefetch", True)) and bool(ISA[isa]["prefetch"])
    # ISA pf_first: only the first row tile of the first M block runs the prefetching kernel,
    # the first to read each B panel of a K block (from L3 after the rest of a network ran);
    # the later tiles and M blocks find the block in L2 (NC) and its panel in L1, where the
    # prefetches only took load slots. Intel Xeon, interleaved with onnxruntime,
    # x86-avx512, time with / without: GEMM 16 x 512 x 512 0.90, 512^3 0.97, transformer 0.97,
    # DS-CNN 0.975-1.00, MobileNetV2 0.99, MobileNetV1 0.99, ResNet-18 and [128 x 768] @
    # [768 x 3072] 1.00-1.01 (GEMM 8, one row tile, is unchanged). On x86-avx2 (prefetches to
    # L1) GEMM 16 1.05 and MobileNetV2 1.02, so it keeps them on every tile.
    pf_first = prefetch and m > mr_max and ISA[isa]["pf_first"]
    kmul = sched.get("kmul", 1)      # every K block a multiple of it (gemm_call)
    chain = chain_of(sched)
    ks = kernels(ctx, isa, rows, prefetch and not pf_first, v, packed, kmul, chain)
    if pf_first:
        k_first = kernels(ctx, isa, [mr_max], True, v, packed, kmul, chain)[mr_max]
    clamp = register_clamp(act, params) if fused else None
    if clamp is not None:
        lo, hi = clamp
        has_clamp = (lo, hi) != (-math.inf, math.inf)
        epi = "fused_" + (f"{hashlib.sha1(f'{lo}:{hi}'.encode()).hexdigest()[:8]}"
                          if has_clamp else "bias")
        pre = "    (void)alpha; (void)crs; (void)ccs; (void)beta; (void)epi;\n" + (
            f"    static const float lohi[2] = {{ {flit(lo)}, {flit(hi)} }};\n"
            if has_clamp else "")
        tail = f"last && C ? C + jc : NULL, last ? {'lohi' if has_clamp else 'NULL'} : NULL"
        post = ""
    else:
        epi = epilogue(ctx, act, params)
        pre, tail = "", "NULL, NULL"
        post = f"""
                        if (last && epi)
                            {epi}(y, N, mr, nc, alpha, C ? C + i * crs + jc * ccs : NULL, crs,
                                ccs, beta);"""
        epi = epi[len('aicc_sg_'):]
    aff_tile = aff_args = ""
    if affine:
        ctx.helper("gemm_simd.3.aicc_sg_post_affine", POST_AFFINE)
        aff_tile = """
                        if (last)
                            aicc_sg_post_affine(y, N, mr, nc, pm + jc, pa + jc);"""
        aff_args = ",\n    const float *restrict pm, const float *restrict pa"
    name = (f"aicc_sg_{isa}_m{mr_max}k{kc}c{mc}j{jb}n{nc}{'' if prefetch else 'np'}"
            f"{'pf1' if pf_first else ''}{_vtag(v)}{'pa' if packed else ''}"
            f"{_k_tag(packed, kmul)}{s_tag(chain)}_r"
            f"{'_'.join(map(str, rows))}_{epi}{'_aff' if affine else ''}")
    cases = "\n".join(f"                        case {r}u: {ks[r]}(kc, a, lda, b, bs, y, N, nc, "
                      f"acc, {tail}); break;" for r in rows)
    first = (f"                        if (ic == 0 && ir == 0) {k_first}(kc, a, lda, b, bs, y, "
             f"N, nc, acc, {tail});\n                        else\n" if pf_first else "")
    if packed:
        pname, ptext = pack_a_text(isa, mr_max)
        ctx.helper(f"gemm_{isa}.1.{pname}", ptext)
        # one M block (M <= mc): its packed A serves every column block of N
        pack_line = (f"                if (n0 == 0 || M > {mc}u)\n"
                     f"                    {pname}(A + ic * lda + pc, lda, mc, kc, {mr_max}u, Ap);"
                     "\n")
        a_tile = "Ap + ir * kc"
    else:
        pack_line, a_tile = "", "A + i * lda + pc"
    pack_doc = ("\n * Each M block of a K block is packed into Ap (min(M, mc) x min(K, kc) floats) "
                "for the\n * packed-A kernels." if packed else "")
    # the first panel toward L1 (ISAs without a prefetch spelling leave it to the hardware)
    first_panel = (f"    for (size_t q = 0; q < bs && q < 4096u; q += 16u)     /* the first panel, "
                   f"toward L1 */\n        {_f(ISA[isa]['prefetch'], p='Bp + q', hint='T0')};\n"
                   if ISA[isa]["prefetch"] else "")
    kdesc = f"{kc} (in chains of {chain})" if chain else f"{kc}"
    code = f"""\
/* {isa} GEMM: Y[M,N] = act(alpha * (A @ B) + beta * C). A(i, k) = A[i*lda + k]; B packed in
 * panels of {nr} (gemm.pack_b layout); C(i, j) = C[i*crs + j*ccs] or NULL; Y dense. Blocks:
 * K by {kdesc}, N by {nc} (all of M passes one such block of B while it is in L2, so B is read
 * once per K block), M by {mc}, N by {jb}, row tiles of {mr_max} and M % {mr_max} (only row kernels
 * {", ".join(map(str, rows))} exist: M must leave one of them). The epilogue runs on each tile
 * after its last K block (when epi != 0). K >= 1.{pack_doc} */
static void {name}(size_t M, size_t N, size_t K, const float *restrict A, size_t lda,
    const float *restrict Bp, float alpha, const float *restrict C, size_t crs, size_t ccs,
    float beta, float *restrict Y, int epi{', float *restrict Ap' if packed else ''}{aff_args})
{{
{pre}    const size_t bs = K * {nr}u;
{first_panel}    for (size_t pc = 0; pc < K; pc += {kc}u) {{
        const size_t kc = K - pc < {kc}u ? K - pc : {kc}u;
        const int acc = pc > 0, last = pc + kc == K;
        for (size_t n0 = 0; n0 < N; n0 += {nc}u) {{
            const size_t n1 = N - n0 < {nc}u ? N : n0 + {nc}u;
            for (size_t ic = 0; ic < M; ic += {mc}u) {{
                const size_t mc = M - ic < {mc}u ? M - ic : {mc}u;
{pack_line}                for (size_t jc = n0; jc < n1; jc += {jb}u) {{
                    const size_t nc = n1 - jc < {jb}u ? n1 - jc : {jb}u;
                    const float *restrict b = Bp + (jc / {nr}u) * bs + pc * {nr}u;
                    for (size_t ir = 0; ir < mc; ir += {mr_max}u) {{
                        const size_t i = ic + ir, mr = mc - ir < {mr_max}u ? mc - ir : {mr_max}u;
                        const float *restrict a = {a_tile};
                        float *restrict y = Y + i * N + jc;
{first}                        switch (mr) {{
{cases}
                        default: break;
                        }}{post}{aff_tile}
                    }}
                }}
            }}
        }}
    }}
}}"""
    ctx.helper(f"gemm_simd.4.{name}", code)
    return name
