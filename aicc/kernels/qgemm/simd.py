"""Integer matrix products on the x86 SIMD targets: QLinearMatMul / MatMulInteger with a
constant ``b`` and QLinearConv / ConvInteger with constant weights (kernels/qgemm/conv.py), as exact
integer GEMMs (qlinear.py's loops stay for run-time weights, depthwise-like convs and the
generic target). This module: the micro-kernels, the GEMM driver, MatMul; kernels/qgemm/requant.py:
requantization and the int32 outputs.

Exactness: every form computes the sum over k of (a - azp)(b - bzp) modulo 2^32 (wrapping
int32 lane adds), the portable loops' value bit for bit whatever the order.

* Pair form (``p``; ``pv`` on AVX-512 VNNI): both operands with their zero points subtracted,
  in [-255, 255] as int16; ``vpmaddwd`` multiplies adjacent pairs of k and adds the two
  products into an int32 lane (|.| <= 2 * 255 * 255: never saturates), then a lane add
  (``vpdpwssd`` does both). Any uint8 / int8 operands and zero points.
* NEON (isa/neon/qgemm.py): the pair form with SMLAL / SMLAL2 into accumulators of unreduced
  products (the description's ``split``), reduced by ADDP at the store; on arm-neon-dot the
  quad form with SDOT, signed x signed (the description's ``quad_flip``: activation bytes
  x + FLIP with FLIP -128 for uint8, 0 for int8; the same zero-point algebra as below).
* Quad form (``qa`` / ``qb``, x86-avx512-vnni; SDOT on arm-neon-dot): ``vpdpbusd``
  multiplies four uint8 by four int8 and adds them to the lane: exact (no intermediate
  saturation). The constant
  operand is ``b - bzp`` as int8 (used only when every value fits: int8 weights with a zero
  point of 0, uint8 weights with a zero point near 128); the activations as unsigned bytes
  u = x (uint8) or x + 128 (int8) with the zero point zu likewise, so that
  sum (x - xzp) w' = sum u w' - zu sum w' with the column sums of w' constants; padding and
  missing channels hold zu. Four times the products per instruction of the pair form.

Layout (the float GEMM's, on groups of g = 2 or 4 consecutive k in a 32-bit lane): the
broadcast operand A is rows of g * kgn elements (kgn = ceil(K / g), zeros past K); the vector
operand B is packed in panels of NR columns (2 vectors: 16 int32 lanes on AVX2, 32 on
AVX-512), ``Bp[((p * kgn + kg) * NR + j) * g + e] = B[g kg + e, p * NR + j]``, or read in
place through a table of row offsets (the implicit convolution). The micro-kernel keeps
mr x 2 accumulator vectors over all of K (no K blocking: integer sums are exact in any order)
and stores whole panels into an int32 block buffer.

MatMul: B (the constant ``b - bzp``) is packed at compile time; the activation rows are
converted into A at run time; all batch dims of ``a`` are rows (``b`` is a matrix).

Requantization (QLinear*, kernels/qgemm/requant.py): per output element ``saturate(rint(acc * m) +
yzp)`` with ``acc * m`` in float64 (m = a_scale * b_scale / y_scale in float32), the values of
qlinear.py's scalar loop.
"""
from __future__ import annotations

from contextlib import nullcontext
from typing import NamedTuple

import numpy as np

from . import amx as qgemm_amx
from ...emit_c.cwriter import c_float, c_int, ctype
from ...emit_c.loops import numel
from ..gemm.call import batch_dims
from ..isa import registry
from ..isa.registry import ISAS
from ..isa.x86 import include
from .requant import Requant, WRAP, output, sums_fit, wrap_i32
from .spell import TABLES, fill


class Plane2D(NamedTuple):
    """A 1-D or 2-D conv's geometry as 2-D (a 1-D conv is one row): input, kernel, stride,
    dilation, leading / trailing pads and output, each (height, width)."""
    H: int
    W: int
    kh: int
    kw: int
    sh: int
    sw: int
    dh: int
    dw: int
    pt: int
    pl: int
    pb: int
    pr: int
    OH: int
    OW: int


