"""neon: the layer norm rows (ops/normalization.py LayerNormalization, float32) with vectors.

The statistics are sum16.py's 16-lane sums kept as 4 vector accumulators (lane j of
accumulator q is s[4 q + j]: the same adds in the same order, then the same reduction tree),
the normalization ``(x - mean) * inv * scale + bias`` 4 values at a time in the portable
helper's order (no FMA): the portable helper's bits. Rows of a length that is not a multiple
of 16, or strided scale / bias, go to the portable helper (``fallback``).
"""
from __future__ import annotations


def layernorm(ctx, fallback: str) -> str:
    """Name of the NEON layer norm helper (the arguments of ``fallback``, which it calls for
    the rows it does not take); the caller includes the ISA's header."""
    name = "aicc_layernorm_f32_neon"      # sorts after the fallback and the ISA's header
    return ctx.helper(name, f"""\
/* {fallback} with NEON vectors for rows of a multiple of 16 and contiguous scale / bias:
 * the 16-lane sums as 4 accumulators (kernels/isa/neon/norm.py), the same bits. */
static float aicc_sum16_neon_f32(const float *restrict x, size_t n, float mu, int dev)
{{
    const float32x4_t vmu = vdupq_n_f32(mu);
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0, s2 = s0, s3 = s0;
    for (size_t i = 0; i < n; i += 16u) {{
        float32x4_t a = vld1q_f32(x + i), b = vld1q_f32(x + i + 4u);
        float32x4_t c = vld1q_f32(x + i + 8u), d = vld1q_f32(x + i + 12u);
        if (dev) {{
            a = vsubq_f32(a, vmu); b = vsubq_f32(b, vmu);
            c = vsubq_f32(c, vmu); d = vsubq_f32(d, vmu);
            a = vmulq_f32(a, a); b = vmulq_f32(b, b); c = vmulq_f32(c, c); d = vmulq_f32(d, d);
        }}
        s0 = vaddq_f32(s0, a); s1 = vaddq_f32(s1, b); s2 = vaddq_f32(s2, c); s3 = vaddq_f32(s3, d);
    }}
    s0 = vaddq_f32(vaddq_f32(s0, s2), vaddq_f32(s1, s3));       /* s[j] += s[j + 8], s[j + 4] */
    s0 = vaddq_f32(s0, vextq_f32(s0, s0, 2));                   /* s[j] += s[j + 2] */
    return vgetq_lane_f32(s0, 0) + vgetq_lane_f32(s0, 1);       /* s[0] += s[1] */
}}

static void {name}(size_t R, size_t D, const float *restrict x,
    const float *restrict scale, size_t ss_, const float *restrict bias, size_t bs, float eps,
    float *restrict y, float *restrict mean_out, float *restrict inv_out)
{{
    if (D % 16u != 0u || ss_ != 1u || (bias && bs != 1u)) {{
        {fallback}(R, D, x, scale, ss_, bias, bs, eps, y, mean_out, inv_out);
        return;
    }}
    for (size_t r = 0; r < R; ++r) {{
        const float *restrict xr = x + r * D;
        float *restrict yr = y + r * D;
        const float mu = aicc_sum16_neon_f32(xr, D, 0.0f, 0) / (float)D;
        const float ss = aicc_sum16_neon_f32(xr, D, mu, 1);
        const float inv = 1.0f / sqrtf(ss / (float)D + eps);
        const float32x4_t vmu = vdupq_n_f32(mu), vinv = vdupq_n_f32(inv);
        const float *restrict xp = xr, *restrict sp = scale, *restrict bp = bias;
        float *restrict yp = yr;
        for (size_t d = 0; d < D; d += 16u) {{     /* 16 at a time: paired loads and stores */
            for (int q = 0; q < 4; ++q) {{
                float32x4_t v = vmulq_f32(vmulq_f32(vsubq_f32(vld1q_f32(xp + 4 * q), vmu), vinv),
                                          vld1q_f32(sp + 4 * q));
                if (bp)
                    v = vaddq_f32(v, vld1q_f32(bp + 4 * q));
                vst1q_f32(yp + 4 * q, v);
            }}
            xp += 16; sp += 16; yp += 16;
            if (bp) bp += 16;
        }}
        if (mean_out) mean_out[r] = mu;
        if (inv_out) inv_out[r] = inv;
    }}
}}""")
