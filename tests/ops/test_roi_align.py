"""RoiAlign: compiled C vs onnxruntime over modes, coordinate transformation modes, sampling
ratios (fixed and adaptive), spatial scales, RoIs partly or fully outside the image, and the
bad batch index rule (aicc/ops/roi_align.py)."""
import numpy as np
import pytest
from onnx import helper

from tests.oracle import check, compile_and_run, make_model, rng


def _model(x, rois, bidx, opset=16, **attrs):
    node = helper.make_node("RoiAlign", ["x", "rois", "b"], ["y"], **attrs)
    feeds = {"x": x, "rois": rois, "b": bidx}
    return make_model([node], feeds, ["y"], opset=opset), feeds


def _rois(n, h, w, seed, spread=1.3, dtype=np.float32):
    r = rng(seed)
    a = r.uniform(-0.2 * w, spread * w, size=(n, 2))
    b = a + r.uniform(0.5, 0.8 * w, size=(n, 2))
    return np.concatenate([a, b], axis=1).astype(dtype)


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("ctm", ["half_pixel", "output_half_pixel"])
@pytest.mark.parametrize("ratio", [0, 1, 2])
def test_roi_align(mode, ctm, ratio, tmp_path):
    x = rng(1).normal(size=(2, 3, 10, 12)).astype(np.float32)
    rois = _rois(5, 10, 12, 2)
    bidx = np.array([0, 1, 1, 0, 1], np.int64)
    model, feeds = _model(x, rois, bidx, mode=mode, coordinate_transformation_mode=ctm,
                          sampling_ratio=ratio, output_height=3, output_width=4)
    check(model, feeds, tmp_path)


def test_roi_align_scale_and_opset10(tmp_path):
    x = rng(3).normal(size=(1, 2, 8, 8)).astype(np.float32)
    rois = _rois(3, 32, 32, 4)
    model, feeds = _model(x, rois, np.zeros(3, np.int64), spatial_scale=0.25,
                          output_height=2, output_width=2)
    check(model, feeds, tmp_path)
    model, feeds = _model(x, rois, np.zeros(3, np.int64), opset=10, spatial_scale=0.25,
                          output_height=3, output_width=2, sampling_ratio=2)
    check(model, feeds, tmp_path)


def test_roi_align_float64(tmp_path):
    x = rng(5).normal(size=(1, 2, 6, 7))
    model, feeds = _model(x, _rois(2, 6, 7, 6, dtype=np.float64), np.zeros(2, np.int64),
                          output_height=2, output_width=3)
    check(model, feeds, tmp_path)


def test_roi_align_bad_batch_index_gives_zeros(tmp_path):
    x = rng(7).normal(size=(2, 1, 5, 5)).astype(np.float32)
    rois = np.array([[0.5, 0.5, 3.5, 4], [1, 1, 3, 3], [0, 0, 4, 4]], np.float32)
    model, feeds = _model(x, rois, np.array([0, 2, -1], np.int64), output_height=2,
                          output_width=2)
    y = compile_and_run(model, feeds, tmp_path)["y"]
    assert y[0].any() and not y[1:].any()


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("ctm", ["half_pixel", "output_half_pixel"])
def test_roi_align_huge_rois(mode, ctm, tmp_path):
    """RoIs hundreds of times the image (adaptive grids of ~300 x 300 points per bin, most of
    them off the image), a RoI entirely off it, and one straddling an edge: the points off
    the image enter once per run instead of one by one, with the same results as
    onnxruntime visiting each."""
    x = rng(8).normal(size=(1, 2, 6, 5)).astype(np.float32)
    x[0, 0, 0, 0] = -2.5                      # x[0] is what an outside point weighs (by 0)
    rois = np.array([[-900, -700, 800, 950], [-300, 2, 400, 3.5], [50, 60, 80, 90],
                     [-2.2, -1.7, 3.3, 4.1]], np.float32)
    model, feeds = _model(x, rois, np.zeros(4, np.int64), mode=mode,
                          coordinate_transformation_mode=ctm, output_height=3, output_width=2)
    check(model, feeds, tmp_path)
