"""avx2: the pool kernels' spellings and tuning (kernels/pool).

The vector vocabulary (loads, adds, lanes) is the description's ``vector``; the masked
load / store and their mask type are the GEMM's (``gemm``: maskload / maskstore with a
lane-mask vector). Templates: ``{p}`` a pointer, ``{m}`` a mask, ``{n}`` a lane count.
"""
TABLE: dict = dict(
    # the first n lanes set: a lane-mask vector read from the middle of the kernels' table
    # aicc_ps_mtab (registered by pool/simd.py: this ISA has no mask registers)
    mask="_mm256_loadu_si256((const __m256i *)(aicc_ps_mtab + 8u - ({n})))",
    # masked load with -inf in the masked-off lanes (max pools' tails)
    mload_ninf="_mm256_blendv_ps(_mm256_set1_ps(-INFINITY), _mm256_maskload_ps({p}, {m}), "
               "_mm256_castsi256_ps({m}))",
    # quotient, 0 where the divisor is 0 (AveragePool windows with no element)
    divz="_mm256_and_ps(_mm256_div_ps({a}, {d}), "
         "_mm256_cmp_ps({d}, _mm256_setzero_ps(), _CMP_NEQ_UQ))",
    # max with NaN propagation from either operand (max_ps alone returns b when one is NaN)
    maxn="_mm256_blendv_ps(_mm256_max_ps(a, b), a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q))",
    # stride 2: the even / odd lanes of the pair of loads lo, hi, within each 128-bit half...
    even="_mm256_shuffle_ps({lo}, {hi}, 0x88)",     # lanes 0 2 8 10 | 4 6 12 14
    odd="_mm256_shuffle_ps({lo}, {hi}, 0xDD)",      # lanes 1 3 9 11 | 5 7 13 15
    # ... so the output vector's lanes are put in order once (after all taps)
    fix="_mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd({a}), 0xD8))",
    # strides > 2: the lane offsets vector gi and the gather through it
    gidx="_mm256_setr_epi32({lanes})",
    gather="_mm256_i32gather_ps({p}, gi, 4)",
    # the butterfly across the lanes (each step pairs lanes 4, 2, 1 apart)
    perms=["_mm256_permute2f128_ps({a}, {a}, 1)", "_mm256_permute_ps({a}, 0x4E)",
           "_mm256_permute_ps({a}, 0xB1)"],
)
