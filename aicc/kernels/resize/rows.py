"""Bilinear upsampling of the last two dims with compile-time tables (ops/resize.py), by rows:
per plane (the merged leading identity dims), each input row is interpolated along x once
into a row cache (``R[r][j] = wlo_x[j] * x[r][lo_x[j]] + whi_x[j] * x[r][hi_x[j]]``), then
every output row is ``y[i][j] = wlo_y[i] * R[lo_y[i]][j] + whi_y[i] * R[hi_y[i]][j]``, a
contiguous loop the C compiler vectorizes.

Values: the element-wise walk computes ``a1 * (a2 * x00 + b2 * x01) + b1 * (a2 * x10 + b2 *
x11)``; R holds its parenthesized terms, rounded to float32 the same way (bundles compile as
ISO C: no FMA contraction), so the results are the same bits, NaN / Inf included. The walk
reads four gathered values per output; here each output costs two contiguous loads (DeepLabV3's
21 x 16 x 16 -> 256 x 256 on x86-avx2: 1.37 ms -> 0.39 ms).

Taken for float32 when the plan is [identity dims,] linear H, linear W and H does not shrink
(the cache holds every input row of a plane: no more rows than the output has).
"""
from __future__ import annotations

_HROW = """\
/* Resize by rows (kernels/resize/rows.py): one input row interpolated along x into r:
 * r[j] = wl[j] * x[lo[j]] + wh[j] * x[hi[j]] for j < n. */
static void aicc_rs_hrow_{t}(size_t n, const float *restrict x, const {ct} *restrict lo,
    const {ct} *restrict hi, const float *restrict wl, const float *restrict wh,
    float *restrict r)
{{
    for (size_t j = 0; j < n; ++j)
        r[j] = wl[j] * x[lo[j]] + wh[j] * x[hi[j]];
}}"""

_VROW = """\
/* Resize by rows (kernels/resize/rows.py): one output row from two cached rows,
 * y[j] = a * r0[j] + b * r1[j]. */
static void aicc_rs_vrow(size_t n, float a, const float *restrict r0, float b,
    const float *restrict r1, float *restrict y)
{
    for (size_t j = 0; j < n; ++j)
        y[j] = a * r0[j] + b * r1[j];
}"""


def applies(plan, shape, out, ctype: str) -> bool:
    if ctype != "float" or len(plan) < 2 or len(plan) > 3:
        return False
    *ids, py, px = plan
    return (py[0] == "lin" and px[0] == "lin" and all(p[0] == "id" for p in ids)
            and shape[-2] <= out[-2])


def emit(ctx, plan, shape, itype: str) -> None:
    """The step body for a plan that ``applies``; itype: the tables' C index type."""
    *ids, (_, oh, tly, thy, wly, why), (_, ow, tlx, thx, wlx, whx) = plan
    h, w = int(shape[-2]), int(shape[-1])
    stride, planes = (ids[0][1], ids[0][2]) if ids else (h * w, 1)
    t = "u32" if itype == "uint32_t" else "u64"
    hrow = ctx.helper(f"aicc_rs_hrow_{t}", _HROW.format(t=t, ct=itype))
    vrow = ctx.helper("aicc_rs_vrow", _VROW)
    rc = ctx.scratch(h * ow * 4, "float", "rows")
    ctx(f"/* by rows: {h} input rows per plane interpolated along x into a cache, then "
        f"{oh} output rows from pairs of them */")
    with ctx.block(f"for (size_t p = 0; p < {planes}u; ++p)"):
        ctx(f"const float *restrict xp = {ctx.inp[0]} + p * {stride}u;")
        ctx(f"float *restrict yp = {ctx.out[0]} + p * {oh * ow}u;")
        ctx(f"for (size_t r = 0; r < {h}u; ++r) {hrow}({ow}u, xp + r * {w}u, {tlx}, {thx}, "
            f"{wlx}, {whx}, {rc} + r * {ow}u);")
        ctx(f"for (size_t i = 0; i < {oh}u; ++i) {vrow}({ow}u, {wly}[i], {rc} + {tly}[i] / "
            f"{w}u * {ow}u, {why}[i], {rc} + {thy}[i] / {w}u * {ow}u, yp + i * {ow}u);")
