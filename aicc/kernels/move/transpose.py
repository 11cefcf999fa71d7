"""Channel-last tiles to channel planes on the x86 SIMD targets: ``aicc_cb_tr_{isa}(t, np,
ldt, nc, y, ldy)`` writes ``y[c * ldy + p] = t[p * ldt + c]`` (p < np, c < nc) with L x L
register transposes (unpack, shuffle, then the 128-bit lanes), the last positions scalar.
t must have ldt >= nc rounded up to L columns (read, not stored past nc). Used by
kernels/conv/bcast.py's NCHW output; the values are moved, never changed (NaN payloads kept)."""
from __future__ import annotations

from string import Template

from ..isa.registry import ISAS

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


def transpose_c(isa: str) -> str:
    """C text of aicc_cb_tr_{isa} (the 128-bit lane stages: the ISA's move table)."""
    I = ISAS[isa]
    return TEMPLATE.substitute(isa=isa, vec=I.vector["v"], L=str(I.lanes), pfx=I.prefix,
                               lanes=I.move["tr_lanes"], out=I.move["tr_out"])
