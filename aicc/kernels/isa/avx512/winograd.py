"""avx512: the winograd kernels' spellings and tuning (kernels/winograd)."""
from __future__ import annotations

TABLE: dict = dict(
    # auto (kernels/winograd/simd.py prefer; benchmarks/conv_layers.py, AMD Zen 4): at least
    # c input / k output channels; with at most `few` F(2,3) tiles per batch item only up to
    # C * K = few_ck (512 channels at 7x7 tie with the GEMM paths); fewer than c_few input
    # channels only on planes of at least `plane` outputs a side (3 -> 16 channels at 32x32
    # 14 -> 9 us, 3 -> 64 at 64x64 186 -> 137 us, 16 -> 8 at 32x32 28 -> 16 us)
    # m4_c: wino_m 0 takes F(4,3) up to this many input channels, else F(2,3): 0, F(2,3) only
    # (F(4,3)'s error through whole networks: docs/ACCURACY.md); chan_*: the channels form's auto rule (simd.py channels_form)
    auto=dict(c=3, k=8, few=16, few_ck=256 * 256, c_few=8, plane=16, m4_c=0,
              chan_ck=128 * 128, chan_tiles=(32, 400), chan_cross=False),
    # even / odd lanes of the 2L floats a:b: two-source permutes by the index vectors that
    # split_idx declares (at the top of a helper)
    split=("_mm512_permutex2var_ps({a}, aicc_wg_ev, {b})",
           "_mm512_permutex2var_ps({a}, aicc_wg_od, {b})"),
    split_idx="""\
    const __m512i aicc_wg_ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8,
                                                6, 4, 2, 0);
    const __m512i aicc_wg_od = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9,
                                                7, 5, 3, 1);""",
    # interleave of a and b: lanes 0..L/2-1 of each, then L/2..L-1 (index vectors: zip_idx)
    zip=("_mm512_permutex2var_ps({a}, aicc_wg_lo, {b})",
         "_mm512_permutex2var_ps({a}, aicc_wg_hi, {b})"),
    zip_idx="""\
    const __m512i aicc_wg_lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1,
                                                16, 0);
    const __m512i aicc_wg_hi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10,
                                                25, 9, 24, 8);""",
    # lanes 1.. of a, then the float at p in the last lane (F(4,3) rows: phase 4 + i of tile l
    # is phase i of tile l + 1)
    shift1="_mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(_mm512_set1_ps(*({p}))),"
           " _mm512_castps_si512({a}), 1))",
    # the blend mask `mk` of lanes [a, b) (a, b: size_t variables), and {b} where mk else {a}
    range_mask="const __mmask16 mk = (__mmask16)(((1u << b) - 1u) & ~((1u << a) - 1u));",
    blend="_mm512_mask_blend_ps(mk, {a}, {b})",
    # the lane mask of the first {n} lanes (a variable), for the gemm mload / mstore ({m})
    lane_mask="(__mmask16)((1u << {n}) - 1u)",
    # in-lane 4 x 4 transposes: unpack lo / hi, then a two-source shuffle with an immediate
    unpack=("_mm512_unpacklo_ps", "_mm512_unpackhi_ps"),
    shuffle="_mm512_shuffle_ps",
    # 128-bit lanes of two vectors picked by an immediate (the four lanes of a transpose)
    shuffle128="_mm512_shuffle_f32x4",
    # store part {i} of {n} floats of {v} at {p}, by n
    store_part={8: "_mm256_storeu_ps({p}, _mm256_castpd_ps(_mm512_extractf64x4_pd("
                   "_mm512_castps_pd({v}), {i})))",
                4: "_mm_storeu_ps({p}, _mm512_extractf32x4_ps({v}, {i}))"},
    # kernels/winograd/rows.py: transforms for planes of TW < L tiles a row, TW dividing L
    # (ResNet-8's 16@32 F(4,3) step 22.7 -> 21.7 us, AMD Zen 4); max_rows: most tile rows a
    # vector holds; idx: an index vector, lanes from the highest; permute: two-source permute
    # of a:b by i; blend: {b} in the lanes of the constant mask mk, else {a}
    rows=dict(max_rows=8, idx="_mm512_set_epi32({})",
              permute="_mm512_permutex2var_ps({a}, {i}, {b})",
              blend="_mm512_mask_blend_ps((__mmask16)0x{mk:04X}u, {a}, {b})"),
    # kernels/winograd/chan.py, F(4,3): a tile's L channels inside the output transposed in
    # 128-bit lanes and stored a row of 4 at a time (store_part[4]) instead of lane by lane
    # (with the channel-last copy: 32 channels at 16x16 23.1 -> 19.2 us, AMD Zen 4)
    chan_rows4=True,
)
