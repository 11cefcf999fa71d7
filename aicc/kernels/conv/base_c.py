"""C text of the convolution kernels and the pieces shared with ConvTranspose and pooling:
the geometry struct, valid ranges, axpy, 8-wide packing, the 4x8 register tile.

Every node is described by one ``aicc_conv_params`` (a 1-D or 2-D node is a 3-D node with
leading unit spatial dims) and each step is one call of a shared helper with a constant
params struct. Kernels:

* ``aicc_conv_gemm`` (its im2col and driver in kernels/conv/gemm_c.py): im2col tiles into step
  scratch, then this module's 4x8 register tile with the weights packed at compile time as
  [group][block of 4 output channels][k][4]. 1x1 stride-1 unpadded convs gather with a
  straight copy.
* ``aicc_conv_direct``: depthwise (one input channel per group) and single-output-channel
  groups: per output row, one contiguous multiply-add per kernel tap over the output columns
  where the tap lands inside the input.
* ConvTranspose kernels live in conv_transpose.py (they reuse axpy, pack8 and the tile).

Padding is never tested per element: ``aicc_valid_range`` gives the range of positions whose
tap lands inside the tensor. Index math is size_t; signed offsets are int64_t. The C text uses
``TYPE`` and ``_SFX`` placeholders (float/_f32, double/_f64).
"""
from __future__ import annotations

import hashlib
import re

import numpy as np

from ...emit_c.cwriter import ctype, sanitize
from ..vmath.act import ACT, ACT_ATTRS, act_expr, fused_epilogue
from ..vmath.mathlib import tag_of
from ..vmath.vector import array_act

# im2col tile budget in elements (256 KiB of float32): ConvTranspose's tiles (tile_size) and
# the conv GEMM's (conv_gemm_c.gemm_tiles)
COL_BUDGET = 1 << 16

PARAMS = """\
/* Geometry of one convolution or pooling node. 1-D and 2-D nodes are 3-D nodes with
 * leading unit spatial dims; spatial arrays are ordered D, H, W. Pooling uses cin_g for
 * the channels (group 1). pad: leading padding, pad_end: trailing padding. */
typedef struct {
    size_t batch, group, cin_g, cout_g;     /* channels per group: input, output */
    size_t in[3], out[3], k[3];             /* spatial sizes: input, output, kernel */
    size_t stride[3], dil[3], pad[3], pad_end[3];
    size_t tile;      /* conv GEMM path: output positions per im2col tile (multiple of 8) */
    int flag;         /* AveragePool: count_include_pad; MaxPool indices: storage_order */
} aicc_conv_params;"""

RANGE = """\
/* The positions o in [0, n_out) whose tap lands inside [0, n_in), i.e.
 * 0 <= o * stride + off < n_in, as [*lo, *hi) (empty when *lo == *hi). */
static AICC_UNUSED void aicc_valid_range(int64_t off, size_t stride, size_t n_in,
                                         size_t n_out, size_t *lo, size_t *hi)
{
    const int64_t s = (int64_t)stride, last = (int64_t)n_in - 1 - off;
    int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t b = last < 0 ? 0 : last / s + 1;
    if (a > (int64_t)n_out) a = (int64_t)n_out;
    if (b > (int64_t)n_out) b = (int64_t)n_out;
    if (b < a) b = a;
    *lo = (size_t)a;
    *hi = (size_t)b;
}

/* Offset of kernel tap t along spatial dim d from the window start: t * dilation - pad. */
static AICC_UNUSED int64_t aicc_tap_off(const aicc_conv_params *p, int d, size_t t)
{
    return (int64_t)(t * p->dil[d]) - (int64_t)p->pad[d];
}

/* o * stride + t * dilation - pad along spatial dim d: the input coordinate of output
 * position o under kernel tap t (Conv, pooling; may lie in the padding), or the output
 * coordinate of input position o (ConvTranspose). */
static AICC_UNUSED int64_t aicc_pos(const aicc_conv_params *p, int d, size_t o, size_t t)
{
    return (int64_t)(o * p->stride[d]) + aicc_tap_off(p, d, t);
}

/* Is the coordinate i inside [0, n)? */
static AICC_UNUSED int aicc_inside(int64_t i, size_t n)
{
    return i >= 0 && i < (int64_t)n;
}"""

