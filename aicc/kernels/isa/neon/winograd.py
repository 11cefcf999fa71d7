"""neon: the winograd kernels' spellings and tuning (kernels/winograd), 4-lane vectors.

No ``halves`` (one 128-bit vector: F(4,3) rows are de-interleaved by split and shift1), no
``rows`` (kernels/winograd/rows.py: planes of 1 or 2 tiles a row only) and no ``chan_rows4``.
"""
from __future__ import annotations

TABLE: dict = dict(
    # auto (kernels/winograd/simd.py prefer, channels_form), by executed instructions under
    # qemu-aarch64 -cpu cortex-a72 (one conv + Relu, F(2,3) against the variant auto takes
    # without winograd): at least c = 4 input channels (3 -> 16 at 32x32 1.03x the implicit
    # GEMM's, at 30x30 1.15x, 16x16 0.91x of im2col's, 3 -> 32 at 64x64 0.90x; 1 or 2 input
    # channels 1.04-1.67x; 4 -> 16 at 4x4 .. 64x64 0.67-1.01x), any number of output channels
    # (16 -> 1 at 32x32 1.01x the implicit GEMM's, 64 -> 1 at 16x16 0.39x of im2col's, 16 -> 4
    # at 32x32 0.74x) and of tiles (few = 0: 512 channels at 2x2 .. 7x7 0.48-0.81x of the
    # transposed / im2col paths'); m4_c 0: F(2,3) only (F(4,3) is less accurate than
    # onnxruntime on some layers; wino_m: 4 forces it). Channels vectorized from chan_ck = 32 x
    # 32 channels on any plane (tiles / channels form: 32@32 1.03, 64@8 1.07, 64@16 1.03, 64@56
    # 1.04, 128@16 0.99, 128@28 1.06, 512@7 1.00; below: 16@32 0.97, 16 -> 32 at 32x32 0.93,
    # 8@16 0.83) and (chan_cross) on planes whose tile rows do not fill whole vectors of 4 tiles
    # (16@10 1.48, 16@14 1.35, 64@10 1.58, 16@28 1.03, 16 -> 8 at 28x28 0.99)
    auto=dict(c=4, k=1, few=0, few_ck=0, c_few=0, plane=0, m4_c=0,
              chan_ck=32 * 32, chan_tiles=(0, float("inf")), chan_cross=True),
    # even / odd lanes of the 8 floats a:b (UZP1 / UZP2)
    split=("vuzp1q_f32({a}, {b})", "vuzp2q_f32({a}, {b})"),
    # the even (.val[0]) / odd (.val[1]) floats of the 2L at p in one de-interleaving load
    # (LD2), for the patch rows' splits of two consecutive vectors
    load2=dict(vecs2="float32x4x2_t", load="vld2q_f32({p})"),
    # interleave of a and b: lanes 0, 1 of each, then 2, 3 (ZIP1 / ZIP2)
    zip=("vzip1q_f32({a}, {b})", "vzip2q_f32({a}, {b})"),
    # lanes 1.. of a, then the float at p in the last lane (F(4,3) rows: phase 4 + i of tile l
    # is phase i of tile l + 1): EXT with the float broadcast (LD1R)
    shift1="vextq_f32({a}, vld1q_dup_f32({p}), 1)",
    # the output clamp min(hi, max(lo, y)): FMIN / FMAX (one instruction each, as the GEMM's
    # clamp; the vector vocabulary's x86-ordered max / min take two); a NaN y passes as there
    clamp=dict(min="vminq_f32", max="vmaxq_f32"),
    # transforms of at most this many patch values (t * t) as straight-line code, all in
    # registers, instead of loops through a vector buffer (x86: 16 registers)
    straight=16,
    # the blend mask `mk` of lanes [a, b) (a, b: size_t variables), and {b} where mk else {a}
    range_mask="const uint32x4_t mk = aicc_neon_lanes(a, b);",
    blend="vbslq_f32(mk, {b}, {a})",
    # the tail of the first {n} lanes (a variable): a lane count, as the gemm mload / mstore
    # take it ({m}; isa/neon MASK)
    lane_mask="(size_t)({n})",
    # 4 x 4 transposes (kernels/winograd/tpad.py lanes4): x86 unpacklo / unpackhi (ZIP1 /
    # ZIP2), then the two-source shuffles of the 64-bit pairs 0x44 / 0xEE (prelude helper)
    unpack=("vzip1q_f32", "vzip2q_f32"),
    shuffle="aicc_neon_wg_shuffle",
    # kernels/winograd/chan.py, F(2,3): the 4 channels of a tile inside the output transposed
    # and each output row of a channel stored as a pair: the low / high pair of {v} at {p}
    chan_rows2=("vst1_f32({p}, vget_low_f32({v}))", "vst1_f32({p}, vget_high_f32({v}))"),
    # C text of the inline helpers these spellings call (registered once per bundle, before
    # the transforms)
    helpers="""\
/* NEON Winograd helper (isa/neon/winograd.py): the two shuffles of x86 _mm_shuffle_ps that
 * the 4 x 4 transposes use: 0x44 = a0 a1 b0 b1 (ZIP1 of the 64-bit pairs), 0xEE = a2 a3 b2 b3
 * (ZIP2); no other immediate is used. */
static inline float32x4_t aicc_neon_wg_shuffle(float32x4_t a, float32x4_t b, int imm)
{
    const float64x2_t x = vreinterpretq_f64_f32(a), y = vreinterpretq_f64_f32(b);
    return vreinterpretq_f32_f64(imm == 0x44 ? vzip1q_f64(x, y) : vzip2q_f64(x, y));
}""",
)
