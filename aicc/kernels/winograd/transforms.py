"""C text of the Winograd transforms (kernels/winograd/simd.py): the Toom-Cook matrices of F(m, 3)
from their interpolation points, and the generated input / output transform helpers for the
ISAs whose description has a winograd table (x86-avx2, x86-avx512, arm-neon), vectorized
across tiles (lane l = tile j + l of the block).

Input transform (``aicc_wgM_in_ISA``): per vector of L tiles and channel, the t x t input
patch d of each tile is read from the padded plane, V = B^T d B is computed in registers
(straight-line code from the matrix entries: +-1 as add/sub, others as FMA) and the t * t
vectors are stored in the GEMM's B panels. When the L tiles lie in one tile row (the common
case) each patch row is read with unit-stride vector loads and de-interleaved (stride m:
even/odd splits, twice for m = 4; one de-interleaving load per pair of vectors where the table
has ``load2``, LD2 on NEON); otherwise (a vector crossing tile rows) the lanes of each later
tile row are read the same way from loads shifted by their first lane and blended in. With
the table's ``straight`` (NEON, 32 registers: F(2,3)'s 16 values) the t patch rows and the
column transforms are straight-line code in registers, else loops through a vector buffer.

Output transform (``aicc_wgM_out_ISA``): per output channel and vector of L tiles, the t * t
GEMM results M, Y = A^T M A (m x m vectors), + bias, clamp [lo, hi], then the m rows of the L
tiles are interleaved into m * L consecutive outputs (vector stores) when the L tiles are in
one tile row and inside the output, else written lane by lane with bounds checks (edges
where the output size is not a multiple of m; lanes past the block are never stored).
"""
from __future__ import annotations

from fractions import Fraction

from . import prog
from ..isa.registry import ISAS
from .prog import cook_toom  # noqa: F401  (re-exported: the matrices)
from .tpad import lanes4

SKEW = 16     # floats between the t * t matrices of V and M: no 4 KiB aliasing of their rows



def vec(isa: str) -> dict:
    """The float32 vocabulary of the transforms: the ISA's vector spellings (min / max, which
    only the output clamp min(hi, max(lo, y)) uses, as the winograd table's ``clamp`` spells
    them where it has one) and mload: a masked load of the first {n} lanes at {p} (the ISA's
    tail mask)."""
    I = ISAS[isa]
    g = I.mask
    return {**I.vector, **I.winograd.get("clamp", {}),
            "mload": g["mload"].format(p="{p}", m=g["mask"])}


def float_lit(c: Fraction) -> str:
    """A float C literal of c (kernels/winograd/portable.py uses it too)."""
    v = float(c)
    return f"{v!r}f" if v != int(v) else f"{int(v)}.0f"


def lincomb(isa: str, out: str, terms, ind: str) -> str:
    """`const vec out = sum c * src` over (Fraction c, src) terms, +-1 as add/sub."""
    d = vec(isa)
    terms = [(c, s) for c, s in terms if c != 0]
    terms.sort(key=lambda cs: cs[0] != 1)           # start from a +1 term when there is one
    c0, s0 = terms[0]
    e = s0 if c0 == 1 else f"{d['mul']}({d['set1']}({float_lit(c0)}), {s0})"
    for c, s in terms[1:]:
        if c == 1:
            e = f"{d['add']}({e}, {s})"
        elif c == -1:
            e = f"{d['sub']}({e}, {s})"
        else:
            e = f"{d['fma']}({d['set1']}({float_lit(c)}), {s}, {e})"
    return f"{ind}const {d['v']} {out} = {e};"


def _transform(isa, mat, rows_in, name_in, name_out, ind) -> list:
    """out[i][j] = sum_r mat[i][r] (sum_s mat[j][s] in[r][s]): rows first (h), then columns,
    each 1-D transform by conv_winograd_prog's program for mat."""
    return ([ln for r in range(rows_in) for ln in _transform_row(isa, mat, r, name_in, ind)] +
            _transform_cols(isa, mat, rows_in, name_out, ind))


def _transform_row(isa, mat, r, name_in, ind) -> list:
    """h{r}_{j} = sum_s mat[j][s] in[r][s]."""
    n_out, n_in = len(mat), len(mat[0])
    return prog.emit(lincomb, isa, mat, [f"{name_in}{r}_{s}" for s in range(n_in)],
                     [f"h{r}_{j}" for j in range(n_out)], f"hp{r}_", ind)


