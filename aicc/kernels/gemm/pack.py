"""The packing of A for the packed-A GEMM kernels (gemm/simd.py): per M block of a K block,
row tiles of the schedule's rows, each k-major (the layout tile_k_loop's "packed" A reads one
k's rows of with one multi-vector load)."""
from __future__ import annotations

from ..isa.registry import table
from .tile import _f

ISA = table("gemm")


def _pack_tiles(d: dict, mr: int) -> str:
    """The full tiles of mr rows (a multiple of 4) of pack_a_text, 4 k at a time: the 4 x 4
    blocks of each group of 4 rows transposed in registers (the ISA's ``tr4v``), the tile's
    mr * 4 packed values stored in order (NEON 12 rows: 12 loads, 24 TRN / ZIP and 6 STP per
    48 values, against about 1.75 instructions per value with the generic loops)."""
    vec, g = d["vec"], mr // 4
    o = [f"        if (rows == {mr}u) {{"]
    o += [f"            const float *restrict r{r} = s + {r}u * lda;" for r in range(mr)]
    o.append("            for (; k + 4u <= kc; k += 4u) {")
    o.append(f"                float *restrict dk = d + k * {mr}u;")
    o.append(f"                {vec} " + ", ".join(f"o{i}" for i in range(mr)) + ";")
    for i in range(g):
        ins = {f"a{r}": _f(d["load"], p=f"r{4 * i + r} + k") for r in range(4)}
        outs = {f"o{q}": f"o{q * g + i}" for q in range(4)}
        o.append("                " + _f(d["tr4v"], **ins, **outs) + ";")
    o += ["                " + _f(d["store"], p=f"dk + {4 * n}u", v=f"o{n}") + ";"
          for n in range(mr)]
    o.append("            }")
    o.append("        }")
    return "\n" + "\n".join(o)


def pack_a_text(isa: str, mr: int = 0) -> tuple:
    """(name, C text) of the helper that packs A[0:mc, 0:kc] (row stride lda) into row tiles
    of mr rows (the last mc % mr), each k-major: ap[i0 * kc + k * rows + r] = A(i0 + r, k),
    the layout of the packed-A kernels (rows i0.. at ap + i0 * kc). 4 x 4 blocks by the
    ISA's ``tr4`` (NEON: TRN1 / TRN2), the rest element by element; with ``tr4v``, the
    full tiles of the calls' mr (a multiple of 4) by _pack_tiles."""
    d = ISA[isa]
    tiles = bool(d.get("tr4v")) and mr % 4 == 0 and mr > 0
    name = f"aicc_sg_{isa}_packa{mr if tiles else ''}"
    tr4 = d.get("tr4")
    blocks = _pack_tiles(d, mr) if tiles else ""
    if tr4:
        blocks += f"""
        for (; k + 4u <= kc; k += 4u) {{
            size_t g = 0;
            for (; g + 4u <= rows; g += 4u)
                {_f(tr4, s="s + g * lda + k", lda="lda", d="d + k * rows + g", ldd="rows")};
            for (; g < rows; ++g)
                for (size_t q = 0; q < 4u; ++q)
                    d[(k + q) * rows + g] = s[g * lda + k + q];
        }}"""
    return name, f"""\
/* A[0:mc, 0:kc] (row stride lda) into the packed-A kernels' layout: row tiles of mr rows (the
 * last mc % mr), k-major, tile i0 at ap + i0 * kc: ap[i0 * kc + k * rows + r] = A(i0 + r, k). */
static void {name}(const float *restrict a, size_t lda, size_t mc, size_t kc, size_t mr,
    float *restrict ap)
{{
    for (size_t i0 = 0; i0 < mc; i0 += mr) {{
        const size_t rows = mc - i0 < mr ? mc - i0 : mr;
        const float *restrict s = a + i0 * lda;
        float *restrict d = ap + i0 * kc;
        size_t k = 0;{blocks}
        for (; k < kc; ++k)
            for (size_t r = 0; r < rows; ++r)
                d[k * rows + r] = s[r * lda + k];
    }}
}}"""
