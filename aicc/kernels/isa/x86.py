"""The x86 SIMD vocabulary shared by the element-wise kernels (softmax rows, erf/gelu,
normalization rows): per ISA the vector type, lane count and intrinsic names, and the
target's choice of ISA for a node; a vector constant and a polynomial in that vocabulary.
``sel``: {b} where {x} {p} {y} holds (a _CMP_ predicate), else {a}."""
from __future__ import annotations

import numpy as np

from ...emit_c.cwriter import c_literal
from .registry import include_line, isa_for, table

SIMD = table("vector")


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


VCOPY = """\
/* n floats from s to d (not overlapping), n zeros into d: 8-float vector moves. GCC 12
 * expands a memcpy / memset of a constant size of a few hundred bytes (these rows, once
 * inlined) as rep movsq / rep stosq on x86-avx2 (generic tuning), ~60 cycles a row:
 * MobileNetV1-0.25's first conv spent 5.6 of its 15 us in its band copies. */
static inline void aicc_vcopy(float *restrict d, const float *restrict s, size_t n)
{
    const size_t nv = n / 8u * 8u;     /* (i + 8 <= n: a GCC 12 false UB warning) */
    for (size_t i = 0; i < nv; i += 8u)
        _mm256_storeu_ps(d + i, _mm256_loadu_ps(s + i));
    for (size_t i = nv; i < n; ++i)
        d[i] = s[i];
}

static inline void aicc_vzero(float *restrict d, size_t n)
{
    const size_t nv = n / 8u * 8u;     /* (i + 8 <= n: a GCC 12 false UB warning) */
    for (size_t i = 0; i < nv; i += 8u)
        _mm256_storeu_ps(d + i, _mm256_setzero_ps());
    for (size_t i = nv; i < n; ++i)
        d[i] = 0.0f;
}"""


def vcopy(ctx) -> None:
    """aicc_vcopy / aicc_vzero (VCOPY; AVX, on both x86 targets)."""
    include(ctx, "avx2")
    ctx.helper("gemm_avx2.0.vcopy", VCOPY)


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