def plane_2d(geo) -> Plane2D:
    two = len(geo.k) == 2

    def hw(v, one):
        return list(v) if two else [one, v[0]]
    return Plane2D(*hw(geo.inp, 1), *hw(geo.k, 1), *hw(geo.stride, 1), *hw(geo.dil, 1),
                   *hw(geo.pad, 0), *hw(geo.pad_end, 0), *hw(geo.out, 1))


def isa_for(ctx):
    """The integer kernels' ISA for ctx's node (isa/registry.py's rule over this family's ISAs)."""
    return registry.isa_for(ctx, TABLES)


def const_operand(ctx, k, zp_k) -> bool:
    """A SIMD target, input k constant and its zero point (input zp_k) constant or absent."""
    return (isa_for(ctx) is not None and ctx.in_const(k) is not None
            and (not ctx.has_input(zp_k) or ctx.in_const(zp_k) is not None))


def matmul_usable(ctx, a_k, b_k, bz_k) -> bool:
    sb = tuple(ctx.in_shape(b_k))
    return (const_operand(ctx, b_k, bz_k) and len(sb) >= 2
            and all(d == 1 for d in sb[:-2]) and len(ctx.in_shape(a_k)) >= 1)


def quad_form(ctx, isa: str, consts: np.ndarray, signed_bcast: bool):
    """'qa' / 'qb' when the target has VNNI and the constant operand (``b - bzp`` values)
    fits int8, else None. signed_bcast: the constant is the broadcast operand (conv)."""
    if not vnni(ctx, isa) or consts.size == 0 or consts.min() < -128 or consts.max() > 127:
        return None
    return "qb" if signed_bcast else "qa"


# -- C text --------------------------------------------------------------------------------------

def vnni(ctx, isa: str) -> bool:
    """VNNI on the target (the description's ``vnni`` and its cpu flag, x86-avx512-vnni):
    vpdpwssd multiplies the pairs and adds them to the accumulator in one instruction (the
    same wrapping int32 sums at twice the rate on Zen 5), and vpdpbusd does four uint8 x
    int8 products (the quad form)."""
    v = TABLES[isa].get("vnni")
    return v is not None and v["flag"] in ctx.target.cpu_flags


# dot-product forms: element type and its bytes, k values per 32-bit lane, C of one
# accumulation step (av: the broadcast lane of A, b0 / b1: the two vectors of the B row); the
# VNNI forms' steps are the description's (``vnni``)
FORMS = {
    "p": dict(et="int16_t", size=2, g=2, step="{add}({c}, {madd}(av, {b}))"),  # vpmaddwd + add
    "pv": dict(et="int16_t", size=2, g=2),      # int16 pairs: vpdpwssd
    "qa": dict(et="uint8_t", size=1, g=4),      # A unsigned: vpdpbusd
    "qb": dict(et="uint8_t", size=1, g=4),      # B unsigned
}


# GCC 12 (-O2, -O3) spills half the accumulators of a tile to the stack on every k step when
# the tile is inlined or cloned with a constant kgn (not with -fno-tree-ch: loop header
# copying), which made the x86-avx2 pointwise convs of MobileNetV2 int8 run at half the rate
# of the same code with kgn a parameter. noipa keeps it one; clang allocates the registers
# either way.
NOIPA = """\
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 8
#define AICC_NOIPA __attribute__((noipa))   /* the tiles' kgn never a constant (qgemm_simd) */
#else
#define AICC_NOIPA
#endif"""


def pair_form(ctx, isa: str) -> str:
    return "pv" if vnni(ctx, isa) and "pv" in TABLES[isa]["vnni"] else "p"


# the quad form's activation bytes x + FLIP by type: unsigned for vpdpbusd (the default);
# a description's ``quad_flip`` otherwise (signed x signed dot products: uint8 - 128)
QUAD_FLIP = {"uint8": 0, "int8": 128}


def flip(ctx, ta) -> int:
    """The quad form's FLIP of activation type ta on ctx's ISA."""
    return TABLES[isa_for(ctx)].get("quad_flip", QUAD_FLIP)[ta.name]