def _columns_from(isa, mat, t, buf, dst, stride, ind) -> list:
    """Column transforms of the t x t row transforms in the vector buffer buf (row-major),
    each result stored at dst + (i * t + j) * stride."""
    d, o = vec(isa), []
    for j in range(t):
        o += [f"{ind}const {d['v']} g{r}_{j} = {buf}[{r * t + j}];" for r in range(t)]
        o += prog.emit(lincomb, isa, mat, [f"g{r}_{j}" for r in range(t)],
                       [f"w{i}_{j}" for i in range(t)], f"vp{j}_", ind)
        o += [f"{ind}{d['st']}({dst} + {i * t + j}u * {stride}, w{i}_{j});"
              for i in range(t)]
    return o


def _transform_cols(isa, mat, rows_in, name_out, ind) -> list:
    """out[i][j] = sum_r mat[i][r] h{r}_{j}."""
    n_out = len(mat)
    return [ln for j in range(n_out)
            for ln in prog.emit(lincomb, isa, mat, [f"h{r}_{j}" for r in range(rows_in)],
                                [f"{name_out}{i}_{j}" for i in range(n_out)], f"vp{j}_", ind)]


def _row_loads(isa, m, r, out: str, ind) -> list:
    """out{r}_{s}, s < m + 2: s[r * Wp + l * m + s] for lanes l (unit-stride loads from the
    patch row r, de-interleaved by m; reads up to s[r * Wp + L * m + 3])."""
    d, W = vec(isa), ISAS[isa].winograd
    L, (ev, od) = d["L"], W["split"]
    v = d["v"]
    o = [f"{ind}const float *restrict q{r} = s + {r}u * Wp;"]

    def load_split(off, ea, ob):
        """ea / ob: the even / odd floats of the 2 L at q{r} + off."""
        if "load2" in W:         # one de-interleaving load
            o.append(f"{ind}const {W['load2']['vecs2']} {ea}{ob} = "
                     f"{W['load2']['load'].format(p=f'q{r} + {off}u')};")
            o.append(f"{ind}const {v} {ea} = {ea}{ob}.val[0], {ob} = {ea}{ob}.val[1];")
            return
        a, b = f"{d['ld']}(q{r} + {off}u)", f"{d['ld']}(q{r} + {off + L}u)"
        o.append(f"{ind}const {v} {ea} = {ev.format(a=a, b=b)};")
        o.append(f"{ind}const {v} {ob} = {od.format(a=a, b=b)};")
    if m == 2:                   # phases 0, 1 at offset 0 and 2 (s = 0..3)
        for off in (0, 2):
            load_split(off, f"{out}{r}_{off}", f"{out}{r}_{off + 1}")
        return o
    if "halves" in W:
        return o + _row_loads4_halves(isa, r, out, ind)
    for h in range(2):           # phases 0..3 from the 4 L floats at offset 0
        load_split(2 * h * L, f"e{r}_{h}", f"o{r}_{h}")
    for ph, (x, y) in enumerate((("e", "e"), ("o", "o"), ("e", "e"), ("o", "o"))):
        f = ev if ph < 2 else od
        o.append(f"{ind}const {v} {out}{r}_{ph} = {f.format(a=f'{x}{r}_0', b=f'{y}{r}_1')};")
    for ph in (4, 5):            # phase 4 + i of tile l = phase i of tile l + 1
        o.append(f"{ind}const {v} {out}{r}_{ph} = "
                 f"{W['shift1'].format(a=f'{out}{r}_{ph - 4}', p=f'q{r} + {L * 4 + ph - 4}u')};")
    return o