AXPY = """\
/* y[i * sy] += a * x[i * sx] for i < n: one weighted input row into an output row. With a
 * contiguous y it runs in blocks of 8, which compilers vectorize (unit stride) at -O2. */
static void aicc_axpy_SFX(size_t n, TYPE a, const TYPE *restrict x, size_t sx,
                          TYPE *restrict y, size_t sy)
{
    const size_t n8 = n - n % 8;
    size_t i = 0;
    if (sy == 1) {
        for (; i < n8; i += 8)
            for (size_t u = 0; u < 8; ++u)
                y[i + u] += a * x[(i + u) * sx];
    }
    for (; i < n; ++i)
        y[i * sy] += a * x[i * sx];
}"""

PACK8 = """\
/* Packs rows [0, rows) x columns [p0, p0 + nt) of a row-major matrix (leading dimension ld)
 * into panels of 8 columns, col[(j / 8) * rows * 8 + r * 8 + j % 8]; the unused lanes of the
 * last panel are zero. */
static void aicc_pack8_SFX(const TYPE *restrict x, size_t rows, size_t ld, size_t p0, size_t nt,
                           TYPE *restrict col)
{
    const size_t K8 = rows * 8, ntp = (nt + 7) / 8 * 8;
    for (size_t r = 0; r < rows; ++r) {
        const TYPE *xr = x + r * ld + p0;
        TYPE *c = col + r * 8;
        size_t j = 0;
        for (; j + 8 <= nt; j += 8)     /* whole panels: a fixed loop, vectorized */
            for (size_t u = 0; u < 8; ++u)
                c[(j >> 3) * K8 + u] = xr[j + u];
        for (; j < nt; ++j)
            c[(j >> 3) * K8 + (j & 7)] = xr[j];
        for (; j < ntp; ++j)
            c[(j >> 3) * K8 + (j & 7)] = 0;
    }
}"""

# The patch loops of an im2col (conv_gemm_c's aicc_im2col, qgemm_c's aicc_icols16): per
# patch entry k (channel ic, taps kz, ky, kx) the positions [p0, p0 + nt) one output row
# segment at a time, the valid columns [a, b) read from row xr, the rest zero. ELEM: the
# input's C type; COLPTR: the declaration of c (entry k's first position; may skip entry k
# with continue); DST: position j's slot of entry k; VALUE: the store of SRC (the input
# value); TAIL: after each entry's positions.
PATCH_LOOPS = """\
    for (size_t ic = 0; ic < p->cin_g; ++ic)
        for (size_t kz = 0; kz < p->k[0]; ++kz)
            for (size_t ky = 0; ky < p->k[1]; ++ky)
                for (size_t kx = 0; kx < p->k[2]; ++kx, ++k) {
                    const int64_t ox = aicc_tap_off(p, 2, kx);
COLPTR
                    size_t lo, hi, j = 0, q = p0;
                    aicc_valid_range(ox, SW, p->in[2], OW, &lo, &hi);
                    while (q < p0 + nt) {   /* one output row segment [x0, x1) per pass */
                        const size_t x0 = q % OW;
                        const size_t x1 = OW - x0 < p0 + nt - q ? OW : x0 + (p0 + nt - q);
                        const int64_t iz = aicc_pos(p, 0, q / OHW, kz);
                        const int64_t iy = aicc_pos(p, 1, q / OW % p->out[1], ky);
                        const ELEM *xr = x;
                        size_t a = x0, b = x0, o = x0;   /* valid columns [a, b) */
                        if (aicc_inside(iz, p->in[0]) && aicc_inside(iy, p->in[1])) {
                            a = lo > x0 ? (lo < x1 ? lo : x1) : x0;
                            b = hi < x1 ? hi : x1;
                            b = b < a ? a : b;
                            xr = x + ic * X + ((size_t)iz * p->in[1] + (size_t)iy) * p->in[2];
                        }
                        for (; o < a; ++o, ++j)
                            DST = 0;
CHUNKS                        for (; o < b; ++o, ++j)
VALUE
                        for (; o < x1; ++o, ++j)
                            DST = 0;
                        q += x1 - x0;
                    }
TAIL                }
"""


def patch_loops(elem: str, colptr: str, dst: str, value: str, tail: str = "",
                chunks: str = "") -> str:
    """PATCH_LOOPS with its placeholders filled (value: an expression of SRC; chunks: code
    that may take a head of the valid run [o, b) first, advancing o and j)."""
    src = "xr[(size_t)((int64_t)(o * SW) + ox)]"
    store = f"{dst} = {value.replace('SRC', src)};"
    if len(store) > 72:      # wrapped after the "=" (C lines within 100 columns)
        store = f"{dst} =\n                                {value.replace('SRC', src)};"
    return (PATCH_LOOPS.replace("COLPTR", " " * 20 + colptr).replace("ELEM", elem)
            .replace("VALUE", " " * 28 + store).replace("DST", dst).replace("TAIL", tail)
            .replace("CHUNKS", chunks))


