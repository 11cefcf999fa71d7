"""AVX2 with FMA (x86-64, Haswell, Zen and later): 256-bit vectors, 16 registers.
"""
from __future__ import annotations

from ..base import Isa
from . import conv, move, pool, qgemm, vmath, winograd

# tails: a lane-mask vector loaded from the 8-entry table aicc_sg_avx2_mtab (no mask registers)
MASK = dict(mtype="__m256i",
            mask="_mm256_loadu_si256((const __m256i *)(aicc_sg_avx2_mtab + 8u - ({n})))",
            mload="_mm256_maskload_ps({p}, {m})",
            mstore="_mm256_maskstore_ps({p}, {m}, {v})")

ISA = Isa(
    name="avx2", family="x86", header="<immintrin.h>", vector_bytes=32, registers=16,
    prefix="_mm256", mask=MASK, masked=False,
    vector=dict(v="__m256", L=8, set1="_mm256_set1_ps", add="_mm256_add_ps", sub="_mm256_sub_ps",
                mul="_mm256_mul_ps", div="_mm256_div_ps", fma="_mm256_fmadd_ps",
                fnma="_mm256_fnmadd_ps", max="_mm256_max_ps", min="_mm256_min_ps",
                ld="_mm256_loadu_ps",
                st="_mm256_storeu_ps", zero="_mm256_setzero_ps()", sqrt="_mm256_sqrt_ps",
                sel="_mm256_blendv_ps({a}, {b}, _mm256_cmp_ps({x}, {y}, {p}))",
                rnd="_mm256_round_ps({x}, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)"),
    integer=dict(vi="__m256i", cvt="_mm256_cvtps_epi32", srai="_mm256_srai_epi32",
                 sub="_mm256_sub_epi32", add="_mm256_add_epi32", slli="_mm256_slli_epi32",
                 c127="_mm256_set1_epi32(127)", cast="_mm256_castsi256_ps",
                 bit="_mm256_{op}_ps({a}, {b})", lane0="_mm256_cvtss_f32", scalef=None),
    int_bits=dict(vi="__m256i", bits="_mm256_castps_si256", flt="_mm256_castsi256_ps",
                  srli="_mm256_srli_epi32", sub="_mm256_sub_epi32", set1="_mm256_set1_epi32",
                  band="_mm256_and_si256", bor="_mm256_or_si256", cvt="_mm256_cvtepi32_ps"),
    gemm=dict(vec="__m256", lanes=8, mr=6, kc=768, ks=32, mc=144, jb=128, nc=128, prefetch_kb=0,
              pf_rows=1, pf_next="T0", pf_first=False,
              # the broadcast K loop unrolled 4 times (gemm/tile.py unroll_pragma)
              ku=4,
              load="_mm256_loadu_ps({p})", store="_mm256_storeu_ps({p}, {v})",
              bcast="_mm256_broadcast_ss({p})", fma="_mm256_fmadd_ps({a}, {b}, {c})",
              zero="_mm256_setzero_ps()", add="_mm256_add_ps", **MASK,
              # the clamp epilogue's min / max (gemm/clamp.py tile_clamp)
              min="_mm256_min_ps", max="_mm256_max_ps",
              # a prefetch of the line at {p} toward cache level {hint} (T0: L1, T1: L2)
              prefetch="_mm_prefetch((const char *)({p}), _MM_HINT_{hint})",
              # most accumulators a kernel of several panels keeps: 3/4 of the 16
              # registers, the rest for the B vectors and broadcasts (gemm/simd.py
              # panels_at_once)
              acc_max=12),
    gemm_mr_max={1: 12, 2: 6, 3: 4},
    conv=dict(mr=6, kc=32, jb=64, tile_kb=192, implicit_pct=5, algo="auto", wino_m=0,
              alias_rows=4,
              wino_kb=768, wino_chan=1, edge_kernels=8),
    conv_kernels=conv.TABLE, winograd=winograd.TABLE, qgemm=qgemm.TABLE, pool=pool.TABLE,
    move=move.TABLE, vmath=vmath.TABLE,
)