def _row_loads4_halves(isa, r, out: str, ind) -> list:
    """F(4,3) on a vector of two 128-bit halves (8 lanes; ``halves``): tile l's phase p is
    float p of the 4-float chunk l of the row (chunk 8: the next tile's). The chunk pairs
    (k | k + 4), k = 0..4, are loaded as the two halves of a vector, and a 4 x 4 transpose
    inside the halves gives phases 0..3 (lanes: tiles 0..3 | 4..7); phases 4, 5 (floats 0, 1
    of chunks l + 1) likewise from the pairs 1..4. 12 in-half shuffles instead of 16 shuffles
    and lane-crossing permutes plus 2 permute-blend-broadcast shifts; reads up to q + 35
    (L * m + 3)."""
    W, v = ISAS[isa].winograd, ISAS[isa].vector["v"]
    load, (unlo, unhi), sh = W["halves"]["load"], W["unpack"], W["shuffle"]
    o = []
    for k in range(5):
        o.append(f"{ind}const {v} k{r}_{k} = "
                 f"{load.format(a=f'q{r} + {4 * k}u', b=f'q{r} + {4 * k + 16}u')};")
    for name, (a, b, hi) in {"t0": (0, 1, 0), "t1": (0, 1, 1), "t2": (2, 3, 0),
                             "t3": (2, 3, 1), "t4": (1, 2, 0), "t5": (3, 4, 0)}.items():
        f = unhi if hi else unlo
        o.append(f"{ind}const {v} {name}{r} = {f}(k{r}_{a}, k{r}_{b});")
    for ph, (a, b, imm) in enumerate((("t0", "t2", "0x44"), ("t0", "t2", "0xEE"),
                                      ("t1", "t3", "0x44"), ("t1", "t3", "0xEE"),
                                      ("t4", "t5", "0x44"), ("t4", "t5", "0xEE"))):
        o.append(f"{ind}const {v} {out}{r}_{ph} = {sh}({a}{r}, {b}{r}, {imm});")
    return o


def input_transform(isa: str, m: int) -> tuple:
    """(name, C text) of the input transform of F(m x m, 3 x 3)."""
    bt, _, _ = cook_toom(m)
    t = m + 2
    d, W = vec(isa), ISAS[isa].winograd
    L, nr, v = d["L"], 2 * d["L"], d["v"]
    name = f"aicc_wg{m}_in_{isa}"
    ind = "        "
    o = [f"/* Winograd F({m}x{m}, 3x3) input transform ({isa}): tiles [j0, j0 + nb) of the "
         f"padded plane xp",
         f" * of one channel (row pitch Wp, TW tiles per row; tile j at row (j / TW) * {m}, column "
         f"(j % TW) * {m}),",
         f" * V = B^T d B of each {t}x{t} patch into v: position xi at v + xi * vs, panels of {nr} "
         f"tiles x CP channels",
         f" * (tile jj of the block: [(jj / {nr}) * CP * {nr} + jj % {nr}]; v points at the "
         f"channel's row). A vector of {L} tiles is",
         " * loaded row segment by row segment (lanes [a, b) of a tile row: loads shifted by -a "
         "tiles, blended);",
         f" * reads stay within {L * m} floats before and {L * m + 4} after the plane (xp's "
         "slack); lanes past nb",
         " * are computed from slack values and never read. */",
         f"static void {name}(const float *restrict xp, size_t Wp, size_t CP, size_t TW, "
         "size_t j0,",
         "    size_t nb, float *restrict v, size_t vs)", "{"]
    if "split_idx" in W:
        o.append(W["split_idx"])
    o += [f"    for (size_t jv = 0; jv < nb; jv += {L}u) {{",
          "        const size_t j = j0 + jv, ty = j / TW, tx0 = j % TW;",
          f"        const size_t nl = nb - jv < {L}u ? nb - jv : {L}u;",
          f"        float *restrict vc = v + (jv / {nr}u) * CP * {nr}u + jv % {nr}u;"]
    if t * t <= W.get("straight", 0):
        return name, "\n".join(o + _input_straight(isa, m, ind) + ["    }", "}"])
    o += [f"        {v} hb[{t * t}];     /* the patch rows' 1-D transforms */",
          f"        for (size_t r = 0; r < {t}u; ++r) {{",
          f"        {v} " + ", ".join(f"d0_{s_}" for s_ in range(t)) + ";",
          "        {",
          f"        const float *restrict s = xp + (ty * {m}u + r) * Wp + tx0 * {m}u;"]
    o += _row_loads(isa, m, 0, "l", ind)
    o += [f"{ind}d0_{s_} = l0_{s_};" for s_ in range(t)]
    o += ["        }",
          "        for (size_t a = TW - tx0, row = ty + 1u; a < nl; a += TW, ++row) {",
          "        const size_t b = a + TW < nl ? a + TW : nl;",
          f"        {W['range_mask']}",
          f"        const float *restrict s = xp + (row * {m}u + r) * Wp - a * {m}u;"]
    o += _row_loads(isa, m, 0, "l", ind)
    o += [f"{ind}d0_{s_} = " + W["blend"].format(a=f"d0_{s_}", b=f"l0_{s_}") + ";"
          for s_ in range(t)]
    o.append("        }")
    o += _transform_row(isa, bt, 0, "d", ind)
    o += [f"{ind}hb[r * {t}u + {j}u] = h0_{j};" for j in range(t)]
    o.append("        }")
    o += _columns_from(isa, bt, t, "hb", "vc", "vs", ind)
    o += ["    }", "}"]
    return name, "\n".join(o)


