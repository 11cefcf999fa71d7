"""neon: the conv kernels' spellings (kernels/conv): the im2col panel copies, the implicit
GEMM's stride-2 phase planes and the phase-split depthwise kernel. The direct-broadcast,
transposed and channel-last depthwise variants have no NEON entries
(kernels/conv/simd.offered): those convs take the other variants or the portable kernels.

Templates: DST, SRC and CNT are the pointer / count placeholders of kernels/conv/im2col.py's
panel copies.
"""
TABLE: dict = dict(
    # im2col panel copy of NR = 2 vectors d[0 .. NR) = s[0 .. NR); the second vector only when
    # the run is longer than one (CNT)
    copy_nr="vst1q_f32(DST, vld1q_f32(SRC)); "
            "if (CNT > 4u) vst1q_f32(DST + 4u, vld1q_f32(SRC + 4u));",
    # im2col stride-2 gather of NR floats d[l] = s[2 * l]: LD2 de-interleaves the even and
    # odd floats (reads s[0 .. 2 * NR - 1]: one past the last)
    stride2="""\
for (size_t h = 0; h < CNT; h += 4u)
    vst1q_f32(DST + h, vld2q_f32(SRC + 2u * h).val[0]);""",
    # phase-split depthwise (kernels/conv/depthwise.py): vectors per step (even); convs of at
    # most `taps` taps run kernel_taps (weights in registers, no tap loop); load2 (LD2: .val[0]
    # the even floats, .val[1] the odd ones) de-interleaves the driver's stride-2 row fill
    depthwise=dict(unroll=8, taps=9, vecs2="float32x4x2_t", load2="vld2q_f32({p})"),
    # implicit GEMM's stride-2 phase planes: d[lo + h] = s0[2 h] for h < n (n >= 1), full
    # vectors while they read below s0[2 n - 1], then scalar
    deinterleave="""\
size_t h = 0;
for (; h + 4u < n; h += 4u)
    vst1q_f32(d + lo + h, vld2q_f32(s0 + 2u * h).val[0]);
for (; h < n; ++h) d[lo + h] = s0[2u * h];""",
)
