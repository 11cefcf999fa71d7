"""The SIMD GEMM of the conv paths (kernels/conv/simd.py, float32, x86 SIMD): micro-kernels in
kernels/gemm/simd.py's design (mr rows x NR = 2 vectors of FMA accumulators, 1-/2-row kernels on 4/2
panels at once, the last partial panel masked) generalized for conv: the B operand is read as
``B(k, j) = b[(j / NR) * bs + k * rs + j % NR]`` (packed im2col panels: bs = K * NR, rs = NR;
the input itself for 1x1 convs: bs = NR, rs = channel stride), and the epilogue runs in
registers after the last K block: + bias (per output row) and a clamp ``min(hi, max(lo, v))``
(Relu is lo = 0, Clip its bounds, none +-inf; any other fused activation runs as a scalar pass
over each finished tile, from the shared activation table). NaN: max/min return their second
operand when one is NaN, so a NaN accumulator passes the clamp as in the scalar
``v < lo ? lo : v``.
"""
from __future__ import annotations

import math

from ..gemm.simd import ISA, _header, nr_of, panels_at_once, register_clamp, row_counts
from ..gemm.simd import epilogue as scalar_epilogue
from ..gemm.clamp import tile_clamp
from ..gemm.tile import V, _f, column_loops, tile_k_loop, tile_open, tile_partial, tile_store
from ..isa.registry import ISAS
from ..vmath.act import ACT_ATTRS, fused_epilogue

KEY = "gemm_simd.6.cv"           # helper keys sort after gemm_simd's includes and epilogues


def clamp_of(node):
    """(lo, hi, scalar activation or None): the fused activation as a register clamp when it
    is one (none, Relu, Clip: gemm_simd.register_clamp), else +-inf and the activation for a
    scalar pass."""
    act, params = fused_epilogue(node)
    clamp = register_clamp(act, params)
    if clamp is not None:
        return (*clamp, None)
    return -math.inf, math.inf, (act, {**ACT_ATTRS.get(act, {}), **params})