def _input_straight(isa: str, m: int, ind: str) -> list:
    """The body of input_transform's loop over vectors of tiles as straight-line code (the
    table's ``straight``): the t patch rows loaded into t * t vectors, the rows of later tile
    rows blended in (one mask per tile row crossed), the row and column transforms, the
    stores; no vector buffer."""
    bt, _, _ = cook_toom(m)
    t, d, W = m + 2, vec(isa), ISAS[isa].winograd
    v = d["v"]
    o = [f"{ind}{v} " + ", ".join(f"d{r}_{s_}" for r in range(t) for s_ in range(t)) + ";",
         f"{ind}{{",
         f"{ind}const float *restrict s = xp + ty * {m}u * Wp + tx0 * {m}u;"]
    for r in range(t):
        o += _row_loads(isa, m, r, "l", ind)
        o += [f"{ind}d{r}_{s_} = l{r}_{s_};" for s_ in range(t)]
    o += [f"{ind}}}",
          f"{ind}for (size_t a = TW - tx0, row = ty + 1u; a < nl; a += TW, ++row) {{",
          f"{ind}const size_t b = a + TW < nl ? a + TW : nl;",
          f"{ind}{W['range_mask']}",
          f"{ind}const float *restrict s = xp + row * {m}u * Wp - a * {m}u;"]
    for r in range(t):
        o += _row_loads(isa, m, r, "l", ind)
        o += [f"{ind}d{r}_{s_} = " + W["blend"].format(a=f"d{r}_{s_}", b=f"l{r}_{s_}") + ";"
              for s_ in range(t)]
    o.append(f"{ind}}}")
    for r in range(t):
        o += _transform_row(isa, bt, r, "d", ind)
    for j in range(t):
        o += prog.emit(lincomb, isa, bt, [f"h{r}_{j}" for r in range(t)],
                       [f"w{i}_{j}" for i in range(t)], f"vp{j}_", ind)
        o += [f"{ind}{d['st']}(vc + {i * t + j}u * vs, w{i}_{j});" for i in range(t)]
    return o


def _interleave4_halves(isa: str, i: int, ind: str) -> list:
    """r{i}_0..3: row i of the 8 tiles' 4 x 4 outputs in order (tiles 2q, 2q + 1 in r{i}_q),
    from y{i}_0..3 (output column j of the 8 tiles), on a vector of two 128-bit halves
    (``halves``): a 4 x 4 transpose inside each half (c{i}_k: tiles k | 4 + k) and one
    cross-half permute per vector: 12 shuffles instead of 24 (unpack + permute per zip)."""
    v, H = ISAS[isa].vector["v"], ISAS[isa].winograd["halves"]
    lo, hi = H["lo"], H["hi"]
    return lanes4(isa, [f"y{i}_{j}" for j in range(4)], f"u{i}_",
                  [f"c{i}_{k}" for k in range(4)], ind) + [
        f"{ind}const {v} r{i}_0 = {lo.format(a=f'c{i}_0', b=f'c{i}_1')}, "
        f"r{i}_1 = {lo.format(a=f'c{i}_2', b=f'c{i}_3')};",
        f"{ind}const {v} r{i}_2 = {hi.format(a=f'c{i}_0', b=f'c{i}_1')}, "
        f"r{i}_3 = {hi.format(a=f'c{i}_2', b=f'c{i}_3')};"]


