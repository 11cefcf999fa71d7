"""Direct conv of a few input channels with each channel's sum in registers (float32; the x86
SIMD targets by auto, NEON when forced): a network's first conv, 3 channels x 3x3 taps,
stride 2.

The channel-blocks rule (kernels/conv/schedule.py ``channel_blocks``) sums each input
channel's taps as an FMA chain from zero and adds the channels' sums, as onnxruntime's
NCHW-input conv kernel does. Through the tile GEMM that is one K block per channel, and each
block's partial sums go through the output in memory: 3 x 3 x 3 = 27 products per output in
three blocks of 9, each a load, an add and a store per accumulator (RegNetX-400MF's 3 -> 32
onto 112 x 112: 0.39 ms, onnxruntime 0.28). Here a tile of MR output channels x NV vectors of
output columns keeps two sets of accumulators: the running total and the channel being
summed, so the whole sum stays in registers: ``((ch0 + ch1) + ch2) + bias``, then the clamp,
in the tile GEMM's order, bit for bit.

Layout: the batch item is copied once into implicit.py's padded volume (stride 1) or phase
planes (stride > 1; pad_ph), so tap (ky, kx) of output (oy, ox) reads ``xp[c * vol +
tap[t] + oy * Wq + ox]``: consecutive ox are consecutive floats. The taps, channels, rows and
offsets are literals (the helper is specific to the node). Per output row and tile of output
channels, the columns go NV * lanes at a time; the last partial step loads whole vectors (the
lanes past the row read the next row or the volume's zero slack, never stored) and stores
with the ISA's lane mask. Activations other than a clamp run over each finished output row
(base_c.epilogue).

Auto choice (conv/simd.py ``variant``, after the broadcast kernels' small-output rules; on the
ISAs whose conv description says ``stem: auto``): exactly the convs the channel-blocks rule
splits (one group, 2-4 input channels, taps > 1, channels x taps <= the schedule's kc, kc not
set by the node), 1-D or 2-D. NaN / Inf: IEEE through the FMAs; zero padding is multiplied
like any input (as the im2col path: a padding zero times an Inf weight is NaN there too).
"""
from __future__ import annotations

import hashlib
import math

from ..gemm.simd import ISA, _header, flit
from ..gemm.clamp import clamp_expr, clamp_sides
from ..gemm.tile import tile_store
from ..isa.registry import ISAS
from . import implicit
from .base_c import epilogue, use
from .bcast_k import NOINLINE
from .simd_gemm import KEY, clamp_of

PIN_PTR = """\
/* AICC_PIN_PTR(p): the pointer p in a general register, as if changed here (an empty asm), so
 * that the loads after it add their offsets to it rather than to addresses hoisted out of the
 * loop (GCC kept 81 weight addresses of a 3-channel 3x3 conv in stack slots). */
#if defined(__GNUC__)
#define AICC_PIN_PTR(p) __asm__("" : "+r"(p))
#else
#define AICC_PIN_PTR(p) ((void)0)
#endif"""

NV = 2          # output column vectors per tile
MAX_CIN = 4     # input channels (the tile's code is unrolled over channels x taps)


