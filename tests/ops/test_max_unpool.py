"""MaxUnpool: compiled C vs onnxruntime, fed with MaxPool's indices (and arbitrary ones),
with and without output_shape (onnx.reference's rule, see aicc/ops/max_unpool.py)."""
import numpy as np
import pytest
from onnx import helper

from tests.oracle import check, compile_and_run, make_model, rng


def _pool_unpool(shape, attrs, tmp_path):
    x = rng(0).normal(size=shape).astype(np.float32) * 10
    nodes = [helper.make_node("MaxPool", ["x"], ["y", "i"], **attrs),
             helper.make_node("MaxUnpool", ["y", "i"], ["z"], **attrs)]
    model = make_model(nodes, {"x": x}, ["z"], opset=12)
    check(model, {"x": x}, tmp_path)


@pytest.mark.parametrize("shape,attrs", [
    ((1, 2, 6, 8), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ((2, 3, 7, 9), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 2, 9), {"kernel_shape": [3], "strides": [3]}),
    ((1, 1, 4, 6, 6), {"kernel_shape": [2, 2, 2], "strides": [2, 2, 2]}),
])
def test_max_unpool_after_maxpool(shape, attrs, tmp_path):
    _pool_unpool(shape, attrs, tmp_path)


def test_max_unpool_int(tmp_path):
    x = rng(1).integers(-50, 50, size=(1, 2, 2, 3)).astype(np.int32)
    i = rng(2).permutation(4 * 6 * 2)[:12].reshape(1, 2, 2, 3).astype(np.int64)
    node = helper.make_node("MaxUnpool", ["x", "i"], ["z"], kernel_shape=[2, 2],
                            strides=[2, 2])
    model = make_model([node], {"x": x, "i": i}, ["z"], opset=11)
    check(model, {"x": x, "i": i}, tmp_path)


def test_max_unpool_output_shape(tmp_path):
    # indices over the default 4x4 output, placed in a 5x5 one (as the conformance case)
    x = np.array([[[[5, 6], [7, 8]]]], np.float32)
    i = np.array([[[[5, 7], [13, 15]]]], np.int64)
    node = helper.make_node("MaxUnpool", ["x", "i", "s"], ["z"], kernel_shape=[2, 2],
                            strides=[2, 2])
    model = make_model([node], {"x": x, "i": i}, ["z"],
                       {"s": np.array([1, 1, 5, 5], np.int64)}, opset=11,
                       output_types={"z": (np.float32, [1, 1, 5, 5])})
    got = compile_and_run(model, {"x": x, "i": i}, tmp_path)["z"]
    want = np.zeros((1, 1, 5, 5), np.float32)
    want[0, 0, 1, 1], want[0, 0, 1, 3], want[0, 0, 3, 1], want[0, 0, 3, 3] = 5, 6, 7, 8
    np.testing.assert_array_equal(got, want)


def test_max_unpool_out_of_range_indices_skipped(tmp_path):
    x = np.array([[[[1, 2], [3, 4]]]], np.float32)
    i = np.array([[[[-1, 16], [3, 3]]]], np.int64)      # bad, bad, duplicate: last wins
    node = helper.make_node("MaxUnpool", ["x", "i"], ["z"], kernel_shape=[2, 2],
                            strides=[2, 2])
    model = make_model([node], {"x": x, "i": i}, ["z"], opset=11)
    got = compile_and_run(model, {"x": x, "i": i}, tmp_path)["z"]
    want = np.zeros((1, 1, 4, 4), np.float32)
    want.flat[3] = 4
    np.testing.assert_array_equal(got, want)
