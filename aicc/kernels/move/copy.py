"""The strided-copy loop nest of the data-movement ops (Transpose, Slice, Expand, ...), and the blocked 2-D transpositions.

``emit_copy`` copies a strided box: for every index vector ``i`` over ``dims``,
``out[out_base + i . out_strides] = in[in_base + i . in_strides]`` (element units; input
strides may be negative (Slice with negative steps) or zero (Expand, Tile broadcast)). Size-1
dims are dropped and adjacent dims that stay adjacent in both tensors are merged, so most
copies become one or two loops; a run contiguous in both tensors becomes one memcpy, and a
2-D transposition whose source is strided in the innermost dim is tiled for locality.

Data movement is dtype-agnostic (elements are copied by their C type, bool as uint8_t, float16
as its uint16_t bits); NaN payloads are preserved bit for bit. Nothing here reads out of
bounds: all offsets are computed at compile time from static shapes.
"""
from __future__ import annotations

from ...emit_c.loops import numel, strides_of
from ..isa.registry import ISAS, isa_for, table
from ..isa.x86 import AVX, SIMD, include


C_BLOCK = 4         # block edge of the portable 2-D transposition (elements)
GEMM = table("gemm")


def collapse_strided(dims, strides_list):
    """Drop size-1 dims and merge dim d into d+1 when every stride list has
    s[d] == s[d+1] * dims[d+1]. Returns (dims, [strides per list])."""
    keep = [d for d in range(len(dims)) if dims[d] != 1]
    nd, ns = [], [[] for _ in strides_list]
    for d in keep:
        if nd and all(s[-1] == st[d] * dims[d] for s, st in zip(ns, strides_list)):
            nd[-1] *= dims[d]
            for s, st in zip(ns, strides_list):
                s[-1] = st[d]
        else:
            nd.append(int(dims[d]))
            for s, st in zip(ns, strides_list):
                s.append(int(st[d]))
    return nd, ns


def _term(var, stride):
    if stride == 0:
        return ""
    mul = "" if abs(stride) == 1 else f" * {abs(stride)}u"
    return f" {'+' if stride > 0 else '-'} {var}{mul}"


def emit_copy(ctx, dims, out_strides, in_strides, ct, out_var=None, in_var=None,
              out_base: int = 0, in_base: int = 0, note: str = "") -> None:
    """Emit the loop nest of a strided box copy (see the module docstring)."""
    w = ctx.w
    out_var = out_var or ctx.out[0]
    in_var = in_var or ctx.inp[0]
    if numel(dims) == 0:
        w(f"(void){out_var};  /* empty box: nothing to copy */")
        return
    dims, (os_, is_) = collapse_strided(list(dims), [list(out_strides), list(in_strides)])
    if note:
        w(f"/* {note} */")
    if not dims:
        w(f"{out_var}[{out_base}u] = {in_var}[{in_base}u];")
        return
    n = len(dims)
    # blocked transposition: innermost source stride is not 1 but another dim reads contiguously
    tile, avx = None, ct in ("float", "uint8_t", "int8_t") and _avx(ctx)
    if n >= 2 and abs(is_[-1]) != 1 and os_[-1] == 1:
        cand = [d for d in range(n - 1) if is_[d] == 1]
        least = (8 if ct == "float" else 16) if avx else 2 * C_BLOCK    # register blocks
        if cand and dims[cand[0]] >= least and dims[-1] >= least:
            tile = cand[0]
    with _Nest(w) as nest:
        ob, ib = f"{out_base}u", f"{in_base}u"
        for d in [d for d in range(n - 1) if d != tile]:
            nest.open(f"for (size_t i{d} = 0; i{d} < {dims[d]}u; ++i{d})")
            ob = _offset(w, f"oo{d}", ob, f"i{d}", os_[d])
            ib = _offset(w, f"io{d}", ib, f"i{d}", is_[d])
        last = n - 1
        if tile is not None and avx:
            a, b = tile, last       # out[.. i_a * os_a + i_b] = in[.. i_a + i_b * is_b]
            if ct == "float":
                w(f"{avx_helper(ctx)}({dims[b]}u, {dims[a]}u, {in_var} + {ib}, {is_[b]}u, "
                  f"{out_var} + {ob}, {os_[a]}u);")
            else:
                w(f"{byte_helper(ctx)}({dims[b]}u, {dims[a]}u, (const uint8_t *)({in_var} + {ib}),"
                  f" {is_[b]}u, (uint8_t *)({out_var} + {ob}), {os_[a]}u);")
        elif tile is not None:
            a, b = tile, last
            tr4 = ct == "float" and _tr4(ctx)
            w(f"{tr4_helper(ctx, tr4) if tr4 else c_helper(ctx, ct)}({dims[b]}u, {dims[a]}u, "
              f"{in_var} + {ib}, {is_[b]}u, {out_var} + {ob}, {os_[a]}u);")
        elif os_[last] == 1 and is_[last] == 1 and dims[last] > 1:
            w(f"memcpy({out_var} + {ob}, {in_var} + {ib}, {dims[last]}u * sizeof({ct}));")
        else:
            nest.open(f"for (size_t i{last} = 0; i{last} < {dims[last]}u; ++i{last})")
            w(f"{out_var}[{_cat(ob, f'i{last}', os_[last])}] = "
              f"{in_var}[{_cat(ib, f'i{last}', is_[last])}];")