def _form_table(isa: str, form: str) -> dict:
    """The description's qgemm table with its ``form_keys`` of form over the defaults."""
    d = TABLES[isa]
    return {**d, **d.get("form_keys", {}).get(form, {})}


def _kernel(ctx, isa: str, form: str, mr: int, implicit: bool) -> str:
    """c[r][0:NR] = sum over k groups kg of the A lane a[r][g kg .. g kg + g) times the B lanes
    of row kg (packed panel: at kg * 2 V; implicit: at off[kg]; V elements a vector)."""
    I, d, f = ISAS[isa], _form_table(isa, form), FORMS[form]
    nr, half, et, g = d["nr"], d["nr"] // 2, f["et"], f["g"]
    vi, step = I.integer["vi"], f.get("step") or d.get("vnni", {}).get(form)
    ve = nr // 2 * g                    # elements per vector: NR / 2 columns of g
    name = f"aicc_qk{'i' if implicit else ''}_{form}_{isa}_{mr}"
    L = [f"/* integer GEMM tile ({isa}, form {form}): {mr} rows x {nr} columns, c[r][j] = sum "
         f"over k of a[r][k] b[k][j],\n * {g} k per 32-bit lane, wrapping int32 sums; row kg of "
         f"b at {'b + off[kg]' if implicit else f'b + kg * {2 * ve}'}. */",
         f"static AICC_NOIPA void {name}(size_t kgn, const {et} *restrict a, size_t lda, "
         f"const {et} *restrict b, {'const int32_t *restrict off, ' if implicit else ''}"
         "int32_t *restrict c, size_t ldc)", "{"]
    # split (the description's ``split``, e.g. NEON's widening multiply-adds): each B vector
    # keeps accumulators of its unreduced products (suffixes ``acc``), updated by the lines
    # ``steps`` and reduced to the int32 sums by ``reduce`` at the store
    split = d.get("split")
    sub = split["acc"] if split else ("",)
    vb = d.get("vb", vi)                # the B vectors' type
    acc = [(r, h) for r in range(mr) for h in range(2)]
    L.append("    " + f"{vi} " + ", ".join(f"c{r}_{h}{x} = {d['zero']}" for r, h in acc
                                         for x in sub) + ";")
    if "bcast" in d:                    # a pointer per row, advanced by the broadcast
        L.append(f"    const {et} *" + ", *".join(f"a{r}_ = a + {r}u * lda" for r in range(mr))
                 + ";")
    L.append("    for (size_t kg = 0; kg < kgn; ++kg) {")
    L.append(f"        const {et} *bk = {'b + off[kg]' if implicit else f'b + kg * {2 * ve}u'};")
    L.append(f"        const {vb} b0 = {fill(d['ld'], p='bk')};")
    L.append(f"        const {vb} b1 = {fill(d['ld'], p=f'bk + {ve}u')};")
    for r in range(mr):
        L.append("        {")
        if "bcast" in d:            # the lane of g elements, the row pointer advanced past it
            L.append(f"            const {vb} av = {fill(d['bcast'], p=f'a{r}_')};")
        else:
            L.append("            int32_t s;")
            L.append(f"            memcpy(&s, a + {r}u * lda + {g}u * kg, sizeof s);")
            L.append(f"            const {vi} av = {I.int_bits['set1']}(s);")
        for h in range(2):
            if split:
                L += ["            " + fill(t, c=f"c{r}_{h}", b=f"b{h}") for t in split["steps"]]
                continue
            st = fill(step, add=I.integer["add"], madd=d.get("madd"), c=f"c{r}_{h}",
                      b=f"b{h}")
            L.append(f"            c{r}_{h} = {st};")
        L.append("        }")
    L.append("    }")
    for r, h in acc:
        v = fill(split["reduce"], c=f"c{r}_{h}") if split else f"c{r}_{h}"
        L.append("    " + fill(d["st"], p=f"c + {r}u * ldc + {h * half}u", v=v) + ";")
    L.append("}")
    include(ctx, isa)
    ctx.helper("qlinear.4.0.string", "#include <string.h>")
    ctx.helper("qlinear.4.0.noipa", NOIPA)
    if "bcast_c" in d:
        ctx.helper(f"qlinear.4.0.bcast_{isa}", d["bcast_c"])
    ctx.helper(f"qlinear.4.1.{name}", "\n".join(L))
    return name


