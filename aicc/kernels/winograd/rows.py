"""Winograd transforms (kernels/winograd/simd.py, tiles vectorized) for planes narrower than a
vector of tiles, on an ISA whose winograd table has ``rows`` (two-source permutes, constant-mask
blends: x86-avx512, L = 16): TW tiles per tile row with TW dividing L, so a full vector of L
tiles (it starts at a tile row, as blocks and vectors start at multiples of L) holds the same
TW columns of R = L / TW consecutive tile rows (ResNet-8: F(4,3) at 32x32 outputs, TW = 8;
F(2,3) at 16x16, TW = 8; 8x8, TW = 4).

conv_winograd_c's general transforms handle such a vector in R passes (full loads and
de-interleaves per tile row, blended) and write its outputs through a buffer, copied run by
run. These helpers, specialized for one TW, build each patch value's vector from R row
segments directly: the W = TW * m floats of a segment (plus the 2 the patch reaches past them)
are one or two unaligned L-float loads, and a two-source permute (``rows["permute"]``)
picks the stride-m values of one segment (W > L) or of two (W <= L) into their lanes; mask
blends join the R / 2 or R partial vectors. The t patch rows run as a loop, each row's 1-D
transform stored to a t x t vector buffer that the column transforms read back: with all rows
unrolled GCC kept ~70 vectors live and spilled them (ResNet-8's 16@32 F(4,3) step 22.7 -> 21.7
us, AMD Zen 4). The output transform stores each interleaved
output vector (m * L / m = L outputs of L / m tiles) whole when those tiles lie in one tile
row, else in TW * m-float pieces (256- or 128-bit stores). Vectors past the plane's last full
vector (nl < L) and outputs clipped at OH / OW go to the general helpers, one vector at a time.

Same arithmetic as the general helpers (the same straight-line transform code), so results are
bitwise the same; only the data movement differs.
"""
from __future__ import annotations

from ..isa.registry import ISAS
from .transforms import (_columns_from, _transform_row, cook_toom, input_transform, output_rows,
                         output_transform)


