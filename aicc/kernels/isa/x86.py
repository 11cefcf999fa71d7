"""The SIMD vocabulary shared by the element-wise kernels (softmax rows, erf/gelu, Swish, the
RNN products): per ISA the vector type, lane count and intrinsic names, and the target's
choice of ISA for a node; a vector constant and a polynomial in that vocabulary. The entries
have the x86 intrinsics' meanings (NEON's spell them through helpers, isa/neon). ``sel``: {b}
where {x} {p} {y} holds (a _CMP_ predicate), else {a}."""
from __future__ import annotations

import numpy as np

from ...emit_c.cwriter import c_literal
from .registry import ISAS, include_line, isa_for, table

SIMD = table("vector")

# The 8-float vector moves (aicc_vcopy / aicc_vzero, the 8 x 8 float and 16 x 16 byte
# transpositions of kernels/move/copy.py) run on every x86 SIMD target, each of which has AVX
# (AVX-512 includes it): they are spelled in, and keyed by, the x86 description with 256-bit
# vectors.
AVX = next(n for n, i in ISAS.items() if i.family == "x86" and i.vector_bytes == 32)


def vconst(d, v) -> str:
    """The float32 constant v broadcast to a vector of ``d`` (an entry of SIMD)."""
    return f"{d['set1']}({c_literal(v, np.float32)})"


def vpoly(d, u: str, coefs) -> str:
    """coefs[0] + u * (coefs[1] + u * (...)) of the vector u, one FMA per step (Horner)."""
    e = vconst(d, coefs[-1])
    for c in coefs[-2::-1]:
        e = f"{d['fma']}({e}, {u}, {vconst(d, c)})"
    return e


def simd_isa(ctx):
    """The first SIMD ISA of the target's kernel list (only the node's ``aicc_kernel`` if
    set), or None when the portable C comes first."""
    return isa_for(ctx, SIMD)


def include(ctx, isa: str) -> None:
    """#include the ISA's header once, sorted with gemm_simd's header."""
    ctx.helper(f"gemm_{isa}.0.include", include_line(isa))


PIN = """\
/* AICC_PIN(v): v is kept in a register (an empty asm that may change it). GCC otherwise folds
 * the load of a vector that 2-3 FMAs use into each of them, reading it from L1 again each
 * time, and the loads, not the FMAs, set the pace (conv_nhwc_dw). */
#if defined(__GNUC__)
#define AICC_PIN(v) __asm__("" : "+v"(v))
#else
#define AICC_PIN(v) ((void)0)
#endif"""


def pin(ctx) -> None:
    """The AICC_PIN macro, once per bundle."""
    ctx.helper("gemm_0.pin", PIN)


def _vcopy_text(d) -> str:
    L = d["L"]
    return f"""\
/* n floats from s to d (not overlapping), n zeros into d: {L}-float vector moves. GCC 12
 * expands a memcpy / memset of a constant size of a few hundred bytes (these rows, once
 * inlined) as rep movsq / rep stosq on x86-avx2 (generic tuning), ~60 cycles a row:
 * MobileNetV1-0.25's first conv spent 5.6 of its 15 us in its band copies. */
static inline void aicc_vcopy(float *restrict d, const float *restrict s, size_t n)
{{
    const size_t nv = n / {L}u * {L}u;     /* (i + {L} <= n: a GCC 12 false UB warning) */
    for (size_t i = 0; i < nv; i += {L}u)
        {d['st']}(d + i, {d['ld']}(s + i));
    for (size_t i = nv; i < n; ++i)
        d[i] = s[i];
}}

static inline void aicc_vzero(float *restrict d, size_t n)
{{
    const size_t nv = n / {L}u * {L}u;     /* (i + {L} <= n: a GCC 12 false UB warning) */
    for (size_t i = 0; i < nv; i += {L}u)
        {d['st']}(d + i, {d['zero']});
    for (size_t i = nv; i < n; ++i)
        d[i] = 0.0f;
}}"""


VCOPY = _vcopy_text(SIMD[AVX])


VCOPY_C = """\
/* n floats from s to d (not overlapping), n zeros into d: element loops (the compiler
 * vectorizes them for an ISA without the x86 vector moves). */
static inline void aicc_vcopy(float *restrict d, const float *restrict s, size_t n)
{
    for (size_t i = 0; i < n; ++i)
        d[i] = s[i];
}

static inline void aicc_vzero(float *restrict d, size_t n)
{
    for (size_t i = 0; i < n; ++i)
        d[i] = 0.0f;
}"""


def vcopy(ctx, isa: str | None = None) -> None:
    """aicc_vcopy / aicc_vzero: VCOPY (AVX, on every x86 SIMD target) where ``isa`` describes
    vector moves (or is not given), else the element loops of VCOPY_C."""
    if isa is not None and not ISAS[isa].move:
        ctx.helper("gemm_c.0.vcopy", VCOPY_C)
        return
    include(ctx, AVX)
    ctx.helper(f"gemm_{AVX}.0.vcopy", VCOPY)


def lane_mask_table(isa: str, name: str) -> str:
    """C text of ``int32_t name[2 L]``, L lanes of -1 then L of 0: for an ISA without mask
    registers, the vector of the first n lanes set is a load at ``name + L - n``."""
    L = ISAS[isa].lanes
    head = f"static const int32_t {name}[{2 * L}] = {{"
    return (f"/* {isa.upper()} lane masks: {L} - n entries from the middle give the first n "
            f"lanes set */\n{head}{', '.join(['-1'] * L)},\n"
            f"{' ' * len(head)}{', '.join(['0'] * L)}}};")


# per ISA: integer vector type and ops, abs/sign masks, compare-select, lane 0
INT = table("integer")


def include_vmath(ctx, isa):
    ctx.helper(f"0.{isa}.0.include", include_line(isa))


def lane0(ctx, isa: str, fn: str, vf: str) -> str:
    """Name of ``float aicc_FN1_ISA(float x)``: the vector function ``vf`` on lane 0."""
    d = SIMD[isa]
    name = f"aicc_{fn}1_{isa}"
    ctx.helper(f"0.{isa}.3.{name}", f"""\
/* {fn}(x) through {vf} (the same bits as the vector loops) */
static AICC_UNUSED float {name}(float x)
{{
    return {INT[isa]['lane0']}({vf}({d['set1']}(x)));
}}""")
    return name


# per ISA: the integer spellings log needs (and expm1_simd / trig_simd)
INT_BITS = table("int_bits")
