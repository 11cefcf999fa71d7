"""Pooling on the SIMD targets (float32; x86-avx2 / x86-avx512 / arm-neon: the ISAs whose
description has a ``pool`` table): MaxPool without Indices,
AveragePool, GlobalAveragePool and GlobalMaxPool. pool.py dispatches here when the target's
``kernels:`` list (or the node's ``aicc_kernel``) names an ISA before ``generic``; the op
semantics (pool.py's docstring) are unchanged.

Window pools (1-D, 2-D and 3-D: a 1-D/2-D pool is a 3-D one with leading 1s), separable, per
plane and batch of output rows (``row_batch``: short rows several at a time, the vertical
pass over the batch before the horizontal one, so no load waits on a just-made store; a
row buffer each):

* vertical: the input rows the window covers (the (kz, ky) taps inside the input; rows in the
  padding are skipped) are combined column by column (max or sum; one load per row, the
  accumulator in a register) into a row buffer ``vr`` laid out in padded coordinates:
  ``vr[pad + j]`` holds column j, and the border ``vr[0, pad)`` and everything past the
  input is the fill (-inf for max, 0 for sums), written once per step. A window with no input
  row gives a fill row.
* horizontal: output columns are vectorized; tap kx of output o reads
  ``vr[o * stride + kx * dilation]``: stride 1 plain unaligned loads, stride 2 two loads and a
  de-interleave (AVX2: ``shuffle_ps`` of the even elements, lanes put in order once per output
  vector by one ``permute4x64``; AVX-512: ``permutex2var``; NEON: ``uzp1`` / ``uzp2``), other
  strides a gather (NEON: four lane loads). ``vr``
  is long enough for every full vector (slack filled too); the last partial vector of a row
  is stored with a mask. The tap loops have compile-time trip counts (the helper is specific
  to the kernel shape, stride and dilation along W).
* AveragePool then divides by the window count, count(z) * count(y) * count(x) (the factors of
  pool_kernels' ``aicc_window_count``, count_include_pad both ways, exact in float); a zero
  count gives 0. Sums run over the window rows first, then the columns: a different rounding
  order from the portable kernel (row-major taps), within rounding of it.

NaN (MaxPool, GlobalMaxPool): ``max_ps(a, b)`` returns b when either operand is NaN, so a NaN
in a would be lost. The combine is ``maxn(a, b)``: AVX2 ``blendv(max(a, b), a, a unordered)``,
AVX-512 ``mask_max(a, a ordered, a, b)``: a NaN operand on either side gives NaN (one of the
NaN operands), so a NaN anywhere in the window gives NaN, in the vertical, horizontal and
reduction steps alike. -inf padding never wins over a real value and never hides a NaN.

A window pool whose one window covers each whole plane (no padding, dilation 1; e.g. ResNet's
AveragePool 8x8 on an 8 x 8 map) runs as the global pool below: the same sum divided by the
same count (the window count is the plane size), in the global pool's summation order (2.7 ->
0.2 us for 64 planes of 8 x 8 on x86-avx512).

Global pools: per plane, two vector accumulators over the full vectors, the last n % lanes
elements through a masked load (masked-off lanes are 0 for sums, -inf for max), then a
butterfly reduction across lanes; the mean divides the sum by n.
"""
from __future__ import annotations

from ..conv.base_c import use
from ..isa.registry import ISAS, include_line, table
from ..isa.x86 import lane_mask_table, simd_isa
from .portable import TAPS

# the ISAs with pool spellings (isa/<name>/pool.py)
POOL = table("pool")


def spell(isa) -> dict:
    """The spellings of the pool kernels on ``isa``: the vector vocabulary, the ISA's masked
    load / store (``mt`` the mask type), lane 0 as a float (``first``) and the pool table."""
    I = ISAS[isa]
    return {**I.vector, "mt": I.mask["mtype"], "mload": I.mask["mload"],
            "mstore": I.mask["mstore"], "first": I.integer["lane0"] + "({a})", **I.pool}


def isa_of(ctx, dt):
    """The first SIMD variant of the target's kernel list (or the node's aicc_kernel) this
    module implements, or None (portable kernels; also every dtype but float32)."""
    if str(dt) != "float32":
        return None
    isa = simd_isa(ctx)
    return isa if isa in POOL else None


def header(ctx, isa):
    ctx.helper(f"pool_simd.{isa}.0.include", include_line(isa))
    if not ISAS[isa].masked:      # tails through lane-mask vectors (the pool table's mask)
        ctx.helper(f"pool_simd.{isa}.1.mtab", lane_mask_table(isa, "aicc_ps_mtab"))
    if "helpers" in POOL[isa]:    # C the ISA's spellings call (isa/<name>/pool.py)
        ctx.helper(f"pool_simd.{isa}.1.helpers", POOL[isa]["helpers"])