def tile_rows(isa: str) -> int:
    """Output channels per tile: two accumulator sets of MR x NV vectors, NV input vectors
    and one broadcast weight in the ISA's registers (x86-avx2: 3; 32 registers: 6)."""
    return max(1, min(6, (ISAS[isa].registers - NV - 1) // (2 * NV)))


def supports(geo, sched: dict, node) -> bool:
    """The convs the channel-blocks rule splits by channel (and 1-channel convs of the same
    size: one chain either way), 1-D or 2-D, one group."""
    taps = math.prod(geo.k)
    return (geo.group == 1 and len(geo.k) <= 2 and 1 <= geo.cin <= MAX_CIN and taps > 1
            and geo.cin * taps <= sched["kc"]
            and "kc" not in (node.attrs.get("aicc_schedule") or {}))


def prefer(geo, sched: dict, node, isa: str) -> bool:
    """Auto: the channel-blocks case (2-4 channels), where the ISA's description says so
    (its conv ``stem`` entry: the x86 targets; NEON executed more instructions)."""
    return (ISAS[isa].conv_kernels["stem"]["auto"] and geo.cin > 1
            and supports(geo, sched, node))


def _block(isa: str, rows: int, cin: int, taps: list, vol: int, P: int, ow: int, bias: bool,
           clamp) -> tuple:
    """The helper for one tile of ``rows`` output channels along an output row: (name, C).
    The channel volume vol, output plane P and row ow are literals: with vol a parameter, GCC
    kept each (channel, tap) address in a stack slot."""
    d = ISA[isa]
    L, vec, fma, add = d["lanes"], d["vec"], d["fma"], d["add"]
    T = len(taps)
    K = cin * T
    sides = clamp_sides(*clamp)
    key = f"{isa}:{rows}:{cin}:{taps}:{vol}:{P}:{ow}:{bias}:{clamp}"
    name = f"aicc_cv_stem_{isa}_r{rows}_{hashlib.sha1(key.encode()).hexdigest()[:10]}"
    tot = [[f"t{r}_{v}" for v in range(NV)] for r in range(rows)]
    acc = [[f"a{r}_{v}" for v in range(NV)] for r in range(rows)]
    o = [f"""\
/* {rows} output channel(s) x {NV * L} columns per step along one output row of {ow}: per input
 * channel (volume stride {vol}) the FMA chain over its {T} taps from zero, the channels'
 * sums added in order{', + bias' if bias else ''}{', the clamp' if any(sides) else ''};
 * x at the row's first column, w the first channel's weights ({K} per channel), y its output
 * row (plane {P}).
 * Never inlined: in the step's constant loops GCC hoisted every weight address out of the
 * column loop and spilled them and the accumulators. */
static {NOINLINE}void {name}(const float *restrict x, const float *restrict w,
    const float *restrict bias, float *restrict y)
{{"""]
    if not bias:
        o.append("    (void)bias;")
    if any(sides):
        o.append(f"    static const float lohi[2] = {{ {flit(clamp[0])}, {flit(clamp[1])} }};")
    o.append(f"    const size_t ldy = {P}u;" + (" (void)ldy;" if rows == 1 else ""))
    o.append(f"    for (size_t j = 0; j < {ow}u; j += {NV * L}u) {{")
    o.append("        AICC_PIN_PTR(w);")
    o.append("        const float *restrict s = x + j;")
    o.append(f"        {vec} " + ", ".join(x for row in tot + acc for x in row) + ";")
    for c in range(cin):
        dst = tot if c == 0 else acc
        for r in range(rows):
            o.append("        " + " ".join(f"{x} = {d['zero']};" for x in dst[r]))
        for t, off in enumerate(taps):
            o.append("        {")
            for v in range(NV):
                o.append(f"            const {vec} x{v} = "
                         + d["load"].format(p=f"s + {c * vol + off + v * L}u") + ";")
            for r in range(rows):
                o.append(f"            {{ const {vec} wv = "
                         + d["bcast"].format(p=f"w + {r * K + c * T + t}u") + ";")
                for v in range(NV):
                    o.append(f"              {dst[r][v]} = "
                             + fma.format(a="wv", b=f"x{v}", c=dst[r][v]) + ";")
                o.append("            }")
            o.append("        }")
        if c:
            o += [f"        {tot[r][v]} = {add}({tot[r][v]}, {acc[r][v]});"
                  for r in range(rows) for v in range(NV)]
    if any(sides):      # the bounds only now: no register held over the sums
        o.append(f"        const {vec} vlo = {d['bcast'].format(p='lohi')}, "
                 f"vhi = {d['bcast'].format(p='lohi + 1')};")
        o.append("        (void)vlo; (void)vhi;")
    for r in range(rows):
        if bias:
            o.append(f"        {{ const {vec} bv = " + d["bcast"].format(p=f"bias + {r}u") + ";")
            o += [f"          {tot[r][v]} = {add}({tot[r][v]}, bv);" for v in range(NV)]
            o.append("        }")
        if any(sides):
            o += [f"        {tot[r][v]} = {clamp_expr(tot[r][v], sides, d['min'], d['max'])};"
                  for v in range(NV)]
    o.append(f"        if (j + {NV * L}u <= {ow}u) {{")      # the tile GEMM's stores (ldy = P)
    tile_store(o, d, " " * 12, tot, False)
    o.append("        } else {")
    o.append(f"            const size_t nc = {ow}u - j;")
    for v in range(NV):
        n = f"nc > {v * L}u ? (nc - {v * L}u < {L}u ? nc - {v * L}u : {L}u) : 0u"
        o.append(f"            const {d['mtype']} m{v} = " + d["mask"].format(n=n) + ";")
    tile_store(o, d, " " * 12, tot, True)
    o.append("        }")
    o.append("    }")
    o.append("}")
    return name, "\n".join(o)


def emit(ctx, node, geo, isa: str, sched: dict, bias: str, pad_c: str, ext) -> None:
    """Step body (pad_c: conv/simd.py's pad helper text; ext the padded extents)."""
    L = ISA[isa]["lanes"]
    e3, taps, phases, reach = implicit.grid(geo, ext)
    vol = math.prod(e3)
    wq = e3[2]
    oh = geo.out[-2] if len(geo.out) > 1 else 1
    ow, M, C = geo.out[-1], geo.cout, geo.cin
    P = oh * ow
    lo, hi, act = clamp_of(node)
    ep = epilogue(ctx, node, "float32") if act else "NULL"
    use(ctx, "float32")
    _header(ctx, isa)
    ctx.helper("gemm_0.pin_ptr", PIN_PTR)
    mr = tile_rows(isa)
    tiles = -(-M // mr)
    mr = -(-M // tiles)                         # balanced: 32 on 3 rows as 3 x 10 + 2
    rows = sorted({mr} | ({M % mr} if M % mr else set()))
    has_bias = bias != "NULL"
    fns = {}
    for r in rows:
        name, text = _block(isa, r, C, taps, vol, P, ow, has_bias, (lo, hi))
        ctx.helper(f"{KEY}.2.{name}", text)
        fns[r] = name
    if phases is None:
        ctx.helper(f"{KEY}.1.pad", pad_c)
    else:
        ctx.helper(f"{KEY}.1.pad_ph_{isa}", implicit.pad_ph(isa))
    slack = NV * L + reach
    xp = ctx.scratch((C * vol + slack) * 4, "float", "xpad")
    grid_c = ("its padded volume" if phases is None else
              f"{len(phases)} phase plane(s) of {e3[1]} x {e3[2]} per channel")
    ctx(f"/* Conv {geo.describe()}: {isa} direct, {C} channel sum(s) in registers, tiles of "
        f"{mr} output channels x {NV * L} columns over {grid_c} */")
    ctx(geo.params())
    ctx("static const size_t e[3] = { " + ", ".join(f"{v}u" for v in e3) + " };")
    if phases is not None:
        ctx(f"static const size_t ph[{2 * len(phases)}] = {{ "
            + ", ".join(f"{v}u" for pq in phases for v in pq) + " };")
    ctx(f"for (size_t n = 0; n < {geo.batch}u; ++n) {{")
    src = f"{ctx.inp[0]} + n * {C * math.prod(geo.inp)}u"
    if phases is not None:
        ctx(f"    aicc_cv_pad_ph_{isa}(&prm, {C}u, {src}, {xp}, e, ph, {slack}u);")
    else:
        ctx(f"    aicc_cv_pad(&prm, {C}u, {src}, {xp}, e, {slack}u);")
    ctx(f"    float *restrict yn = {ctx.out[0]} + n * {M * P}u;")
    ctx(f"    for (size_t oy = 0; oy < {oh}u; ++oy) {{")
    ctx(f"        const float *restrict xr = {xp} + oy * {wq}u;")
    w, K = ctx.inp[1], C * len(taps)
    full = M // mr
    if full:
        ctx(f"        for (size_t co = 0; co < {full * mr}u; co += {mr}u)")
        ctx(f"            {fns[mr]}(xr, {w} + co * {K}u, "
            f"{bias + ' + co' if has_bias else 'NULL'}, yn + co * {P}u + oy * {ow}u);")
    if M % mr:
        co = full * mr
        ctx(f"        {fns[M % mr]}(xr, {w} + {co * K}u, "
            f"{f'{bias} + {co}u' if has_bias else 'NULL'}, yn + {co * P}u + oy * {ow}u);")
    if ep != "NULL":
        ctx(f"        for (size_t co = 0; co < {M}u; ++co)")
        ctx(f"            {ep}(yn + co * {P}u + oy * {ow}u, {ow}u);")
    ctx("    }")
    ctx("}")
