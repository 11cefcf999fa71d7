"""AVX-512F/VL/BW (x86-64, Skylake-SP, Ice Lake, Zen 4 and later): 512-bit vectors, 32
registers, mask registers.
"""
from __future__ import annotations

from ..base import Isa
from . import conv, move, pool, qgemm, vmath, winograd

# tails: a mask register holding the first {n} lanes
MASK = dict(mtype="__mmask16",
            mask="(__mmask16)((1u << ({n})) - 1u)",
            mload="_mm512_maskz_loadu_ps({m}, {p})",
            mstore="_mm512_mask_storeu_ps({p}, {m}, {v})")

ISA = Isa(
    name="avx512", family="x86", header="<immintrin.h>", vector_bytes=64, registers=32,
    prefix="_mm512", mask=MASK, masked=True,
    vector=dict(v="__m512", L=16, set1="_mm512_set1_ps", add="_mm512_add_ps", sub="_mm512_sub_ps",
                mul="_mm512_mul_ps", div="_mm512_div_ps", fma="_mm512_fmadd_ps",
                fnma="_mm512_fnmadd_ps", max="_mm512_max_ps", min="_mm512_min_ps",
                ld="_mm512_loadu_ps",
                st="_mm512_storeu_ps", zero="_mm512_setzero_ps()", sqrt="_mm512_sqrt_ps",
                sel="_mm512_mask_blend_ps(_mm512_cmp_ps_mask({x}, {y}, {p}), {a}, {b})",
                rnd="_mm512_roundscale_ps({x}, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)"),
    integer=dict(vi="__m512i", cvt="_mm512_cvtps_epi32", srai="_mm512_srai_epi32",
                 sub="_mm512_sub_epi32", add="_mm512_add_epi32", slli="_mm512_slli_epi32",
                 c127="_mm512_set1_epi32(127)", cast="_mm512_castsi512_ps",
                 # float and/or/xor are AVX512DQ: integer ones
                 bit="_mm512_castsi512_ps(_mm512_{op}_si512(_mm512_castps_si512({a}), "
                     "_mm512_castps_si512({b})))",
                 lane0="_mm512_cvtss_f32",
                 scalef="_mm512_scalef_ps({p}, {n})"),
    int_bits=dict(vi="__m512i", bits="_mm512_castps_si512", flt="_mm512_castsi512_ps",
                  srli="_mm512_srli_epi32", sub="_mm512_sub_epi32", set1="_mm512_set1_epi32",
                  band="_mm512_and_si512", bor="_mm512_or_si512", cvt="_mm512_cvtepi32_ps"),
    gemm=dict(vec="__m512", lanes=16, mr=12, kc=32, ks=32, mc=48, jb=32, nc=512,
              prefetch_kb=0, pf_rows=2, pf_next="T1", pf_first=True,
              load="_mm512_loadu_ps({p})", store="_mm512_storeu_ps({p}, {v})",
              bcast="_mm512_set1_ps(*({p}))", fma="_mm512_fmadd_ps({a}, {b}, {c})",
              zero="_mm512_setzero_ps()", add="_mm512_add_ps", **MASK,
              # the clamp epilogue's min / max (gemm/clamp.py tile_clamp)
              min="_mm512_min_ps", max="_mm512_max_ps",
              # a prefetch of the line at {p} toward cache level {hint} (T0: L1, T1: L2)
              prefetch="_mm_prefetch((const char *)({p}), _MM_HINT_{hint})",
              # most accumulators a kernel of several panels keeps: 3/4 of the 32
              # registers, the rest for the B vectors and broadcasts (gemm/simd.py
              # panels_at_once)
              acc_max=24),
    gemm_mr_max={1: 28, 2: 14, 3: 9},
    conv=dict(mr=12, kc=32, jb=64, tile_kb=192, implicit_pct=13, algo="auto", wino_m=0,
              alias_rows=4,
              wino_kb=768, wino_chan=1, edge_kernels=8),
    conv_kernels=conv.TABLE, winograd=winograd.TABLE, qgemm=qgemm.TABLE, pool=pool.TABLE,
    move=move.TABLE, vmath=vmath.TABLE,
)