def _avx(ctx) -> bool:
    """The target runs x86 SIMD kernels (AVX is there for both x86-avx2 and x86-avx512): its
    first SIMD ISA has a move table (isa/<name>/move.py)."""
    return isa_for(ctx, table("move")) is not None


def _tr4(ctx):
    """(ISA, its 4 x 4 float block transposition ``tr4``) of the target's GEMM ISA when it
    has one (NEON: TRN1 / TRN2), else None."""
    isa = isa_for(ctx, GEMM)
    return (isa, GEMM[isa]["tr4"]) if isa is not None and GEMM[isa].get("tr4") else None


def tr4_helper(ctx, tr4) -> str:
    """float 2-D transposition in 4 x 4 register blocks by the ISA's tr4 (vector loads,
    register shuffles, vector stores), c_helper's walk: bits moved unchanged (NEON: the
    transformer's K transposes, 1.7 -> 1.0 executed instructions per value)."""
    isa, spell = tr4
    include(ctx, isa)
    return blocked(ctx, f"aicc_tr_f32_{isa}", "float", C_BLOCK, f"""\
/* 2-D float transposition dst[c * ds + r] = src[r * ss + c] (r < R, c < C) in 4 x 4 {isa}
 * register blocks, scalar edges; column panels of 64 as aicc_tr_float_c4. */""",
                   "                " + spell.format(s="s", lda="ss", d="d", ldd="ds") + ";",
                   isa=None)


def c_helper(ctx, ct: str) -> str:
    """Portable 2-D transposition of elements ``ct`` in 4 x 4 blocks: 16 loads (four rows of
    four contiguous elements) into locals, then 16 stores (four rows of four). Element by
    element through 16 x 16 tiles, GCC 12 -O2 took 143 us for 64 x 3136 floats, the blocks
    81 us. Any C type (bits moved unchanged)."""
    name = f"aicc_tr_{ct.replace('_t', '')}_c4"
    loads = "\n".join(f"                const {ct} " + ", ".join(
        f"a{r}{c} = s[{f'{r}u * ss + ' if r else ''}{c}u]" for c in range(C_BLOCK)) + ";"
        for r in range(C_BLOCK))
    stores = "\n".join("                " + " ".join(
        f"d[{f'{c}u * ds + ' if c else ''}{r}u] = a{r}{c};" for r in range(C_BLOCK))
        for c in range(C_BLOCK))
    return blocked(ctx, name, ct, C_BLOCK, f"""\
/* 2-D transposition dst[c * ds + r] = src[r * ss + c] (r < R, c < C) of {ct} in 4 x 4 blocks
 * of locals (portable C: four contiguous loads per source row, four contiguous stores per
 * destination row), scalar edges; column panels of 64 as aicc_tr_f32_avx. */""",
                   "\n".join((loads, stores)), isa=None)


