"""Gemm, and the GEMM kernel shared with MatMul (matmul.py).

Kernel: ``Y[M,N] = alpha * (A @ B) + beta * C``. A is read through (row, col) strides, so a
transposed A costs nothing; B is packed into column panels of NB (4, 8, 16 or 32) columns,
``Bp[p][k][j] = B[k, p*NB + j]`` zero-padded past N, at compile time when B is a constant
(``ctx.const``) or by a packing helper into step scratch when it is computed at run time. The
kernel keeps a 4 x NB block of accumulators in a local array and walks k in ascending order:
for each k, ``acc[r][:] += a[i+r, k] * Bp[p][k][:]``, a fixed-length loop over contiguous
memory that the C compiler vectorizes at -O2 (i-k-j order, blocked). C is optional and read
through strides (0 where it broadcasts), which also carries MatMul's fused bias.

Accumulation is in the output dtype (float32 or float64), one sum per output element in
ascending k, so results differ from onnxruntime's (blocked, FMA) only by rounding. A fused
activation (``aicc_act``) is applied in a second pass over the output, after alpha/beta/C.

NaN/Inf follow IEEE arithmetic: a NaN or Inf anywhere in row i of A or column j of B reaches
Y[i, j] (Inf * 0 = NaN included), as in a plain dot product. Empty operands: K == 0 gives
``Y = beta * C`` (or 0), M == 0 or N == 0 an empty output with no code.

Kernel variants (``gemm_plan``): the target's ``kernels:`` list, best first, picks the first
variant this module implements: ``avx512`` / ``avx2`` (float32, K > 0; gemm_simd.py: FMA
micro-kernels, K/M/N cache blocking, the bias/alpha/beta/activation epilogue applied to each
tile right after its last K block) or ``generic`` (the portable kernel above; float64 and
K == 0 always use it). Schedule parameters (mr, kc, mc, jb) come from the target's
``schedule: gemm:`` and a node's ``aicc_schedule`` attribute; ``aicc_kernel`` on a node
forces one variant of the target's list.

FMA contraction: the SIMD kernels round once per multiply-add (``fma(a, b, acc)``, k
ascending, starting at +0), the generic kernel twice (multiply, then add: bundles compile with
-std=c99, where GCC does not contract ``acc += a * b`` into an FMA; never -ffast-math). Both
sum in ascending k, so they differ from each other and from onnxruntime (MLAS: FMA, its own K
blocking) by rounding only: about sqrt(K) ulp of the sum of |a*b| terms, inside rtol 1e-4 /
atol 1e-5 for the tested sizes (K = 4099 needs atol 1e-4 for every variant). The SIMD
results do not depend on the schedule (tile sizes, K blocks), only on K's order.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..emit_c.cwriter import c_literal, ctype
from . import transpose
from .activations import ACT, ACT_ATTRS, INT_OK, act_expr, apply_epilogue, fused_epilogue, unfused
from .base import Op, register
from .gemm_simd import ISA, WIDE, driver, nr_of, panel_vectors, register_clamp, schedule

MR = 4                      # rows of A per register block


def choose_nb(n: int) -> int:
    """Panel width: the smallest of 4/8/16 holding N, else 32."""
    for nb in (4, 8, 16):
        if n <= nb:
            return nb
    return 32


def _sfx(dt) -> str:
    return "f32" if np.dtype(dt) == np.float32 else "f64"


def pack_b(b2: np.ndarray, nb: int) -> np.ndarray:
    """numpy packing of a [K, N] matrix into [panels, K, nb] (zero padded)."""
    k, n = b2.shape
    p = (n + nb - 1) // nb
    out = np.zeros((p, k, nb), dtype=b2.dtype)
    padded = np.zeros((k, p * nb), dtype=b2.dtype)
    padded[:, :n] = b2
    out[:] = padded.reshape(k, p, nb).transpose(1, 0, 2)
    return out


def packed_elems(k: int, n: int, nb: int) -> int:
    return ((n + nb - 1) // nb) * k * nb


def _block(ct: str, rows, cols: int, a_of, ind: str) -> str:
    """C text: a rows x cols block of the panel (columns jj..jj + cols) summed over k in
    arrays of 4 (a loop of 4 is one 16-byte vector at -O2, held in a register; wider arrays
    were vectorized as loops whose sums GCC kept in memory), then stored to acc."""
    rs, hs = list(rows), range(cols // 4)
    decl = "\n".join(f"{ind}{ct} " + ", ".join(f"s{r}_{h}[4] = {{0}}" for h in hs) + ";"
                      for r in rs)
    loads = "\n".join(f"{ind}    const {ct} a{r} = {a_of(r)};" for r in rs)
    fmas = "\n".join(f"{ind}        s{r}_{h}[u] += a{r} * b[{4 * h}u + u];"
                     for r in rs for h in hs)
    stores = "\n".join(f"{ind}    acc[{r}][jj + {4 * h}u + u] = s{r}_{h}[u];"
                       for r in rs for h in hs)
    return f"""{decl}
{ind}for (size_t k = 0; k < K; ++k) {{
{ind}    const {ct} *restrict b = bp + k * NB + jj;
{loads}
{ind}    for (size_t u = 0; u < 4u; ++u) {{
{fmas}
{ind}    }}
{ind}}}
{ind}for (size_t u = 0; u < 4u; ++u) {{
{stores}
{ind}}}"""


def gemm_helper(ctx, dt, nb: int) -> str:
    """The portable kernel. Its full row blocks have the MR rows written out, each row's
    value of A read once per k: GCC 12 -O2 kept the row loop, and reloaded b[j] for each row
    (197 x 768 x 3072: 53-85 ms, depending on where the code landed, against 40-44). The
    panel is computed in column blocks whose sums stay in registers: MR x 8 (8 vectors of 4,
    with 4 broadcasts and 2 loads of B: 14 of SSE2's 16 registers), and rows past the last
    full block one at a time, 1 x 16 (GEMM 512^3 on generic, SSE2: 10.8 -> 8.5 ms)."""
    ct = ctype(dt)
    name = f"aicc_gemm_{_sfx(dt)}_nb{nb}"
    z = c_literal(0, dt)
    sub, sub1 = min(nb, 8), min(nb, 16)
    full = _block(ct, range(MR), sub, lambda r: f"A[(i + {r}u) * ars + k * acs]", " " * 20)
    one = _block(ct, [0], sub1, lambda r: "A[(i + r) * ars + k * acs]", " " * 24)
    one = one.replace("acc[0][", "acc[r][")
    code = f"""\
/* GEMM (panel width {nb}): Y[M,N] = alpha * (A @ B) + beta * C. A(i, k) = A[i*ars + k*acs];
 * B packed in column panels (aicc_pack_b_{_sfx(dt)}_nb{nb}); C(i, j) = C[i*crs + j*ccs], C may
 * be NULL; Y dense row-major. Blocks of {MR} x {sub} sums in registers (rows past the last
 * block of {MR}: 1 x {sub1}), k ascending from 0, one sum per output element. */
static void {name}(size_t M, size_t N, size_t K,
    const {ct} *restrict A, size_t ars, size_t acs, const {ct} *restrict Bp, {ct} alpha,
    const {ct} *restrict C, size_t crs, size_t ccs, {ct} beta, {ct} *restrict Y)
{{
    const size_t NB = {nb}u;
    for (size_t j0 = 0; j0 < N; j0 += NB) {{
        const size_t nb = N - j0 < NB ? N - j0 : NB;
        const {ct} *restrict bp = Bp + (j0 / NB) * K * NB;
        for (size_t i = 0; i < M; i += {MR}u) {{
            const size_t mr = M - i < {MR}u ? M - i : {MR}u;
            {ct} acc[{MR}][{nb}];
            if (mr == {MR}u) {{     /* the rows written out: {MR} products per load of b */
                for (size_t jj = 0; jj < NB; jj += {sub}u) {{
{full}
                }}
            }} else {{
                for (size_t r = 0; r < mr; ++r)
                    for (size_t jj = 0; jj < NB; jj += {sub1}u) {{
{one}
                    }}
            }}
            for (size_t r = 0; r < mr; ++r) {{
                {ct} *restrict y = Y + (i + r) * N + j0;
                for (size_t j = 0; j < nb; ++j) {{
                    {ct} v = alpha * acc[r][j];
                    if (C) v += beta * C[(i + r) * crs + (j0 + j) * ccs];
                    y[j] = v;
                }}
            }}
        }}
    }}
}}"""
    return ctx.helper(name, code)


def pack_helper(ctx, dt, nb: int) -> str:
    ct = ctype(dt)
    name = f"aicc_pack_b_{_sfx(dt)}_nb{nb}"
    code = f"""\
/* Pack B (K x N, B(k, n) = B[k*brs + n*bcs]) into column panels of {nb}:
 * Bp[(p*K + k)*{nb} + j] = B(k, p*{nb} + j), zero past N (the GEMM kernel's layout). */
static void {name}(size_t K, size_t N, const {ct} *restrict B, size_t brs, size_t bcs,
    {ct} *restrict Bp)
{{
    for (size_t p = 0; p * {nb}u < N; ++p)
        for (size_t k = 0; k < K; ++k)
            for (size_t j = 0; j < {nb}u; ++j) {{
                const size_t n = p * {nb}u + j;
                Bp[(p * K + k) * {nb}u + j] = n < N ? B[k * brs + n * bcs] : {c_literal(0, dt)};
            }}
}}"""
    return ctx.helper(name, code)


@dataclass(frozen=True)
class GemmPlan:
    """Kernel variant of one GEMM: isa None is the portable kernel; nb is the B panel width
    (the packing layout); sched the SIMD schedule (dict) or None."""
    isa: object
    nb: int
    sched: object = None


def gemm_plan(ctx, dt, n: int, k: int) -> GemmPlan:
    node, target = ctx.node, ctx.target
    forced = node.attrs.get("aicc_kernel")
    if np.dtype(dt) == np.float32 and k > 0:
        for name in target.kernels:
            if forced and name != forced:
                continue
            if name in ISA:
                over = {**dict((target.schedule or {}).get("gemm") or {}),
                        **dict(node.attrs.get("aicc_schedule") or {})}
                v = panel_vectors(name, n)
                return GemmPlan(name, nr_of(name, v), schedule(name, over, v))
            if name == "generic":
                break
    return GemmPlan(None, choose_nb(n))


def gemm_call(ctx, plan, dt, m, n, k, a, ars, acs, bp, y, alpha=1.0, c=None, crs=0, ccs=0,
              beta=1.0) -> None:
    """One call line of the kernel (pointer arguments are C expressions). The SIMD variants
    need acs == 1 (see a_rows) and apply the node's fused activation per tile."""
    L = lambda v: c_literal(v, dt)  # noqa: E731
    cexpr = c if c is not None else "NULL"
    ctx.kernel = plan.isa or "generic"
    if plan.isa is None:
        fn = gemm_helper(ctx, dt, plan.nb)
        ctx(f"{fn}({m}u, {n}u, {k}u, {a}, {ars}u, {acs}u, {bp}, {L(alpha)},")
        ctx(f"    {cexpr}, {crs}u, {ccs}u, {L(beta)}, {y});")
        return
    assert acs == 1, "SIMD GEMM reads A rows with unit stride"
    act, params = fused_epilogue(ctx.node)
    sched = plan.sched
    if m < sched["mr"]:
        sched = {**sched, "jb": WIDE, "nc": WIDE}   # one row tile: no column blocking
    elif sched["mc"] < m <= 2 * sched["mc"]:
        # one M block instead of a full one and a remainder: each M block streams all of B
        # (from L2 / L3 when B is large), A's block (<= 2 * mc rows x kc) still fits in L2
        # and equal row tiles (49 rows: 5 x 10 rather than 4 x 12 + a 1-row tile, whose
        # kernel has too few FMA chains on one panel)
        tiles = -(-m // sched["mr"])
        mr = -(-m // tiles)
        sched = {**sched, "mr": mr, "mc": tiles * mr}
    if k > sched["kc"]:
        # K blocks of equal length: K = 320 as 160 + 160 rather than 256 + 64, whose short
        # block stores and reloads every tile's partial sums for a quarter of the FMAs
        # (MobileNetV2's 320 -> 1280 conv at 7x7, x86-avx2, C loop: 372 -> 349 us)
        blocks = -(-k // sched["kc"])
        sched = {**sched, "kc": -(-k // blocks)}
    fused = (alpha == 1.0 and beta == 1.0 and (c is None or (crs == 0 and ccs == 1))
             and register_clamp(act, params) is not None)
    sched = {**sched, "prefetch": k * n * 4 > sched["prefetch_kb"] * 1024}
    fn = driver(ctx, plan.isa, sched, act, params, m, fused)
    epi = int(alpha != 1.0 or c is not None or act is not None)
    ctx(f"{fn}({m}u, {n}u, {k}u, {a}, {ars}u, {bp}, {L(alpha)},")
    ctx(f"    {cexpr}, {crs}u, {ccs}u, {L(beta)}, {y}, {epi});")


def a_rows(ctx, plan, dt, m, k, a, ars, acs):
    """(A, row stride) with unit column stride for the SIMD kernels (float32): a transposed A
    (ars 1: a K x M matrix of row stride acs) is copied into step scratch first, by the AVX
    8 x 8 transposition of transpose.py. Unchanged for the portable kernel."""
    if plan.isa is None or acs == 1 or m * k == 0:
        return a, ars, acs
    t = ctx.scratch(m * k * np.dtype(dt).itemsize, ctype(dt), "at")
    ctx(f"{transpose.avx_helper(ctx)}({k}u, {m}u, {a}, {acs}u, {t}, {k}u);")
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


def empty_body(ctx) -> None:
    """Body of a step whose output is empty (the output pointers are still declared)."""
    ctx(" ".join(f"(void){o};" for o in ctx.out if o) + "  /* empty output: nothing to do */")


def float_dtype_reason(dts) -> str | None:
    dts = {np.dtype(d) for d in dts}
    if len(dts) != 1:
        return "mixed dtypes " + ", ".join(sorted(d.name for d in dts))
    dt = dts.pop()
    if dt not in (np.float32, np.float64):
        return f"dtype {dt.name} not supported (float32/float64 only)"
    return None


@register("Gemm", since=7)
class Gemm(Op):
    attrs = {"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 0}

    def _mnk(self, node, g):
        sa, sb = g.shape(node.inputs[0]), g.shape(node.inputs[1])
        m, k = (sa[1], sa[0]) if self.attr(node, "transA") else (sa[0], sa[1])
        n = sb[0] if self.attr(node, "transB") else sb[1]
        return int(m), int(n), int(k)

    def check(self, node, g):
        ins = [i for i in node.inputs if i]
        r = float_dtype_reason(g.dtype(i) for i in ins)
        if r:
            return r
        if len(g.shape(node.inputs[0])) != 2 or len(g.shape(node.inputs[1])) != 2:
            return "A and B must be 2-D"
        if len(node.inputs) > 2 and node.inputs[2]:
            m, n, _ = self._mnk(node, g)
            sc = tuple(int(d) for d in g.shape(node.inputs[2]))
            if len(sc) > 2 or any(d not in (1, full) for d, full in zip(sc[::-1], (n, m))):
                return f"C of shape {list(sc)} does not broadcast to [{m}, {n}]"
        return check_epilogue(node, g.dtype(node.inputs[0]))

    def reference(self, node, g, inputs):
        from .reference import run_onnx_reference
        y = run_onnx_reference(unfused(node), g, inputs)[0]
        return [apply_epilogue(node, y)]

    def emit(self, node, ctx):
        g, dt = ctx.g, ctx.out_dtype(0)
        m, n, k = self._mnk(node, g)
        ta, tb = self.attr(node, "transA"), self.attr(node, "transB")
        alpha, beta = float(self.attr(node, "alpha")), float(self.attr(node, "beta"))
        if m * n == 0:
            empty_body(ctx)
            return
        plan = gemm_plan(ctx, dt, n, k)
        nb = plan.nb
        ars, acs = (1, m) if ta else (k, 1)
        a, ars, acs = a_rows(ctx, plan, dt, m, k, ctx.inp[0], ars, acs)
        bconst = ctx.in_const(1)
        if k == 0:
            bp = "NULL"
        elif bconst is not None:
            b2 = np.asarray(bconst).T if tb else np.asarray(bconst)
            bp = ctx.const(pack_b(np.ascontiguousarray(b2, dtype=dt), nb), "pk")
        else:
            bp = ctx.scratch(packed_elems(k, n, nb) * dt.itemsize, ctype(dt), "pk")
            brs, bcs = (1, k) if tb else (n, 1)
            ctx(f"{pack_helper(ctx, dt, nb)}({k}u, {n}u, {ctx.inp[1]}, {brs}u, {bcs}u, {bp});")
        c, crs, ccs = None, 0, 0
        if ctx.has_input(2):
            sc = (1, 1) + ctx.in_shape(2)
            cm, cn = sc[-2], sc[-1]
            c, crs, ccs = ctx.inp[2], (cn if cm != 1 else 0), (1 if cn != 1 else 0)
        gemm_call(ctx, plan, dt, m, n, k, a, ars, acs, bp, ctx.out[0], alpha=alpha,
                  c=c, crs=crs, ccs=ccs, beta=beta)
        emit_epilogue(ctx, node, m * n, dt, plan)
