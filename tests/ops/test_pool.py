"""MaxPool (with Indices; float, int8, uint8), AveragePool, GlobalAveragePool,
GlobalMaxPool: compiled C vs onnxruntime over shapes and attribute combinations; NaN behaviour vs numpy (documented in
aicc/ops/pool.py: NaN propagates, where onnxruntime's result depends on its kernel)."""
import numpy as np
import pytest
from onnx import helper

from aicc.errors import UnsupportedError
from tests.oracle import assert_close, check_node, compile_and_run, make_model, rng

# (input shape, attributes); pads are always smaller than the kernel (onnxruntime requires it)
CASES = {
    "2x2_s2": ((1, 3, 8, 8), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    "3x3_s2_pad1_odd": ((1, 3, 9, 11), {"kernel_shape": [3, 3], "strides": [2, 2],
                                        "pads": [1, 1, 1, 1]}),
    "3x3_s1_pad1_batch2": ((2, 4, 7, 6), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    "asym_pads": ((1, 2, 7, 8), {"kernel_shape": [3, 3], "pads": [0, 1, 2, 1]}),
    "asym_pads_s2": ((1, 5, 9, 8), {"kernel_shape": [3, 4], "strides": [2, 2],
                                    "pads": [2, 0, 1, 3]}),
    "dilation2": ((1, 2, 9, 10), {"kernel_shape": [3, 3], "dilations": [2, 2],
                                  "pads": [2, 2, 2, 2]}),
    "dilation_stride": ((1, 3, 12, 11), {"kernel_shape": [2, 3], "dilations": [3, 2],
                                         "strides": [2, 3], "pads": [1, 0, 0, 2]}),
    "stride3": ((1, 3, 10, 11), {"kernel_shape": [3, 3], "strides": [3, 3]}),
    "k2_s3": ((1, 3, 10, 11), {"kernel_shape": [2, 2], "strides": [3, 3]}),
    "wide_rows": ((1, 2, 5, 37), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    "wide_rows_s2": ((1, 2, 6, 40), {"kernel_shape": [3, 3], "strides": [2, 2],
                                     "pads": [1, 1, 1, 1]}),
    "k1_s2": ((1, 3, 9, 8), {"kernel_shape": [1, 1], "strides": [2, 2]}),
    "rect": ((1, 6, 7, 9), {"kernel_shape": [3, 1], "strides": [1, 2], "pads": [1, 0, 1, 0]}),
    "ceil": ((1, 2, 8, 8), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    "ceil_pads": ((1, 2, 9, 10), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1,
                                  "pads": [1, 1, 1, 1]}),
    "ceil_asym_s3": ((2, 3, 12, 7), {"kernel_shape": [2, 3], "strides": [3, 2], "ceil_mode": 1,
                                     "pads": [1, 0, 0, 1]}),
    "same_upper": ((1, 2, 7, 8), {"kernel_shape": [3, 3], "strides": [2, 2],
                                  "auto_pad": "SAME_UPPER"}),
    "same_upper_k2": ((1, 2, 7, 9), {"kernel_shape": [2, 2], "strides": [2, 2],
                                     "auto_pad": "SAME_UPPER"}),
    "same_lower_k2": ((1, 2, 7, 9), {"kernel_shape": [2, 2], "strides": [2, 2],
                                     "auto_pad": "SAME_LOWER"}),
    "same_lower_s1": ((1, 3, 6, 7), {"kernel_shape": [4, 2], "auto_pad": "SAME_LOWER"}),
    "valid_s2": ((1, 3, 9, 8), {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "VALID"}),
    "1d": ((2, 3, 17), {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
    "1d_ceil": ((1, 3, 16), {"kernel_shape": [4], "strides": [3], "ceil_mode": 1, "pads": [0, 2]}),
    "3d": ((1, 2, 5, 6, 7), {"kernel_shape": [2, 3, 3], "strides": [2, 2, 1],
                             "pads": [0, 1, 1, 1, 1, 0]}),
    "3d_ceil": ((1, 2, 6, 5, 7), {"kernel_shape": [3, 2, 2], "strides": [2, 2, 2],
                                  "ceil_mode": 1}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_maxpool(case, tmp_path):
    shape, attrs = CASES[case]
    x = rng(1).normal(size=shape).astype(np.float32)
    check_node("MaxPool", {"x": x}, tmp_path, attrs=attrs)


AVG = ["3x3_s2_pad1_odd", "3x3_s1_pad1_batch2", "asym_pads", "asym_pads_s2", "stride3", "k2_s3",
       "ceil", "ceil_pads", "ceil_asym_s3", "same_upper", "same_upper_k2", "same_lower_k2",
       "same_lower_s1", "valid_s2", "1d", "1d_ceil", "3d", "3d_ceil", "rect", "2x2_s2",
       "wide_rows", "wide_rows_s2"]


@pytest.mark.parametrize("include_pad", [0, 1])
@pytest.mark.parametrize("case", AVG)
def test_averagepool(case, include_pad, tmp_path):
    shape, attrs = CASES[case]
    x = rng(2).normal(size=shape).astype(np.float32)
    check_node("AveragePool", {"x": x}, tmp_path,
               attrs={**attrs, "count_include_pad": include_pad})


@pytest.mark.parametrize("include_pad", [0, 1])
@pytest.mark.parametrize("case", ["dilation2", "dilation_stride"])
def test_averagepool_dilations(case, include_pad, tmp_path):
    shape, attrs = CASES[case]
    x = rng(3).normal(size=shape).astype(np.float32)
    check_node("AveragePool", {"x": x}, tmp_path, opset=19,
               attrs={**attrs, "count_include_pad": include_pad})
    check_node("AveragePool", {"x": x}, tmp_path, opset=19,
               attrs={**attrs, "count_include_pad": include_pad, "ceil_mode": 1})


def test_maxpool_padding_never_wins(tmp_path):
    x = -1.0 - rng(4).random(size=(1, 2, 5, 7)).astype(np.float32)      # all < 0
    check_node("MaxPool", {"x": x}, tmp_path,
               attrs={"kernel_shape": [3, 3], "pads": [2, 2, 2, 2], "ceil_mode": 1,
                      "strides": [2, 2]})


@pytest.mark.parametrize("order", [0, 1])
@pytest.mark.parametrize("case", ["3x3_s2_pad1_odd", "asym_pads_s2", "3x3_s1_pad1_batch2",
                                  "ceil_pads", "dilation2", "1d", "3d"])
def test_maxpool_indices(case, order, tmp_path):
    shape, attrs = CASES[case]
    x = rng(5).normal(size=shape).astype(np.float32)
    check_node("MaxPool", {"x": x}, tmp_path, attrs={**attrs, "storage_order": order},
               n_outputs=2)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
@pytest.mark.parametrize("case", ["3x3_s2_pad1_odd", "asym_pads_s2", "dilation2", "ceil_pads",
                                  "same_lower_k2", "1d", "3d", "wide_rows"])
def test_maxpool_int8_uint8(case, dtype, tmp_path):
    shape, attrs = CASES[case]
    info = np.iinfo(dtype)
    x = rng(12).integers(info.min, info.max, size=shape, endpoint=True).astype(dtype)
    x.flat[::7] = info.min          # the type's minimum must still win where it is the max
    check_node("MaxPool", {"x": x}, tmp_path, attrs=attrs, opset=12)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_maxpool_int8_uint8_indices(dtype, tmp_path):
    shape, attrs = CASES["3x3_s2_pad1_odd"]
    x = rng(13).integers(0, 100, size=shape).astype(dtype)
    check_node("MaxPool", {"x": x}, tmp_path, attrs=attrs, opset=12, n_outputs=2)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_pool_float64(op, tmp_path):
    shape, attrs = CASES["ceil_pads"]
    x = rng(6).normal(size=shape)
    check_node(op, {"x": x}, tmp_path, attrs=attrs)


GLOBAL_SHAPES = [(1, 3, 1, 1), (2, 5, 7, 7), (1, 3, 37, 41), (2, 3, 13), (1, 2, 3, 4, 5),
                 (1, 16, 8, 8)]


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", GLOBAL_SHAPES)
def test_global_pool(op, shape, tmp_path):
    x = (rng(7).normal(size=shape) + 0.5).astype(np.float32)
    check_node(op, {"x": x}, tmp_path)


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pool_float64(op, tmp_path):
    check_node(op, {"x": rng(8).normal(size=(2, 3, 5, 6))}, tmp_path)


# -- NaN: propagates (numpy/PyTorch rule), see the pool.py docstring ----------------------

def _run(op, x, attrs, tmp_path, n_outputs=1):
    outs = ["y", "i"][:n_outputs]
    model = make_model([helper.make_node(op, ["x"], outs, **attrs)], {"x": x}, outs)
    return compile_and_run(model, {"x": x}, tmp_path)


def test_maxpool_nan_propagates(tmp_path):
    x = rng(9).normal(size=(1, 2, 4, 6)).astype(np.float32)
    x[0, 0, 0, 0] = np.nan          # first element of window (0, 0)
    x[0, 0, 1, 3] = np.nan          # last element of window (0, 1)
    x[0, 1, 2, 4] = np.nan
    x[0, 1, 3, 4] = np.inf          # window with NaN and +Inf: NaN
    x[0, 1, 2, 0] = -np.inf
    win = x.reshape(1, 2, 2, 2, 3, 2).transpose(0, 1, 2, 4, 3, 5).reshape(1, 2, 2, 3, 4)
    want_y = win.max(axis=-1)                               # np.max propagates NaN
    a = win.argmax(axis=-1)                                 # first NaN, else first max
    r, c = np.divmod(a, 2)
    hh = np.arange(2).reshape(1, 1, 2, 1) * 2 + r
    ww = np.arange(3).reshape(1, 1, 1, 3) * 2 + c
    want_i = np.arange(2).reshape(1, 2, 1, 1) * 24 + hh * 6 + ww
    attrs = {"kernel_shape": [2, 2], "strides": [2, 2]}
    got = _run("MaxPool", x, attrs, tmp_path)
    assert_close(got, {"y": want_y})
    got = _run("MaxPool", x, attrs, tmp_path, n_outputs=2)
    assert_close(got, {"y": want_y, "i": want_i.astype(np.int64)})


def test_global_maxpool_nan_propagates(tmp_path):
    x = rng(10).normal(size=(1, 3, 5, 5)).astype(np.float32)
    x[0, 0, 4, 4] = np.nan
    x[0, 1, 0, 0] = np.nan
    x[0, 2, 2, 2] = np.inf
    got = _run("GlobalMaxPool", x, {}, tmp_path)
    assert_close(got, {"y": x.max(axis=(2, 3), keepdims=True)})
    check_node("GlobalAveragePool", {"x": x}, tmp_path)     # IEEE: NaN/Inf propagate


def test_avgpool_nan_inf(tmp_path):
    x = rng(11).normal(size=(1, 2, 6, 6)).astype(np.float32)
    x[0, 0, 1, 1], x[0, 1, 4, 4] = np.nan, np.inf
    check_node("AveragePool", {"x": x}, tmp_path, attrs={"kernel_shape": [3, 3],
                                                         "pads": [1, 1, 1, 1]})


def test_same_kernel_smaller_than_stride_unsupported(tmp_path):
    x = np.zeros((1, 1, 6), np.float32)
    with pytest.raises(UnsupportedError, match="negative padding"):
        _run("MaxPool", x, {"kernel_shape": [1], "strides": [3], "auto_pad": "SAME_UPPER"},
             tmp_path)


def test_ceil_window_in_trailing_padding_unsupported(tmp_path):
    # onnx shape inference says width 5, onnxruntime (and onnx.reference) compute 4
    x = np.zeros((1, 1, 5, 6), np.float32)
    with pytest.raises(UnsupportedError, match="ceil_mode"):
        _run("MaxPool", x, {"kernel_shape": [3, 3], "pads": [2, 2, 2, 2], "strides": [2, 2],
                            "ceil_mode": 1}, tmp_path)
