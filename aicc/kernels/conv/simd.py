"""Conv on the SIMD targets (float32; x86-avx2 / x86-avx512, and arm-neon for the variants its
description has entries for: im2col, direct, implicit, transposed, depthwise, dwchan,
winograd; ``offered``): variant
choice, schedule, and the GEMM path ``Y[Cout/g, P] = W[Cout/g, K] @ col[K, P]`` per batch
item and group, with the output positions P (the large dimension) as the vectorized N
dimension.

Variants (``emit``; the target's ``schedule: conv: algo`` or a node's ``aicc_schedule: {algo:
...}`` forces one, ``auto`` picks):

* ``depthwise`` (kernels/conv/depthwise.py): one input channel per group, 1-D/2-D, multiplier < 4;
  ``dwchan`` (kernels/conv/dwchan.py): multiplier 1, channels vectorized through channel-last
  copies; forced only (measured slower than ``depthwise`` on every MobileNet shape, e.g.
  576 channels 14x14 stride 2: 52 vs 17 us on avx512; with constant weights the
  layout-nhwc pass runs such convs channel-last without the copies, kernels/conv/nhwc_dw.py).
* ``winograd`` (kernels/winograd/simd.py): 2-D 3x3, stride 1, dilation 1, group 1, constant weights:
  Winograd F(2x2,3x3) or F(4x4,3x3) (``wino_m``), t * t GEMMs on transformed tiles, 2.25x /
  4x fewer multiplications (auto: when channels and output tiles pass winograd/simd.AUTO;
  F(2,3) only: F(4,3) is less accurate than onnxruntime through whole networks,
  docs/ACCURACY.md).
* ``bcast`` (kernels/conv/bcast.py): direct, group 1, 1-D/2-D, constant weights: blocks of output
  positions x output-channel vectors, each input value broadcast from the padded rows, no
  im2col (auto: strided convs, and on x86-avx512 convs of at most 4 input channels, whose
  channels fill >= 75% of the lanes, with outputs of at most 64 K floats (20 K with at most
  4 input channels; avx2 16 K) and weights of at most 2 MB; conv_bcast.prefer; stride-1
  convs of more than one tap, on x86-avx2 those that would otherwise run as im2col, on
  x86-avx512 before the transposed and implicit GEMMs, conv_bcast.prefer_s1; x86-avx512 uses
  8-lane vectors when the last 16-lane one would be at most half full).
* ``grouped`` (kernels/conv/grouped.py): direct, 1-D/2-D, several groups of several input
  channels, constant weights: ``bcast``'s kernels run group by group, the group's output
  channels vectorized (auto: 8-64 output channels per group filling the lanes, the ISA
  description's ``grouped`` rule: RegNet's 3x3 convs of 16 channels per group).
* ``transposed`` (kernels/conv/transposed.py): output channels vectorized, for few positions / many
  channels (auto: when Cout/g fills clearly more vector lanes than P, e.g. 7x7 maps).
* ``stem`` (kernels/conv/stem.py): a network's first conv (one group, 2-4 input channels,
  channels x taps within one K block): direct, each channel's sum and the running total in
  registers (auto: the convs schedule.channel_blocks splits by channel that bcast's rules
  leave, i.e. larger outputs; 1-channel convs of that size when forced).
* ``implicit`` (kernels/conv/implicit.py): 1-D/2-D, no im2col: the padded input (split into phase
  planes for stride > 1) is the B operand, read through a per-k offset table on a virtual
  grid (auto: when at most ``implicit_pct`` % of the lanes are padding garbage).
* ``direct`` (kernels/conv/im2col.py): 1x1 kernel, stride 1, no padding: the input [C, P] of a group
  is the B operand itself, read in column panels with row stride P (the micro-kernel's ``rs``); the last partial
  panel is read with masked loads, so nothing past the tensor is touched. auto takes im2col
  instead when more than ``alias_rows`` rows of a K block start in one L1 set (P a multiple of
  256 floats: im2col.py aliased).
* ``im2col`` (kernels/conv/im2col.py): every other geometry. The batch item is copied into a
  zero-padded scratch volume (2 * NR floats of zero slack after it) so that every tap lands inside; then per tile
  of ``nt`` positions x ``kt`` patch entries (``tile_kb``), the patches are packed into column
  panels of NR (2 vectors), ``col[(j / NR) * kt * NR + k * NR + j % NR]`` (zero past the tile's
  last position), and the tile runs as a GEMM (K tiles accumulate into Y). In the padded volume
  a patch value's offset is (channel/tap offset) + (position offset), so a panel is a few runs
  of consecutive positions of one output row, each a vector copy (stride 1) or a vector
  de-interleave (stride 2).

Weights are packed at compile time (``ctx.const``; run-time weights into step scratch) in the
kernels' A layout, in the order the tile GEMM streams them (conv_simd_gemm.pack_a). The tile
GEMM and micro-kernels (kernels/conv/simd_gemm.py) fuse bias and the activation (in registers for
none / Relu / Clip, else a scalar pass from the shared activation table). Schedule: ``mr``
(rows per micro-tile, lowered per node to equal row tiles), ``kc`` (K block), ``jb`` (column
block), ``tile_kb`` (im2col / patch / output tile budget), ``implicit_pct``, ``wino_m``
(Winograd output tile 2 or 4; 0 auto), ``wino_kb`` (Winograd tile-block budget), ``wino_chan``
(Winograd form: 0 tiles vectorized, 2 output channels, 1 auto), ``edge_kernels`` (the
broadcast conv's kernels per channel block with padded taps left out, conv_bcast_edges; 0 or
1: none, for less code); defaults in SCHED, target yaml ``schedule: conv:``, node
``aicc_schedule``.

Rounding: each output is an FMA chain over k ascending from +0 per K block of kc (im2col and
implicit: one input channel's taps when all of K fits one block, schedule.channel_blocks), the
blocks' sums added in order (gemm/tile.py tile_partial), then + bias, then the activation: the
result depends on the K blocking, not on the tile sizes or the variant (except depthwise: one
chain over the taps, then + bias; bcast: one chain over all K; transposed: the same chains,
bias added after), except for ``winograd``: its transforms change the
arithmetic, so its results depend on the variant and on ``wino_m`` (F(2,3): errors as the
direct chain; F(4,3): about 5x larger, ~0.4 of the tests' tolerance at C = 64 (x86 auto's limit),
above 1 at C = 256 - 512 (forced only there); measured figures in kernels/winograd/simd.py). It
differs from onnxruntime (also FMA, other order) by rounding only. NaN/Inf: IEEE (0 * Inf =
NaN for zero weights); the clamp propagates NaN
(max/min return the NaN operand as the scalar ``x < lo ? lo : x`` does); padding zeros never
meet a real input value; masked-off or slack lanes are never stored. ``winograd``: a NaN/Inf
input spreads to every output of the tiles whose input patch contains it (Inf - Inf = NaN in
the transforms), not only to the outputs whose receptive field holds it.
"""
from __future__ import annotations

