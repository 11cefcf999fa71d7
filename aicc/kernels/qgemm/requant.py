"""Requantization of integer GEMM results on the x86 SIMD targets (kernels/qgemm/simd.py,
kernels/qgemm/conv.py, kernels/qgemm/depthwise.py): ``y = saturate(rint((acc + add) * m) + yzp)`` with the product
in float64, as qlinear.py's scalar loop (quantize.round_helper), value for value: the int32
sum (modulo 2^32) converted exactly, one float64 product, round half to even (the default
rounding mode, as rint), the zero point added, clamped; NaN -> the zero point, clamped; +-Inf
saturate. The n % lanes tail calls the scalar helper. Also the output stage shared by the
integer kernels: the int32 outputs (MatMulInteger / ConvInteger) as acc + add.

When the build proves every sum acc + add at most 2^24 in magnitude (``sums_fit``: the
constant weights, the input's range and the constant bias bound them), the helper's ``_f32``
form computes the same values in float32 for one multiplier |m| <= 64: a = acc + add
converted exactly, p = a * m rounded, q = rint(p) (the rounding conversion to int32). p is
the product's nearest float and the half-integers below 2^22 are floats, so no rounding
boundary lies strictly between p and the exact product a * m (which float64 holds exactly:
25 + 24 bits); q is its rint unless p is itself a half-integer, when the exact error
e = fma(a, m, -p) (nonzero: not a tie) says which way it rounds. |p| >= 2^22 saturates
either way; |p| <= 2^30, so q + yzp fits int32 and the packs to bytes saturate it. A third
of the float64 form's vector operations (one conversion each way, one product, no split
into halves, no clamp): MobileNetV2 int8's requantization (x86-avx512-amx), 96 x 12544
outputs in rows of 256, C loop: 250 us (float64) -> 119 us.

For |m| <= F_MAX (0.75: every requantization multiplier seen in practice) the ``_f32f`` form
rounds without a check: q = bits(fma(a, m, C)) - bits(C) with C = 1.5 * 2^23. The fused
multiply-add rounds the exact a m + C once; while |a m| < 2^22 that value lies in [2^23, 2^24),
where the floats are the integers, so the result is C + rint(a m), half to even (C is even),
and the integer bits of the floats there are bits(C) plus the integer: rint(a m) itself,
exactly as the float64 product rounds (a m is exact in float64: 25 + 24 bits). Beyond 2^22
it only has to saturate: a m + C stays positive (|a m| <= 0.75 * 2^24 = C) and the bits of
positive floats grow with them, so q lies past +-(2^22 - 1) on the right side and the packs
saturate it. Three vector operations per 8 (16) sums: one conversion, the fused multiply-add
and an integer subtraction; the checked form has eight and a branch (MobileNetV2 int8,
x86-avx2, C loop: per tensor 6.39 -> 6.19 ms, per channel 7.11 -> 6.28 ms). The multiply-add
rounds to nearest: AVX-512 says so (embedded rounding); AVX2 uses the MXCSR's mode, the C
default (round to nearest) that all of the float kernels assume. Per-channel multipliers are
build-time constants, checked against F_MAX at build time; one multiplier is checked at run
time (beyond F_MAX: the float64 form).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...emit_c.cwriter import ctype
from ..isa.registry import ISAS
from .spell import TABLES, fill, fill_lines

WRAP = """\
/* uint32 accumulator (sum modulo 2^32) -> int32 two's complement, without
 * implementation-defined conversions. */