def blocked(ctx, name: str, et: str, bs: int, doc: str, block: str,
            isa: str | None = AVX, params: str = "", pre: str = "",
            edge: str = "src[r * ss + c]", key: str | None = None) -> str:
    """Register the 2-D transposition helper ``name(R, C, src, ss, dst, ds{params})``:
    dst[c * ds + r] = src[r * ss + c] on elements et, ``block`` (C text over s, d) moving each
    bs x bs block of the column panels of 64, each panel through all rows, then the scalar
    edges, each ``dst[c * ds + r] = {edge}``. params / pre: further parameters and the lines
    opening the body (kernels/conv/transposed.py's copy with + bias and the clamp); key: the
    helper key (default transpose.1.{name})."""
    rb, cb = f"R{bs}", f"C{bs}"
    code = f"""\
{doc}
static void {name}(size_t R, size_t C, const {et} *restrict src, size_t ss,
    {et} *restrict dst, size_t ds{params})
{{
    const size_t {rb} = R - R % {bs}u, {cb} = C - C % {bs}u;
{pre}    for (size_t c0 = 0; c0 < {cb}; c0 += 64u) {{
        const size_t c1 = c0 + 64u < {cb} ? c0 + 64u : {cb};
        for (size_t rb = 0; rb < {rb}; rb += {bs}u)
            for (size_t cb = c0; cb < c1; cb += {bs}u) {{
                const {et} *restrict s = src + rb * ss + cb;
                {et} *restrict d = dst + cb * ds + rb;
{block}
            }}
    }}
    for (size_t c = {cb}; c < C; ++c)
        for (size_t r = 0; r < {rb}; ++r)
            dst[c * ds + r] = {edge};
    for (size_t r = {rb}; r < R; ++r)
        for (size_t c = 0; c < C; ++c)
            dst[c * ds + r] = {edge};
}}"""
    if isa:
        include(ctx, isa)
    ctx.helper(key or f"transpose.1.{name}", code)
    return name


def avx_block(store) -> str:
    """C text moving the 8 x 8 float block at s (row stride ss) transposed, in AVX registers
    (8 loads, unpack, shuffle, lane permute): store(i, v) is the line that writes row i of the
    transposed block, the vector expression v (kernels/conv/transposed.py adds bias and clamps
    there). Bits unchanged."""
    d, p = SIMD[AVX], ISAS[AVX].prefix
    v = d["v"]
    loads = "\n".join(f"                const {v} r{i} = {d['ld']}(s + {i}u * ss);"
                       for i in range(8))
    unp = "\n".join(f"                const {v} t{2 * i} = {p}_unpacklo_ps(r{2 * i}, r{2 * i + 1}), "
                     f"t{2 * i + 1} = {p}_unpackhi_ps(r{2 * i}, r{2 * i + 1});"
                     for i in range(4))
    shf = "\n".join(
        f"                const {v} u{4 * h + 2 * j} = {p}_shuffle_ps(t{4 * h + j}, "
        f"t{4 * h + j + 2}, 0x44), u{4 * h + 2 * j + 1} = {p}_shuffle_ps(t{4 * h + j}, "
        f"t{4 * h + j + 2}, 0xEE);" for h in range(2) for j in range(2))
    sto = "\n".join("                " + store(i, f"{p}_permute2f128_ps(u{i % 4}, u{i % 4 + 4}, "
                                                  f"{'0x20' if i < 4 else '0x31'})")
                     for i in range(8))
    return "\n".join((loads, unp, shf, sto))