from . import bcast as conv_bcast
from . import depthwise as conv_depthwise
from . import dwchan as conv_depthwise_c
from . import grouped as conv_grouped
from . import im2col as conv_im2col
from . import implicit as conv_simd_i
from . import stem as conv_stem
from . import transposed as conv_simd_t
from ..gemm.simd import nr_of
from ..isa.registry import ISAS, isa_for, table
from ..isa.x86 import vcopy
from ..winograd import simd as conv_winograd
from .schedule import balanced, channel_blocks, extents, node_schedule, padded_extents

CONV = table("conv_kernels")

PAD = """\
/* Zero-padded copy of the C channels of one batch item: xp[c][e0][e1][e2] with padded
 * coordinate = input coordinate + pad (per spatial dim); e[d] = (out - 1) * stride +
 * (k - 1) * dilation + 1 covers every tap of every output position. `slack` zeros follow.
 * Rows by vector copies (simd.VCOPY; element loops with run-time bounds: 16 channels of
 * 32 x 32 took 0.5-0.7 us more, x86-avx2 Winograd 16@32). */
static void aicc_cv_pad(const aicc_conv_params *p, size_t C, const float *restrict x,
                        float *restrict xp, const size_t e[3], size_t slack)
{
    size_t lo[3], hi[3];
    for (int d = 0; d < 3; ++d) {       /* padded coordinates [lo, hi) hold input values */
        lo[d] = p->pad[d] < e[d] ? p->pad[d] : e[d];
        hi[d] = p->pad[d] + p->in[d] < e[d] ? p->pad[d] + p->in[d] : e[d];
    }
    for (size_t c = 0; c < C; ++c)
        for (size_t z = 0; z < e[0]; ++z)
            for (size_t r = 0; r < e[1]; ++r) {
                float *restrict d = xp + ((c * e[0] + z) * e[1] + r) * e[2];
                if (z < lo[0] || z >= hi[0] || r < lo[1] || r >= hi[1]) {
                    aicc_vzero(d, e[2]);
                    continue;
                }
                const float *restrict s = x + ((c * p->in[0] + (z - p->pad[0])) * p->in[1] +
                                               (r - p->pad[1])) * p->in[2];
                if (lo[2])
                    aicc_vzero(d, lo[2]);
                if (hi[2] > lo[2])
                    aicc_vcopy(d + lo[2], s + (lo[2] - p->pad[2]), hi[2] - lo[2]);
                if (e[2] > hi[2])
                    aicc_vzero(d + hi[2], e[2] - hi[2]);
            }
    aicc_vzero(xp + C * e[0] * e[1] * e[2], slack);
}"""


