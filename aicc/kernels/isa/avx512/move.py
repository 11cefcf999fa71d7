"""avx512: the move kernels' spellings and tuning (kernels/move).

The vector vocabulary is the description's ``vector`` and ``prefix``.
"""
TABLE: dict = dict(
    # aicc_cb_tr_avx512 (kernels/move/transpose.py): after the unpack and shuffle stages
    # each 128-bit lane holds a 4 x 4 block; two stages of shuffle_f32x4 put the lanes in
    # place, leaving the transposed rows in r
    tr_lanes="""\
            for (int i = 0; i < 4; ++i) {
                s[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
                s[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xDD);
                s[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
                s[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xDD);
            }
            for (int i = 0; i < 4; ++i) {
                r[i] = _mm512_shuffle_f32x4(s[i], s[i + 8], 0x88);
                r[i + 8] = _mm512_shuffle_f32x4(s[i], s[i + 8], 0xDD);
                r[i + 4] = _mm512_shuffle_f32x4(s[i + 4], s[i + 12], 0x88);
                r[i + 12] = _mm512_shuffle_f32x4(s[i + 4], s[i + 12], 0xDD);
            }""",
    tr_out="r",
)