def kernel(ctx, isa: str, mr: int, table: bool = False, dense: bool = False,
           prefetch: str = "tile_prefetch") -> str:
    """Micro-kernel of mr rows: Y[0:mr, 0:n] (+)= A[0:mr, 0:kc] @ B with A packed as
    a[k * mr + r] and B(k, j) = b[(j / NR) * bs + k * rs + j % NR] (table: b[(j / NR) * bs +
    koff[k] + j % NR], row offsets from a table; dense: rs = NR, a constant, rs unused);
    after the last K block (fin) + bias, clamp. prefetch: the ISA conv description's entry
    whose spelling (if any) prefetches the same row of the next panel."""
    d = ISA[isa]
    L, vec, nr = d["lanes"], d["vec"], nr_of(isa)
    np_ = panels_at_once(mr, isa)
    # the same row of the next panel toward the cache (as the GEMM kernels do), on the ISAs
    # whose description has it (tile_prefetch: why, measured; transposed_prefetch)
    pf = ISAS[isa].conv_kernels.get(prefetch)
    own = "p" if pf and prefetch != "tile_prefetch" else ""   # a kernel of its own
    name = f"aicc_cv_{isa}_k{mr}" + ("t" if table else "") + ("d" if dense else "") + own
    brow = "koff[k]" if table else f"k * {nr}u" if dense else "k * rs"
    o = [f"/* {isa} conv micro-kernel, {mr} row(s): Y[0:{mr}, 0:n] (+)= A[0:{mr}, 0:kc] @ B, "
         f"A(r, k) = a[k * {mr} + r] (packed),",
         f" * B(k, j) = b[(j / {nr}) * bs + {brow} + j % {nr}]",
         f" * ({np_} panel(s) at once, the last partial panel masked: its B and Y lanes past n are "
         "never read).",
         " * acc: add to the partial sums in Y. lohi (after the last K block, else NULL): then "
         "+ bias[r]",
         " * (bias may be NULL) and clamp to [lohi[0], lohi[1]] (few scalar parameters: GCC then "
         "keeps all",
         " * accumulators and B vectors in registers). */",
         f"static void {name}(size_t kc, const float *restrict a,",
         "    const float *restrict b, size_t bs, " + (
             "const size_t *restrict koff" if table else "size_t rs") +
         ", float *restrict y, size_t ldy, size_t n,",
         "    int acc, const float *restrict lohi, const float *restrict bias)", "{"]
    if mr == 1:
        o.append("    (void)ldy;")
    if dense:
        o.append("    (void)rs;")
    o.append("    size_t j = 0;")
    add = d["add"]
    pin = ISAS[isa].conv_kernels.get("pin_ptr")

    def body(npb: int, masked: bool, ind: str, v: int = V):
        cols = npb * v
        accs = [[f"c{r}_{c}" for c in range(cols)] for r in range(mr)]
        tile_open(o, d, ind, nr, npb, accs, masked)
        if table and pin:
            # the panel pointers in registers: GCC otherwise folds b into each row's address
            # (b + (panel offset + koff[k]) * 4: two adds per k and panel instead of one)
            o.extend(f"{ind}{pin.format(p=f'b{p}')};" for p in range(npb))
        pre = [f"const float *restrict ak = a + k * {mr}u;"]
        pre += [f"const float *restrict bk{p} = b{p} + {brow};" for p in range(npb)]
        if not table and pf:
            # integer address arithmetic, as the last panel's "next" is past the array
            pre += [pf.format(p=f"(uintptr_t)(bk{npb - 1} + {q}u) + bs * sizeof(float)",
                              hint=d["pf_next"]) + ";" for q in range(0, nr, 16)]
        # B is not padded (the input itself, or a partial im2col panel): masked loads
        tile_k_loop(o, d, ind, accs, pre,
                    lambda p, c, k="k": _f(d["mload"] if masked else d["load"],
                                           p=f"bk{p} + {c * L}u", m=f"m{c}"),
                    lambda r: f"ak + {r}u", v, a_layout="packed",
                    bptr=None if masked else lambda p: f"bk{p}")
        tile_partial(o, d, ind, accs, masked, guard=False)
        o.append(f"{ind}if (lohi) {{")
        o.append(f"{ind}    if (bias) {{")
        for r in range(mr):
            o.append(f"{ind}        const {vec} v{r} = " + _f(d["bcast"], p=f"bias + {r}u") + ";")
            for c in range(cols):
                o.append(f"{ind}        {accs[r][c]} = {add}({accs[r][c]}, v{r});")
        o.append(f"{ind}    }}")
        tile_clamp(o, d, ind + "    ", accs)
        o.append(f"{ind}}}")
        tile_store(o, d, ind, accs, masked)

    # a tail of at most one vector's columns on one vector per row (a 14 x 14 map's last 4
    # of 196 positions)
    column_loops(o, body, np_, nr, half=0 if d.get("fma_lane") else L)
    _header(ctx, isa)
    ctx.helper(f"{KEY}.0.{isa}.k{mr:02d}" + ("t" if table else "") + ("d" if dense else "")
               + own, "\n".join(o))
    return name


# C parameter declarations of a tile_gemm helper (B row stride, or koff offset table)
GEMM_FN = ("void (*gemm)(size_t, size_t, size_t, const float *, size_t, const float *,"
           "\n                 size_t, size_t, float *, size_t, const float *, float, float, int, "
           "int)")
GEMM_FN_TABLE = GEMM_FN.replace("size_t, size_t, float *", "size_t, const size_t *, float *")