static AICC_UNUSED int32_t aicc_u32_i32(uint32_t u)
{
    return u < 0x80000000u ? (int32_t)u : -(int32_t)(~u) - 1;
}"""

def wrap_i32(v) -> np.ndarray:
    """Integer values as int32 modulo 2^32 (two's complement): a bias added in wrapping int32."""
    return (np.asarray(v, np.int64) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


ADD = """\
/* y[j] = acc[j] + add[j * as] modulo 2^32 (the int32 outputs of MatMulInteger / ConvInteger). */
static void aicc_qadd(size_t n, const int32_t *restrict acc, const int32_t *restrict add,
                      size_t as, int32_t *restrict y)
{
    for (size_t j = 0; j < n; ++j)
        y[j] = aicc_u32_i32((uint32_t)acc[j] + (uint32_t)add[j * as]);
}"""


class Requant(NamedTuple):
    """How a QLinear* op turns its int32 sums into outputs: rnd, the scalar rounding helper
    (quantize.round_helper); mult, the C expression of the float multiplier (conv: of output
    channel ``oc``; matmul: a pointer to one, or to N when per_col); bias, the conv's int32
    bias of ``oc`` as a C expression, or None; fits: every sum within 2^24 (sums_fit)."""
    rnd: str
    mult: str
    bias: str | None = None
    per_col: bool = False
    fits: bool = False         # sums_fit: the helper's float32 form is exact
    chan_mult: bool = False    # conv: mult differs by output channel (per-channel w scales)
    rform: str = ""            # float32 rounding: "" checked, "f" check-free (|m| <= F_MAX)
    mcol: bool = False         # per_col with constant multipliers, each finite and <= MAX_MULT


def _requant_fast(isa: str, ydt: str) -> tuple:
    """(setup lines, loop lines) of the requantization for one finite multiplier (no NaN can
    arise): the description's ``rq_fast`` (with lane masks the whole row, else whole vectors
    and the caller's scalar tail)."""
    T = TABLES[isa]
    setup, loop = T["rq_fast"]
    return fill_lines(setup, pk=T["pack"][ydt]), fill_lines(loop, pk=T["pack"][ydt])


EXACT = 1 << 24          # float32 holds every integer up to this magnitude


def irange(dt: str) -> tuple:
    """(min, max) of integer dtype dt."""
    i = np.iinfo(dt)
    return int(i.min), int(i.max)


def span(xdt: str, xzp) -> int:
    """The largest |x - xzp| over integer dtype xdt (xzp None: not constant, any in range)."""
    lo, hi = irange(xdt)
    return hi - lo if xzp is None else max(int(xzp) - lo, hi - int(xzp))


def sums_fit(w, xdt: str, xzp, bias) -> bool:
    """Whether |sum over k of (x - xzp) w[oc, k] + bias[oc]| <= 2^24 for every x of dtype
    xdt (the helper's ``_f32`` form is then exact). w: the constant weights minus their zero
    point, [cout, ...]; xzp: the constant input zero point (None: not constant, any);
    bias: constant int32 [cout], None when absent, False when not constant."""
    if bias is False or np.dtype(xdt).kind not in "iu":
        return False
    dx = span(xdt, xzp)
    s = np.abs(np.asarray(w, np.int64)).reshape(len(w), -1).sum(axis=1) * dx
    if bias is not None:
        s = s + np.abs(np.asarray(bias, np.int64).reshape(-1))
    return int(s.max(initial=0)) <= EXACT


MAX_MULT = 64.0          # |m| <= 2^6: |rint(a * m)| + |yzp| < 2^31 for |a| <= 2^24
F_MAX = 0.75             # |m| <= F_MAX: the _f32f form (module doc; |a m| <= 1.5 * 2^23)


def _rq_f32(isa: str, rform: str = "") -> tuple:
    """(name, C) of the inline float32 rounding of one vector of sums a (|a| <= 2^24, module
    doc): rint(a * m) as int32, for |m| <= MAX_MULT (no overflow; the caller saturates).
    rform "f": by the fused multiply-add's rounding, for |m| <= F_MAX (no check)."""
    I, T = ISAS[isa], TABLES[isa]
    v, vi, bits = I.vector["v"], I.integer["vi"], I.int_bits
    if rform == "f":
        name = f"aicc_qrff_{isa}"
        fma = fill(T["fma_rn"], a=f"{bits['cvt']}(ai)", b="vm",
                   c=f"{I.vector['set1']}(12582912.0f)")
        C = ["/* rint(ai * vm) as int32 for |ai| <= 2^24 and |vm| <= 0.75 (kernels/qgemm/requant.py):",
             " * fma(ai, vm, 1.5 * 2^23) rounds the exact sum once to an integer while |ai vm| < "
             "2^22, whose", " * float bits are those of 1.5 * 2^23 plus it; beyond, the bits "
             "still order the values (saturated). */",
             f"static inline {vi} {name}({vi} ai, {v} vm)", "{",
             f"    return {I.integer['sub']}({bits['bits']}({fma}), {bits['set1']}(0x4B400000));",
             "}"]
        return name, "\n".join(C)
    name = f"aicc_qrf_{isa}"
    C = ["/* rint(ai * vm) as int32 in float32, for |ai| <= 2^24 and |vm| <= 64: the float64",
         " * product's rounding (kernels/qgemm/requant.py). */",
         f"static inline {vi} {name}({vi} ai, {v} vm)", "{", *["    " + b for b in T["rqf_body"]],
         "}"]
    return name, "\n".join(C)


def _requant_fast_f32(isa: str, ydt: str, rf: str, mcol: bool = False) -> tuple:
    """(setup, loop) of the ``_f32`` form for one finite multiplier of at most MAX_MULT (mcol:
    one per column, m[j], each checked so by the build): 4 vectors per step, + yzp,
    saturated to the output type by the packs, then single vectors (with lane masks the last
    under a mask, clamped in int32; without, the scalar tail follows)."""
    I, T = ISAS[isa], TABLES[isa]
    L, vi, set1, pk = I.lanes, I.integer["vi"], I.int_bits["set1"], T["pack"][ydt]
    lo, hi = irange(ydt)

    def one(o: int) -> str:     # the vector of outputs o.. (multipliers m[j + o..] or vmf)
        return fill(T["rqf_one"], rf=rf, o=o,
                    vm=f"{I.vector['ld']}(m + j + {o}u)" if mcol else "vmf")
    # the multipliers of the lanes of mask k (the masked tail's)
    mk = fill(I.mask["mload"], m="k", p="m + j") if mcol and I.masked else "vmf"
    return [
        f"const {vi} va{L} = {set1}(add[0]), vzi = {set1}(yzp);",
        *([] if mcol else [f"const {I.vector['v']} vmf = {I.vector['set1']}(m[0]);"]),
        *fill_lines(T["rqf_setup"], lo=lo, hi=hi)], [
        f"for (; j + {4 * L}u <= n; j += {4 * L}u) {{",
        *[f"    const {vi} r{i} = {one(L * i)};" for i in range(4)],
        *["    " + s for s in fill_lines(T["rqf_pack4"], pk=pk)],
        "}",
        *fill_lines(T["rqf_tail"], rf=rf, pk=pk, one=one(0), mk=mk)]


def requant_helper(ctx, isa: str, ydt: str, rnd: str, f32: bool = False,
                   per_row: bool = False, rform: str = "", mcol: bool = False) -> str:
    """``aicc_qreq_{isa}_{y}(rows, n, acc, sa, add, as, m, ms, yzp, y, sy)``: for each of rows
    rows (acc and y advancing by sa and sy), y[j] = saturate(rint((acc[j] + add[j * as]) *
    m[j * ms]) + yzp), the product in double (the scalar loops' values). per_row: the
    ``_ra`` variant, whose add advances by ``ar`` (after ``as``) per row: a bias per row. (A
    variant, not one helper with ar: GCC's clones of the helper specialized to constant
    arguments changed with the extra parameter; ResNet-8 int8's 3x3 convs' requantization
    took ~1.5 us more each.)"""
    lo, hi = irange(ydt)
    yc = ctype(np.dtype(ydt))
    f32 = f32 and "rqf_one" in TABLES[isa]      # the float32 forms where the ISA spells them
    bound = F_MAX if rform == "f" else MAX_MULT      # of one multiplier, checked at run time
    nt = rform if f32 else ""     # the _f32f form: no half-integer check
    mcol = mcol and f32           # _f32*c: a multiplier per column, each checked at build time
    tag = f"_f32{nt}{'c' if mcol else ''}" if f32 else ""
    name = f"aicc_qreq_{isa}_{ydt}{tag}{'_ra' if per_row else ''}"
    scalar = (f"y[j] = ({yc}){rnd}((double)aicc_u32_i32((uint32_t)acc[j] + (uint32_t)add[as ? j : 0u]) "
              f"* (double)m[ms ? j : 0u], yzp, {lo}, {hi});")
    T = TABLES[isa]
    L = ISAS[isa].vector_bytes // 8           # float64 lanes: outputs per step
    body = fill_lines(T["rq_body"], pk=T["pack"][ydt])
    if f32:
        rf, code = _rq_f32(isa, nt)
        ctx.helper(f"qlinear.4.2.rqf{nt}_{isa}", code)
        setup, fast = _requant_fast_f32(isa, ydt, rf, mcol)
    else:
        setup, fast = _requant_fast(isa, ydt)
    vd, set1d, half = T["f64"]["v"], T["f64"]["set1"], T["half"]
    C = [f"/* y[j] = saturate(rint((acc[j] + add[j * as]) * m[j * ms]) + yzp) for j < n ({ydt}; the "
         "product in\n * double, add modulo 2^32; NaN -> yzp, clamped): the scalar helper's "
         f"values, {L} at a time; for rows\n * rows of n, acc and y advancing by sa and sy "
         "elements per row. */",
         f"static void {name}(size_t rows, size_t n, const int32_t *restrict acc, size_t sa,",
         f"    const int32_t *restrict add, size_t as, const float *restrict m, size_t ms, "
         f"int32_t yzp, {yc} *restrict y, size_t sy)", "{",
         f"    const {half['vi']} va = {half['set1']}(add[0]);",
         f"    const {vd} vm0 = {set1d}((double)m[0]), vz = {set1d}((double)yzp);",
         f"    const {vd} vlo = {set1d}({float(lo)!r}), vhi = {set1d}({float(hi)!r});",
         f"    const {vd} vzc = {set1d}((double)(yzp < {lo} ? {lo} : "
         f"(yzp > {hi} ? {hi} : yzp)));",
         ("    const int finite = 1;  /* per-column multipliers, each finite and at most "
          f"{bound!r} in magnitude\n        (the build checked them): the float32 form */"
          if mcol else "    const int finite = ms == 0u && m[0] - m[0] == 0.0f"
          + (f"\n        && m[0] <= {bound!r}f && m[0] >= -{bound!r}f;  /* one multiplier, "
             "small: the float32 form */" if f32 else ";  /* one finite multiplier: no NaN */")),
         *["    " + ln for ln in setup],
         "    for (size_t row = 0; row < rows; ++row, acc += sa, y += sy) {"]
    row = (["size_t j = 0;", "if (finite) {"] + ["    " + s for s in fast]
           + ["}", f"for (const size_t f = n - n % {L}u; j < f; j += {L}u) {{"]
           + ["    " + s for s in body] + ["}", "for (; j < n; ++j)", "    " + scalar])
    C += ["        " + s for s in row] + ["    }", "}"]
    ctx.helper("qlinear.0.wrap", WRAP)
    ctx.helper("qlinear.4.0.string", "#include <string.h>")
    text = "\n".join(C)
    if per_row:
        text = _per_row(text, isa)
    ctx.helper(f"qlinear.4.3.req_{isa}_{ydt}{tag}{'_ra' if per_row else ''}", text)
    return name


def _per_row(text: str, isa: str) -> str:
    """The helper's text with ``ar``: add advances by ar per row, its broadcasts renewed."""
    I, half = ISAS[isa], TABLES[isa]["half"]
    vi, ai, vf, set1 = half["vi"], half["set1"], f"va{I.lanes}", I.int_bits["set1"]
    fvi = I.integer["vi"]
    reps = [("size_t as, const float", "size_t as, size_t ar, const float"),
            (f"const {vi} va = ", f"{vi} va = "), (f"const {fvi} {vf} = ", f"{fvi} {vf} = "),
            ("++row, acc += sa, y += sy) {", "++row, acc += sa, y += sy, add += ar) {\n"
             f"        if (row != 0u) {{     /* this row's bias */\n"
             f"            va = {ai}(add[0]);\n            {vf} = {set1}(add[0]);\n        }}"),
            ("acc and y advancing by sa and sy", "acc, add and y advancing by sa, ar and sy")]
    for a, b in reps:
        assert a in text, a
        text = text.replace(a, b)
    return text


def add_expr(ctx, rq: Requant | None, corr: str | None = None) -> str:
    """The C expression of ``add`` of output channel ``oc``: the bias, minus zu * (the sum of
    w - wzp) in the quad form (corr: the C name of those sums)."""
    terms = [f"(uint32_t){rq.bias}"] if rq is not None and rq.bias else []
    if corr:
        terms.append(f"0u - zu * (uint32_t){corr}[oc]")
    if not terms:
        return "0"
    ctx.helper("qlinear.0.wrap", WRAP)
    return "aicc_u32_i32(" + " + ".join(terms) + ")"


def channel_terms(ctx, rq: Requant | None, corr: str | None = None) -> None:
    """Declare ``mlt`` and ``add`` of output channel ``oc`` (add_expr)."""
    if rq is not None:
        ctx(f"const float mlt = {rq.mult};")
    ctx(f"const int32_t add = {add_expr(ctx, rq, corr)};")


def output(ctx, isa: str, rq: Requant | None, n: str, src: str, dst: str,
           add: str = "&add, 0u", mlt: str = "&mlt, 0u", rows: tuple = ("1u", "0u", "0u"),
           add_row: str | None = None) -> None:
    """Write n outputs at dst from the int32 sums at src: requantized, or (rq None) the int32
    sums plus add. add / mlt: the helpers' (pointer, stride) arguments; rows: (count, src
    stride, dst stride) of rows of n (one call, not one per row: the helper's setup is a large
    part of a short row); add_row: add's advance per row (requantized rows only: the helper's
    ``_ra`` variant)."""
    cnt, sa, sy = rows
    if rq is None:
        ctx.helper("qlinear.0.wrap", WRAP)
        ctx.helper("qlinear.4.3.add", ADD)
        if cnt == "1u":
            ctx(f"aicc_qadd({n}, {src}, {add}, {dst});")
        else:
            with ctx.block(f"for (size_t r_ = 0; r_ < {cnt}; ++r_)"):
                ctx(f"aicc_qadd({n}, {src} + r_ * {sa}, {add}, {dst} + r_ * {sy});")
        return
    fn = requant_helper(ctx, isa, ctx.out_dtype(0).name, rq.rnd, rq.fits, add_row is not None,
                        rq.rform, rq.mcol)
    if add_row is not None:
        add = f"{add}, {add_row}"
    ctx(f"{fn}({cnt}, {n}, {src}, {sa}, {add}, {mlt}, yzp, ({ctype(ctx.out_dtype(0))} *)({dst}), "
        f"{sy});")
