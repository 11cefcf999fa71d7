"""AffineGrid: compiled C vs onnxruntime (2-D and 3-D, align_corners, size-1 dims, float64),
with theta fed at run time, and feeding GridSample."""
import numpy as np
import pytest
from onnx import helper

from tests.oracle import check, make_model, rng


def _model(theta, size, align, dtype=np.float32):
    node = helper.make_node("AffineGrid", ["theta", "size"], ["grid"], align_corners=align)
    r = len(size) - 2
    out = [size[0], *size[2:], r]
    return make_model([node], {"theta": theta}, ["grid"], {"size": np.array(size, np.int64)},
                      opset=20, output_types={"grid": (dtype, out)})


@pytest.mark.parametrize("align", [0, 1])
@pytest.mark.parametrize("size", [[2, 3, 5, 7], [1, 1, 1, 4], [1, 2, 6, 1]])
def test_affine_grid_2d(size, align, tmp_path):
    theta = rng(0).normal(size=(size[0], 2, 3)).astype(np.float32)
    check(_model(theta, size, align), {"theta": theta}, tmp_path)


@pytest.mark.parametrize("align", [0, 1])
@pytest.mark.parametrize("size", [[2, 1, 3, 4, 5], [1, 2, 1, 2, 3]])
def test_affine_grid_3d(size, align, tmp_path):
    theta = rng(1).normal(size=(size[0], 3, 4)).astype(np.float32)
    check(_model(theta, size, align), {"theta": theta}, tmp_path)


def test_affine_grid_float64(tmp_path):
    theta = rng(2).normal(size=(1, 2, 3))
    check(_model(theta, [1, 1, 4, 5], 1, np.float64), {"theta": theta}, tmp_path)


def test_affine_grid_into_grid_sample(tmp_path):
    theta = np.array([[[0.8, -0.3, 0.1], [0.2, 0.9, -0.2]]], np.float32)
    x = rng(3).normal(size=(1, 2, 6, 7)).astype(np.float32)
    nodes = [helper.make_node("AffineGrid", ["theta", "size"], ["g"], align_corners=0),
             helper.make_node("GridSample", ["x", "g"], ["y"], align_corners=0)]
    model = make_model(nodes, {"x": x, "theta": theta}, ["y"],
                       {"size": np.array([1, 2, 5, 4], np.int64)}, opset=20,
                       output_types={"y": (np.float32, [1, 2, 5, 4])})
    check(model, {"x": x, "theta": theta}, tmp_path)