def tile_gemm(ctx, isa: str, sched: dict, m: int, act, table: bool = False,
              dense: bool = False, cols_outer: bool = False,
              prefetch: str = "tile_prefetch") -> str:
    """GEMM over one tile: Y[M, n] (row stride ldy) (+)= W[M, k0:k0+K] (packed) @ B, after
    the last K block of the last tile (fin) + bias and the activation. m: M, or the list of M
    values the helper is called with (their row-tile sizes get kernels). dense: every call
    passes rs = NR (packed panels), which the kernels then take as a constant where the
    ISA's conv description asks for it (``dense_b``). Returns the helper name (one per ISA,
    schedule, row-kernel set and scalar activation). cols_outer: the column blocks outside
    the K blocks (same sums, same order: for a B larger than the A tile, the transposed
    GEMM's weights, each panel is then read as one stream and a column block's Y stays in
    L1 across the K blocks). prefetch: the micro-kernels' prefetch entry (kernel)."""
    mr, kc, jb = sched["mr"], sched["kc"], sched["jb"]
    nr = nr_of(isa)
    dense = dense and not table and bool(ISAS[isa].conv_kernels.get("dense_b"))
    rows = sorted({r for mm in (m if isinstance(m, (list, tuple)) else [m])
                   for r in row_counts(mm, {"mr": mr})})
    ks = {r: kernel(ctx, isa, r, table, dense, prefetch) for r in rows}
    epi = scalar_epilogue(ctx, act[0], act[1]) if act else None
    tag = epi[len("aicc_sg_"):] if epi else "clamp"
    own = "p" if prefetch != "tile_prefetch" and ISAS[isa].conv_kernels.get(prefetch) else ""
    name = (f"aicc_cv_{isa}_gemm{'t' if table else ''}{'d' if dense else ''}"
            f"{'c' if cols_outer else ''}{own}_m{mr}k{kc}j{jb}_r"
            f"{'_'.join(map(str, rows))}_{tag}")
    cases = "\n".join(f"                case {r}u: {ks[r]}(kc, W + (k0 + pc) * M + i * kc, bj, "
                      f"bs, {'koff + k0 + pc' if table else 'rs'}, yt, ldy, nc, acc, "
                      f"last ? lohi : NULL, bt); break;" for r in rows)
    post = (f"\n                if (last)\n                    {epi}(yt, ldy, mr, nc, 1.0f, NULL, "
            "0u, 0u, 0.0f);") if epi else ""
    what = "clamp to [lo, hi], then " + act[0] if act else "clamp to [lo, hi]"
    code = f"""\
/* {isa} conv tile GEMM: Y[M, n] (row stride ldy) (+)= W[M, k0:k0+K] @ B, W packed by
 * pack_a in K blocks of {kc} (k0 a multiple of {kc}), each a sequence of row tiles of {mr}
 * (and M % {mr}) stored k-major: W(i, k) = W[kb * M + i0 * kcb + (k - kb) * rows + i - i0]
 * (block kb of kcb entries, tile i0 of `rows` rows: the kernels stream W sequentially),
 * B(k, j) = b[(j / {nr}) * bs + {'koff[k0 + k]' if table else 'k * rs'} + j % {nr}];
 * acc0: add to the partial sums in Y; fin:
 * then + bias[M] (may be NULL) and the activation ({what}).
 * Blocks: K by {kc}, columns by {jb}, row tiles of {mr} and M % {mr} (only row kernels
 * {", ".join(map(str, rows))} exist). K >= 1. */
static void {name}(size_t M, size_t n, size_t K, const float *restrict W, size_t k0,
    const float *restrict b, size_t bs, {'const size_t *restrict koff' if table else 'size_t rs'},
    float *restrict Y, size_t ldy,
    const float *restrict bias, float lo, float hi, int acc0, int fin)
{{
    const float lohi[2] = {{ lo, hi }};
    for (size_t OUTER) {{
        INNER1
        for (size_t INNER) {{
            INNER2
            const float *restrict bj = b + (jc / {nr}u) * bs{'' if table else ' + pc * rs'};
            for (size_t i = 0; i < M; i += {mr}u) {{
                const size_t mr = M - i < {mr}u ? M - i : {mr}u;
                const float *restrict bt = bias ? bias + i : NULL;
                float *restrict yt = Y + i * ldy + jc;
                switch (mr) {{
{cases}
                default: break;
                }}{post}
            }}
        }}
    }}
}}"""
    kl = (f"pc = 0; pc < K; pc += {kc}u",
          f"const size_t kc = K - pc < {kc}u ? K - pc : {kc}u;\n"
          "        const int acc = acc0 || pc > 0, last = fin && pc + kc == K;")
    jl = (f"jc = 0; jc < n; jc += {jb}u", f"const size_t nc = n - jc < {jb}u ? n - jc : {jb}u;")
    (o1, i1), (o2, i2) = (jl, kl) if cols_outer else (kl, jl)
    code = (code.replace("OUTER", o1).replace("INNER1", i1).replace("INNER2", i2.replace(
        "\n        ", "\n            ")).replace("INNER", o2))
    ctx.helper(f"{KEY}.2.{name}", code)
    return name


