"""neon: the winograd kernels' spellings and tuning (kernels/winograd), 4-lane vectors.

No ``halves`` (one 128-bit vector: F(4,3) rows are de-interleaved by split and shift1), no
``rows`` (kernels/winograd/rows.py: planes of 1 or 2 tiles a row only) and no ``chan_rows4``.
"""
from __future__ import annotations

TABLE: dict = dict(
    # auto (kernels/winograd/simd.py prefer), tuned by executed instructions under
    # qemu-aarch64 -cpu cortex-a72; m4_c 0: auto takes F(2,3) only (F(4,3) is less accurate
    # than onnxruntime on some layers; wino_m: 4 forces it)
    auto=dict(c=3, k=8, few=9, few_ck=256 * 256, c_few=8, plane=16, m4_c=0),
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
    range_mask="const uint32x4_t mk = aicc_neon_wg_range(a, b);",
    blend="vbslq_f32(mk, {b}, {a})",
    # the tail of the first {n} lanes (a variable): a lane count, as the gemm mload / mstore
    # take it ({m}; isa/neon MASK)
    lane_mask="(size_t)({n})",
    # 4 x 4 transposes (kernels/winograd/tpad.py lanes4): x86 unpacklo / unpackhi (ZIP1 /
    # ZIP2), then the two-source shuffles of the 64-bit pairs 0x44 / 0xEE (prelude helper)
    unpack=("vzip1q_f32", "vzip2q_f32"),
    shuffle="aicc_neon_wg_shuffle",
    # C text of the inline helpers these spellings call (registered once per bundle, before
    # the transforms)
    helpers="""\
/* NEON Winograd helpers (isa/neon/winograd.py): the lanes [a, b) of a vector set, and the two
 * shuffles of x86 _mm_shuffle_ps that the 4 x 4 transposes use: 0x44 = a0 a1 b0 b1 (ZIP1 of
 * the 64-bit pairs), 0xEE = a2 a3 b2 b3 (ZIP2); no other immediate is used. */
static inline uint32x4_t aicc_neon_wg_range(size_t a, size_t b)
{
    static const uint32_t io[4] = {0u, 1u, 2u, 3u};
    const uint32x4_t i = vld1q_u32(io);
    return vandq_u32(vcgeq_u32(i, vdupq_n_u32((uint32_t)a)),
                     vcltq_u32(i, vdupq_n_u32((uint32_t)b)));
}

static inline float32x4_t aicc_neon_wg_shuffle(float32x4_t a, float32x4_t b, int imm)
{
    const float64x2_t x = vreinterpretq_f64_f32(a), y = vreinterpretq_f64_f32(b);
    return vreinterpretq_f32_f64(imm == 0x44 ? vzip1q_f64(x, y) : vzip2q_f64(x, y));
}""",
)