def output_rows(isa: str, m: int, ind: str, load, store_row) -> list:
    """Y = A^T M A for the t x t M values at s + (r * t + c) * ms (load(pointer): the C
    expression loading one), + bias (vb, when bias), clamped to [vlo, vhi]; each of its m rows
    interleaved into r{i}_{q}, q < m (the m * L outputs of row i of the L tiles in order, L / m
    tiles per vector) and stored by store_row(i)'s lines. The column transforms (A^T M) run as
    a loop through a vector buffer, then each output row's transform, interleave and stores:
    few vectors live at a time (x86-avx2 has 16 registers; all t * t values at once spilled:
    AMD Zen 4, ResNet-8 x86-avx2 ratio 0.689 -> 0.671, 64 channels at 56x56 0.829 -> 0.801 ms,
    x86-avx512 0.800 -> 0.781 ms)."""
    _, _, at = cook_toom(m)
    t = m + 2
    d, W = vec(isa), ISAS[isa].winograd
    v, (lo, hi) = d["v"], W["zip"]
    if t * t <= W.get("straight", 0):    # all t * t values in registers, no loop
        o = []
        for c in range(t):
            o += [f"{ind}const {v} x{r}_{c} = {load(f's + {r * t + c}u * ms')};"
                  for r in range(t)]
            o += prog.emit(lincomb, isa, at, [f"x{r}_{c}" for r in range(t)],
                           [f"g{i}_{c}" for i in range(m)], f"gp{c}_", ind)
        gb = "g{i}_{c}"
    else:
        o = [f"{ind}{v} gb[{m * t}];     /* A^T M, column by column */",
             f"{ind}for (size_t c = 0; c < {t}u; ++c) {{"]
        o += [f"{ind}const {v} x{r} = {load(f's + ({r * t}u + c) * ms')};" for r in range(t)]
        o += prog.emit(lincomb, isa, at, [f"x{r}" for r in range(t)],
                       [f"g{i}" for i in range(m)], "gp", ind)
        o += [f"{ind}gb[{i * t}u + c] = g{i};" for i in range(m)]
        o.append(f"{ind}}}")
        gb = "gb[{k}]"
    for i in range(m):
        o += [f"{ind}const {v} e{i}_{c} = {gb.format(i=i, c=c, k=i * t + c)};"
              for c in range(t)]
        o += prog.emit(lincomb, isa, at, [f"e{i}_{c}" for c in range(t)],
                       [f"z{i}_{j}" for j in range(m)], f"yp{i}_", ind)
        for j in range(m):
            o.append(f"{ind}{v} y{i}_{j} = bias ? {d['add']}(z{i}_{j}, vb) : z{i}_{j};")
            o.append(f"{ind}y{i}_{j} = {d['min']}(vhi, {d['max']}(vlo, y{i}_{j}));")
        if m == 4 and "halves" in W:
            o += _interleave4_halves(isa, i, ind)
        elif m == 2:
            o.append(f"{ind}const {v} r{i}_0 = {lo.format(a=f'y{i}_0', b=f'y{i}_1')}, "
                     f"r{i}_1 = {hi.format(a=f'y{i}_0', b=f'y{i}_1')};")
        else:
            o.append(f"{ind}const {v} a{i}_0 = {lo.format(a=f'y{i}_0', b=f'y{i}_2')}, "
                     f"a{i}_1 = {hi.format(a=f'y{i}_0', b=f'y{i}_2')};")
            o.append(f"{ind}const {v} b{i}_0 = {lo.format(a=f'y{i}_1', b=f'y{i}_3')}, "
                     f"b{i}_1 = {hi.format(a=f'y{i}_1', b=f'y{i}_3')};")
            for q in range(4):
                f = lo if q % 2 == 0 else hi
                o.append(f"{ind}const {v} r{i}_{q} = "
                         f"{f.format(a=f'a{i}_{q // 2}', b=f'b{i}_{q // 2}')};")
        o += store_row(i)
    return o


