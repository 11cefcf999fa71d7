"""The GEMM kernel of Gemm and MatMul: plan, call line, epilogue (ops/gemm.py, ops/matmul.py).

Kernel: ``Y[M,N] = alpha * (A @ B) + beta * C``. A is read through (row, col) strides, so a
transposed A costs nothing; B is packed into column panels of NB (4, 8, 16 or 32) columns,
``Bp[p][k][j] = B[k, p*NB + j]`` zero-padded past N, at compile time when B is a constant
(``ctx.const``) or by a packing helper into step scratch when it is computed at run time. The
kernel keeps a 4 x NB block of accumulators in a local array and walks k in ascending order:
for each k, ``acc[r][:] += a[i+r, k] * Bp[p][k][:]``, a fixed-length loop over contiguous
memory that the C compiler vectorizes at -O2 (i-k-j order, blocked). C is optional and read
through strides (0 where it broadcasts), which also carries MatMul's fused bias.

Accumulation is in the output dtype (float32 or float64), k ascending in blocks of 64
summed apart and added in order (gemm/portable.py KB), so results differ from onnxruntime's
(blocked, FMA) only by rounding. A fused
activation (``aicc_act``) is applied in a second pass over the output, after alpha/beta/C.

NaN/Inf follow IEEE arithmetic: a NaN or Inf anywhere in row i of A or column j of B reaches
Y[i, j] (Inf * 0 = NaN included), as in a plain dot product. Empty operands: K == 0 gives
``Y = beta * C`` (or 0), M == 0 or N == 0 an empty output with no code.

Kernel variants (``gemm_plan``): the target's ``kernels:`` list, best first, picks the first
variant this module implements: ``avx512`` / ``avx2`` (float32, K > 0; kernels/gemm/simd.py: FMA
micro-kernels, K/M/N cache blocking, the bias/alpha/beta/activation epilogue applied to each
tile right after its last K block) or ``generic`` (the portable kernel above; float64 and
K == 0 always use it). Schedule parameters (mr, kc, mc, jb) come from the target's
``schedule: gemm:`` and a node's ``aicc_schedule`` attribute; ``aicc_kernel`` on a node
forces one variant of the target's list.

FMA contraction: the SIMD kernels round once per multiply-add (``fma(a, b, acc)``, k
ascending from +0 within each chain of ks products, or each K block of kc without ks, the
chains' sums added in order: gemm/tile.py tile_chains / tile_partial), the generic kernel
twice (multiply, then add: bundles compile with -std=c99, where GCC does not contract
``acc += a * b`` into an FMA; never -ffast-math). They differ from
each other and from onnxruntime (MLAS: FMA, K blocks of 128 summed apart; x86's chains are 32)
by rounding only: about sqrt(ks + K / ks) ulp of the sum of |a*b| terms, inside rtol 1e-4 /
atol 1e-5 for the tested sizes (K = 4099 needs atol 1e-4 for every variant). The SIMD
results depend on the chains (ks, else kc), not on the K blocks around them, the tile sizes or
the instruction set.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...emit_c.cwriter import c_literal, ctype
from ..isa.registry import ISAS, fpu_isa, isa_for
from ..move.copy import avx_helper, c_helper
from ..vmath.act import ACT, ACT_ATTRS, INT_OK, act_expr, fused_epilogue
from .portable import choose_nb, gemm_helper
from .simd import ISA, WIDE, driver, nr_of, panel_vectors, register_clamp, schedule
from .simd import step_rows
from .tile import KU


@dataclass(frozen=True)
class GemmPlan:
    """Kernel variant of one GEMM: isa None is the portable kernel; nb is the B panel width
    (the packing layout); sched the SIMD schedule (dict) or None."""
    isa: object
    nb: int
    sched: object = None


def gemm_plan(ctx, dt, n: int, k: int) -> GemmPlan:
    isa = isa_for(ctx, ISA) if np.dtype(dt) == np.float32 and k > 0 else None
    if isa is None:
        return GemmPlan(None, choose_nb(n))
    over = {**dict((ctx.target.schedule or {}).get("gemm") or {}),
            **dict(ctx.node.attrs.get("aicc_schedule") or {})}
    v = panel_vectors(isa, n)
    return GemmPlan(isa, nr_of(isa, v), schedule(isa, over, v))


def gemm_call(ctx, plan, dt, m, n, k, a, ars, acs, bp, y, alpha=1.0, c=None, crs=0, ccs=0,
              beta=1.0, post=None) -> None:
    """One call line of the kernel (pointer arguments are C expressions). The SIMD variants
    need acs == 1 (see a_rows) and apply the node's fused activation per tile, then post
    (SIMD only: the (mul, add) column vectors of a post-affine, ops/matmul.py)."""
    L = lambda v: c_literal(v, dt)  # noqa: E731
    cexpr = c if c is not None else "NULL"
    fpu = fpu_isa(ctx, dt) if plan.isa is None else None
    ctx.kernel = plan.isa or fpu or "generic"
    ctx.schedule = {**ctx.schedule, "nb": plan.nb, **(plan.sched or {})}
    if plan.isa is None:
        fn = gemm_helper(ctx, dt, plan.nb, ISAS[fpu].fpu if fpu else None, fpu or "")
        ctx(f"{fn}({m}u, {n}u, {k}u, {a}, {ars}u, {acs}u, {bp}, {L(alpha)},")
        ctx(f"    {cexpr}, {crs}u, {ccs}u, {L(beta)}, {y});")
        return
    assert acs == 1, "SIMD GEMM reads A rows with unit stride"
    act, params = fused_epilogue(ctx.node)
    sched = plan.sched
    d = ISA[plan.isa]
    if sched.get("pack_a") and m >= sched["pack_a"] and n >= d["pack_n"]:
        # A packed per block into row tiles of pack_a rows (gemm/pack.py pack_a_text): the
        # ISA's packed-A kernels read a k's A vectors with one load
        mr = sched["pack_a"]
        sched = {**sched, "pack": 1, "mr": mr, "mc": max(mr, sched["mc"] // mr * mr)}
    if m < sched["mr"]:
        sched = {**sched, "jb": WIDE, "nc": WIDE}   # one row tile: no column blocking
    elif sched["mc"] < m <= 2 * sched["mc"]:
        # one M block instead of a full one and a remainder: each M block streams all of B
        # (from L2 / L3 when B is large), A's block (<= 2 * mc rows x kc) still fits in L2
        # and equal row tiles (49 rows: 5 x 10 rather than 4 x 12 + a 1-row tile, whose
        # kernel has too few FMA chains on one panel)
        tiles = -(-m // sched["mr"])
        mr = step_rows(m, -(-m // tiles), sched["mr"], d.get("row_step", 1) if sched.get("pack")
                       else 1)
        sched = {**sched, "mr": mr, "mc": -(-m // mr) * mr}
    if m < FEW_TILES * sched["mr"] and sched.get("ks"):
        # few row tiles: K blocks of ks (one chain each), whose B block (ks x nc) each row
        # tile finds in L1, rather than long blocks streamed from L2 by every tile. x86-avx2,
        # thread CPU time against onnxruntime, GEMM 4 x 512 x 512: 0.75 with blocks of 32,
        # 0.92 with chains of 32 in blocks of 512
        sched = {**sched, "kc": sched["ks"]}
    sched = {**sched, **k_blocks(k, sched["kc"], sched.get("ks", 0))}
    fused = (alpha == 1.0 and beta == 1.0 and (c is None or (crs == 0 and ccs == 1))
             and register_clamp(act, params) is not None)
    sched = {**sched, "prefetch": k * n * 4 > sched["prefetch_kb"] * 1024}
    if sched.get("pack") and k % KU == 0 and sched["kc"] % KU == 0:
        sched["kmul"] = KU       # every K block a multiple of KU: kernels without a K rest
    fn = driver(ctx, plan.isa, sched, act, params, m, fused, affine=post is not None)
    epi = int(alpha != 1.0 or c is not None or act is not None)
    ap = ""
    if sched.get("pack"):
        ap = ", " + ctx.scratch(min(m, sched["mc"]) * min(k, sched["kc"]) * 4, "float", "apk")
    ctx(f"{fn}({m}u, {n}u, {k}u, {a}, {ars}u, {bp}, {L(alpha)},")
    pa = f", {post[0]}, {post[1]}" if post is not None else ""
    ctx(f"    {cexpr}, {crs}u, {ccs}u, {L(beta)}, {y}, {epi}{ap}{pa});")


# GEMMs of fewer row tiles than this take K blocks of the schedule's ks (gemm_call)
FEW_TILES = 4


def k_blocks(k: int, kc: int, ks: int = 0) -> dict:
    """kc (and ks) for a K of k: K blocks of equal length up to kc, K = 320 as 160 + 160
    rather than 256 + 64, whose short block stores and reloads every tile's partial sums for
    a quarter of the FMAs (MobileNetV2's 320 -> 1280 conv at 7x7, x86-avx2, C loop: 372 ->
    349 us). With chains of ks (gemm/tile.py tile_chains): chains of equal length up to ks,
    K blocks of equally many chains up to kc; ks 0 (one chain per block) when K fits one."""
    if not ks or ks >= kc:
        return {"kc": -(-k // -(-k // kc))} if k > kc else {}
    if k <= ks:
        return {"ks": 0}
    # long sums: chains doubled while that lowers ks + K / ks (the rounding steps of a sum, see
    # docs/ACCURACY.md; ties to the longer chain, which stores the partial sums less often):
    # 32 below K = 2048, 64 from there below 8192
    while 2 * ks <= kc and 2 * ks + k / (2 * ks) <= ks + k / ks:
        ks *= 2
    ks = -(-k // -(-k // ks))
    chains = -(-k // ks)
    per = max(1, kc // ks)
    return {"kc": ks * -(-chains // -(-chains // per)), "ks": ks}


def a_rows(ctx, plan, dt, m, k, a, ars, acs):
    """(A, row stride) with unit column stride for the SIMD kernels (float32): a transposed A
    (ars 1: a K x M matrix of row stride acs) is copied into step scratch first, by the AVX
    8 x 8 transposition of kernels/move/copy.py where the ISA describes vector moves, else
    its portable 4 x 4 one. Unchanged for the portable kernel."""
    if plan.isa is None or acs == 1 or m * k == 0:
        return a, ars, acs
    t = ctx.scratch(m * k * np.dtype(dt).itemsize, ctype(dt), "at")
    tr = avx_helper(ctx) if ISAS[plan.isa].move else c_helper(ctx, "float")
    ctx(f"{tr}({k}u, {m}u, {a}, {acs}u, {t}, {k}u);")
    return t, k, 1


def check_epilogue(node, dt) -> str | None:
    name, _ = fused_epilogue(node)
    if name is None:
        return None
    if name not in ACT:
        return f"fused activation {name!r} unknown"
    if dt.kind != "f" and name not in INT_OK:
        return f"fused activation {name} on {dt.name}"
    return None


def emit_epilogue(ctx, node, total: int, dt, plan=None, y: str | None = None) -> None:
    """Apply the fused activation (if any) to every output element (the SIMD kernels have
    already applied it per tile); y: the elements' C pointer expression (default: the output)."""
    name, params = fused_epilogue(node)
    if name is None or total == 0:
        return
    if plan is not None and plan.isa is not None:
        ctx(f"/* fused {name}: in the {plan.isa} GEMM tile epilogue */")
        return
    p = {**ACT_ATTRS.get(name, {}), **params}
    ct, y = ctype(dt), y or ctx.out[0]
    ctx(f"/* fused {name} */")
    with ctx.block(f"for (size_t e = 0; e < {total}u; ++e)"):
        ctx(f"const {ct} v = {y}[e];")
        ctx(f"{y}[e] = {act_expr(name, p, 'v', dt, ctx)};")


def batch_dims(sa, sb):
    """(batch shape of A, of B, of the output, M, K, N) with 1-D operands promoted."""
    a2 = (1,) + tuple(sa) if len(sa) == 1 else tuple(sa)
    b2 = tuple(sb) + (1,) if len(sb) == 1 else tuple(sb)
    ba, bb = a2[:-2], b2[:-2]
    r = max(len(ba), len(bb))
    pa, pb = (1,) * (r - len(ba)) + ba, (1,) * (r - len(bb)) + bb
    bo = tuple(_broadcast(x, y) for x, y in zip(pa, pb))
    return pa, pb, bo, a2[-2], a2[-1], b2[-1]


def _broadcast(x, y):
    """One broadcast batch dim; a symbolic dim (a name, before shapes are pinned: aicc
    inspect) against a size is that size, against 1 itself."""
    if isinstance(x, int) and isinstance(y, int):
        return max(x, y) if min(x, y) != 0 else 0
    if x == y or y == 1:
        return x
    if x == 1:
        return y
    return y if isinstance(x, str) else x
