"""ConvTranspose on the SIMD targets (x86-avx2, x86-avx512) against onnxruntime: the conv tile
GEMM + col2im path (kernels/conv/transpose_simd.py: groups with >= 4 input channels, constant
weights) on every ConvTranspose case of test_conv.py (the others keep the portable scatter
kernel, checked by marker), several position tiles with a partial last one, every row-kernel
count, fused activations, run-time weights (portable path), NaN/Inf. Targets the host cannot
run are not generated."""
import zlib

import numpy as np
import pytest

from tests.oracle import rng
from tests.ops.test_conv import ACTS, CONVT_CASES
from tests.ops.test_conv_simd import MR, TARGETS, isa, run

pytestmark = pytest.mark.skipif(not TARGETS, reason="host runs no x86 SIMD target")


def data(case, scale=1.0):
    xs, ws, attrs = CONVT_CASES[case]
    r = rng(zlib.crc32(case.encode()) % 1000)
    x = (r.normal(size=xs) * scale).astype(np.float32)
    w = (r.normal(size=ws) / np.sqrt(ws[0])).astype(np.float32)
    return x, w, attrs


def gemm_path(case) -> bool:
    xs, ws, attrs = CONVT_CASES[case]
    return xs[1] // attrs.get("group", 1) >= 4


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", sorted(CONVT_CASES))
def test_convt_simd(case, target, tmp_path):
    x, w, attrs = data(case)
    mark = f"aicc_convt_{isa(target)}(" if gemm_path(case) else "aicc_convt_f32("
    run(tmp_path, target, x, w, attrs, op="ConvTranspose", marker=mark)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", ["s2_k2_many_tiles", "3d", "s2_k4_pads", "1d", "group2"])
def test_convt_simd_tiles(case, target, tmp_path):
    """tile_kb 1: one panel of positions per tile, the last one partial (masked B loads)."""
    x, w, attrs = data(case)
    run(tmp_path, target, x, w, attrs, op="ConvTranspose", sched={"tile_kb": 1, "kc": 16},
        marker=f"aicc_convt_{isa(target)}(")


@pytest.mark.parametrize("target", TARGETS)
def test_convt_simd_every_row_kernel(target, tmp_path):
    """1x1 kernels: M = output channels, 1 .. 2 * MR + 1 rows (each row tile count)."""
    r = rng(3)
    for m in range(1, 2 * MR[target] + 2):
        x = r.normal(size=(1, 6, 5, 7)).astype(np.float32)
        w = r.normal(size=(6, m, 1, 1)).astype(np.float32)
        d = tmp_path / str(m)
        d.mkdir()
        run(d, target, x, w, {}, op="ConvTranspose",
            marker=f"aicc_convt_{isa(target)}(")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("act,params,_", ACTS)
def test_convt_simd_fused_activation(act, params, _, target, tmp_path):
    x, w, attrs = data("s2_k4_pads", scale=3.0)
    run(tmp_path, target, x, w, attrs, op="ConvTranspose", act=act, params=params,
        marker=f"aicc_convt_{isa(target)}(")


@pytest.mark.parametrize("target", TARGETS)
def test_convt_simd_runtime_weights(target, tmp_path):
    """Weights fed at run time: the portable GEMM + col2im path, also on SIMD targets."""
    x, w, attrs = data("s2_k2_unet")
    run(tmp_path, target, x, w, attrs, op="ConvTranspose", runtime_w=True,
        marker="aicc_convt_gemm_f32(")


@pytest.mark.parametrize("target", TARGETS)
def test_convt_simd_nan_inf(target, tmp_path):
    """NaN and +-Inf inputs reach exactly the outputs their taps reach (kernel == stride:
    one input per output; k4 s2: overlapping taps, Inf - Inf = NaN where signs meet)."""
    for case in ("s2_k2_unet", "s2_k4_pads"):
        x, w, attrs = data(case)
        x.flat[[0, 7, 30]] = [np.nan, np.inf, -np.inf]
        d = tmp_path / case
        d.mkdir()
        run(d, target, x, w, attrs, op="ConvTranspose",
            marker=f"aicc_convt_{isa(target)}(")
