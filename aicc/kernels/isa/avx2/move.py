"""avx2: the move kernels' spellings and tuning (kernels/move).

The vector vocabulary is the description's ``vector`` and ``prefix``. kernels/move/copy.py's
8 x 8 float and 16 x 16 byte transpositions run on every x86 SIMD target in this
description's spellings (isa/x86.py AVX).
"""
TABLE: dict = dict(
    # aicc_cb_tr_avx2 (kernels/move/transpose.py): after the unpack and shuffle stages each
    # 128-bit lane holds a 4 x 4 block; one stage of permute2f128 puts the lanes in place,
    # leaving the transposed rows in s
    tr_lanes="""\
            for (int i = 0; i < 4; ++i) {
                s[i] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x20);
                s[i + 4] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x31);
            }""",
    tr_out="s",
    # the 16 x 16 byte transposition (aicc_tr_u8_sse): SSE2 128-bit vectors ({w}: the
    # element bits of an unpack stage, 8 to 64)
    u8=dict(vec="__m128i", ld="_mm_loadu_si128", st="_mm_storeu_si128",
            lo="_mm_unpacklo_epi{w}", hi="_mm_unpackhi_epi{w}"),
)