def gemm(ctx, isa: str, form: str, m: int, implicit: bool = False) -> str:
    """``aicc_qgemm*``: C [m x (np * NR)] (ldc) = A [m rows of g * kgn] x np panels of B
    (packed: panel p at bp + p * kgn * NR * g; implicit: the columns p * NR.. of rows at
    bp + off[kg], i.e. panel p at bp + p * NR * g)."""
    d, f = _form_table(isa, form), FORMS[form]
    mr, nr, et, g = d["mr"], d["nr"], f["et"], f["g"]
    tag = "i" if implicit else ""
    name = f"aicc_qgemm{tag}_{form}_{isa}_{m}"
    # balanced row tiles (49 rows: 7 x 7, not 6 x 8 + 1, whose 1-row tile waits on its two
    # accumulators' dependency chains)
    nt = -(-m // mr)
    sizes = [m // nt + 1] * (m % nt) + [m // nt] * (nt - m % nt)
    tiles = [(sum(sizes[:i]), r) for i, r in enumerate(sizes)]
    L = [f"/* C[{m} x np * {nr}] = A[{m} x {g} kgn] x np {'implicit' if implicit else 'packed'} "
         "panels */",
         f"static void {name}(size_t kgn, size_t np_, const {et} *restrict a, "
         f"const {et} *restrict bp, {'const int32_t *restrict off, ' if implicit else ''}"
         "int32_t *restrict c, size_t ldc)", "{",
         "    for (size_t p = 0; p < np_; ++p) {",
         f"        const {et} *pb = bp + p * {'' if implicit else 'kgn * '}{g * nr}u;"]
    for r0, rows in tiles:
        k = _kernel(ctx, isa, form, rows, implicit)
        L.append(f"        {k}(kgn, a + {r0}u * {g}u * kgn, {g}u * kgn, pb, "
                 f"{'off, ' if implicit else ''}c + {r0}u * ldc + p * {nr}u, ldc);")
    L += ["    }", "}"]
    ctx.helper(f"qlinear.4.2.g{tag}_{form}_{isa}_{m:05d}", "\n".join(L))
    return name


PACK_A = """\
/* One row of k values (TA) minus the zero point as int16, a zero after an odd k. */
static void aicc_qrow_SFX(size_t k, const TA *restrict a, int32_t zp, int16_t *restrict d)
{
    for (size_t i = 0; i < k; ++i)
        d[i] = (int16_t)((int32_t)a[i] - zp);
    if (k & 1u)
        d[k] = 0;
}"""

PACK_AQ = """\
/* One row of k values (TA) as unsigned bytes (x + FLIP), zeros up to kq (a multiple of 4). */
static void aicc_qrowq_SFX(size_t k, size_t kq, const TA *restrict a, uint8_t *restrict d)
{
    for (size_t i = 0; i < k; ++i)
        d[i] = (uint8_t)((int32_t)a[i] + FLIP);
    for (size_t i = k; i < kq; ++i)
        d[i] = 0;
}"""

def typed(code: str, ta, fl: int | None = None) -> tuple:
    """Helper text for activation type ta (uint8 / int8): _SFX, TA, FLIP (fl; by default
    QUAD_FLIP's: +128 for int8)."""
    sfx = "_u8" if ta.name == "uint8" else "_s8"
    return (code.replace("_SFX", sfx).replace("TA", ctype(ta))
            .replace("FLIP", str(QUAD_FLIP[ta.name] if fl is None else fl)), sfx)


def as_elems(v: np.ndarray, form: str) -> np.ndarray:
    """Integer values as a form's operand elements (int8 values are stored as their bytes)."""
    return v.astype(np.int16) if FORMS[form]["g"] == 2 else v.astype(np.int8).view(np.uint8)


def pack_b(b: np.ndarray, nr: int, form: str, kgn: int = 0) -> np.ndarray:
    """[K, N] values -> NR-column panels of max(kgn, ceil(K / g)) k groups (zeros past K and
    N)."""
    g = FORMS[form]["g"]
    k, n = b.shape
    kgn, npn = max(kgn, -(-k // g)), -(-n // nr)
    full = np.zeros((g * kgn, npn * nr), np.int64)
    full[:k, :n] = b
    # [kg, e, p, j] -> [p, kg, j, e]
    return as_elems(full.reshape(kgn, g, npn, nr).transpose(2, 0, 3, 1), form)


def zp_values(ctx, k, n) -> np.ndarray:
    """The constant zero point of input k as n int64 values (0 when absent)."""
    if not ctx.has_input(k):
        return np.zeros(n, np.int64)
    v = np.asarray(ctx.in_const(k)).astype(np.int64).reshape(-1)
    return np.broadcast_to(v, (n,)) if v.size == 1 else v


def conv_weights(ctx, op, geo) -> np.ndarray:
    """A conv's constant w - wzp as int64 [cout, cin_g, taps]."""
    w = np.asarray(ctx.in_const(op.W)).astype(np.int64).reshape(geo.cout, geo.cin_g, -1)
    return w - zp_values(ctx, op.WZ, geo.cout)[:, None, None]


def scalar(ctx, k) -> str:
    """Element 0 of input k: a literal when constant, else a load."""
    v = ctx.in_const(k)
    if v is not None:
        v = np.asarray(v).reshape(-1)[0]
        return c_float(v) if v.dtype.kind == "f" else c_int(v, v.dtype)
    return f"{ctx.inp[k]}[0]"


def zp_expr(ctx, k) -> str:
    """The int32 C expression of the per-tensor zero point input k (0 when absent)."""
    return f"(int32_t){scalar(ctx, k)}" if ctx.has_input(k) else "0"


def zp_const(ctx, k):
    """The per-tensor zero point input k as an int: 0 when absent, None when not constant."""
    if not ctx.has_input(k):
        return 0
    v = ctx.in_const(k)
    return None if v is None else int(np.asarray(v).reshape(-1)[0])


# -- emitters ------------------------------------------------------------------------------------

def emit_matmul(op, node, ctx, rq: Requant | None, bias: np.ndarray | None = None) -> None:
    """MatMul form. ``rq``: None (int32 output) or the requantization (its mult: the C
    expression of a pointer to the float multiplier, or to N of them when per_col); bias:
    constant int32 values [n] added to the sums (aicc.QGemm)."""
    _, _, _, m, k, n = batch_dims(ctx.in_shape(op.A), ctx.in_shape(op.B))
    rows = numel(tuple(ctx.out_shape(0))) // n
    b = np.asarray(ctx.in_const(op.B)).astype(np.int64).reshape(k, n)
    emit_rows(ctx, op.A, op.AZ, rows, b - zp_values(ctx, op.BZ, n)[None, :], rq,
              None if bias is None else np.asarray(bias, np.int64).reshape(n))


def emit_rows(ctx, a_k: int, az_k: int, rows: int, b: np.ndarray, rq: Requant | None,
              bias: np.ndarray | None = None) -> None:
    """``y[rows, n] = (a - azp)[rows, k] @ b`` (+ bias [n], int64 constant values, added modulo
    2^32), requantized by rq or the int32 sums (rq None): a is input a_k (rows of k, its
    zero point input az_k), b the constant ``[k, n]`` values minus their zero points."""
    isa = isa_for(ctx)
    d = TABLES[isa]
    ctx.kernel = isa
    ta = ctx.in_dtype(a_k)
    k, n = b.shape
    if rq is not None and (not rq.per_col or rq.mcol):
        rq = rq._replace(fits=sums_fit(b.T, ta.name, zp_const(ctx, az_k), bias))
    form = quad_form(ctx, isa, b, False) or pair_form(ctx, isa)
    g, et, nr = FORMS[form]["g"], FORMS[form]["et"], d["nr"]
    npn, kgn = -(-n // nr), -(-k // g)
    amx = form == "qa" and qgemm_amx.available(ctx) and rows >= qgemm_amx.MIN_ROWS
    if amx:            # whole k tiles; whole 16-row tiles in the scratch buffers
        kgn = qgemm_amx.k_groups(kgn)
    # rows of whole k groups whose FLIP is 0 (vpdpbusd: uint8; SDOT: int8) are the quad
    # form's A as they are: read in place
    in_place = form == "qa" and flip(ctx, ta) == 0 and k == g * kgn and not amx
    bp = ctx.const(pack_b(b, nr, form, kgn), "qb")
    mb = min(rows, 64)
    mbs = qgemm_amx.rows_padded(mb) if amx else mb
    if not in_place:
        ab = ctx.scratch(mbs * g * kgn * FORMS[form]["size"], et, "qa")
    cb = ctx.scratch(mbs * npn * nr * 4, "int32_t", "qc")
    ctx(f"/* integer GEMM ({isa}{', AMX tiles' if amx else ''}, form {form}): {rows} rows of a x "
        f"(b - bzp) packed at build time ({npn} panels of {nr})"
        f"{'; a read in place' if in_place else ''} */")
    ctx(f"const int32_t azp = {zp_expr(ctx, az_k)};")
    bias32 = None if bias is None else ctx.const(wrap_i32(bias), "qbias")
    if g == 4:      # the zero point's share: -zu * column sums of b - bzp
        code, sfx = typed(PACK_AQ, ta, flip(ctx, ta))
        ws = ctx.const(b.sum(axis=0).astype(np.int32), "qsum")
        add = ctx.scratch(n * 4, "int32_t", "qadd")
        ctx(f"const uint32_t zu = (uint32_t)(azp + {flip(ctx, ta)});")
        ctx.helper("qlinear.0.wrap", WRAP)
        bterm = "" if bias32 is None else f"(uint32_t){bias32}[j] "
        with ctx.block(f"for (size_t j = 0; j < {n}u; ++j)"):
            ctx(f"{add}[j] = aicc_u32_i32({bterm or '0u '}- zu * (uint32_t){ws}[j]);")
        adds = f"{add}, 1u"
        if not in_place:
            ctx.helper(f"qlinear.4.1.rowq{sfx}", code)
        row = f"aicc_qrowq{sfx}({k}u, {g * kgn}u, {ctx.inp[a_k]} + (r0 + i) * {k}u, " \
              f"{ab} + i * {g * kgn}u);" if not in_place else None
    else:
        code, sfx = typed(PACK_A, ta)
        ctx.helper(f"qlinear.4.1.row{sfx}", code)
        if bias32 is None:
            ctx("static const int32_t zero = 0;")
            adds = "&zero, 0u"
        else:
            adds = f"{bias32}, 1u"
        row = f"aicc_qrow{sfx}({k}u, {ctx.inp[a_k]} + (r0 + i) * {k}u, azp, {ab} + i * {g * kgn}u);"
    ldc = npn * nr
    with ctx.block(f"for (size_t r0 = 0; r0 < {rows}u; r0 += {mb}u)"):
        ctx(f"const size_t mr = {rows}u - r0 < {mb}u ? {rows}u - r0 : {mb}u;")
        if row is not None:
            with ctx.block("for (size_t i = 0; i < mr; ++i)"):
                ctx(row)
        a = f"{ctx.inp[a_k]} + r0 * {k}u" if in_place else ab
        if in_place and ta.name != "uint8":         # int8 rows as the quad form's bytes
            a = f"(const uint8_t *)(const void *)({a})"
        args = f"({kgn}u, {npn}u, {a}, {bp}, {cb}, {ldc}u);"
        vec = [gemm(ctx, isa, form, mb) + args]
        if rows % mb:
            vec = [f"if (mr == {mb}u) {vec[0]}", f"else {gemm(ctx, isa, form, rows % mb)}{args}"]
        if amx:
            ctx(f"if (aicc_amx_ready()) {qgemm_amx.gemm(ctx)}(mr, {args[1:]}")
        with ctx.block("else") if amx else nullcontext():
            for line in vec:
                ctx(line)
        output(ctx, isa, rq, f"{n}u", cb, f"{ctx.out[0]} + r0 * {n}u", adds,
               "" if rq is None else f"{rq.mult}, {1 if rq.per_col else 0}u",
               rows=("mr", f"{ldc}u", f"{n}u"))
