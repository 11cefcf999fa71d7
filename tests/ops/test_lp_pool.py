"""LpPool and GlobalLpPool: compiled C vs onnxruntime over p, windows, strides, pads,
dilations, auto_pad, ceil_mode, 1-D/2-D/3-D and float64."""
import numpy as np
import pytest

from tests.oracle import check_node, rng

CASES = {
    "2x2": ((1, 3, 8, 8), {"kernel_shape": [2, 2]}),
    "3x3_s2_pads": ((2, 2, 9, 11), {"kernel_shape": [3, 3], "strides": [2, 2],
                                    "pads": [1, 1, 1, 1]}),
    "asym_pads": ((1, 2, 7, 8), {"kernel_shape": [3, 2], "pads": [0, 1, 2, 1]}),
    "same_upper": ((1, 2, 7, 8), {"kernel_shape": [3, 3], "strides": [2, 2],
                                  "auto_pad": "SAME_UPPER"}),
    "same_lower": ((1, 2, 7, 9), {"kernel_shape": [2, 2], "auto_pad": "SAME_LOWER"}),
    "valid": ((1, 2, 7, 9), {"kernel_shape": [3, 3], "strides": [2, 1], "auto_pad": "VALID"}),
    "1d": ((2, 3, 17), {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
    "3d": ((1, 2, 5, 6, 7), {"kernel_shape": [2, 3, 2], "strides": [2, 1, 2]}),
}


@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("case", sorted(CASES))
def test_lppool(case, p, tmp_path):
    shape, attrs = CASES[case]
    x = rng(1).normal(size=shape).astype(np.float32)
    check_node("LpPool", {"x": x}, tmp_path, attrs={**attrs, "p": p}, opset=18)


def test_lppool_dilations_ceil(tmp_path):
    x = rng(2).normal(size=(1, 2, 9, 10)).astype(np.float32)
    check_node("LpPool", {"x": x}, tmp_path, opset=18,
               attrs={"kernel_shape": [2, 3], "dilations": [2, 2], "strides": [2, 2],
                      "ceil_mode": 1, "p": 2})


def test_lppool_float64_and_old_opset(tmp_path):
    x = rng(3).normal(size=(1, 2, 6, 7))
    check_node("LpPool", {"x": x}, tmp_path, opset=18, attrs={"kernel_shape": [3, 3], "p": 4})
    check_node("LpPool", {"x": x.astype(np.float32)}, tmp_path, opset=11,
               attrs={"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]})


@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("shape", [(1, 3, 5, 5), (2, 2, 7), (1, 2, 3, 4, 2)])
def test_global_lppool(shape, p, tmp_path):
    x = rng(4).normal(size=shape).astype(np.float32)
    check_node("GlobalLpPool", {"x": x}, tmp_path, attrs={"p": p})


def test_lppool_nan_inf(tmp_path):
    x = rng(5).normal(size=(1, 1, 6, 6)).astype(np.float32)
    x[0, 0, 1, 1], x[0, 0, 4, 4] = np.nan, -np.inf
    check_node("LpPool", {"x": x}, tmp_path, opset=18, attrs={"kernel_shape": [2, 2], "p": 2})
