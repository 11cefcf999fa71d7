"""avx2: the conv kernels' spellings and tuning (kernels/conv).

Templates: {x} / {p} / {v} as each entry says; DST, SRC and CNT are the pointer / count
placeholders of kernels/conv/im2col.py's panel copies.
"""
TABLE: dict = dict(
    # kernels/conv/bcast.py, direct conv with the input broadcast: its auto rules (prefer /
    # prefer_nhwc) and register blocking (blocking). Measured on x86-avx2, C loop, us, bcast vs
    # the variant auto took before: 16 -> 32 stride 2 23.8 vs 26.2, 32 -> 64 stride 2 22.9 vs
    # 24.7, 1x1 stride 2 3.4 vs 4.6, 128 -> 256 stride 2 at 28x28 1149 vs 1131, ResNet-8's
    # first conv 13.1 vs 11.6 (implicit): strided convs only, small outputs.
    bcast=dict(
        # 1-D convs (conv1d_kws, 40 / 64 -> 64 channels k3 over 101 steps, dilated: aicc tune
        # measured bcast at 0.65-0.67 of the transposed GEMM variant)
        one_d=True,
        small_cin=0,            # input channels counted as few (0: none)
        out_max=16384,          # output floats at most
        few_out_max=16384,      # output floats at most with few input channels
        w_max=2 << 20,          # weight bytes at most (every band streams them: stay in L2)
        # strided NCHW convs of at least kb_cin input channels and kb_ow positions an output
        # row, whose band input and weights take more than kb_set bytes, run in K blocks of
        # input channels whose band input and weights take at most kblock bytes
        # (bcast.k_block), on blocks of acc_kb accumulators; then they are taken
        # at any output size when of more than one tap and weights of at most kb_w_max bytes.
        # AMD Zen 4, 3x3 stride 2, ratio to onnxruntime: 64 -> 64 onto 56 x 56 1.00 vs 1.19
        # (im2col; in K blocks of 4 channels 1.12, of 1 channel 1.06 with 10 accumulators,
        # which GCC spilled), 32 -> 64 onto 56 x 56 1.02 vs 1.05, 128 -> 128 onto 28 x 28
        # 1.01 vs 1.07; in models, ms: ResNet-50's 128 -> 128 2.68 -> 2.45, PoolFormer-S12's
        # and EfficientFormer-L1's downsampling 1.43 -> 1.27 and 0.72 -> 0.62, Inception-v3's
        # 96 -> 96 onto 17 x 17 0.58 -> 0.50. Lost (excluded): 256 -> 512 onto 14 x 14 (4.7
        # MB of weights) 1.13 vs 1.00; 1x1 stride 2 256 -> 512 onto 28 x 28 1.9 vs 0.88
        kblock=8192, kb_cin=16, kb_ow=12, kb_set=65536, acc_kb=8, kb_w_max=1 << 20,
        # stride-1 convs of more than one tap, output rows of at least s1_ow positions, that
        # would run as im2col (prefer_s1), and their sums of at least s1_kmin products
        # in K blocks of chains of about s1_chain (k_block): one chain over Inception-v3's
        # 1 x 7 / 5 x 5 sums of 900-1300 products took its error against float64 from
        # 0.90-0.96x onnxruntime's to 1.07-1.09x. AMD Zen 4, Inception-v3 (TorchScript), per
        # step, ms, im2col -> bcast in chains (in one chain): 1 x 7 onto 17 x 17, 128 / 160 /
        # 192 channels 0.74 -> 0.65 (0.62), 1.13 -> 1.02 (0.97), 1.60 -> 1.50 (1.39); 5 x 5
        # 48 -> 64 onto 35 x 35 2.05 -> 1.75 (1.85); 1 x 3 384 -> 384 onto 8 x 8 (excluded by
        # s1_ow) 0.59 -> 0.69 (0.56). The 7 x 1 and 3 x 1 convs stay implicit (one chain:
        # 1.54 -> 1.51 and 0.60 -> 0.66).
        s1_taps="im2col", s1_ow=12, s1_chain=32, s1_kmin=256,
        # ConvNHWC: input channels counted as few, channel vectors at most (vs its im2col
        # GEMM, us: 3 -> 32 s2 onto 112x112 258 vs 293, 3 -> 16 s2 onto 48x48 22.9 vs 26.4,
        # 3 -> 24 s2 onto 64x64 63 vs 70; 8 vectors, where each band's input is broadcast 4
        # times, lose: 3 -> 64 s2 onto 112x112 488 vs 460, 1 -> 64 10x4 s2 onto 25x5 6.7 vs
        # 5.8)
        nhwc_cin=4, nhwc_nv=4,
        # one input channel (the band re-broadcast per channel block is one plane): DS-CNN's
        # 1 -> 64 10x4 with its padded taps left out (conv_bcast_edges), Intel Xeon, C A/B:
        # the model -2.7% against the im2col ConvNHWC
        nhwc_nv_cin1=8,
        # accumulators per register block beside the V weight vectors and the broadcasts, of
        # 16 registers (16 -> 32 stride 2: 28.5 us with 12 accumulators, GCC spilled; 23.8
        # with 10)
        acc=10,
        vmax=2,                 # channel vectors per block
    ),
    # kernels/conv/grouped.py, bcast's kernels group by group: its auto rule (prefer):
    # output channels per group at least / at most, and the share of the vector lanes they
    # fill at least; chains: independent accumulators that keep the FMA pipes busy (4 cycles
    # of latency x 2 pipes; grouped.positions)
    grouped=dict(cout_min=8, cout_max=64, fill=0.75, chains=8),
    # kernels/conv/transposed.py: its tile GEMM runs the column blocks (the weights' panels)
    # outside the K blocks (the same sums): each panel read as one stream, a column block's
    # partial sums in L1 across the K blocks. AMD Zen 4, 12 chained 1x1 convs of 400 channels
    # on 7x7 (regnet_x_400mf's last stage), ratio to onnxruntime: 1.17-1.22 -> 1.07-1.09
    # (x86-avx512: 0.98-1.02 either way, so it keeps the K blocks outside)
    transposed_cols_outer=True,
    # ... and its micro-kernels prefetch the same row of the next panel (the weights, read
    # once per conv, come from L3): AMD Zen 4, regnet_x_400mf ratio to onnxruntime 1.04-1.05
    # -> 0.99-1.00, 12 chained 1x1 convs of 400 channels on 7x7 1.12-1.14 -> 1.03-1.05,
    # ResNet-18 / ResNet-50 unchanged. (Zen 5 measured the opposite for all conv kernels before
    # the column blocks went outside, see "no tile_prefetch" below: to be measured there.)
    transposed_prefetch="_mm_prefetch((const char *)({p}), _MM_HINT_{hint})",
    # the float at lvalue {x} in every lane (bcast_k's input broadcasts)
    splat="_mm256_broadcast_ss(&{x})",
    # im2col panel copy of NR = 2 vectors d[0 .. NR) = s[0 .. NR) (vector moves: no memmove
    # call per panel row); the second vector only when the run is longer than one (CNT)
    copy_nr="_mm256_storeu_ps(DST, _mm256_loadu_ps(SRC)); "
            "if (CNT > 8u) _mm256_storeu_ps(DST + 8u, _mm256_loadu_ps(SRC + 8u));",
    # im2col stride-2 gather of NR floats d[l] = s[2 * l] (reads s[0 .. 2 * NR - 1]: one past
    # the last)
    stride2="""\
for (size_t h = 0; h < CNT; h += 8u) {
    const __m256 a = _mm256_loadu_ps(SRC + 2u * h), b = _mm256_loadu_ps(SRC + 2u * h + 8u);
    const __m256 q = _mm256_shuffle_ps(a, b, 0x88);
    _mm256_storeu_ps(DST + h, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(q),
                                                                      0xD8)));
}""",
    # kernels/conv/stem.py (a first conv's channel sums in registers): taken by auto. AMD Zen
    # 4, 3 -> 32 3x3 stride 2 onto 112 x 112, ratio to onnxruntime 1.17 (im2col, one K block
    # per channel) -> 0.89; RegNetX-400MF 0.988 -> 0.976, SqueezeNet 1.1 0.889 -> 0.869
    stem=dict(auto=True),
    # implicit GEMM's stride-2 phase planes: d[lo + h] = s0[2 h] for h < n (n >= 1), full
    # vectors while they read below s0[2 n - 1], then scalar
    deinterleave="""\
size_t h = 0;
for (; h + 8u < n; h += 8u) {
    const __m256 a = _mm256_loadu_ps(s0 + 2u * h), b = _mm256_loadu_ps(s0 + 2u * h + 8u);
    const __m256 v = _mm256_shuffle_ps(a, b, 0x88);
    _mm256_storeu_ps(d + lo + h, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(v),
                                                                        0xD8)));
}
for (; h < n; ++h) d[lo + h] = s0[2u * h];""",
    # transposed GEMM's patch gather, stride 1: the run of n <= 16 floats at sr to dr, two
    # 8-lane masked loads (rows of the lane-mask table) stored 16 floats wide
    copy_run="""\
const __m256i m0 = _mm256_loadu_si256(
    (const __m256i *)(aicc_sg_avx2_mtab + 8u - (n < 8u ? n : 8u)));
const __m256i m1 = _mm256_loadu_si256(
    (const __m256i *)(aicc_sg_avx2_mtab + 8u - (n > 8u ? n - 8u : 0u)));
_mm256_storeu_ps(dr, _mm256_maskload_ps(sr, m0));
_mm256_storeu_ps(dr + 8u, _mm256_maskload_ps(sr + 8u, m1));""",
    # the branch-free scalar clamp of the transposed copies to NCHW (dwchan, transposed):
    # decl declares vlo / vhi from lo / hi, expr is min(hi, max(lo, {x})) ({br}: its line
    # break); max / min return the second operand when one is NaN, so NaN passes. SSE scalar:
    # the same on every x86 ISA
    clamp1=dict(decl="const __m128 vlo = _mm_set_ss(lo), vhi = _mm_set_ss(hi);",
                expr="_mm_cvtss_f32(_mm_min_ss(vhi, _mm_max_ss(vlo,{br}_mm_set_ss({x}))))"),
    # no tile_prefetch (the conv micro-kernels' prefetch of the next panel): the 6-row
    # kernels ran ResNet-18's 512-channel 3x3 convs on 7x7 1.24 -> 1.82 ms with it (AMD Zen 5)
    #
    # kernels/conv/nhwc_dw.py, channel-last depthwise: the tail vector's mask ({c} = 8 - tail
    # lanes: a row of gemm_simd's lane-mask table), masked load / store of {p} (and {v});
    # tune: channel vectors per block (at most), positions per block (at most), registers for
    # a block's accumulators and weights, bytes of the input rows one output row of a channel
    # strip reads (L1 budget), measured on Zen 5, MobileNet shapes; pin: input vectors pinned
    # in registers (isa/x86.PIN)
    nhwc_dw=dict(
        mdecl="const __m256i m = _mm256_loadu_si256((const __m256i *)"
              "(aicc_sg_avx2_mtab + {c}u));",
        mload="_mm256_maskload_ps({p}, m)", mstore="_mm256_maskstore_ps({p}, m, {v})",
        tune=(1, 8, 14, 24576), pin=False),
    # kernels/conv/depthwise.py, the phase-split plane kernel: vectors per step (independent
    # FMA chains)
    depthwise=dict(unroll=8),
)
