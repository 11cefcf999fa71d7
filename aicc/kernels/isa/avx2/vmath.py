"""avx2: the vmath kernels' spellings and tuning (kernels/vmath, the softmax rows).

The float vector vocabulary is the description's ``vector``, the bit operations its
``integer`` and ``int_bits``. A compare gives a float vector of all-ones lanes (``mask``).
"""
TABLE: dict = dict(
    mask="__m256",                                  # the type of a compare's lanes
    cmp="_mm256_cmp_ps({x}, {y}, {p})",             # lanes where x p y (a _CMP_ predicate)
    blend="_mm256_blendv_ps({a}, {b}, {m})",        # b where m holds, else a
    mask_andnot="_mm256_andnot_ps({a}, {b})",       # lanes of mask b and not of mask a
    any="_mm256_movemask_ps({m})",                  # the lanes of m as bits: != 0 when any
    cvtt="_mm256_cvttps_epi32",                     # float -> int32, truncating
    # the lanes of v reduced to a float by op (max, add): halves through 128-bit SSE vectors
    # (the softmax rows' aicc_hmax_avx2 / aicc_hsum_avx2, aicc/ops/softmax.py)
    hred="""\
    __m128 t = _mm_{op}_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    t = _mm_{op}_ps(t, _mm_movehl_ps(t, t));
    return _mm_cvtss_f32(_mm_{op}_ss(t, _mm_movehdup_ps(t)));""",
    # float32 <-> float16 Casts (kernels/vmath/half.py, F16C): one vector of {x} down / up /
    # rounded through half at {y}; the tail one value {x}[i] at a time (a loop)
    half=dict(
        down="_mm_storeu_si128((__m128i *)({y}), _mm256_cvtps_ph(_mm256_loadu_ps({x}), RNE));",
        up="_mm256_storeu_ps({y}, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)({x}))));",
        round="_mm256_storeu_ps({y}, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps({x}), "
              "RNE)));",
        tail_down="{y}[i] = (uint16_t)_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss({x}[i]), RNE), "
                  "0);",
        tail_up="{y}[i] = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128({x}[i])));",
        tail_round="{y}[i] = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph(_mm_set_ss({x}[i]), "
                   "RNE)));"),
)
