"""The NEON depthwise conv (kernels/conv/depthwise.py on arm-neon: the phase-split plane, the
tap-unrolled kernel with the weights in registers up to the description's ``taps``, the tap
loop above, the driver's vector row copies) against onnxruntime under qemu-aarch64: strides
1 / 2 / 3, dilations, asymmetric pads and pads of at least the kernel, multipliers 1 .. 5
(from 4 the GEMM path), 1-D, tiny and wide planes (vector tails), batch 2, fused activations
(register clamp or a scalar pass), NaN / Inf, run-time weights; and the depthwise cases of
tests/ops/test_conv_simd.py. Skipped when the cross toolchain or qemu is missing."""
import zlib

import numpy as np
import pytest

from aicc.targets import load_target
from tests.oracle import rng
from tests.ops.test_conv import CONV_CASES
from tests.ops.test_conv_simd import DW_CASES, MARK, algo_of, run

T = "arm-neon"
pytestmark = pytest.mark.skipif(bool(load_target(T).missing_tools()),
                                reason="arm-neon toolchain or qemu-aarch64 missing "
                                       "(make cross-toolchain)")
DW = MARK["depthwise"]


def _dw(c, m, spatial, k, seed=0, batch=1):
    r = rng(seed)
    x = r.normal(size=(batch, c, *spatial)).astype(np.float32)
    w = (r.normal(size=(c * m, 1, *k)) / np.sqrt(np.prod(k))).astype(np.float32)
    return x, w


# (channels, multiplier, spatial, kernel, attrs)
GEOS = {
    "s1_pad1": (3, 1, (9, 11), (3, 3), {"pads": [1, 1, 1, 1]}),
    "s2_pad1": (4, 1, (13, 10), (3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    "s2_pad0_wide": (2, 1, (7, 37), (3, 3), {"strides": [2, 2]}),
    "s2_pad_odd_even": (2, 1, (9, 21), (3, 3), {"pads": [0, 1, 2, 0], "strides": [2, 2]}),
    "s3": (3, 1, (11, 14), (3, 3), {"pads": [1, 2, 1, 0], "strides": [3, 3]}),
    "s_mixed": (2, 2, (10, 13), (3, 3), {"pads": [1, 1, 1, 1], "strides": [1, 2]}),
    "dil2": (3, 1, (12, 12), (3, 3), {"pads": [2, 2, 2, 2], "dilations": [2, 2]}),
    "dil_s2": (2, 1, (15, 17), (3, 3), {"pads": [1, 3, 2, 1], "dilations": [2, 3],
                                        "strides": [2, 2]}),
    "asym_pads": (3, 1, (8, 9), (3, 3), {"pads": [0, 2, 1, 0]}),
    "pads_ge_k": (2, 1, (5, 6), (3, 3), {"pads": [3, 4, 4, 3]}),
    "tiny_1x1": (3, 1, (1, 1), (3, 3), {"pads": [1, 1, 1, 1]}),
    "tiny_2x3": (2, 1, (2, 3), (3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    "wide_tail": (2, 1, (3, 45), (3, 3), {"pads": [1, 1, 1, 1]}),
    "k5_loop": (2, 1, (12, 13), (5, 5), {"pads": [2, 2, 2, 2]}),
    "k2x4": (2, 1, (9, 10), (2, 4), {"pads": [0, 1, 1, 2]}),
    "k1": (3, 1, (6, 7), (1, 1), {}),
    "m2": (3, 2, (9, 9), (3, 3), {"pads": [1, 1, 1, 1]}),
    "m3_s2": (2, 3, (10, 11), (3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    "m4_gemm": (2, 4, (8, 8), (3, 3), {"pads": [1, 1, 1, 1]}),
    "m5_gemm": (2, 5, (7, 9), (3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    "1d": (4, 1, (29,), (3,), {"pads": [1, 1]}),
    "1d_s2_dil": (3, 2, (31,), (5,), {"pads": [2, 3], "strides": [2], "dilations": [2]}),
    "mobilenet_14": (6, 1, (14, 14), (3, 3), {"pads": [1, 1, 1, 1]}),
    "mobilenet_7_s2": (5, 1, (14, 14), (3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
}


@pytest.mark.parametrize("geo", sorted(GEOS))
def test_neon_depthwise_geometries(geo, tmp_path):
    c, m, sp, k, attrs = GEOS[geo]
    x, w = _dw(c, m, sp, k, seed=len(geo))
    run(tmp_path, T, x, w, {"group": c, **attrs}, seed=len(geo),
        marker=None if m >= 4 else (DW,))


@pytest.mark.parametrize("act,params", [("Relu", {}), ("Clip", {"min": -0.5, "max": 0.25}),
                                        ("LeakyRelu", {"alpha": 0.1}), ("Sigmoid", {})])
def test_neon_depthwise_activations(act, params, tmp_path):
    """Relu / Clip clamp in registers (max only, max and min), the others run on the
    finished output plane."""
    x, w = _dw(4, 1, (9, 10), (3, 3), seed=3)
    run(tmp_path, T, x, w, {"group": 4, "pads": [1, 1, 1, 1], "strides": [2, 2]},
        act=act, params=params, marker=(DW,))


def test_neon_depthwise_batch_runtime_weights(tmp_path):
    x, w = _dw(3, 2, (11, 9), (3, 3), seed=5, batch=2)
    run(tmp_path, T, x, w, {"group": 3, "pads": [1, 0, 1, 2], "strides": [2, 1]},
        runtime_w=True, runtime_b=True, act="Relu", marker=(DW,))


def test_neon_depthwise_nan_inf(tmp_path):
    x, w = _dw(3, 1, (8, 9), (3, 3), seed=7)
    x[0, 0, 2, 3] = np.nan
    x[0, 1, 5, 0] = np.inf
    x[0, 2, 7, 8] = -np.inf
    for act, params in ((None, None), ("Clip", {"min": 0.0, "max": 6.0})):
        d = tmp_path / str(act)
        d.mkdir()
        run(d, T, x, w, {"group": 3, "pads": [1, 1, 1, 1]}, act=act, params=params,
            marker=(DW,))


@pytest.mark.parametrize("case", sorted(DW_CASES) + sorted(c for c in CONV_CASES
                                                          if algo_of(c) == "depthwise"))
def test_neon_depthwise_conv_simd_cases(case, tmp_path):
    """test_conv_simd.py's depthwise geometries, the variant forced (any multiplier)."""
    xs, ws, attrs = DW_CASES.get(case) or CONV_CASES[case]
    r = rng(zlib.crc32(case.encode()) % 1000)
    x = r.normal(size=xs).astype(np.float32)
    w = (r.normal(size=ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
    run(tmp_path, T, x, w, attrs, sched={"algo": "depthwise"}, marker=(DW,))
