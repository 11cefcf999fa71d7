"""A float sum over the middle axis of [O, D, I] in blocks of COL_BLOCK rows (ops/reduce.py:
a channel-last spatial mean, as layout-nhwc makes of a squeeze-excite block's mean). Each
block's rows are summed from zero into a scratch row t (ascending d), then added to the totals
in order: the error of a long sum grows with sqrt(COL_BLOCK + D / COL_BLOCK), not sqrt(D)."""
from __future__ import annotations

COL_BLOCK = 64      # rows per block (as the GEMMs' K blocks)


def blocked_cols(ctx, name: str, kind: str, ct: str, init: str, acc: str, finish: str) -> str:
    """The helper ``NAME_bCOL_BLOCK(O, D, I, x, y, t)``: acc is the C expression adding the
    term of v to t[i]; finish the code after the sum (the mean's division, ...)."""
    fn = f"{name}_b{COL_BLOCK}"
    return ctx.helper(fn, f"""\
/* {kind} over the middle axis of [O, D, I], I > 1: a row of I results at a time, in blocks of
 * {COL_BLOCK} rows of the input, each summed from zero into t (ascending d) and then added to
 * the totals in order (kernels/reduce/cols.py). */
static void {fn}(size_t O, size_t D, size_t I, const {ct} *restrict x, {ct} *restrict y,
    {ct} *restrict t)
{{
    for (size_t o = 0; o < O; ++o) {{
        const {ct} *restrict xo = x + o * D * I;
        {ct} *restrict yo = y + o * I;
        for (size_t d0 = 0; d0 < D; d0 += {COL_BLOCK}u) {{
            const size_t d1 = D - d0 < {COL_BLOCK}u ? D : d0 + {COL_BLOCK}u;
            for (size_t i = 0; i < I; ++i) t[i] = {init};
            for (size_t d = d0; d < d1; ++d) {{
                const {ct} *restrict xd = xo + d * I;
                for (size_t i = 0; i < I; ++i) {{
                    const {ct} v = xd[i];
                    t[i] = {acc};
                }}
            }}
            for (size_t i = 0; i < I; ++i) yo[i] = d0 ? yo[i] + t[i] : t[i];
        }}{finish}
    }}
}}""")
