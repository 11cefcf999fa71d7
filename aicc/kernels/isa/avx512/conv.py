"""avx512: the conv kernels' spellings and tuning (kernels/conv).

Templates: {x} / {p} / {v} as each entry says; DST, SRC and CNT are the pointer / count
placeholders of kernels/conv/im2col.py's panel copies.
"""
TABLE: dict = dict(
    # kernels/conv/bcast.py, direct conv with the input broadcast: its auto rules (prefer /
    # prefer_nhwc) and register blocking (blocking). Measured on x86-avx512 (C loop, us,
    # against the variant auto chose before): see kernels/conv/bcast.py.
    bcast=dict(
        # 1-D convs (conv1d_kws, 40 / 64 -> 64 channels k3 over 101 steps, dilated: aicc tune
        # measured bcast at 0.65-0.67 of the transposed GEMM variant)
        one_d=True,
        # input channels counted as few: first convs, where the GEMM forms are weakest
        small_cin=4,
        out_max=65536,          # output floats at most
        # the output limit for convs of few input channels (small_cin), where each output
        # is a short chain and the transposes weigh more (Zen 4, us, bcast vs im2col: 3 -> 8
        # / 16 / 24 / 40 s2 from 96x96 / 64x64: 12.2 / 11.7 / 20.4 / 36.0 vs 19.8 / 12.7 /
        # 17.5 / 26.0; 3 -> 32 / 64 s2 from 32x32: 5.5 / 10.2 vs 5.8 / 10.1)
        few_out_max=20480,
        w_max=2 << 20,          # weight bytes at most (every band streams them: stay in L2)
        # stride-1 convs of more than one tap, output rows of at least s1_ow positions, before
        # the transposed and implicit GEMMs (bcast.prefer_s1), their sums of at least s1_kmin
        # products in K blocks of chains of about s1_chain (as x86-avx2's, for the error).
        # AMD Zen 4, Inception-v3, per step, ms: 1 x 7 / 7 x 1 onto 17 x 17 (transposed
        # before) 0.73-1.61 -> 0.55-1.35 (0.74-0.86x), 5 x 5 48 -> 64 onto 35 x 35 (implicit)
        # 2.00 -> 1.83; the model against onnxruntime (avx512) 1.011 -> 0.944 (dynamo); in the
        # zoo also DLA-34 0.741 either way, the STFT CNN 0.612 -> 0.598. The 1 x 3 / 3 x 1
        # convs onto 8 x 8 (s1_ow) gained 0.87-0.90x in one chain, not measured in chains.
        s1_taps="first", s1_ow=12, s1_chain=32, s1_kmin=256,
        # ConvNHWC: input channels counted as few (DS-CNN's 10x4 conv of 1 -> 64 channels,
        # 4.3 -> 3.6 us), channel vectors at most (None: any; 8 and 12 vectors gain: 3 -> 128
        # / 192 s2 onto 56x56 143 / 193 vs 167 / 219 us)
        nhwc_cin=4, nhwc_nv=None,
        # accumulators per register block beside the V weight vectors and the broadcasts, of
        # 32 registers (7x7 stride 2, 3 -> 64 onto 112x112, 4 vectors: 6 positions, 24
        # accumulators, 2015 us; 5 positions 1548; 4 positions 1701)
        acc=20,
        vmax=4,                 # channel vectors per block
        # the ISA whose 8-lane vectors a conv takes when the target lists it and the last
        # 16-lane vector of output channels would be at most half used (Cout % 16 in 1..8:
        # fewer FMAs on Zen 4, which splits 512-bit FMAs in two; on Intel a half-empty 512-bit
        # FMA costs what a full 256-bit one does). Zen 4, C loop, us, 8 lanes / 16 lanes / the
        # variant auto took before: MobileNetV1-0.25's first conv, 3 -> 8 stride 2 onto 48 x
        # 48, 12.2 / 21.8 / 15.3 (implicit); 8 -> 8 stride 2 onto 16 x 16 3.4 / 6.1 / 5.1
        # (implicit); 16 -> 20 stride 2 onto 16 x 16 17.8 / 22.8 / 18.8 (im2col)
        narrow="avx2",
    ),
    # kernels/conv/grouped.py, bcast's kernels group by group: its auto rule (prefer):
    # output channels per group at least / at most, and the share of the vector lanes they
    # fill at least; chains: independent accumulators that keep the FMA pipes busy (4 cycles
    # of latency x 2 pipes; grouped.positions)
    grouped=dict(cout_min=8, cout_max=64, fill=0.75, chains=8),
    # the float at lvalue {x} in every lane (bcast_k's input broadcasts)
    splat="_mm512_set1_ps({x})",
    # im2col panel copy of NR = 2 vectors d[0 .. NR) = s[0 .. NR) (vector moves: no memmove
    # call per panel row); the second vector only when the run is longer than one (CNT)
    copy_nr="_mm512_storeu_ps(DST, _mm512_loadu_ps(SRC)); "
            "if (CNT > 16u) _mm512_storeu_ps(DST + 16u, _mm512_loadu_ps(SRC + 16u));",
    # im2col stride-2 gather of NR floats d[l] = s[2 * l] (reads s[0 .. 2 * NR - 1]: one past
    # the last)
    stride2="""\
const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
for (size_t h = 0; h < CNT; h += 16u)
    _mm512_storeu_ps(DST + h, _mm512_permutex2var_ps(_mm512_loadu_ps(SRC + 2u * h), ev,
                                                     _mm512_loadu_ps(SRC + 2u * h + 16u)));""",
    # kernels/conv/stem.py (a first conv's channel sums in registers): taken by auto. AMD Zen
    # 4, 3 -> 32 3x3 stride 2 onto 112 x 112: 0.394 ms (im2col) -> 0.307
    stem=dict(auto=True),
    # implicit GEMM's stride-2 phase planes: d[lo + h] = s0[2 h] for h < n (n >= 1), full
    # vectors while they read below s0[2 n - 1], then one masked vector
    deinterleave="""\
const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
size_t h = 0;
for (; h + 16u < n; h += 16u)
    _mm512_storeu_ps(d + lo + h, _mm512_permutex2var_ps(_mm512_loadu_ps(s0 + 2u * h), ev,
                                                        _mm512_loadu_ps(s0 + 2u * h + 16u)));
{   /* 1..16 outputs left, 2 (n - h) - 1 floats to read */
    const size_t rs = 2u * (n - h) - 1u;
    const __mmask16 m0 = (__mmask16)(rs >= 16u ? 0xFFFFu : (1u << rs) - 1u);
    const __mmask16 m1 = (__mmask16)(rs > 16u ? (1u << (rs - 16u)) - 1u : 0u);
    const __m512 v = _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(m0, s0 + 2u * h), ev,
                                            _mm512_maskz_loadu_ps(m1, s0 + 2u * h + 16u));
    _mm512_mask_storeu_ps(d + lo + h, (__mmask16)((1u << (n - h)) - 1u), v);
}""",
    # transposed GEMM's patch gather, stride 1: the run of n <= 16 floats at sr to dr, one
    # masked load (only its own lanes are read)
    copy_run="""\
_mm512_storeu_ps(dr, _mm512_maskz_loadu_ps((__mmask16)((1u << n) - 1u),
                                           sr));""",
    # the conv micro-kernels (kernels/conv/simd_gemm.py, not the table variant) prefetch the
    # same row of the next panel ({p}: its address), toward the cache level {hint} of the GEMM
    # kernels' pf_next, while this one computes: weights streamed from memory (ResNet-18's
    # 512-channel 3x3 convs on 7x7, 9 MB each: 1.34 -> 1.05 ms interleaved with onnxruntime,
    # prefetched to L1); to L2 instead of L1: ResNet-18 -2.7 to -3.4% (Intel Xeon), ResNet-8
    # 1.00-1.01 (gemm_simd)
    tile_prefetch="_mm_prefetch((const char *)({p}), _MM_HINT_{hint})",
    # the branch-free scalar clamp of the transposed copies to NCHW (dwchan, transposed):
    # decl declares vlo / vhi from lo / hi, expr is min(hi, max(lo, {x})) ({br}: its line
    # break); max / min return the second operand when one is NaN, so NaN passes. SSE scalar:
    # the same on every x86 ISA
    clamp1=dict(decl="const __m128 vlo = _mm_set_ss(lo), vhi = _mm_set_ss(hi);",
                expr="_mm_cvtss_f32(_mm_min_ss(vhi, _mm_max_ss(vlo,{br}_mm_set_ss({x}))))"),
    # kernels/conv/nhwc_dw.py, channel-last depthwise: the tail vector's mask ({mask}: its
    # lanes' bits), masked load / store of {p} (and {v}); tune: channel vectors per block (at
    # most), positions per block (at most), registers for a block's accumulators and weights,
    # bytes of the input rows one output row of a channel strip reads (L1 budget), measured on
    # Zen 5, MobileNet shapes; pin: input vectors pinned in registers (isa/x86.PIN: GCC folded
    # each load into the 2-3 FMAs using it, and the loads set the pace; Intel Xeon, C A/B:
    # DS-CNN -3% against the unpinned kernels, MobileNetV1-0.25 -0.7%, MobileNetV2 unchanged)
    nhwc_dw=dict(
        mdecl="const __mmask16 m = (__mmask16){mask}u;",
        mload="_mm512_maskz_loadu_ps(m, {p})", mstore="_mm512_mask_storeu_ps({p}, m, {v})",
        tune=(2, 8, 29, 20000), pin=True),
    # at most cmax channels: 8-lane ymm vectors with AVX-512VL masks, the flavor `name`
    nhwc_dw_narrow=dict(
        name="avx512y", cmax=8, vec="__m256", L=8, p="_mm256",
        mdecl="const __mmask8 m = (__mmask8){mask}u;",
        mload="_mm256_maskz_loadu_ps(m, {p})", mstore="_mm256_mask_storeu_ps({p}, m, {v})",
        tune=(1, 12, 29, 24576), pin=False),
    # kernels/conv/depthwise.py, the phase-split plane kernel: vectors per step (independent
    # FMA chains)
    depthwise=dict(unroll=8),
)
