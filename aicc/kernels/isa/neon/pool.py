"""neon: the pool kernels' spellings (kernels/pool/simd.py).

Tails are counts (the description's ``mask``: aicc_neon_mload / mstore of the first n lanes);
``helpers`` is C the pool kernels register once per bundle: the tail load with a fill value
in the lanes past n (-inf for max pools) and the strided gather NEON has no instruction for.
Templates: ``{p}`` a pointer, ``{m}`` a lane count, ``{n}`` a lane count expression.
"""
TABLE: dict = dict(
    helpers="""\
/* the first n (<= 4) floats at p, `fill` in the other lanes; nothing past p + n is read */
static inline float32x4_t aicc_ps_mload_fill_neon(const float *p, size_t n, float fill)
{
    return vbslq_f32(aicc_neon_lanes(0, n), aicc_neon_mload(p, n), vdupq_n_f32(fill));
}

/* the int32 lanes a, b, c, d */
static inline int32x4_t aicc_ps_idx_neon(int32_t a, int32_t b, int32_t c, int32_t d)
{
    return vsetq_lane_s32(d, vsetq_lane_s32(c, vsetq_lane_s32(b, vdupq_n_s32(a), 1), 2), 3);
}

/* p[gi[l]] in lane l (strides > 2 along W: NEON has no gather) */
static inline float32x4_t aicc_ps_gather_neon(const float *p, int32x4_t gi)
{
    float32x4_t v = vdupq_n_f32(p[vgetq_lane_s32(gi, 0)]);
    v = vsetq_lane_f32(p[vgetq_lane_s32(gi, 1)], v, 1);
    v = vsetq_lane_f32(p[vgetq_lane_s32(gi, 2)], v, 2);
    return vsetq_lane_f32(p[vgetq_lane_s32(gi, 3)], v, 3);
}""",
    mask="(size_t)({n})",
    # masked load with -inf in the masked-off lanes (max pools' tails)
    mload_ninf="aicc_ps_mload_fill_neon({p}, {m}, -INFINITY)",
    # quotient, 0 where the divisor is 0 (AveragePool windows with no element); a NaN
    # divisor keeps the quotient (x86: _CMP_NEQ_UQ)
    divz="aicc_neon_and(vdivq_f32({a}, {d}), vreinterpretq_f32_u32(vmvnq_u32(vceqq_f32({d}, "
         "vdupq_n_f32(0.0f)))))",
    # a when a is NaN, else a > b ? a : b (b when b is NaN): NaN from either operand, -0 / +0
    # as x86's blend of max_ps
    maxn="vbslq_f32(aicc_neon_CMP_UNORD_Q(a, a), a, aicc_neon_max(a, b))",
    # stride 2: the even / odd lanes of the pair of loads lo, hi, in order (UZP1 / UZP2)
    even="vuzp1q_f32({lo}, {hi})",
    odd="vuzp2q_f32({lo}, {hi})",
    # strides > 2: the lane offsets vector gi and the gather through it
    gidx="aicc_ps_idx_neon({lanes})",
    gather="aicc_ps_gather_neon({p}, gi)",
    # the butterfly across the lanes (lanes 2, then 1 apart)
    perms=["vextq_f32({a}, {a}, 2)", "vrev64q_f32({a})"],
)