def pack_a(w, group: int, mr: int, kc: int):
    """Weights [Cout][C/g][k...] as the kernels' A operand, in the order the tile GEMM reads
    them: per group (M x K), K blocks of kc (block kb at kb * M), each a sequence of row tiles
    of mr rows (the last M % mr) stored k-major: W(i0 + r, kb + kk) at kb * M + i0 * kcb +
    kk * rows + r."""
    import numpy as np
    m = w.shape[0] // group
    k = int(np.prod(w.shape[1:]))
    w3 = np.asarray(w, dtype=np.float32).reshape(group, m, k)
    out = np.empty((group, m * k), np.float32)
    for kb in range(0, k, kc):
        kcb = min(kc, k - kb)
        for i0 in range(0, m, mr):
            rows = min(mr, m - i0)
            at = kb * m + i0 * kcb
            out[:, at:at + rows * kcb] = w3[:, i0:i0 + rows, kb:kb + kcb].transpose(
                0, 2, 1).reshape(group, rows * kcb)
    return out.reshape(-1)


PACKA = """\
/* Run-time weights into the kernels' A layout (as pack_a() does at compile time): per group
 * of M x K, K blocks of kc, row tiles of mr rows (the last M % mr), k-major:
 * ap[g * M * K + kb * M + i0 * kcb + kk * rows + r] = w[(g * M + i0 + r) * K + kb + kk]. */
static void aicc_cv_packa(const float *restrict w, size_t G, size_t M, size_t K, size_t mr,
                          size_t kc, float *restrict ap)
{
    for (size_t g = 0; g < G; ++g)
        for (size_t kb = 0; kb < K; kb += kc) {
            const size_t kcb = K - kb < kc ? K - kb : kc;
            for (size_t i0 = 0; i0 < M; i0 += mr) {
                const size_t rows = M - i0 < mr ? M - i0 : mr;
                const float *restrict wg = w + (g * M + i0) * K + kb;
                float *restrict d = ap + g * M * K + kb * M + i0 * kcb;
                for (size_t k = 0; k < kcb; ++k)
                    for (size_t r = 0; r < rows; ++r)
                        d[k * rows + r] = wg[r * K + k];
            }
        }
}"""


def packed_weights(ctx, geo, mr: int, kc: int) -> str:
    """C name of the packed weights: a compile-time constant, or step scratch packed from the
    run-time input 1 at the start of the step."""
    w = ctx.in_const(1)
    if w is not None:
        return ctx.const(pack_a(w, geo.group, mr, kc), "wpack")
    K = geo.cin_g * math.prod(geo.k)
    wp = ctx.scratch(geo.cout * K * 4, "float", "wpack")
    ctx.helper(f"{KEY}.1.packa", PACKA)
    ctx("/* run-time weights: packed into scratch for the kernels */")
    ctx(f"aicc_cv_packa({ctx.inp[1]}, {geo.group}u, {geo.cout_g}u, {K}u, {mr}u, {kc}u, {wp});")
    return wp