def _op(ctx, isa, avg):
    """The combining operation (a, b) -> C expression: add, or the NaN-propagating max (its
    helper registered only then: an unused static function fails clang's -Werror)."""
    if avg:
        return lambda a, b: f"{ISAS[isa].vector['add']}({a}, {b})"
    v = ISAS[isa].vector["v"]
    ctx.helper(f"pool_simd.{isa}.2.maxn", f"""\
/* max with NaN propagation from either operand (max_ps alone returns b when one is NaN) */
static inline {v} aicc_ps_maxn_{isa}({v} a, {v} b)
{{
    return {POOL[isa]['maxn']};
}}""")
    return lambda a, b: f"aicc_ps_maxn_{isa}({a}, {b})"


def _reduce(isa, op, a):
    """Lines folding the lanes of vector ``a`` with ``op`` (butterfly: every lane ends with
    the result)."""
    return [f"{a} = {op(a, p.format(a=a))};" for p in POOL[isa]["perms"]]


def row_buffer(geo, isa) -> int:
    """Floats of the padded row buffer: the padded row and every horizontal vector read."""
    L = ISAS[isa].lanes
    W, OW, PW = geo.inp[-1], geo.out[-1], geo.pad[-1]
    KW, SW, DW = geo.k[-1], geo.stride[-1], geo.dil[-1]
    last = -(-OW // L) * L - L              # start of the last (maybe partial) vector
    if SW == 1:
        end = last + L + (KW - 1) * DW
    elif SW == 2:
        end = 2 * last + (KW - 1) * DW + 2 * L
    else:
        end = (last + L - 1) * SW + (KW - 1) * DW + 1
    n = max(PW + W - W % L + L, end)        # the row's tail vector is stored whole
    return -(-n // L) * L


# output rows per batch: row buffers of at most this many floats together (4 KiB), and only
# rows of at most SHORT_ROW vectors
ROW_BATCH_FLOATS = 1024
SHORT_ROW = 12


def row_batch(geo, B: int, L: int) -> int:
    """Output rows per batch: the vertical pass fills a row buffer (B floats) for each row of
    the batch, then the horizontal pass reads them. On short rows, reading a buffer right after
    its stores stalled the loads that span two of them (no store forwarding), x86-avx2 on AMD
    EPYC, 3x3 stride 1: 512 planes of 7 x 7 0.051 -> 0.020 ms, 320 of 14 x 14 0.069 -> 0.030,
    64 of 56 x 56 0.067 -> 0.047. Long rows stay one at a time (112 wide: 0.079 -> 0.082 in
    batches; their first loads come long after the stores)."""
    if B > SHORT_ROW * L:
        return 1
    return max(1, min(geo.out[-2] if len(geo.out) > 1 else 1, ROW_BATCH_FLOATS // B))


def _window_helper(ctx, isa, geo, avg) -> str:
    d = spell(isa)
    L, v = d["L"], d["v"]
    k3 = (1,) * (3 - len(geo.k)) + tuple(geo.k)
    KD, KH, KW = k3
    SW, DW = geo.stride[-1], geo.dil[-1]
    kind = "avg" if avg else "max"
    name = f"aicc_ps_{kind}pool_{isa}_k{KD}x{KH}x{KW}_s{SW}_d{DW}"
    op = _op(ctx, isa, avg)
    fill = "0.0f" if avg else "-INFINITY"

    def tap(off):     # the vector of tap offset ``off`` (a number) for L output columns
        if SW == 1:
            return f"{d['ld']}(s + {off}u)"
        if SW == 2:   # even / odd lanes of the pair of loads at the even offset at or below
            e = off - off % 2
            return d["odd" if off % 2 else "even"].format(lo=f"lo{e}", hi=f"hi{e}")
        return d["gather"].format(p=f"s + {off}u")
    consts, vi = [], ISAS[isa].integer["vi"]
    if SW == 2 and d.get("pair_index"):
        for nm, first in (("ev", 0), ("od", 1)):
            if not any(t * DW % 2 == first for t in range(KW)):
                continue              # (no odd tap offsets with an even dilation)
            consts.append(f"const {vi} {nm} = " + d["gidx"].format(
                lanes=", ".join(str(2 * i + first) for i in range(L))) + ";")
    if SW > 2:
        consts.append(f"const {vi} gi = "
                      + d["gidx"].format(lanes=", ".join(str(SW * i) for i in range(L))) + ";")
    how = {1: "plain loads", 2: "de-interleaved loads"}.get(SW, "gathers")
    what = "AveragePool sums" if avg else "MaxPool (NaN propagates)"
    # the row tail: the fill value in the lanes past W (-inf: mload_ninf; 0: mload), stored
    # whole (row_buffer leaves room): a masked store there, read back at once by the
    # horizontal pass, stalled its loads (no store forwarding; avx2's maskstore is slow on AMD)
    ml = d["mload"] if avg else d["mload_ninf"]
    wm_load = ml.format(p="rows[0] + Wv", m="wm")
    wm_loadq = ml.format(p="rows[q] + Wv", m="wm")
    o = [f"""\
/* {what}, {isa}: kernel {KD}x{KH}x{KW}, stride {SW} and dilation {DW} along W (others from p);
 * vertical combine of the window's input rows into the padded row vr ({fill} border, B
 * floats), then {L} output columns at a time over the {KW} taps ({how}).{' cx: OW + ' + str(L) + ' floats of column counts.' if avg else ''} */
static void {name}(const aicc_conv_params *p, const float *restrict x, float *restrict y,
    float *restrict vr, float *restrict cx, size_t B, size_t R)
{{
    const size_t W = p->in[2], OW = p->out[2], PW = p->pad[2];
    const size_t X = p->in[0] * p->in[1] * W, P = p->out[0] * p->out[1] * OW;
    const size_t Wv = W - W % {L}u, OWv = OW - OW % {L}u;
    const {d['mt']} wm = {d['mask'].format(n='W % ' + str(L) + 'u')};
    const {d['mt']} om = {d['mask'].format(n='OW % ' + str(L) + 'u')};"""]
    o += [f"    {c}" for c in consts]
    o.append(f"""\
    const float *rows[{KD * KH}];
    for (size_t i = 0; i < R * B; ++i)
        vr[i] = {fill};""")
    if avg:
        o.append(f"""\
    for (size_t i = 0; i < OW + {L}u; ++i)
        cx[i] = i < OW ? (float)aicc_window_count(p, 2, i) : 1.0f;""")
    else:
        o.append("    (void)cx;")
    o.append(f"""\
    for (size_t c = 0; c < p->batch * p->cin_g; ++c) {{
        const float *xc = x + c * X;
        float *yc = y + c * P;
        for (size_t z = 0; z < p->out[0]; ++z)
            for (size_t r0 = 0; r0 < p->out[1]; r0 += R) {{
              const size_t r1 = p->out[1] - r0 < R ? p->out[1] : r0 + R;
              for (size_t r = r0; r < r1; ++r) {{
                float *restrict vp = vr + (r - r0) * B + PW;
                size_t nr = 0;
                for (size_t kz = 0; kz < {KD}u; ++kz) {{
                    const int64_t iz = aicc_pos(p, 0, z, kz);
                    if (!aicc_inside(iz, p->in[0]))
                        continue;
                    for (size_t ky = 0; ky < {KH}u; ++ky) {{
                        const int64_t iy = aicc_pos(p, 1, r, ky);
                        if (aicc_inside(iy, p->in[1]))
                            rows[nr++] = xc + ((size_t)iz * p->in[1] + (size_t)iy) * W;
                    }}
                }}
                if (nr == 0) {{
                    for (size_t j = 0; j < W; ++j)
                        vp[j] = {fill};
                }} else {{
                    for (size_t j = 0; j < Wv; j += {L}u) {{
                        {v} a = {d['ld']}(rows[0] + j);
                        for (size_t q = 1; q < nr; ++q)
                            a = {op('a', d['ld'] + '(rows[q] + j)')};
                        {d['st']}(vp + j, a);
                    }}
                    if (Wv < W) {{
                        {v} a = {wm_load};
                        for (size_t q = 1; q < nr; ++q)
                            a = {op('a', wm_loadq)};
                        {d['st']}(vp + Wv, a);
                    }}
                }}
              }}
              for (size_t r = r0; r < r1; ++r) {{
                float *restrict yr = yc + (z * p->out[1] + r) * OW;""")
    if avg:
        o.append(f"""\
                {{
                    const {v} cy = {d['set1']}((float)(aicc_window_count(p, 0, z) *
                                                    aicc_window_count(p, 1, r)));""")
    else:
        o.append("                {")
    o.append(f"""\
                    for (size_t o = 0; o < OW; o += {L}u) {{
                        const float *s = vr + (r - r0) * B + o * {SW}u;""")
    offs = [t * DW for t in range(KW)]      # the taps, unrolled
    if SW == 2:       # each pair of loads once (taps 2m and 2m + 1 share theirs)
        for e in sorted({f - f % 2 for f in offs}):
            o.append(f"                        const {v} lo{e} = {d['ld']}(s + {e}u), "
                     f"hi{e} = {d['ld']}(s + {e + L}u);")
    o.append(f"                        {v} a = {tap(offs[0])};")
    for f in offs[1:]:
        o.append(f"                        a = {op('a', tap(f))};")
    if SW == 2 and "fix" in d:
        o.append(f"                        a = {d['fix'].format(a='a')};")
    if avg:
        o.append(f"                        {{\n                            const {v} dv = "
                 f"{d['mul']}(cy, {d['ld']}(cx + o));\n"
                 f"                            a = {d['divz'].format(a='a', d='dv')};\n"
                 "                        }")
    o.append(f"""\
                        if (o < OWv)
                            {d['st']}(yr + o, a);
                        else
                            {d['mstore'].format(p='yr + o', m='om', v='a')};
                    }}
                }}
              }}
            }}
    }}
}}""")
    ctx.helper(f"pool_simd.{isa}.3.{name}", "\n".join(o))
    return name


def emit_window(ctx, geo, avg: bool, flag: int, isa: str) -> None:
    """Step body of a float32 MaxPool (no Indices) / AveragePool on a SIMD target (1-3-D);
    flag: count_include_pad (AveragePool)."""
    use(ctx, "float32")
    if avg:
        ctx.helper("pool.0.taps", TAPS)
    header(ctx, isa)
    name = _window_helper(ctx, isa, geo, avg)
    L = ISAS[isa].lanes
    B = row_buffer(geo, isa)
    R = row_batch(geo, B, L)
    vr = ctx.scratch(R * B * 4, "float", "vr")
    cx = ctx.scratch((geo.out[-1] + L) * 4, "float", "cx") if avg else "NULL"
    ctx.kernel = isa
    ctx(geo.params(flag))
    ctx(f"{name}(&prm, {ctx.inp[0]}, {ctx.out[0]}, {vr}, {cx}, {B}u, {R}u);")


def _global_helper(ctx, isa, avg) -> str:
    d = spell(isa)
    L, v = d["L"], d["v"]
    kind = "avg" if avg else "max"
    name = f"aicc_ps_global_{kind}_{isa}"
    op = _op(ctx, isa, avg)
    init = d["zero"] if avg else f"{d['set1']}(-INFINITY)"
    tail = d["mload" if avg else "mload_ninf"].format(p="xc + nv", m="m")
    red = "\n".join("        " + s for s in _reduce(isa, op, "a0"))
    res = f"{d['first'].format(a='a0')} / (float)n" if avg else d["first"].format(a="a0")
    what = "the mean" if avg else "the max (NaN propagates)"
    code = f"""\
/* Global pooling, {isa}: {what} of each of `planes` contiguous planes of n floats (n > 0).
 * Two accumulators over full vectors, a masked tail, then a butterfly across the lanes. */
static void {name}(size_t planes, size_t n, const float *restrict x, float *restrict y)
{{
    const size_t nv = n - n % {L}u;
    const {d['mt']} m = {d['mask'].format(n='n % ' + str(L) + 'u')};
    for (size_t c = 0; c < planes; ++c) {{
        const float *xc = x + c * n;
        {v} a0 = {init}, a1 = {init};
        size_t i = 0;
        for (; i + {2 * L}u <= nv; i += {2 * L}u) {{
            a0 = {op('a0', d['ld'] + '(xc + i)')};
            a1 = {op('a1', d['ld'] + f'(xc + i + {L}u)')};
        }}
        if (i < nv)
            a0 = {op('a0', d['ld'] + '(xc + i)')};
        if (nv < n)
            a1 = {op('a1', tail)};
        a0 = {op('a0', 'a1')};
{red}
        y[c] = {res};
    }}
}}"""
    ctx.helper(f"pool_simd.{isa}.4.{name}", code)
    return name


def emit_global(ctx, planes: int, n: int, avg: bool, isa: str) -> None:
    """Step body of a float32 GlobalAveragePool / GlobalMaxPool on a SIMD target (n > 0)."""
    header(ctx, isa)
    name = _global_helper(ctx, isa, avg)
    ctx.kernel = isa
    ctx(f"{name}({planes}u, {n}u, {ctx.inp[0]}, {ctx.out[0]});")