def rows_of(isa: str, m: int, tw: int) -> int:
    """R: tile rows per vector of the specialized helpers, or 1 (use the general ones): an ISA
    with these helpers (``rows`` in its winograd table), TW < L dividing L, output pieces of
    at least 4 floats, R <= max_rows."""
    I = ISAS[isa]
    L = I.lanes
    if ("rows" not in I.winograd or tw >= L or L % tw or tw * m < 4
            or L // tw > I.winograd["rows"]["max_rows"]):
        return 1
    return L // tw


def _idx(isa: str, vals) -> str:
    return ISAS[isa].winograd["rows"]["idx"].format(", ".join(str(v) for v in reversed(vals)))


def input_transform_rows(isa: str, m: int, tw: int) -> tuple:
    """(name, C text): same signature as conv_winograd_c.input_transform's helper."""
    I = ISAS[isa]
    L, v, ld, RW = I.lanes, I.vector["v"], I.vector["ld"], I.winograd["rows"]
    bt, _, _ = cook_toom(m)
    t = m + 2
    R, W, nr = L // tw, tw * m, 2 * L
    gen, _ = input_transform(isa, m)
    name = f"aicc_wg{m}_in_{isa}_tw{tw}"
    two = W > L                  # a segment's values span two loads (one segment per permute)
    per = 1 if two else 2        # segments per permute
    ind = "        "
    # phase s < m of segment g: value k * m + s (k < TW) of the segment's load(s); phases
    # s >= m: phase s - m of the loads at +m
    consts, pidx = [], {}
    for s in range(m):
        lanes = []
        for lane in range(L):
            g, k = divmod(lane, tw)
            lanes.append(k * m + s + (L * (g % 2) if per == 2 else 0))
        pidx[s] = f"ix{s}"
        consts.append(f"    const {I.integer['vi']} ix{s} = {_idx(isa, lanes)};")
    o = [f"/* Winograd F({m}x{m}, 3x3) input transform ({isa}), {tw} tiles per tile row "
         f"(kernels/winograd/rows.py): as {gen},",
         f" * each full vector of {L} tiles = {R} tile rows, its patch rows gathered from "
         f"{R} row segments by two-source",
         f" * permutes; vectors of fewer tiles go to {gen}. */",
         f"static void {name}(const float *restrict xp, size_t Wp, size_t CP, size_t TW, "
         "size_t j0,",
         "    size_t nb, float *restrict v, size_t vs)", "{"]
    o += consts
    o += [f"    for (size_t jv = 0; jv < nb; jv += {L}u) {{",
          f"        const size_t j = j0 + jv, nl = nb - jv < {L}u ? nb - jv : {L}u;",
          f"        float *restrict vc = v + (jv / {nr}u) * CP * {nr}u + jv % {nr}u;",
          f"        if (nl < {L}u) {{",
          f"            {gen}(xp, Wp, CP, TW, j, nl, vc, vs);",
          "            continue;",
          "        }",
          f"        const float *restrict s = xp + (j / {tw}u) * {m}u * Wp;",
          f"        {v} hb[{t * t}];     /* the rows' transforms */"]
    o.append(f"{ind}for (size_t r = 0; r < {t}u; ++r) {{   /* patch row r of the R segments */")
    o.append(f"{ind}const float *restrict q = s + r * Wp;")
    for off in (0, m):
        for g in range(R):
            base = f"q + {g * m}u * Wp + {off}u"
            o.append(f"{ind}const {v} a{off}_{g} = {ld}({base});")
            if two:
                o.append(f"{ind}const {v} b{off}_{g} = {ld}({base} + {L}u);")
    for s_ in range(t):
        off, ph = (0, s_) if s_ < m else (m, s_ - m)
        parts = []
        for h in range(R // per):
            g = h * per
            src2 = f"b{off}_{g}" if two else f"a{off}_{g + 1}"
            parts.append(RW["permute"].format(a=f"a{off}_{g}", i=pidx[ph], b=src2))
        e = parts[0]
        for h, p in enumerate(parts[1:], 1):
            lo_lane, hi_lane = h * per * tw, (h + 1) * per * tw
            mk = ((1 << hi_lane) - 1) & ~((1 << lo_lane) - 1)
            e = RW["blend"].format(mk=mk, a=e, b=p)
        o.append(f"{ind}const {v} d0_{s_} = {e};")
    o += _transform_row(isa, bt, 0, "d", ind)
    o += [f"{ind}hb[r * {t}u + {j}u] = h0_{j};" for j in range(t)]
    o.append(f"{ind}}}")
    o += _columns_from(isa, bt, t, "hb", "vc", "vs", ind)
    o += ["    }", "}"]
    return name, "\n".join(o)


def _store(isa: str, r: str, dst: str, lanes: int, piece: int) -> str:
    """Store `lanes` floats of r from lane `piece * lanes`."""
    I = ISAS[isa]
    if lanes == I.lanes:
        return f"{I.vector['st']}({dst}, {r});"
    return I.winograd["store_part"][lanes].format(p=dst, v=r, i=piece) + ";"


def output_transform_rows(isa: str, m: int, tw: int, ms: int, ntp: int) -> tuple:
    """(name, C text): same signature and constant strides as conv_winograd_c.output_transform's
    helper."""
    I = ISAS[isa]
    L, d = I.lanes, I.vector
    R, G = L // tw, L // m       # tile rows per vector; tiles per interleaved output vector
    gen, _ = output_transform(isa, m, ms, ntp)
    name = f"aicc_wg{m}_out_{isa}_tw{tw}_{ms}_{ntp}"
    ind = "        "
    o = [f"/* Winograd F({m}x{m}, 3x3) output transform ({isa}), {tw} tiles per tile row "
         f"(kernels/winograd/rows.py): as {gen},",
         f" * each full vector of {L} tiles = {R} tile rows inside the output stored "
         f"directly; other vectors go to {gen}. */",
         f"static void {name}(const float *restrict mm, size_t K, size_t OH, size_t OW, "
         "size_t TW,",
         "    size_t j0, size_t nb, const float *restrict bias, float lo, float hi, "
         "float *restrict y)", "{",
         f"    const size_t P = OH * OW, ms = {ms}u, ntp = {ntp}u;",
         f"    const {d['v']} vlo = {d['set1']}(lo), vhi = {d['set1']}(hi);",
         I.winograd["zip_idx"],
         "    for (size_t k = 0; k < K; ++k) {",
         f"        const {d['v']} vb = {d['set1']}(bias ? bias[k] : 0.0f);",
         "        float *restrict yk = y + k * P;",
         f"        for (size_t jv = 0; jv < nb; jv += {L}u) {{",
         "        const float *restrict s = mm + k * ntp + jv;",
         f"        const size_t j = j0 + jv, oy = j / {tw}u * {m}u, "
         f"nl = nb - jv < {L}u ? nb - jv : {L}u;",
         f"        if (nl < {L}u || oy + {R * m}u > OH || {tw * m}u > OW) {{",
         f"            {gen}(s, 1u, OH, OW, TW, j, nl, bias ? bias + k : NULL, lo, "
         "hi, yk);",
         "            continue;",
         "        }"]
    n = min(G, tw) * m           # floats per store: one tile row's part of an output vector

    def store_row(i):            # r{i}_{q}: outputs of tiles [q G, q G + G)
        out = []
        for q in range(m):
            for piece in range(G * m // n):
                tile = q * G + piece * n // m
                g, col = divmod(tile, tw)
                dst = f"yk + (oy + {g * m + i}u) * OW + {col * m}u"
                out.append(f"{ind}{_store(isa, f'r{i}_{q}', dst, n, piece)}")
        return out
    o += output_rows(isa, m, ind, lambda p: f"{d['ld']}({p})", store_row)
    o += ["        }", "    }", "}"]
    return name, "\n".join(o)