def plan(ctx, dt, geo=None):
    """(isa, conv schedule) of the first SIMD variant in the target's kernel list (or the
    node's aicc_kernel) whose description has conv kernels, None for the portable kernels
    (also for float64, and for a conv whose variant the ISA's description leaves out, such as
    depthwise on an ISA without the vector vocabulary)."""
    isa = isa_for(ctx, CONV) if str(dt) == "float32" else None
    if isa is None:
        return None
    sched = node_schedule(ctx, isa)
    if geo is not None and not offered(isa, variant(ctx, geo, isa, sched)):
        return None
    return isa, sched


# what each variant needs from an ISA's description beyond the GEMM and conv copies
_NEEDS = {"depthwise": lambda i: "depthwise" in i.conv_kernels,
          "dwchan": lambda i: bool(i.vector) and "clamp1" in i.conv_kernels,
          "winograd": lambda i: bool(i.winograd), "bcast": lambda i: "bcast" in i.conv_kernels,
          "grouped": lambda i: "grouped" in i.conv_kernels,
          "transposed": lambda i: "copy_run" in i.conv_kernels,
          "implicit": lambda i: "deinterleave" in i.conv_kernels,
          "stem": lambda i: "stem" in i.conv_kernels and "deinterleave" in i.conv_kernels}


def offered(isa: str, v: str) -> bool:
    """Whether ISA ``isa``'s description has what conv variant ``v`` needs."""
    need = _NEEDS.get(v)
    return need is None or need(ISAS[isa])


def is_direct(geo) -> bool:
    """1x1 kernel, stride 1, no padding: positions are input offsets (B is the input)."""
    return set(geo.k) == {1} and set(geo.stride) == {1} and not (any(geo.pad) or
                                                                 any(geo.pad_end))


def variant(ctx, geo, isa: str, sched: dict) -> str:
    """The kernel variant ``emit`` runs: the schedule's ``algo`` when forced, else the first
    whose auto rule takes the conv (see the module docstring)."""
    algo = sched["algo"]
    auto = algo == "auto"
    if algo in ("dwchan", "bcast", "grouped"):
        return algo
    if algo == "depthwise" or (auto and conv_depthwise.supports(geo)):
        return "depthwise"
    if algo == "winograd" or (auto and offered(isa, "winograd")
                              and conv_winograd.prefer(ctx, geo, isa)):
        return "winograd"
    if auto and offered(isa, "grouped") and conv_grouped.prefer(ctx, geo, isa):
        return "grouped"
    bcast = auto and offered(isa, "bcast")
    s1 = conv_bcast.prefer_s1(ctx, geo, isa) if bcast else None
    if s1 == "first" or (bcast and conv_bcast.prefer(ctx, geo, isa)):
        return "bcast"
    if algo == "stem" or (auto and offered(isa, "stem")
                          and conv_stem.prefer(geo, sched, ctx.node, isa)):
        return "stem"
    if algo == "transposed" or (auto and offered(isa, "transposed")
                                and conv_simd_t.prefer(geo, isa, is_direct(geo))):
        return "transposed"
    if algo == "implicit" or (auto and offered(isa, "implicit") and conv_simd_i.supports(geo)
                              and not is_direct(geo)
                              and conv_simd_i.prefer(geo, nr_of(isa), sched["implicit_pct"])):
        return "implicit"
    if algo == "direct" or (auto and is_direct(geo) and not conv_im2col.aliased(geo, sched)):
        return "direct"
    if s1 == "im2col":
        return "bcast"
    return "im2col"


