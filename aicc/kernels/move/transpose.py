"""Channel-last tiles to channel planes on the x86 SIMD targets: ``aicc_cb_tr_{isa}(t, np,
ldt, nc, y, ldy)`` writes ``y[c * ldy + p] = t[p * ldt + c]`` (p < np, c < nc) with L x L
register transposes (unpack, shuffle, then the 128-bit lanes), the last positions scalar.
t must have ldt >= nc rounded up to L columns (read, not stored past nc). Used by
kernels/conv/bcast.py's NCHW output; the values are moved, never changed (NaN payloads kept)."""
from __future__ import annotations

from string import Template

TEMPLATE = Template("""\
/* y[c * ldy + p] = t[p * ldt + c] for p < np, c < nc (ldt >= nc rounded up to $L): $L x $L
 * blocks in registers, the last channels' rows not stored; the last positions scalar. */
static void aicc_cb_tr_$isa(const float *restrict t, size_t np, size_t ldt, size_t nc,
                              float *restrict y, size_t ldy)
{
    size_t p0 = 0;
    for (; p0 + ${L}u <= np; p0 += ${L}u) {
        for (size_t c0 = 0; c0 < nc; c0 += ${L}u) {
            $vec r[$L], s[$L];
            for (int i = 0; i < $L; ++i) r[i] = ${pfx}_loadu_ps(t + (p0 + i) * ldt + c0);
            for (int i = 0; i < $L; i += 2) {
                s[i] = ${pfx}_unpacklo_ps(r[i], r[i + 1]);
                s[i + 1] = ${pfx}_unpackhi_ps(r[i], r[i + 1]);
            }
            for (int i = 0; i < $L; i += 4) {
                r[i] = ${pfx}_shuffle_ps(s[i], s[i + 2], 0x44);
                r[i + 1] = ${pfx}_shuffle_ps(s[i], s[i + 2], 0xEE);
                r[i + 2] = ${pfx}_shuffle_ps(s[i + 1], s[i + 3], 0x44);
                r[i + 3] = ${pfx}_shuffle_ps(s[i + 1], s[i + 3], 0xEE);
            }
$lanes
            for (int i = 0; i < $L; ++i)       /* $out[i]: channel c0 + i */
                if (c0 + (size_t)i < nc) ${pfx}_storeu_ps(y + (c0 + (size_t)i) * ldy + p0, $out[i]);
        }
    }
    /* the last positions (pointer steps: gcc's loop analysis then sees no overflow) */
    const float *restrict tp = t + p0 * ldt;
    for (float *restrict yp = y + p0; p0 < np; ++p0, ++yp, tp += ldt) {
        float *restrict yc = yp;
        for (size_t c = 0; c < nc; ++c, yc += ldy) *yc = tp[c];
    }
}""")

LANES = {   # (the 128-bit lane stages, the array holding the transposed rows)
    "avx512": ("""\
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
            }""", "r"),
    "avx2": ("""\
            for (int i = 0; i < 4; ++i) {
                s[i] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x20);
                s[i + 4] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x31);
            }""", "s"),
}

_ISA = {"avx512": ("__m512", "16", "_mm512"), "avx2": ("__m256", "8", "_mm256")}


def transpose_c(isa: str) -> str:
    """C text of aicc_cb_tr_{isa}."""
    vec, lanes, pfx = _ISA[isa]
    lane_text, out = LANES[isa]
    return TEMPLATE.substitute(isa=isa, vec=vec, L=lanes, pfx=pfx, lanes=lane_text, out=out)
