"""The portable GEMM kernel (kernels/gemm/call.py describes it): B packed into column panels of
NB columns, a 4 x NB block of accumulators the C compiler vectorizes.
"""
from __future__ import annotations

import numpy as np

from ...emit_c.cwriter import c_literal, ctype


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


KB = 64                     # k per summation block (as the portable conv GEMM's tile)


def _block(ct: str, rows, cols: int, a_of, ind: str) -> str:
    """C text: a rows x cols block of the panel (columns jj..jj + cols) summed over k in
    arrays of 4 (a loop of 4 is one 16-byte vector at -O2, held in a register; wider arrays
    were vectorized as loops whose sums GCC kept in memory), in blocks of KB k each summed from
    zero and added to acc (one block when K <= KB; K = 0 leaves zeros): blocked summation, whose
    rounding error grows with sqrt(KB + K / KB) instead of sqrt(K) (K = 2048: 2.8x smaller
    root-mean-square error against float64, below onnxruntime's)."""
    rs, hs = list(rows), range(cols // 4)
    decl = "\n".join(f"{ind}    {ct} " + ", ".join(f"s{r}_{h}[4] = {{0}}" for h in hs) + ";"
                      for r in rs)
    loads = "\n".join(f"{ind}        const {ct} a{r} = {a_of(r)};" for r in rs)
    fmas = "\n".join(f"{ind}            s{r}_{h}[u] += a{r} * b[{4 * h}u + u];"
                     for r in rs for h in hs)
    stores = "\n".join(f"{ind}        acc[{r}][jj + {4 * h}u + u] = k0 ? acc[{r}][jj + {4 * h}u + u]"
                       f" + s{r}_{h}[u] : s{r}_{h}[u];" for r in rs for h in hs)
    return f"""{ind}for (size_t k0 = 0; k0 < K || k0 == 0; k0 += {KB}u) {{
{ind}    const size_t k1 = K - k0 < {KB}u ? K : k0 + {KB}u;
{decl}
{ind}    for (size_t k = k0; k < k1; ++k) {{
{ind}        const {ct} *restrict b = bp + k * NB + jj;
{loads}
{ind}        for (size_t u = 0; u < 4u; ++u) {{
{fmas}
{ind}        }}
{ind}    }}
{ind}    for (size_t u = 0; u < 4u; ++u) {{
{stores}
{ind}    }}
{ind}}}"""


def _block_fpu(rows, cols: int, a_of, ind: str, fma: str) -> str:
    """_block for a scalar FPU with fused multiply-add (an ISA description's ``fpu`` entry;
    float32): the rows x cols sums as scalars, each product one fused multiply-add (there
    GCC kept _block's arrays of 4 in memory: a load and a store per product)."""
    rs, js = list(rows), range(cols)
    decl = "\n".join(f"{ind}    float " + ", ".join(f"s{r}_{j} = 0" for j in js) + ";"
                      for r in rs)
    loads = "\n".join(f"{ind}        const float a{r} = {a_of(r)};" for r in rs)
    fmas = "\n".join(f"{ind}        s{r}_{j} = {fma.format(a=f'a{r}', b=f'b[{j}]', c=f's{r}_{j}')};"
                      for r in rs for j in js)
    stores = "\n".join(f"{ind}    acc[{r}][jj + {j}u] = k0 ? acc[{r}][jj + {j}u] + s{r}_{j} : "
                       f"s{r}_{j};" for r in rs for j in js)
    return (f"{ind}for (size_t k0 = 0; k0 < K || k0 == 0; k0 += {KB}u) {{\n"
            f"{ind}    const size_t k1 = K - k0 < {KB}u ? K : k0 + {KB}u;\n{decl}\n"
            f"{ind}    for (size_t k = k0; k < k1; ++k) {{\n"
            f"{ind}        const float *restrict b = bp + k * NB + jj;\n{loads}\n{fmas}\n"
            f"{ind}    }}\n{stores}\n{ind}}}")


def gemm_helper(ctx, dt, nb: int, fpu: dict | None = None, isa: str = "") -> str:
    """The portable kernel. Its full row blocks have the MR rows written out, each row's
    value of A read once per k: GCC 12 -O2 kept the row loop, and reloaded b[j] for each row
    (197 x 768 x 3072: 53-85 ms, depending on where the code landed, against 40-44). The
    panel is computed in column blocks whose sums stay in registers: MR x 8 (8 vectors of 4,
    with 4 broadcasts and 2 loads of B: 14 of SSE2's 16 registers), and rows past the last
    full block one at a time, 1 x 16 (GEMM 512^3 on generic, SSE2: 10.8 -> 8.5 ms)."""
    ct = ctype(dt)
    name = f"aicc_gemm_{isa + '_' if fpu else ''}{_sfx(dt)}_nb{nb}"
    a_full, a_one = (lambda r: f"A[(i + {r}u) * ars + k * acs]",
                     lambda r: "A[(i + r) * ars + k * acs]")
    if fpu:         # MR rows x the FPU's cols; one row x row1_cols (scalar sums)
        if fpu["rows"] != MR:
            raise ValueError(f"isa {isa}: the portable GEMM needs fpu rows {MR}")
        sub, sub1 = min(nb, fpu["cols"]), min(nb, fpu["row1_cols"])
        full = _block_fpu(range(MR), sub, a_full, " " * 20, fpu["fma"])
        one = _block_fpu([0], sub1, a_one, " " * 24, fpu["fma"])
    else:
        sub, sub1 = min(nb, 8), min(nb, 16)
        full = _block(ct, range(MR), sub, a_full, " " * 20)
        one = _block(ct, [0], sub1, a_one, " " * 24)
    one = one.replace("acc[0][", "acc[r][")
    code = f"""\
/* GEMM (panel width {nb}): Y[M,N] = alpha * (A @ B) + beta * C. A(i, k) = A[i*ars + k*acs];
 * B packed in column panels (aicc_pack_b_{_sfx(dt)}_nb{nb}); C(i, j) = C[i*crs + j*ccs], C may
 * be NULL; Y dense row-major. Blocks of {MR} x {sub} sums in registers (rows past the last
 * block of {MR}: 1 x {sub1}), k ascending from 0 in blocks of {KB} summed apart, added in order. */
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


def pack_helper(ctx, dt, nb: int, rows: bool = False) -> str:
    """Name of the run-time B packer into panels of nb; rows: full panels of a B with
    contiguous rows (bcs 1) are nb-value copies per k, which GCC vectorizes (NEON: the
    transformer's attention MatMuls, 1.4 executed instructions per value less)."""
    ct = ctype(dt)
    name = f"aicc_pack_b_{_sfx(dt)}_nb{nb}{'_rows' if rows else ''}"
    fast = f"""
        if (bcs == 1u && p * {nb}u + {nb}u <= N) {{     /* a full panel of contiguous rows */
            for (size_t k = 0; k < K; ++k)
                for (size_t j = 0; j < {nb}u; ++j)
                    Bp[(p * K + k) * {nb}u + j] = B[k * brs + p * {nb}u + j];
            continue;
        }}""" if rows else ""
    code = f"""\
/* Pack B (K x N, B(k, n) = B[k*brs + n*bcs]) into column panels of {nb}:
 * Bp[(p*K + k)*{nb} + j] = B(k, p*{nb} + j), zero past N (the GEMM kernel's layout). */
static void {name}(size_t K, size_t N, const {ct} *restrict B, size_t brs, size_t bcs,
    {ct} *restrict Bp)
{{
    for (size_t p = 0; p * {nb}u < N; ++p){" {" if rows else ""}{fast}
        for (size_t k = 0; k < K; ++k)
            for (size_t j = 0; j < {nb}u; ++j) {{
                const size_t n = p * {nb}u + j;
                Bp[(p * K + k) * {nb}u + j] = n < N ? B[k * brs + n * bcs] : {c_literal(0, dt)};
            }}{chr(10) + "    }" if rows else ""}
}}"""
    return ctx.helper(name, code)