TILE = """\
/* 4x8 register tile of the conv GEMM: acc[r][u] = sum over k of wp[k * 4 + r] * col[k * 8 + u]
 * (4 output channels x 8 output positions). The accumulators are arrays of 4 (a loop of 4 is
 * one 16-byte vector at -O2, held in a register; loops of 8 were vectorized as two-pass loops
 * whose sums GCC kept in memory). The sum runs in blocks of 64 k added to the totals, which
 * keeps rounding error growth with K in check (about onnxruntime's accuracy, which uses FMA). */
static void aicc_tile4x8_SFX(size_t K, const TYPE *restrict wp, const TYPE *restrict col,
                             TYPE acc[4][8])
{
    TYPE s0[8] = {0}, s1[8] = {0}, s2[8] = {0}, s3[8] = {0};
    for (size_t kb = 0; kb < K; kb += 64) {
        const size_t ke = K - kb < 64 ? K : kb + 64;
        TYPE a0l[4] = {0}, a0h[4] = {0};
        TYPE a1l[4] = {0}, a1h[4] = {0};
        TYPE a2l[4] = {0}, a2h[4] = {0};
        TYPE a3l[4] = {0}, a3h[4] = {0};
        for (size_t k = kb; k < ke; ++k) {
            const TYPE *c = col + k * 8;
            const TYPE w0 = wp[4 * k], w1 = wp[4 * k + 1], w2 = wp[4 * k + 2], w3 = wp[4 * k + 3];
            for (size_t u = 0; u < 4; ++u) {
                a0l[u] += w0 * c[u];
                a0h[u] += w0 * c[4 + u];
                a1l[u] += w1 * c[u];
                a1h[u] += w1 * c[4 + u];
                a2l[u] += w2 * c[u];
                a2h[u] += w2 * c[4 + u];
                a3l[u] += w3 * c[u];
                a3h[u] += w3 * c[4 + u];
            }
        }
        for (size_t u = 0; u < 4; ++u) {
            s0[u] += a0l[u];
            s0[4 + u] += a0h[u];
            s1[u] += a1l[u];
            s1[4 + u] += a1h[u];
            s2[u] += a2l[u];
            s2[4 + u] += a2h[u];
            s3[u] += a3l[u];
            s3[4 + u] += a3h[u];
        }
    }
    for (size_t u = 0; u < 8; ++u) {
        acc[0][u] = s0[u];
        acc[1][u] = s1[u];
        acc[2][u] = s2[u];
        acc[3][u] = s3[u];
    }
}"""

DIRECT = """\
/* Direct convolution for depthwise groups (one input channel) and groups with one output
 * channel: each output plane starts at the bias; per kernel tap, the ranges of output
 * rows/columns where the tap lands inside the input are computed once, then every such row
 * accumulates the weighted input row (no per-element bounds tests). w: ONNX layout
 * [M][C/group][kD][kH][kW]. The fused epilogue (ep, may be NULL) runs on the finished plane. */
static void aicc_conv_direct_SFX(const aicc_conv_params *p, const TYPE *restrict x,
                                 const TYPE *restrict w, const TYPE *restrict bias,
                                 TYPE *restrict y, void (*ep)(TYPE *, size_t))
{
    const size_t X = p->in[0] * p->in[1] * p->in[2], P = p->out[0] * p->out[1] * p->out[2];
    const size_t KK = p->k[0] * p->k[1] * p->k[2], OW = p->out[2], SW = p->stride[2];
    for (size_t n = 0; n < p->batch; ++n)
        for (size_t g = 0; g < p->group; ++g)
            for (size_t m = 0; m < p->cout_g; ++m) {
                const size_t oc = g * p->cout_g + m;
                const TYPE bv = bias ? bias[oc] : (TYPE)0;
                TYPE *yc = y + (n * p->group * p->cout_g + oc) * P;
                for (size_t i = 0; i < P; ++i)
                    yc[i] = bv;
                for (size_t ic = 0; ic < p->cin_g; ++ic) {
                    const TYPE *xc = x + ((n * p->group + g) * p->cin_g + ic) * X;
                    const TYPE *wc = w + (oc * p->cin_g + ic) * KK;
                    for (size_t t = 0; t < KK; ++t) {
                        const size_t kz = t / (p->k[1] * p->k[2]), ky = t / p->k[2] % p->k[1];
                        const size_t kx = t % p->k[2];
                        size_t zlo, zhi, ylo, yhi, lo, hi;
                        aicc_valid_range(aicc_tap_off(p, 0, kz), p->stride[0], p->in[0],
                                         p->out[0], &zlo, &zhi);
                        aicc_valid_range(aicc_tap_off(p, 1, ky), p->stride[1], p->in[1],
                                         p->out[1], &ylo, &yhi);
                        aicc_valid_range(aicc_tap_off(p, 2, kx), SW, p->in[2], OW, &lo, &hi);
                        if (lo == hi)
                            continue;
                        for (size_t z = zlo; z < zhi; ++z)
                            for (size_t r = ylo; r < yhi; ++r) {
                                const size_t iz = (size_t)aicc_pos(p, 0, z, kz);
                                const size_t iy = (size_t)aicc_pos(p, 1, r, ky);
                                const TYPE *xr = xc + (iz * p->in[1] + iy) * p->in[2];
                                aicc_axpy_SFX(hi - lo, wc[t], xr + aicc_pos(p, 2, lo, kx), SW,
                                              yc + (z * p->out[1] + r) * OW + lo, 1);
                            }
                    }
                }
                if (ep)
                    ep(yc, P);
            }
}"""

