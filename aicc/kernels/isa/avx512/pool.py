"""avx512: the pool kernels' spellings and tuning (kernels/pool).

The vector vocabulary (loads, adds, lanes) is the description's ``vector``; the masked
load / store and their mask type are the GEMM's (``gemm``: __mmask16 and maskz / mask
loads and stores). Templates: ``{p}`` a pointer, ``{m}`` a mask, ``{n}`` a lane count.
"""
TABLE: dict = dict(
    # the first n lanes set
    mask="(__mmask16)((1u << ({n})) - 1u)",
    # masked load with -inf in the masked-off lanes (max pools' tails)
    mload_ninf="_mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), {m}, {p})",
    # quotient, 0 where the divisor is 0 (AveragePool windows with no element)
    divz="_mm512_maskz_div_ps(_mm512_cmp_ps_mask({d}, _mm512_setzero_ps(), _CMP_NEQ_UQ), "
         "{a}, {d})",
    # max with NaN propagation from either operand (max_ps alone returns b when one is NaN)
    maxn="_mm512_mask_max_ps(a, _mm512_cmp_ps_mask(a, a, _CMP_ORD_Q), a, b)",
    # stride 2: the even / odd lanes of the pair of loads lo, hi in order, through the index
    # vectors ev / od (built with gidx; pair_index: the kernel declares them)
    even="_mm512_permutex2var_ps({lo}, ev, {hi})",
    odd="_mm512_permutex2var_ps({lo}, od, {hi})",
    pair_index=True,
    # strides > 2: the lane offsets vector gi and the gather through it
    gidx="_mm512_setr_epi32({lanes})",
    gather="_mm512_i32gather_ps(gi, {p}, 4)",
    # the butterfly across the lanes (each step pairs lanes 8, 4, 2, 1 apart)
    perms=["_mm512_shuffle_f32x4({a}, {a}, 0x4E)", "_mm512_shuffle_f32x4({a}, {a}, 0xB1)",
           "_mm512_permute_ps({a}, 0x4E)", "_mm512_permute_ps({a}, 0xB1)"],
)