def output_transform(isa: str, m: int, ms: int, ntp: int) -> tuple:
    """(name, C text) of the output transform of F(m x m, 3 x 3) for M matrices ms floats
    apart, of rows ntp floats apart: compile-time constants, so the t * t loads of a vector of
    tiles are the pointer plus a displacement (with them as arguments GCC kept the 36 load
    addresses in spilled registers: x86-avx2 16@32 F(4,3) 25.3 -> 24.1 us, AMD Zen 4)."""
    d, W = vec(isa), ISAS[isa].winograd
    L, v = d["L"], d["v"]
    name = f"aicc_wg{m}_out_{isa}_{ms}_{ntp}"
    ind = "        "
    o = [f"/* Winograd F({m}x{m}, 3x3) output transform ({isa}): for the tiles [j0, j0 + nb) "
         "and K output",
         f" * channels, M(xi) at mm + xi * {ms} + k * {ntp} + jj; Y = A^T M A, + bias[k] (bias "
         "may be NULL),",
         f" * clamped to [lo, hi], into y[K][OH][OW] (tile j: rows (j / TW) * {m}, columns "
         f"(j % TW) * {m}). The {m} rows",
         f" * of a vector of {L} tiles are interleaved into {m} x {m * L} outputs: stored "
         "directly when the tiles are",
         " * in one tile row and inside the output or (several tile rows) when no output vector "
         "straddles a row,",
         " * else copied run by run (one per tile row) clipped at OH / OW;",
         " * lanes past nb are never stored. */",
         f"static void {name}(const float *restrict mm, size_t K, size_t OH, size_t OW, "
         "size_t TW,",
         "    size_t j0, size_t nb, const float *restrict bias, float lo, float hi, "
         "float *restrict y)", "{",
         f"    const size_t P = OH * OW, ms = {ms}u, ntp = {ntp}u;",
         f"    const {v} vlo = {d['set1']}(lo), vhi = {d['set1']}(hi);"]
    if "zip_idx" in W:
        o.append(W["zip_idx"])
    o += ["    for (size_t k = 0; k < K; ++k) {",
          f"        const {v} vb = {d['set1']}(bias ? bias[k] : 0.0f);",
          "        float *restrict yk = y + k * P;",
          f"        for (size_t jv = 0; jv < nb; jv += {L}u) {{",
          "        const float *restrict s = mm + k * ntp + jv;",
          "        const size_t j = j0 + jv, ty = j / TW, tx0 = j % TW, oy = ty * "
          f"{m}u, nl = nb - jv < {L}u ? nb - jv : {L}u;"]
    G = L // m                   # tiles per interleaved vector
    o += [f"{ind}const int full = nl == {L}u && tx0 + {L}u <= TW && oy + {m}u <= OH && "
          f"(tx0 + {L}u) * {m}u <= OW;",
          f"{ind}const int segs = !full && nl == {L}u && tx0 % {G}u == 0 && TW % {G}u == 0 && "
          f"TW * {m}u <= OW && (j + {L - 1}u) / TW * {m}u + {m}u <= OH;"
          "   /* whole vectors, several rows */"]
    # where the m output vectors of each row go: dq + i * rs for row i (one choice per
    # vector of tiles, not a three-way branch per row: GCC kept the branches' addresses in
    # spilled scalars)
    o.append(f"{ind}float buf[{m * m * L}];     /* row i at buf + i * {m * L} */")
    o.append(f"{ind}float " + ", ".join(f"*d{q}" for q in range(m)) + ";")
    o.append(f"{ind}size_t rs = OW;")
    o.append(f"{ind}if (full) {{")
    o += [f"{ind}    d{q} = yk + oy * OW + tx0 * {m}u + {q * L}u;" for q in range(m)]
    o.append(f"{ind}}} else if (segs) {{")
    o += [f"{ind}    d{q} = yk + (oy + (tx0 + {q * G}u) / TW * {m}u) * OW + (tx0 + {q * G}u) % TW "
          f"* {m}u;" for q in range(m)]
    o.append(f"{ind}}} else {{")
    o += [f"{ind}    d{q} = buf + {q * L}u;" for q in range(m)]
    o.append(f"{ind}    rs = {m * L}u;")
    o.append(f"{ind}}}")

    def store_row(i):
        return [f"{ind}{d['st']}(d{q} + {i}u * rs, r{i}_{q});" for q in range(m)]
    o += output_rows(isa, m, ind, lambda p: f"nl == {L}u ? {d['ld']}({p}) : "
                     f"{d['mload'].format(p=p, n='nl')}", store_row)
    o += [f"{ind}if (full || segs)", f"{ind}    continue;"]
    o += [f"{ind}for (size_t a = 0, row = ty, tx = tx0; a < nl; a += TW - tx, ++row, tx = 0) {{",
          f"{ind}    const size_t b = a + (TW - tx) < nl ? a + (TW - tx) : nl;",
          f"{ind}    const size_t n = OW - tx * {m}u < (b - a) * {m}u ? OW - tx * {m}u : "
          f"(b - a) * {m}u;",
          f"{ind}    for (size_t i = 0; i < {m}u && row * {m}u + i < OH; ++i) {{",
          f"{ind}        float *restrict dst = yk + (row * {m}u + i) * OW + tx * {m}u;",
          f"{ind}        const float *restrict src = buf + i * {m * L}u + a * {m}u;",
          f"{ind}        for (size_t q = 0; q < n; ++q) dst[q] = src[q];",
          f"{ind}    }}", f"{ind}}}", "        }", "    }", "}"]
    return name, "\n".join(o)
