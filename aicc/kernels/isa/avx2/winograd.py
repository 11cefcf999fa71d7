"""avx2: the winograd kernels' spellings and tuning (kernels/winograd)."""
from __future__ import annotations

TABLE: dict = dict(
    # auto (kernels/winograd/simd.py prefer; benchmarks/conv_layers.py, AMD Zen 4): at least
    # c input / k output channels; with at most `few` F(2,3) tiles per batch item only up to
    # C * K = few_ck (512 channels at 4x4 tie with the GEMM paths); fewer than c_few input
    # channels only on planes of at least `plane` outputs a side (3 -> 16 channels at 32x32
    # 15 -> 12 us, 3 -> 64 at 64x64 188 -> 149 us)
    # m4_c: wino_m 0 takes F(4,3) up to this many input channels, else F(2,3): 0, F(2,3) only
    # (F(4,3)'s error through whole networks: docs/ACCURACY.md); chan_*: the channels form's auto rule (simd.py channels_form)
    auto=dict(c=3, k=8, few=9, few_ck=256 * 256, c_few=8, plane=16, m4_c=0,
              chan_ck=128 * 128, chan_tiles=(32, 400), chan_cross=False),
    # even / odd lanes of the 2L floats a:b (in-lane shuffle, then the 64-bit pairs in order)
    split=("_mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps({a}, "
           "{b}, 0x88)), 0xD8))",
           "_mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps({a}, "
           "{b}, 0xDD)), 0xD8))"),
    # interleave of a and b: lanes 0..L/2-1 of each, then L/2..L-1
    zip=("_mm256_permute2f128_ps(_mm256_unpacklo_ps({a}, {b}), _mm256_unpackhi_ps({a}, {b}),"
         " 0x20)",
         "_mm256_permute2f128_ps(_mm256_unpacklo_ps({a}, {b}), _mm256_unpackhi_ps({a}, {b}),"
         " 0x31)"),
    # the vector is two 128-bit halves: load = floats [a, a + 4) | [b, b + 4); lo / hi = the
    # low / high halves of a and b. F(4,3) rows are de-interleaved and interleaved inside the
    # halves (4 x 4 transposes) instead of by lane-crossing split / zip (12 in-half shuffles
    # instead of 16 shuffles and permutes per patch row)
    halves=dict(load="_mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps({a})), "
                     "_mm_loadu_ps({b}), 1)",
                lo="_mm256_permute2f128_ps({a}, {b}, 0x20)",
                hi="_mm256_permute2f128_ps({a}, {b}, 0x31)"),
    # the blend mask `mk` of lanes [a, b) (a, b: size_t variables), and {b} where mk else {a}
    range_mask="const __m256 mk = _mm256_castsi256_ps(_mm256_andnot_si256(_mm256_loadu_si256("
               "(const __m256i *)(aicc_sg_avx2_mtab + 8u - a)), _mm256_loadu_si256("
               "(const __m256i *)(aicc_sg_avx2_mtab + 8u - b))));",
    blend="_mm256_blendv_ps({a}, {b}, mk)",
    # the lane mask of the first {n} lanes (a variable), for the gemm mload / mstore ({m})
    lane_mask="_mm256_loadu_si256((const __m256i *)(aicc_sg_avx2_mtab + 8u - {n}))",
    # in-lane 4 x 4 transposes: unpack lo / hi, then a two-source shuffle with an immediate
    unpack=("_mm256_unpacklo_ps", "_mm256_unpackhi_ps"),
    shuffle="_mm256_shuffle_ps",
)