# -- helpers for emitters ----------------------------------------------------------------

def suffix(dtype) -> str:
    sfx = {"float32": "_f32", "float64": "_f64", "int8": "_i8", "uint8": "_u8"}
    return sfx[np.dtype(dtype).name]


def typed(code: str, dtype, isa: str | None = None) -> str:
    """The C text with TYPE and _SFX filled in for dtype (and the ISA whose spellings it
    holds, so its functions do not clash with the portable ones: _fpv4_f32)."""
    code = re.sub(r"\bTYPE\b", ctype(dtype), code)
    return code.replace("_SFX", (f"_{isa}" if isa else "") + suffix(dtype))


def use(ctx, dtype, *parts, isa: str | None = None) -> None:
    """Register the params struct, the range helper and the given typed kernel parts (the
    texts above, or (key, text) pairs for kernels defined elsewhere) in dependency order:
    helpers are emitted sorted by key."""
    ctx.helper("conv.0.params", PARAMS)
    ctx.helper("conv.1.range", RANGE)
    sfx = (f"_{isa}" if isa else "") + suffix(dtype)
    for part in parts:
        key, text = part if isinstance(part, tuple) else (_KEYS[part], part)
        ctx.helper(f"conv.{key}{sfx}", typed(text, dtype, isa))


# fixed helper keys: the sort order puts every function after the ones it calls
# (conv_transpose.py uses "8.*")
_KEYS = {AXPY: "2.axpy", PACK8: "3.pack8", TILE: "5.tile", DIRECT: "7.direct"}


def to3d(vals, fill) -> tuple:
    vals = tuple(int(v) for v in vals)
    return (fill,) * (3 - len(vals)) + vals


def params_c(*, batch, group, cin_g, cout_g, inp, out, k, stride, dil, pad, pad_end,
             tile=0, flag=0) -> str:
    """A `static const aicc_conv_params prm` definition (spatial tuples of rank 1-3)."""
    def arr(v, fill=1):
        return "{ " + ", ".join(f"{d}u" for d in to3d(v, fill)) + " }"
    return ("static const aicc_conv_params prm = {\n"
            f"    {batch}u, {group}u, {cin_g}u, {cout_g}u,\n"
            f"    {arr(inp)}, {arr(out)}, {arr(k)},\n"
            f"    {arr(stride)}, {arr(dil)}, {arr(pad, 0)}, {arr(pad_end, 0)},\n"
            f"    {tile}u, {flag}\n"
            "};")


def act_check(node, dtype) -> str | None:
    """Why the node's fused epilogue cannot be emitted (None when it can)."""
    name, _ = fused_epilogue(node)
    if name is not None and name not in ACT:
        return f"fused activation {name!r} unknown"
    return None