def avx_helper(ctx) -> str:
    """float32 2-D transposition in 8 x 8 register blocks (AVX): bits are moved unchanged
    (also Gemm's transposed A operand on the SIMD targets, gemm.a_rows)."""
    st = SIMD[AVX]["st"]
    return blocked(ctx, "aicc_tr_f32_avx", "float", 8, """\
/* 2-D float transposition dst[c * ds + r] = src[r * ss + c] (r < R, c < C) in 8 x 8 AVX
 * register blocks (unpack, shuffle, lane permute), scalar edges; data bits unchanged. Columns
 * go in panels of 64, each panel through all rows, so the 64 destination rows of a panel are
 * finished while they are in cache (row by row, a destination larger than L2 took every cache
 * line in and out R / 16 times). */""", avx_block(lambda i, v: f"{st}(d + {i}u * ds, {v});"))


def byte_helper(ctx) -> str:
    """1-byte 2-D transposition in 16 x 16 register blocks (SSE2, on the x86 targets): bits
    moved unchanged (channel-last int8 chains, passes/layout_nhwc.py: MobileNetV2 int8's
    32 x 112 x 112 uint8 NCHW -> NHWC took 195 us as strided loops)."""
    name = "aicc_tr_u8_sse"
    u = ISAS[AVX].move["u8"]
    st = "\n".join(f"                for (int i = 0; i < 8; ++i) {{\n"
                   f"                    {d}[i] = {u['lo'].format(w=w)}({s}[2 * i], "
                   f"{s}[2 * i + 1]);\n"
                   f"                    {d}[i + 8] = {u['hi'].format(w=w)}({s}[2 * i], "
                   f"{s}[2 * i + 1]);\n"
                   "                }" for s, d, w in (("a", "b", 8), ("b", "a", 16),
                                                       ("a", "b", 32), ("b", "a", 64)))
    block = f"""\
                static const unsigned char rev[16] = {{0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15}};
                {u['vec']} a[16], b[16];
                for (int i = 0; i < 16; ++i)
                    a[i] = {u['ld']}((const {u['vec']} *)(const void *)(s + (size_t)i * ss));
{st}
                for (int k = 0; k < 16; ++k)
                    {u['st']}(({u['vec']} *)(void *)(d + (size_t)rev[k] * ds), a[k]);"""
    return blocked(ctx, name, "uint8_t", 16, """\
/* 2-D byte transposition dst[c * ds + r] = src[r * ss + c] (r < R, c < C) in 16 x 16 SSE2
 * register blocks: four perfect-shuffle stages of unpacks (8-, 16-, 32-, 64-bit), after
 * which register k holds column bitreverse4(k); scalar edges; column panels of 64 as
 * aicc_tr_f32_avx. */""", block)


def _cat(base, *pairs):
    """C index ``base +- i * |s| ...`` for (i, s) pairs, without a leading ``0u +``."""
    e = base + "".join(_term(pairs[k], pairs[k + 1]) for k in range(0, len(pairs), 2))
    return e[5:] if e.startswith("0u + ") else e


def _offset(w, var, base, i, stride):
    """Declare ``var = base +- i * |stride|`` (skipped for stride 0); returns the name."""
    if stride == 0:
        return base
    w(f"const size_t {var} = {_cat(base, i, stride)};")
    return var


class _Nest:
    """Opens braces on demand and closes them all at exit."""

    def __init__(self, w):
        self.w, self.depth = w, 0

    def open(self, head):
        self.w(head + " {")
        self.w.level += 1
        self.depth += 1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for _ in range(self.depth):
            self.w.level -= 1
            self.w("}")


def emit_gather_copy(ctx, out_shape, in_strides, in_base=0, note="") -> None:
    """Contiguous output filled from the input through per-output-dim strides."""
    emit_copy(ctx, out_shape, strides_of(out_shape), in_strides, ctx.out_ctype(0),
              in_base=in_base, note=note)


def empty_guard(ctx) -> bool:
    """For an empty output: mark the output pointer used and return True."""
    if numel(ctx.out_shape(0)) == 0:
        ctx(f"(void){ctx.out[0]};  /* empty output */")
        return True
    return False
