"""avx512: the vmath kernels' spellings and tuning (kernels/vmath, the softmax rows).

The float vector vocabulary is the description's ``vector``, the bit operations its
``integer`` and ``int_bits``. A compare gives a mask register (``mask``).
"""
TABLE: dict = dict(
    mask="__mmask16",                               # the type of a compare's lanes
    cmp="_mm512_cmp_ps_mask({x}, {y}, {p})",        # lanes where x p y (a _CMP_ predicate)
    blend="_mm512_mask_blend_ps({m}, {a}, {b})",    # b where m holds, else a
    mask_andnot="({b} & (__mmask16)~{a})",          # lanes of mask b and not of mask a
    any="{m}",                                      # the lanes of m as bits: != 0 when any
    cvtt="_mm512_cvttps_epi32",                     # float -> int32, truncating
    # the lanes of v reduced to a float by op (max, add)
    hred="""\
    return _mm512_reduce_{op}_ps(v);""",
    # float32 <-> float16 Casts (kernels/vmath/half.py): one vector of {x} down / up /
    # rounded through half at {y}; the tail one masked vector of the values left ({mask})
    half=dict(
        down="_mm256_storeu_si256((__m256i *)({y}), _mm512_cvtps_ph(_mm512_loadu_ps({x}), RNE));",
        up="_mm512_storeu_ps({y}, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)({x}))));",
        round="_mm512_storeu_ps({y}, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_loadu_ps({x}), "
              "RNE)));",
        tail_down="_mm256_mask_storeu_epi16({y}, {mask}, _mm512_cvtps_ph("
                  "_mm512_maskz_loadu_ps({mask}, {x}), RNE));",
        tail_up="_mm512_mask_storeu_ps({y}, {mask}, _mm512_cvtph_ps("
                "_mm256_maskz_loadu_epi16({mask}, {x})));",
        tail_round="_mm512_mask_storeu_ps({y}, {mask}, _mm512_cvtph_ps(_mm512_cvtps_ph("
                   "_mm512_maskz_loadu_ps({mask}, {x}), RNE)));",
        mask="(__mmask16)((1u << {m}u) - 1u)"),     # the first m lanes of the tail
)
