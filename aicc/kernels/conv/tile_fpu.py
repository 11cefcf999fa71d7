"""The portable conv GEMM's register tile for a scalar FPU with fused multiply-add (an ISA
description with an ``fpu`` entry: isa/fpv4, the Cortex-M4F / M7 FPU).

Same contract as base_c's aicc_tile4x8 (4 output channels x a panel of 8 positions, weights
packed [k][4], the panel [k][8]), but computed as 8 / cols column groups of rows x cols
scalar sums (4 x 4 on FPv4: 16 sums, 4 weights and 4 inputs in 24 of the 32 single-precision
registers; the portable tile's 32 sums in vectors of 4 spilled on every k there), each product
one fused multiply-add.

Rounding: per output, k ascending from +0 in blocks of 64, each product added by one fused
multiply-add (one rounding, where the portable tile rounds the product and the sum), the
blocks' sums added in order: the portable tile's order with FMA, as the SIMD kernels round.
NaN and Inf as IEEE fmaf gives them.
"""
from __future__ import annotations

from ..isa.registry import table

FPU = table("fpu")


def tile(isa: str) -> str:
    """C text of aicc_tile4x8_SFX for the description's FPU (TYPE is float)."""
    f = FPU[isa]
    rows, cols = 4, f["cols"]
    if rows != f["rows"] or 8 % cols:
        raise ValueError(f"isa {isa}: the conv tile needs fpu rows 4 and cols dividing 8")
    rr, cc = range(rows), range(cols)
    sums = "\n".join("            TYPE " + ", ".join(f"s{r}{u} = 0" for u in cc) + ";"
                     for r in rr)
    loads = ("                const TYPE " + ", ".join(f"w{r} = w[{r}]" for r in rr) + ";\n"
             "                const TYPE " + ", ".join(f"c{u} = c[{u}]" for u in cc) + ";")
    fmas = "\n".join("                " + " ".join(
        f"s{r}{u} = {f['fma'].format(a=f'w{r}', b=f'c{u}', c=f's{r}{u}')};" for u in cc)
        for r in rr)
    first = "\n".join(f"                acc[{r}][h + {u}] = s{r}{u};" for r in rr for u in cc)
    more = "\n".join(f"                acc[{r}][h + {u}] += s{r}{u};" for r in rr for u in cc)
    return f"""\
/* 4x8 register tile of the conv GEMM on a scalar FPU ({isa}; kernels/conv/tile_fpu.py): as
 * aicc_tile4x8 (acc[r][u] = sum over k of wp[k * 4 + r] * col[k * 8 + u], in blocks of 64 k),
 * by column groups of 4 x {cols} scalar sums, each product a fused multiply-add. */
static void aicc_tile4x8_SFX(size_t K, const TYPE *restrict wp, const TYPE *restrict col,
                             TYPE acc[4][8])
{{
    for (size_t h = 0; h < 8; h += {cols}) {{
        for (size_t kb = 0; kb < K || kb == 0; kb += 64) {{
            const size_t ke = K - kb < 64 ? K : kb + 64;
            const TYPE *w = wp + 4 * kb, *c = col + 8 * kb + h;
{sums}
            for (size_t k = kb; k < ke; ++k, w += 4, c += 8) {{
{loads}
{fmas}
            }}
            if (kb == 0) {{
{first}
            }} else {{
{more}
            }}
        }}
    }}
}}"""
