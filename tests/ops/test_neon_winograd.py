"""Winograd conv on arm-neon (kernels/winograd with the NEON description's table,
isa/neon/winograd.py) against onnxruntime, run under qemu-aarch64: F(2x2,3x3) in both forms
(tiles vectorized: LD2 row splits, straight-line transforms, vectors of tiles crossing tile
rows, outputs through the buffer at the edges; output channels vectorized: the channel-last
copy's 4 x 4 transposes, tails of K % 4 channels, the row-pair stores) on output sizes 1..9 and
odd / non-square planes (not multiples of 2), few tiles, C and K not multiples of 4, bias or
none, fused Relu / Clip and scalar-pass activations, batch 2, several tile blocks with tails
(wino_kb 1) and row tiles, planes of 1 to 3 tiles a row (no narrow-plane helpers on NEON: the
general ones), F(4x4,3x3) forced (it runs on NEON: shift1 and splits; auto never takes it),
all forced per node by ``aicc_schedule``; the auto choice (which convs, which form, F(2,3)
only); NaN / Inf. Many convs share one compiled model (tests/ops/test_conv_winograd.convs)
to keep the file fast. Skipped when the cross toolchain or qemu is missing."""
import pytest

from aicc.targets import load_target
from tests.ops import test_conv_winograd as x86
from tests.ops.test_conv_winograd import BLOCKS, NARROW, P1, SHAPES, convs

T = "arm-neon"
pytestmark = pytest.mark.skipif(bool(load_target(T).missing_tools()),
                                reason="arm-neon toolchain or qemu-aarch64 missing "
                                       "(make cross-toolchain)")
WG = {"algo": "winograd"}
TILES, CHAN = "in blocks of", "channels vectorized"


def _with(cases, sched, marker):
    return [(x, w, a, {**o, "sched": sched, "marker": marker}) for x, w, a, o in cases]


def test_neon_winograd_forced(tmp_path):
    """Every form and schedule of the module docstring, one model (56 convs)."""
    chan_extra = [((1, 5, 3, 5), (37, 5, 3, 3), {"pads": [1, 0, 1, 1]}, {}),
                  ((2, 19, 6, 5), (33, 19, 3, 3), P1, {"act": "Clip",
                                                      "params": {"min": 0.0, "max": 6.0}}),
                  ((1, 8, 16, 16), (12, 8, 3, 3), P1, {"act": "Relu"})]
    cases = (_with(SHAPES, {**WG, "wino_m": 2, "wino_chan": 0}, TILES) +
             _with(SHAPES + chan_extra, {**WG, "wino_m": 2, "wino_chan": 2}, CHAN) +
             _with(BLOCKS, {**WG, "wino_m": 2, "wino_chan": 0, "wino_kb": 1, "mr": 3}, TILES) +
             _with(BLOCKS, {**WG, "wino_m": 2, "wino_chan": 2, "wino_kb": 1}, CHAN) +
             _with(NARROW, {**WG, "wino_m": 2, "wino_chan": 0}, TILES) +
             _with(SHAPES[2:8], {**WG, "wino_m": 4, "wino_chan": 0}, "F(4x4, 3x3)") +
             _with(SHAPES[2:8], {**WG, "wino_m": 4, "wino_chan": 2}, "F(4x4, 3x3)"))
    convs(tmp_path, T, cases, marker=None)


def test_neon_winograd_auto(tmp_path):
    """auto: F(2,3) only (also at 16 channels, where x86 takes F(4,3)); tiles for few
    channels on planes of whole vectors of tiles, channels from 32 x 32 channels, for tile
    rows that do not fill vectors and for few tiles; any output channel count; the GEMM paths
    for fewer than 4 input channels, stride 2, 1x1 and one-row planes."""
    f2, no = "Winograd F(2x2, 3x3)", {"marker": None, "absent": "Winograd"}
    cases = [((1, 16, 32, 32), (16, 16, 3, 3), P1, {"act": "Relu", "scale": 3,
                                                    "marker": f"{f2}, 16 x 16 tiles in"}),
             ((1, 16, 28, 28), (16, 16, 3, 3), P1, {"act": "Relu", "marker": CHAN}),
             ((1, 64, 8, 8), (64, 64, 3, 3), P1, {"act": "Relu", "marker": CHAN}),
             ((1, 128, 4, 4), (128, 128, 3, 3), P1, {"marker": CHAN}),
             ((1, 4, 16, 16), (16, 4, 3, 3), P1, {"marker": TILES}),
             ((1, 64, 16, 16), (1, 64, 3, 3), P1, {"marker": f2}),
             ((1, 3, 32, 32), (16, 3, 3, 3), P1, {"act": "Relu", **no}),
             ((1, 16, 16, 16), (16, 16, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}, no),
             ((1, 16, 16, 16), (16, 16, 1, 1), {}, no),
             ((1, 64, 1, 9), (64, 64, 3, 3), P1, no)]
    convs(tmp_path, T, cases, marker=None)


def test_neon_winograd_nan_inf(tmp_path):
    """As test_conv_winograd's (F(2,3), forced)."""
    x86.test_winograd_nan_inf(2, T, tmp_path)
