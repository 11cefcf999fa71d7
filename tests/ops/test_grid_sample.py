"""GridSample: compiled C vs onnxruntime (onnx.reference where onnxruntime lacks the case)
over modes, padding modes, align_corners, 2-D and 3-D, grids reaching far outside the
input, and the NaN rule of aicc/ops/grid_sample.py."""
import numpy as np
import pytest

from tests.oracle import check_node, compile_and_run, make_model, rng
from onnx import helper


def _gs(tmp_path, xs, gs, mode, pad, align, opset=20, dtype=np.float32, seed=0, span=1.6):
    r = rng(seed)
    x = r.normal(size=xs).astype(dtype)
    grid = r.uniform(-span, span, size=gs).astype(dtype)
    check_node("GridSample", {"x": x, "grid": grid}, tmp_path, opset=opset,
               attrs={"mode": mode, "padding_mode": pad, "align_corners": align})


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("pad", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_2d(mode, pad, align, tmp_path):
    _gs(tmp_path, (2, 3, 5, 7), (2, 4, 6, 2), mode, pad, align, seed=align)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("pad", ["zeros", "border", "reflection"])
def test_grid_sample_3d(mode, pad, tmp_path):
    _gs(tmp_path, (1, 2, 3, 4, 5), (1, 2, 3, 4, 3), mode, pad, 0)
    _gs(tmp_path, (1, 2, 4, 3, 2), (1, 3, 2, 2, 3), mode, pad, 1, seed=2)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_grid_sample_opset16_names(mode, tmp_path):
    _gs(tmp_path, (1, 2, 6, 5), (1, 3, 3, 2), mode, "border", 0, opset=16)


def test_grid_sample_far_outside_and_one_pixel(tmp_path):
    for pad in ("zeros", "border", "reflection"):
        _gs(tmp_path, (1, 1, 4, 5), (1, 5, 5, 2), "linear", pad, 0, span=7.0, seed=3)
        _gs(tmp_path, (1, 1, 4, 5), (1, 5, 5, 2), "cubic", pad, 1, span=7.0, seed=3)
        _gs(tmp_path, (1, 2, 1, 6), (1, 3, 3, 2), "linear", pad, 0, seed=4)


def test_grid_sample_float64(tmp_path):
    _gs(tmp_path, (1, 2, 5, 4), (1, 3, 3, 2), "linear", "reflection", 1, dtype=np.float64)
    _gs(tmp_path, (1, 2, 5, 4), (1, 3, 3, 2), "cubic", "zeros", 0, dtype=np.float64)


def test_grid_sample_nan_grid(tmp_path):
    x = rng(5).normal(size=(1, 2, 4, 4)).astype(np.float32)
    grid = rng(6).uniform(-1, 1, size=(1, 2, 3, 2)).astype(np.float32)
    grid[0, 1, 2, 0] = np.nan
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], padding_mode="border")
    model = make_model([node], {"x": x, "grid": grid}, ["y"], opset=20)
    y = compile_and_run(model, {"x": x, "grid": grid}, tmp_path)["y"]
    assert np.isnan(y[0, :, 1, 2]).all()
    assert not np.isnan(np.delete(y.reshape(2, 6), 5, axis=1)).any()