def epilogue(ctx, node, dtype) -> str:
    """C name of the fused-activation helper ``void f(TYPE *y, size_t n)`` (or NULL)."""
    name, params = fused_epilogue(node)
    if name is None:
        return "NULL"
    params = {**ACT_ATTRS.get(name, {}), **params}
    if np.dtype(dtype) == np.float32:
        vec = array_act(ctx, name, params)
        if vec is not None:
            return vec
    tag = sanitize(name, 16)
    if params:
        tag += "_" + hashlib.sha1(repr(sorted(params.items())).encode()).hexdigest()[:8]
    expr = act_expr(name, params, 'v', dtype, ctx)
    tag += tag_of(expr)
    fn = f"aicc_ep{suffix(dtype)}_{tag}"
    shown = ", ".join(f"{k}={v}" for k, v in sorted(params.items()))
    # blocks of 8 (a loop of known count, which -O2 vectorizes: a plain loop of n kept Relu's
    # branch, GCC storing only where v < 0), then the tail. The blocks' end n8 is computed
    # first: with `i + 8u <= n` as the condition, aarch64 GCC 12 -O3, having inlined the
    # helper into a step whose n and y are constants (the portable Winograd's call over a
    # batch item), warned that the tail loop "invokes undefined behavior" (-Werror).
    code = (f"/* fused epilogue {name}({shown}) on n contiguous outputs */\n"
            f"static void {fn}(TYPE *y, size_t n)\n{{\n"
            "    const size_t n8 = n / 8u * 8u;\n"
            "    for (size_t i = 0; i < n8; i += 8u)\n"
            "        for (size_t u = 0; u < 8u; ++u) {\n"
            "            const TYPE v = y[i + u];\n"
            f"            y[i + u] = {expr};\n"
            "        }\n"
            "    for (size_t i = n8; i < n; ++i) {\n"
            "        const TYPE v = y[i];\n"
            f"        y[i] = {expr};\n"
            "    }\n}")
    ctx.helper(f"conv.ep.{fn}", typed(code, dtype))
    return fn


def tile_size(K: int, P: int) -> int:
    """Output positions per im2col tile: a multiple of 8 within COL_BUDGET elements."""
    whole = (P + 7) // 8 * 8
    return max(8, min(whole, COL_BUDGET // max(K, 1) // 8 * 8))


def pack_weights(w: np.ndarray, group: int) -> np.ndarray:
    """[M][C/g][k...] -> [group][ceil(M/g/4)][K][4], zero rows padding the last block."""
    m = w.shape[0]
    mg, k = m // group, int(np.prod(w.shape[1:]))
    nb = (mg + 3) // 4
    wr = np.zeros((group, nb * 4, k), dtype=w.dtype)
    wr[:, :mg, :] = w.reshape(group, mg, k)
    return np.ascontiguousarray(wr.reshape(group, nb, 4, k).transpose(0, 1, 3, 2))


PACKW = """\
/* Packs weights at run time exactly as pack_weights() does at compile time: per group g and
 * block b of 4 rows, wp[((g * nb + b) * K + k) * 4 + r] = w[g * sg + (4b + r) * sm + k * sk],
 * zero for rows 4b + r >= M (the padding of the last block). Conv: M = output channels per
 * group, K = C/group * kernel taps; ConvTranspose: the transposed weights. */
static void aicc_packw_SFX(const TYPE *restrict w, size_t group, size_t M, size_t K, size_t sg,
                           size_t sm, size_t sk, TYPE *restrict wp)
{
    const size_t nb = (M + 3) / 4;
    for (size_t g = 0; g < group; ++g)
        for (size_t b = 0; b < nb; ++b)
            for (size_t k = 0; k < K; ++k)
                for (size_t r = 0; r < 4; ++r) {
                    const size_t m = 4 * b + r;
                    *wp++ = m < M ? w[g * sg + m * sm + k * sk] : (TYPE)0;
                }
}"""


def packed_weights(ctx, dt, w_const, pack, group, M, K, strides) -> str:
    """C name of the packed weights: a compile-time constant (``pack()`` of the constant)
    or step scratch filled at run time from input 1 with element strides (sg, sm, sk)."""
    if w_const is not None:
        return ctx.const(pack(), "wpack")
    use(ctx, dt, ("3.packw", PACKW))
    nb = (M + 3) // 4
    wp = ctx.scratch(group * nb * 4 * K * dt.itemsize, ctype(dt), "wpack")
    sg, sm, sk = strides
    ctx("/* run-time weights: packed into scratch for the GEMM kernel */")
    ctx(f"aicc_packw{suffix(dt)}({ctx.inp[1]}, {group}u, {M}u, {K}u, {sg}u, {sm}u, {sk}u, {wp});")
    return wp