def emit(ctx, node, geo, isa: str, sched: dict, bias: str) -> None:
    """Step body of a float32 conv on a SIMD target: the variant ``variant`` picks."""
    _VARIANTS[variant(ctx, geo, isa, sched)](ctx, node, geo, isa, sched, bias)


def _dwchan(ctx, node, geo, isa, sched, bias):
    if not conv_depthwise_c.supports(geo):
        raise ValueError("conv algo 'dwchan' needs a depthwise conv (group = channels), "
                         "multiplier 1, 1-D/2-D")
    ctx.kernel = f"{isa} dwchan"
    conv_depthwise_c.emit(ctx, node, geo, isa, bias)


def _depthwise(ctx, node, geo, isa, sched, bias):
    if geo.cin_g != 1 or len(geo.k) > 2:
        raise ValueError("conv algo 'depthwise' needs one input channel per group, 1-D/2-D")
    ctx.kernel = f"{isa} depthwise"
    conv_depthwise.emit(ctx, node, geo, isa, bias)


def _bcast(ctx, node, geo, isa, sched, bias):
    conv_bcast.emit(ctx, node, geo, isa, bias)


def _grouped(ctx, node, geo, isa, sched, bias):
    conv_grouped.emit(ctx, node, geo, isa, bias)


def _pad(ctx, isa: str) -> str:
    """PAD, the text of the pad helper the variants register, and the row copies it calls."""
    vcopy(ctx, isa)
    return PAD


def _winograd(ctx, node, geo, isa, sched, bias):
    conv_winograd.emit(ctx, node, geo, isa, sched, bias, balanced)


def _transposed(ctx, node, geo, isa, sched, bias):
    ctx.kernel = f"{isa} transposed"
    conv_simd_t.emit(ctx, node, geo, isa, sched, bias, _pad(ctx, isa), padded_extents(geo))


def _implicit(ctx, node, geo, isa, sched, bias):
    if not conv_simd_i.supports(geo):
        raise ValueError("conv algo 'implicit' needs a 1-D/2-D conv")
    ctx.kernel = f"{isa} implicit"
    sched = balanced(channel_blocks(sched, geo, node), geo.cout_g)
    conv_simd_i.emit(ctx, node, geo, isa, sched, bias, _pad(ctx, isa), extents(geo))


def _stem(ctx, node, geo, isa, sched, bias):
    if not conv_stem.supports(geo, sched, node):
        raise ValueError(f"conv algo 'stem' needs a 1-D/2-D conv of one group, 1-"
                         f"{conv_stem.MAX_CIN} input channels, channels x taps <= kc "
                         f"({sched['kc']}) and no kc in its aicc_schedule")
    ctx.kernel = f"{isa} stem"
    conv_stem.emit(ctx, node, geo, isa, sched, bias, _pad(ctx, isa), extents(geo))


def _gemm(ctx, node, geo, isa, sched, bias, direct):
    """direct (1x1 stride 1 unpadded: the input is the B operand) or im2col tiles."""
    if direct and not is_direct(geo):
        raise ValueError("conv algo 'direct' needs a 1x1 kernel, stride 1 and no padding")
    sched = balanced(channel_blocks(sched, geo, node), geo.cout_g)
    conv_im2col.emit(ctx, node, geo, isa, sched, bias, direct, _pad(ctx, isa), extents(geo))


_VARIANTS = {"bcast": _bcast, "grouped": _grouped, "dwchan": _dwchan, "depthwise": _depthwise, "winograd": _winograd,
             "transposed": _transposed, "implicit": _implicit, "stem": _stem,
             "direct": lambda *a: _gemm(*a, direct=True),
             "im2col": lambda *a: _gemm(*a, direct=False)}
