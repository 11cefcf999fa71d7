"""Integer matrix products on the x86 SIMD targets: QLinearMatMul / MatMulInteger with a
constant ``b`` and QLinearConv / ConvInteger with constant weights, as GEMMs on int16 pairs
(qlinear.py's loops stay for run-time weights, depthwise-like convs and the generic target).

Exactness: both operands have their zero points subtracted first, ``a - azp`` and ``b - bzp``
in [-255, 255], stored as int16; ``vpmaddwd`` multiplies adjacent int16 pairs and adds the two
products into an int32 lane (|.| <= 2 * 255 * 255: never saturates), and the lanes accumulate
with wrapping int32 adds: the sum modulo 2^32 of the portable loops, bit for bit, whatever the
order. (onnxruntime uses vpmaddubsw / VNNI on uint8 x int8 directly; without VNNI and with
both operands possibly uint8 with zero points, the int16 form is the exact one.)

Layout (the float GEMM's, on pairs of k): the broadcast operand A is int16 rows of 2 * K2
values (K2 = ceil(K / 2), a zero past K), one 32-bit pair broadcast per row and k pair; the
vector operand B is packed in panels of NR columns (2 vectors: 16 int32 lanes on AVX2, 32 on
AVX-512), ``Bp[((p * K2 + kp) * NR + j) * 2 + h] = B[2 kp + h, p * NR + j]``. The
micro-kernel keeps mr x 2 accumulator vectors over all of K (no K blocking: the int32 sums are
exact in any order) and stores whole panels into an int32 block buffer.

* MatMul: B (the constant ``b - bzp``) is packed at compile time; the activation rows are
  packed into A at run time; all batch dims of ``a`` are rows (``b`` is a matrix).
* Conv: A is the constant weights ``w - wzp`` ([cout, K], K = cin_g * taps); B is the
  im2col of ``x - xzp`` for a block of output positions (JB, a multiple of NR, sized so that
  the block's panels stay in L2), packed at run time: per k pair two int16 rows (zeros in the
  padding) interleaved into the panels. Groups: one GEMM per group.

Requantization (QLinear*): per output element ``saturate(rint(acc * m) + yzp)`` with ``acc *
m`` in float64 (m = a_scale * b_scale / y_scale in float32), as qlinear.py's scalar loop:
the same values (vectorized conversion, product, round-to-nearest-even, clamp; NaN -> yzp,
clamped; +-Inf saturate); the n % lanes tail calls the scalar helper.
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import ctype
from .conv import ConvGeometry
from .conv_kernels import PARAMS, RANGE
from .loops import numel
from .matmul import _dims
from .simd import include, simd_isa

MIN_K = 16          # convs with fewer products per output (depthwise) keep the tap loops
PANEL_KB = 128      # conv: im2col panels of one position block (L2)
ISA = {
    "avx512": dict(nr=32, mr=8, vi="__m512i", zero="_mm512_setzero_si512()",
                   ld="_mm512_loadu_si512((const void *)({p}))",
                   st="_mm512_storeu_si512((void *)({p}), {v})",
                   set1="_mm512_set1_epi32", madd="_mm512_madd_epi16", add="_mm512_add_epi32"),
    "avx2": dict(nr=16, mr=6, vi="__m256i", zero="_mm256_setzero_si256()",
                 ld="_mm256_loadu_si256((const __m256i *)({p}))",
                 st="_mm256_storeu_si256((__m256i *)({p}), {v})",
                 set1="_mm256_set1_epi32", madd="_mm256_madd_epi16", add="_mm256_add_epi32"),
}


def isa_for(ctx):
    isa = simd_isa(ctx)
    return isa if isa in ISA else None


def _const_or_absent(ctx, k) -> bool:
    return not ctx.has_input(k) or ctx.in_const(k) is not None


def matmul_usable(ctx, a_k, b_k, bz_k) -> bool:
    sb = tuple(ctx.in_shape(b_k))
    return (isa_for(ctx) is not None and ctx.in_const(b_k) is not None
            and _const_or_absent(ctx, bz_k) and len(sb) >= 2
            and all(d == 1 for d in sb[:-2]) and len(ctx.in_shape(a_k)) >= 1)


def conv_usable(ctx, geo, w_k, wz_k) -> bool:
    return (isa_for(ctx) is not None and ctx.in_const(w_k) is not None
            and _const_or_absent(ctx, wz_k) and geo.cin_g * numel(geo.k) >= MIN_K)


# -- C text --------------------------------------------------------------------------------------

def vnni(ctx, isa: str) -> bool:
    """vpdpwssd (multiply the pairs and add them to the accumulator in one instruction) on
    targets that list AVX-512 VNNI: the same wrapping int32 sums, twice the rate on Zen 5."""
    return isa == "avx512" and "avx512_vnni" in ctx.target.cpu_flags


def _kernel(ctx, isa: str, mr: int, implicit: bool = False) -> str:
    """c[r][0:NR] = sum over k pairs of a[r] pair x the pair vectors of row kp of b (a packed
    panel: row kp at kp * 2 NR; implicit: at off[kp], int16 units), wrapping int32."""
    d = ISA[isa]
    nr, half = d["nr"], d["nr"] // 2
    dp = vnni(ctx, isa)
    name = f"aicc_qk{'i' if implicit else ''}{'v' if dp else ''}_{isa}_{mr}"
    L = [f"/* int16-pair GEMM tile ({isa}): {mr} rows x {nr} columns, c[r][j] = sum over k "
         f"pairs kp of\n * a[r][2kp] b[2kp][j] + a[r][2kp+1] b[2kp+1][j] "
         f"({'vpdpwssd' if dp else 'vpmaddwd, wrapping int32 adds'}); row kp of b at "
         f"{'b + off[kp]' if implicit else 'b + kp * 2 NR'}. */",
         f"static void {name}(size_t k2, const int16_t *restrict a, size_t lda, "
         f"const int16_t *restrict b, {'const int32_t *restrict off, ' if implicit else ''}"
         "int32_t *restrict c, size_t ldc)", "{"]
    acc = [(r, h) for r in range(mr) for h in range(2)]
    L.append("    " + f"{d['vi']} " + ", ".join(f"c{r}_{h} = {d['zero']}" for r, h in acc) + ";")
    L.append("    for (size_t kp = 0; kp < k2; ++kp) {")
    row = "b + off[kp]" if implicit else f"b + kp * {2 * nr}u"
    L.append(f"        const int16_t *bk = {row};")
    L.append(f"        const {d['vi']} b0 = {d['ld'].format(p='bk')};")
    L.append(f"        const {d['vi']} b1 = {d['ld'].format(p=f'bk + {nr}u')};")
    for r in range(mr):
        L.append("        {")
        L.append("            int32_t s;")
        L.append(f"            memcpy(&s, a + {r}u * lda + 2u * kp, sizeof s);")
        L.append(f"            const {d['vi']} av = {d['set1']}(s);")
        for h in range(2):
            if dp:
                L.append(f"            c{r}_{h} = _mm512_dpwssd_epi32(c{r}_{h}, av, b{h});")
            else:
                L.append(f"            c{r}_{h} = {d['add']}(c{r}_{h}, {d['madd']}(av, b{h}));")
        L.append("        }")
    L.append("    }")
    for r, h in acc:
        L.append("    " + d["st"].format(p=f"c + {r}u * ldc + {h * half}u", v=f"c{r}_{h}") + ";")
    L.append("}")
    include(ctx, isa)
    ctx.helper("qlinear.4.0.string", "#include <string.h>")
    ctx.helper(f"qlinear.4.1.{name}", "\n".join(L))
    return name


def _gemm(ctx, isa: str, m: int, implicit: bool = False) -> str:
    """``aicc_qgemm_{isa}_{m}``: C [m x (np * NR)] (ldc) = A [m rows of 2 * k2] x np panels
    (packed: panel p at bp + p * k2 * 2 NR; implicit: columns p * NR.. of the pair rows at
    bp + off[kp], i.e. panel p at bp + p * 2 NR)."""
    d = ISA[isa]
    mr, nr = d["mr"], d["nr"]
    tag = "i" if implicit else ""
    name = f"aicc_qgemm{tag}_{isa}_{m}"
    tiles = [(r0, min(mr, m - r0)) for r0 in range(0, m, mr)]
    L = [f"/* C[{m} x np * {nr}] = A[{m} x 2 k2] (int16 pairs) x np {'implicit' if implicit else 'packed'} panels */",
         f"static void {name}(size_t k2, size_t np_, const int16_t *restrict a, "
         f"const int16_t *restrict bp, {'const int32_t *restrict off, ' if implicit else ''}"
         "int32_t *restrict c, size_t ldc)", "{",
         "    for (size_t p = 0; p < np_; ++p) {",
         f"        const int16_t *pb = bp + p * {'' if implicit else 'k2 * '}{2 * nr}u;"]
    for r0, rows in tiles:
        k = _kernel(ctx, isa, rows, implicit)
        L.append(f"        {k}(k2, a + {r0}u * 2u * k2, 2u * k2, pb, {'off, ' if implicit else ''}"
                 f"c + {r0}u * ldc + p * {nr}u, ldc);")
    L += ["    }", "}"]
    ctx.helper(f"qlinear.4.2.g{tag}_{isa}_{m:05d}", "\n".join(L))
    return name


def _requant(ctx, isa: str, ydt: str, rnd: str, wrap: str) -> str:
    """``aicc_qreq_{isa}_{y}(n, acc, add, m, ms, yzp, y)``: y[j] = saturate(rint((acc[j] +
    add) * m[j * ms]) + yzp), the product in double (the scalar loops' values)."""
    lo, hi = (0, 255) if ydt == "uint8" else (-128, 127)
    yc = ctype(np.dtype(ydt))
    name = f"aicc_qreq_{isa}_{ydt}"
    scalar = (f"y[j] = ({yc}){rnd}((double){wrap}((uint32_t)acc[j] + (uint32_t)add) * "
              f"(double)m[j * ms], yzp, {lo}, {hi});")
    if isa == "avx512":
        L, pd = 8, "_mm512"
        body = [
            "const __m256i ai = _mm256_add_epi32(_mm256_loadu_si256((const __m256i *)(acc + j)), va);",
            "const __m512d vm = ms ? _mm512_cvtps_pd(_mm256_loadu_ps(m + j)) : vm0;",
            "__m512d t = _mm512_mul_pd(_mm512_cvtepi32_pd(ai), vm);",
            "t = _mm512_add_pd(_mm512_roundscale_pd(t, _MM_FROUND_TO_NEAREST_INT | "
            "_MM_FROUND_NO_EXC), vz);",
            "t = _mm512_max_pd(vlo, _mm512_min_pd(vhi, t));   /* NaN stays (second operand) */",
            "t = _mm512_mask_blend_pd(_mm512_cmp_pd_mask(t, t, _CMP_UNORD_Q), t, vzc);",
            "_mm_storel_epi64((__m128i *)(void *)(y + j), "
            "_mm256_cvtepi32_epi8(_mm512_cvtpd_epi32(t)));"]
    else:
        L, pd = 4, "_mm256"
        pk = "_mm_packus_epi16" if ydt == "uint8" else "_mm_packs_epi16"
        body = [
            "const __m128i ai = _mm_add_epi32(_mm_loadu_si128((const __m128i *)(acc + j)), va);",
            "const __m256d vm = ms ? _mm256_cvtps_pd(_mm_loadu_ps(m + j)) : vm0;",
            "__m256d t = _mm256_mul_pd(_mm256_cvtepi32_pd(ai), vm);",
            "t = _mm256_add_pd(_mm256_round_pd(t, _MM_FROUND_TO_NEAREST_INT | "
            "_MM_FROUND_NO_EXC), vz);",
            "t = _mm256_max_pd(vlo, _mm256_min_pd(vhi, t));   /* NaN stays (second operand) */",
            "t = _mm256_blendv_pd(t, vzc, _mm256_cmp_pd(t, t, _CMP_UNORD_Q));",
            "__m128i w = _mm256_cvtpd_epi32(t);",
            f"w = {pk}(_mm_packs_epi32(w, w), w);    /* in range: the packs never saturate */",
            "const int32_t o = _mm_cvtsi128_si32(w);",
            "memcpy(y + j, &o, 4);"]
    vd, ai = f"__m{512 if isa == 'avx512' else 256}d", ("_mm256_set1_epi32" if isa == "avx512"
                                                         else "_mm_set1_epi32")
    C = [f"/* y[j] = saturate(rint((acc[j] + add) * m[j * ms]) + yzp) for j < n ({ydt}; the "
         "product in\n * double, add modulo 2^32; NaN -> yzp, clamped): the scalar helper's "
         f"values, {L} at a time. */",
         f"static void {name}(size_t n, const int32_t *restrict acc, int32_t add, "
         f"const float *restrict m, size_t ms, int32_t yzp, {yc} *restrict y)", "{",
         f"    const size_t full = n - n % {L}u;",
         f"    const {'__m256i' if isa == 'avx512' else '__m128i'} va = {ai}(add);",
         f"    const {vd} vm0 = {pd}_set1_pd((double)m[0]), vz = {pd}_set1_pd((double)yzp);",
         f"    const {vd} vlo = {pd}_set1_pd({float(lo)!r}), vhi = {pd}_set1_pd({float(hi)!r});",
         f"    const {vd} vzc = {pd}_set1_pd((double)(yzp < {lo} ? {lo} : "
         f"(yzp > {hi} ? {hi} : yzp)));",
         f"    for (size_t j = 0; j < full; j += {L}u) {{"]
    C += ["        " + s for s in body]
    C += ["    }", "    for (size_t j = full; j < n; ++j)", "        " + scalar, "}"]
    ctx.helper("qlinear.4.0.string", "#include <string.h>")
    ctx.helper(f"qlinear.4.3.req_{isa}_{ydt}", "\n".join(C))
    return name


PACK_A = """\
/* One row of k values (TA) minus the zero point as int16, a zero after an odd k. */
static void aicc_qrow_SFX(size_t k, const TA *restrict a, int32_t zp, int16_t *restrict d)
{
    for (size_t i = 0; i < k; ++i)
        d[i] = (int16_t)((int32_t)a[i] - zp);
    if (k & 1u)
        d[k] = 0;
}"""

PACK_B = """\
/* im2col of positions [p0, p0 + jn) of one group (x: its first input channel, zero point
 * subtracted, zeros in the padding and past jn up to jbp) packed into jbp / NR panels of
 * k2 int16 pairs x NR columns. t0, t1: two rows of jbp int16. */
static void aicc_qim2col_SFX(const aicc_conv_params *p, const TA *restrict x, int32_t zp,
                             size_t K, size_t p0, size_t jn, size_t jbp, size_t nr,
                             int16_t *restrict t0, int16_t *restrict t1, int16_t *restrict bp)
{
    const size_t taps = p->k[0] * p->k[1] * p->k[2], plane = p->in[0] * p->in[1] * p->in[2];
    const size_t o1n = p->out[1], o2n = p->out[2], k2 = (K + 1u) / 2u;
    for (size_t kp = 0; kp < k2; ++kp) {
        for (size_t h = 0; h < 2u; ++h) {
            int16_t *restrict t = h ? t1 : t0;
            const size_t k = 2u * kp + h;
            if (k >= K) {
                memset(t, 0, jbp * sizeof *t);
                continue;
            }
            const size_t c = k / taps, tap = k % taps;
            const size_t k0 = tap / (p->k[1] * p->k[2]), k1 = tap / p->k[2] % p->k[1],
                         k2_ = tap % p->k[2];
            const int64_t f0 = aicc_tap_off(p, 0, k0), f1 = aicc_tap_off(p, 1, k1),
                          f2 = aicc_tap_off(p, 2, k2_);
            size_t l2, h2;
            aicc_valid_range(f2, p->stride[2], p->in[2], o2n, &l2, &h2);
            const TA *xc = x + c * plane;
            for (size_t q = p0; q < p0 + jn;) {
                const size_t row = q / o2n, o2s = q % o2n;
                const size_t o2e = o2n - o2s < p0 + jn - q ? o2n : o2s + (p0 + jn - q);
                const size_t base = q - p0 - o2s;          /* t[base + o2] is position o2 */
                const int64_t i0 = (int64_t)(row / o1n * p->stride[0]) + f0,
                              i1 = (int64_t)(row % o1n * p->stride[1]) + f1;
                size_t lo = l2 > o2s ? l2 : o2s, hi = h2 < o2e ? h2 : o2e;
                if (i0 < 0 || i0 >= (int64_t)p->in[0] || i1 < 0 || i1 >= (int64_t)p->in[1]
                    || hi < lo)
                    lo = hi = o2e;
                for (size_t o2 = o2s; o2 < lo; ++o2)
                    t[base + o2] = 0;
                if (lo < hi) {
                    const TA *restrict xr = xc + ((size_t)i0 * p->in[1] + (size_t)i1) * p->in[2];
                    if (p->stride[2] == 1u) {
                        const TA *restrict xs = xr + (size_t)((int64_t)lo + f2);
                        int16_t *restrict ts = t + base + lo;
                        for (size_t j = 0; j < hi - lo; ++j)
                            ts[j] = (int16_t)((int32_t)xs[j] - zp);
                    } else {
                        for (size_t o2 = lo; o2 < hi; ++o2)
                            t[base + o2] = (int16_t)((int32_t)
                                xr[(size_t)((int64_t)(o2 * p->stride[2]) + f2)] - zp);
                    }
                }
                for (size_t o2 = hi; o2 < o2e; ++o2)
                    t[base + o2] = 0;
                q += o2e - o2s;
            }
            for (size_t j = jn; j < jbp; ++j)
                t[j] = 0;
        }
        for (size_t pn = 0; pn < jbp / nr; ++pn) {
            int16_t *restrict d = bp + (pn * k2 + kp) * nr * 2u;
            const int16_t *restrict s0 = t0 + pn * nr, *restrict s1 = t1 + pn * nr;
            for (size_t j = 0; j < nr; ++j) {
                d[2u * j] = s0[j];
                d[2u * j + 1u] = s1[j];
            }
        }
    }
}"""


PAD = """\
/* x - zp of cin channels (h x w planes) zero-padded to hp x wp (pt rows above, pl columns on
 * the left) with the channels interleaved in pairs: d[((c2 * hp + i) * wp + j) * 2 + e] =
 * x[2 c2 + e][i - pt][j - pl] - zp (zero in the padding and for a missing odd channel); then
 * slack zeros (the implicit GEMM's last panel reads up to NR positions past the planes). */
static void aicc_qpad_SFX(const TA *restrict x, size_t cin, size_t h, size_t w, int32_t zp,
                          size_t hp, size_t wp, size_t pt, size_t pl, size_t slack,
                          int16_t *restrict d)
{
    const size_t c2n = (cin + 1u) / 2u, plane = h * w;
    for (size_t c2 = 0; c2 < c2n; ++c2) {
        const TA *x0 = x + 2u * c2 * plane;
        const int pair = 2u * c2 + 1u < cin;
        int16_t *dp = d + c2 * hp * wp * 2u;
        for (size_t i = 0; i < hp; ++i) {
            int16_t *restrict dr = dp + i * wp * 2u;
            if (i < pt || i >= pt + h) {
                memset(dr, 0, wp * 2u * sizeof *dr);
                continue;
            }
            memset(dr, 0, pl * 2u * sizeof *dr);
            memset(dr + (pl + w) * 2u, 0, (wp - pl - w) * 2u * sizeof *dr);
            int16_t *restrict o = dr + pl * 2u;
            const TA *restrict r0 = x0 + (i - pt) * w;
            if (pair) {
                const TA *restrict r1 = r0 + plane;
                for (size_t j = 0; j < w; ++j) {
                    o[2u * j] = (int16_t)((int32_t)r0[j] - zp);
                    o[2u * j + 1u] = (int16_t)((int32_t)r1[j] - zp);
                }
            } else {
                for (size_t j = 0; j < w; ++j) {
                    o[2u * j] = (int16_t)((int32_t)r0[j] - zp);
                    o[2u * j + 1u] = 0;
                }
            }
        }
    }
    memset(d + c2n * hp * wp * 2u, 0, slack * sizeof *d);
}"""


def _typed(code: str, ta) -> str:
    sfx = "_u8" if ta.name == "uint8" else "_s8"
    return code.replace("_SFX", sfx).replace("TA", ctype(ta)), sfx


def pack_b(b: np.ndarray, nr: int) -> np.ndarray:
    """[K, N] int16 values -> NR-column panels of k pairs (zeros past K and N)."""
    k, n = b.shape
    k2, npn = (k + 1) // 2, -(-n // nr)
    full = np.zeros((2 * k2, npn * nr), np.int16)
    full[:k, :n] = b
    # [kp, h, p, j] -> [p, kp, j, h]
    return np.ascontiguousarray(full.reshape(k2, 2, npn, nr).transpose(2, 0, 3, 1))


def pack_a(w: np.ndarray) -> np.ndarray:
    """[M, K] int16 values -> rows of 2 * ceil(K / 2) (a zero column after an odd K)."""
    m, k = w.shape
    out = np.zeros((m, k + (k & 1)), np.int16)
    out[:, :k] = w
    return out


def _zp_values(ctx, k, n, dt) -> np.ndarray:
    """The constant zero point of input k as n int64 values (0 when absent)."""
    if not ctx.has_input(k):
        return np.zeros(n, np.int64)
    v = np.asarray(ctx.in_const(k)).astype(np.int64).reshape(-1)
    return np.broadcast_to(v, (n,)) if v.size == 1 else v


# -- emitters ------------------------------------------------------------------------------------

def emit_matmul(op, node, ctx, requant) -> None:
    """MatMul form. ``requant``: None (int32 output) or (rnd, wrap, mult) with mult the C
    expression of the per-tensor float multiplier or a float array of N (then per column)."""
    isa = isa_for(ctx)
    d = ISA[isa]
    ctx.kernel = isa
    ta = ctx.in_dtype(op.A)
    _, _, _, m, k, n = _dims(ctx.in_shape(op.A), ctx.in_shape(op.B))
    rows = numel(tuple(ctx.out_shape(0))) // n
    b = np.asarray(ctx.in_const(op.B)).astype(np.int64).reshape(k, n)
    b = b - _zp_values(ctx, op.BZ, n, None)[None, :]
    nr = d["nr"]
    npn, k2 = -(-n // nr), (k + 1) // 2
    bp = ctx.const(pack_b(b.astype(np.int16), nr), "qb")
    code, sfx = _typed(PACK_A, ta)
    ctx.helper(f"qlinear.4.1.row{sfx}", code)
    mb = min(rows, 64)
    a16 = ctx.scratch(mb * 2 * k2 * 2, "int16_t", "qa")
    cb = ctx.scratch(mb * npn * nr * 4, "int32_t", "qc")
    ctx(f"/* int16-pair GEMM ({isa}): {rows} rows of a (zero point subtracted) x b - bzp "
        f"packed at build time ({npn} panels of {nr}) */")
    ctx(f"const int32_t azp = (int32_t){_scalar(ctx, op.AZ)};" if ctx.has_input(op.AZ)
        else "const int32_t azp = 0;")
    yc = ctype(ctx.out_dtype(0))
    ldc = npn * nr
    with ctx.block(f"for (size_t r0 = 0; r0 < {rows}u; r0 += {mb}u)"):
        ctx(f"const size_t mr = {rows}u - r0 < {mb}u ? {rows}u - r0 : {mb}u;")
        with ctx.block("for (size_t i = 0; i < mr; ++i)"):
            ctx(f"aicc_qrow{sfx}({k}u, {ctx.inp[op.A]} + (r0 + i) * {k}u, azp, "
                f"{a16} + i * {2 * k2}u);")
        last = rows % mb
        g_full = _gemm(ctx, isa, mb)
        if last:
            g_last = _gemm(ctx, isa, last)
            ctx(f"if (mr == {mb}u) {g_full}({k2}u, {npn}u, {a16}, {bp}, {cb}, {ldc}u);")
            ctx(f"else {g_last}({k2}u, {npn}u, {a16}, {bp}, {cb}, {ldc}u);")
        else:
            ctx(f"{g_full}({k2}u, {npn}u, {a16}, {bp}, {cb}, {ldc}u);")
        with ctx.block("for (size_t i = 0; i < mr; ++i)"):
            dst = f"{ctx.out[0]} + (r0 + i) * {n}u"
            if requant is None:
                ctx(f"memcpy({dst}, {cb} + i * {ldc}u, {n}u * sizeof(int32_t));")
            else:
                rnd, wrap, mult, per_col = requant
                fn = _requant(ctx, isa, ctx.out_dtype(0).name, rnd, wrap)
                ctx(f"{fn}({n}u, {cb} + i * {ldc}u, 0, {mult}, {1 if per_col else 0}u, yzp, "
                    f"({yc} *){dst});")


def _scalar(ctx, k) -> str:
    v = ctx.in_const(k)
    if v is not None:
        from ..emit_c.cwriter import c_int
        v = np.asarray(v).reshape(-1)[0]
        return c_int(v, v.dtype)
    return f"{ctx.inp[k]}[0]"


def block_positions(P: int, k2: int, nr: int) -> int:
    """Output positions per im2col block: a multiple of NR whose panels fit PANEL_KB."""
    jb = max(nr, (PANEL_KB * 1024 // (k2 * 4)) // nr * nr)
    return min(jb, -(-P // nr) * nr)


def implicit_ok(geo) -> bool:
    """Stride-1 1-D / 2-D convs read the padded, pair-interleaved input in place."""
    return len(geo.k) <= 2 and set(geo.stride) == {1}


def _post_conv(ctx, isa, requant, seg_n, src, dst) -> None:
    yc = ctype(ctx.out_dtype(0))
    if requant is None:
        ctx(f"memcpy({dst}, {src}, ({seg_n}) * sizeof(int32_t));")
        return
    rnd, wrap, _mult, bias = requant
    fn = _requant(ctx, isa, ctx.out_dtype(0).name, rnd, wrap)
    ctx(f"{fn}({seg_n}, {src}, {bias or '0'}, &mlt, 0u, yzp, ({yc} *)({dst}));")


def emit_conv_implicit(op, node, ctx, requant) -> None:
    """Stride 1: the GEMM's columns are the positions of the output grid widened to the padded
    input width wp (wp - OW garbage columns per row, never stored); tap (kh, kw) of channel
    pair c2 is the pair row at offset (c2 * hp * wp + kh * dh * wp + kw * dw) pairs of the
    padded input: no im2col. K runs over (tap, channel pair)."""
    isa = isa_for(ctx)
    d = ISA[isa]
    ctx.kernel = isa
    nr = d["nr"]
    ta = ctx.in_dtype(op.X)
    geo = ConvGeometry(op, node, ctx.in_shape(op.X), ctx.in_shape(op.W))
    two = len(geo.k) == 2
    H, W = (geo.inp if two else [1, geo.inp[0]])
    kh, kw = (geo.k if two else [1, geo.k[0]])
    dh, dw = (geo.dil if two else [1, geo.dil[0]])
    pt, pl = (geo.pad if two else [0, geo.pad[0]])
    pb, pr = (geo.pad_end if two else [0, geo.pad_end[0]])
    OH, OW = (geo.out if two else [1, geo.out[0]])
    hp, wp = H + pt + pb, W + pl + pr
    Q = (OH - 1) * wp + OW
    P = OH * OW
    c2n = (geo.cin_g + 1) // 2
    taps = kh * kw
    k2 = taps * c2n
    w = np.asarray(ctx.in_const(op.W)).astype(np.int64).reshape(geo.cout, geo.cin_g, taps)
    w = w - _zp_values(ctx, op.WZ, geo.cout, None)[:, None, None]
    a = np.zeros((geo.cout, taps, 2 * c2n), np.int16)
    a[:, :, :geo.cin_g] = w.transpose(0, 2, 1)
    wpk = ctx.const(a.reshape(geo.cout, 2 * k2), "qw")
    off = np.array([(c2 * hp * wp + (t // kw) * dh * wp + (t % kw) * dw) * 2
                    for t in range(taps) for c2 in range(c2n)], np.int32)
    offs = ctx.const(off, "qoff")
    jb = max(nr, (96 * 1024 // (geo.cout_g * 4)) // nr * nr)
    jb = min(jb, -(-Q // nr) * nr)
    slack = 2 * nr + 64
    xp = ctx.scratch((c2n * hp * wp * 2 + slack) * 2, "int16_t", "qx")
    cb = ctx.scratch(geo.cout_g * jb * 4, "int32_t", "qc")
    code, sfx = _typed(PAD, ta)
    ctx.helper("qlinear.4.0.string", "#include <string.h>")
    ctx.helper(f"qlinear.4.1.pad{sfx}", code)
    g = _gemm(ctx, isa, geo.cout_g, implicit=True)
    ctx(f"/* {geo.describe()}: int16-pair implicit GEMM ({isa}) on the padded input "
        f"({hp} x {wp}, channel pairs interleaved), weights - wzp packed at build time; "
        f"blocks of {jb} of the {Q} grid positions */")
    ctx(f"const int32_t xzp = (int32_t){_scalar(ctx, op.XZ)};" if ctx.has_input(op.XZ)
        else "const int32_t xzp = 0;")
    inP = numel(geo.inp)
    with ctx.block(f"for (size_t nb = 0; nb < {geo.batch}u; ++nb)"):
        with ctx.block(f"for (size_t gi = 0; gi < {geo.group}u; ++gi)"):
            ctx(f"aicc_qpad{sfx}({ctx.inp[op.X]} + (nb * {geo.cin}u + gi * {geo.cin_g}u) * "
                f"{inP}u, {geo.cin_g}u, {H}u, {W}u, xzp, {hp}u, {wp}u, {pt}u, {pl}u, {slack}u, "
                f"{xp});")
            with ctx.block(f"for (size_t q0 = 0; q0 < {Q}u; q0 += {jb}u)"):
                ctx(f"const size_t jn = {Q}u - q0 < {jb}u ? {Q}u - q0 : {jb}u;")
                ctx(f"{g}({k2}u, (jn + {nr - 1}u) / {nr}u, {wpk} + gi * {geo.cout_g * 2 * k2}u, "
                    f"{xp} + q0 * 2u, {offs}, {cb}, {jb}u);")
                with ctx.block(f"for (size_t og = 0; og < {geo.cout_g}u; ++og)"):
                    ctx(f"const size_t oc = gi * {geo.cout_g}u + og;")
                    if requant is not None:
                        ctx(f"const float mlt = {requant[2]};")
                    with ctx.block(f"for (size_t row = q0 / {wp}u; row * {wp}u < q0 + jn; ++row)"):
                        ctx(f"const size_t s = row * {wp}u > q0 ? row * {wp}u : q0;")
                        ctx(f"const size_t e = row * {wp}u + {OW}u < q0 + jn ? row * {wp}u + {OW}u "
                            ": q0 + jn;")
                        with ctx.block("if (s < e)"):
                            _post_conv(ctx, isa, requant, "e - s", f"{cb} + og * {jb}u + (s - q0)",
                                       f"{ctx.out[0]} + (nb * {geo.cout}u + oc) * {P}u + "
                                       f"row * {OW}u + (s - row * {wp}u)")


def emit_conv(op, node, ctx, requant) -> None:
    """Conv form. ``requant``: None (int32 output) or (rnd, wrap, mult, bias) with mult the C
    expression of the float multiplier of output channel ``oc`` and bias its int32 C
    expression or None."""
    geo = ConvGeometry(op, node, ctx.in_shape(op.X), ctx.in_shape(op.W))
    if implicit_ok(geo):
        emit_conv_implicit(op, node, ctx, requant)
        return
    isa = isa_for(ctx)
    d = ISA[isa]
    ctx.kernel = isa
    nr = d["nr"]
    ta = ctx.in_dtype(op.X)
    P, K = numel(geo.out), geo.cin_g * numel(geo.k)
    k2 = (K + 1) // 2
    w = np.asarray(ctx.in_const(op.W)).astype(np.int64).reshape(geo.cout, K)
    w = w - _zp_values(ctx, op.WZ, geo.cout, None)[:, None]
    wp = ctx.const(pack_a(w.astype(np.int16)), "qw")
    jb = block_positions(P, k2, nr)
    ctx.helper("conv.0.params", PARAMS)
    ctx.helper("conv.1.range", RANGE)
    ctx.helper("qlinear.4.0.string", "#include <string.h>")
    code, sfx = _typed(PACK_B, ta)
    ctx.helper(f"qlinear.4.1.im2col{sfx}", code)
    t = ctx.scratch(2 * jb * 2, "int16_t", "qt")
    bp = ctx.scratch(k2 * jb * 2 * 2, "int16_t", "qb")
    cb = ctx.scratch(geo.cout_g * jb * 4, "int32_t", "qc")
    g = _gemm(ctx, isa, geo.cout_g)
    yc = ctype(ctx.out_dtype(0))
    ctx(f"/* {geo.describe()}: int16-pair GEMM ({isa}), weights - wzp packed at build time, "
        f"im2col blocks of {jb} positions */")
    ctx(geo.params())
    ctx(f"const int32_t xzp = (int32_t){_scalar(ctx, op.XZ)};" if ctx.has_input(op.XZ)
        else "const int32_t xzp = 0;")
    inP = numel(geo.inp)
    with ctx.block(f"for (size_t nb = 0; nb < {geo.batch}u; ++nb)"):
        with ctx.block(f"for (size_t gi = 0; gi < {geo.group}u; ++gi)"):
            with ctx.block(f"for (size_t p0 = 0; p0 < {P}u; p0 += {jb}u)"):
                ctx(f"const size_t jn = {P}u - p0 < {jb}u ? {P}u - p0 : {jb}u;")
                ctx(f"const size_t jbp = (jn + {nr - 1}u) / {nr}u * {nr}u;")
                ctx(f"aicc_qim2col{sfx}(&prm, {ctx.inp[op.X]} + (nb * {geo.cin}u + gi * "
                    f"{geo.cin_g}u) * {inP}u, xzp, {K}u, p0, jn, jbp, {nr}u, {t}, {t} + {jb}u, "
                    f"{bp});")
                ctx(f"{g}({k2}u, jbp / {nr}u, {wp} + gi * {geo.cout_g * 2 * k2}u, {bp}, {cb}, "
                    "jbp);")
                with ctx.block(f"for (size_t og = 0; og < {geo.cout_g}u; ++og)"):
                    ctx(f"const size_t oc = gi * {geo.cout_g}u + og;")
                    dst = f"{ctx.out[0]} + (nb * {geo.cout}u + oc) * {P}u + p0"
                    if requant is None:
                        ctx(f"memcpy({dst}, {cb} + og * jbp, jn * sizeof(int32_t));")
                    else:
                        rnd, wrap, mult, bias = requant
                        fn = _requant(ctx, isa, ctx.out_dtype(0).name, rnd, wrap)
                        ctx(f"const float mlt = {mult};")
                        ctx(f"{fn}(jn, {cb} + og * jbp, {bias or '0'}, &mlt, 0u, yzp, "
                            f"({yc} *)({dst}));")
