"""neon: the conv kernels' spellings (kernels/conv): the im2col panel copies, the implicit
GEMM's stride-2 phase planes, the transposed GEMM's patch runs and the phase-split depthwise
kernel. The direct-broadcast and channel-last depthwise variants have no NEON entries
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
    # kernels/conv/stem.py: only when forced. Under qemu-aarch64 (cortex-a72) it executed
    # more instructions than the implicit / im2col GEMMs: ResNet-8 3.672 -> 3.752 M,
    # MobileNetV1-0.25 3.823 -> 3.871 M per inference
    stem=dict(auto=False),
    # implicit GEMM's stride-2 phase planes: d[lo + h] = s0[2 h] for h < n (n >= 1), full
    # vectors while they read below s0[2 n - 1], then scalar
    deinterleave="""\
size_t h = 0;
for (; h + 4u < n; h += 4u)
    vst1q_f32(d + lo + h, vld2q_f32(s0 + 2u * h).val[0]);
for (; h < n; ++h) d[lo + h] = s0[2u * h];""",
    # transposed GEMM's patch gather, stride 1: the run of n <= 12 floats (a row tile) at sr
    # to dr, 4-lane vectors (the last stored whole: up to 3 floats past the run, which later
    # runs and columns rewrite, inside the pack's slack at the end)
    copy_run="""\
for (size_t q = 0; q < n; q += 4u)
    vst1q_f32(dr + q, aicc_neon_mload(sr + q, n - q < 4u ? n - q : 4u));""",
    # the branch-free scalar clamp of the transposed copies to NCHW: min(hi, max(lo, {x}))
    # with FMIN / FMAX on 2-lane vectors, which return NaN when an operand is NaN (NaN
    # passes, as on x86)
    clamp1=dict(decl="const float32x2_t vlo = vdup_n_f32(lo), vhi = vdup_n_f32(hi);",
                expr="vget_lane_f32(vmin_f32(vhi, vmax_f32(vlo,{br}vdup_n_f32({x}))), 0)"),
    # kernels/conv/transposed.py prefer: against the direct 1x1 path a narrower margin than on
    # x86 (the 4-lane tail of the positions' last 8-column panel costs more than the
    # transposed path's packing: arm-neon, executed instructions, MobileNetV2's 1x1 convs on
    # 7x7 maps 0.87-0.99 of the direct path's, on 14x14 maps 1.22-1.37)
    transposed_margin={"direct": 0.05, "other": 0.05},
    # the tile GEMM's kernels for packed B panels (im2col, transposed: row step NR) take the
    # step as a constant: LD1 of a panel's B row then post-increments its pointer (12 rows:
    # 28 instructions per k instead of 29)
    dense_b=True,
    # a pointer kept in a register where the compiler would fold it into each address (the
    # implicit GEMM's panel pointers, kernels/conv/simd_gemm.py: 31 -> 30 instructions per k on
    # 12 rows; isa/neon PRELUDE)
    pin_ptr="AICC_NEON_PIN_PTR({p})",
)
