"""Bilinear upsampling by rows (kernels/resize/rows.py): each input row interpolated along x
once, then the output rows from pairs of cached rows. Checked against onnxruntime and bit for
bit against the element-wise walk it replaces (the same build with the rows path turned off),
on the generic target and the x86 SIMD targets the host runs (vectorized row loops);
shapes with leading identity dims merged into planes, rank 2 (one plane), batch, 1 x 1
inputs, large factors (DeepLabV3's 16x), the coordinate modes, NaN / Inf inputs; and the
geometries it must leave to the walk (H shrinking or unchanged, a resized channel dim,
nearest)."""
import numpy as np
import onnx
import pytest
from onnx import helper

import aicc
from aicc.kernels.resize import rows as resize_rows
from aicc.targets import runnable_targets
from tests.oracle import STRICT_CFLAGS, assert_close, make_model, reference, rng

TARGETS = ["generic"] + [t for t in runnable_targets() if t in ("x86-avx2", "x86-avx512")]
COORDS = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"]


def model_of(shape, scales, coord="half_pixel", mode="linear", bad=()):
    x = rng(len(shape) * 7 + int(sum(scales) * 10)).normal(size=shape).astype(np.float32)
    for idx, v in bad:
        x[idx] = v
    node = helper.make_node("Resize", ["x", "roi", "s"], ["y"], mode=mode,
                            coordinate_transformation_mode=coord)
    inits = {"roi": np.array([], np.float32), "s": np.array(scales, np.float32)}
    return make_model([node], {"x": x}, ["y"], inits, opset=19), {"x": x}


def build_run(model, feeds, tmp_path, target, name):
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    out = aicc.build(path, target=target, out=tmp_path / name)
    got = aicc.load(out, cflags=STRICT_CFLAGS).run(feeds)
    return got, "aicc_rs_vrow(" in (out / "model.c").read_text()


CASES = [
    ((1, 21, 16, 16), [1, 1, 16, 16], "half_pixel"),
    ((2, 3, 5, 7), [1, 1, 2, 3], "pytorch_half_pixel"),
    ((2, 3, 5, 7), [1, 1, 1.5, 0.5], "align_corners"),       # W shrinks, H grows: rows
    ((4, 6), [3, 2.5], "asymmetric"),                           # rank 2: one plane
    ((1, 8, 1, 1), [1, 1, 16, 16], "half_pixel"),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape,scales,coord", CASES)
def test_rows_bits(shape, scales, coord, target, tmp_path, monkeypatch):
    bad = [((0,) * (len(shape) - 2) + (0, 1), np.nan),
           ((0,) * (len(shape) - 2) + (shape[-2] - 1, 0), np.inf)] \
        if shape[-1] > 1 and shape[-2] > 1 else []
    model, feeds = model_of(shape, scales, coord, bad=bad)
    got, used = build_run(model, feeds, tmp_path, target, "rows")
    assert used
    assert_close(got, reference(model, feeds))
    monkeypatch.setattr(resize_rows, "applies", lambda *a: False)
    walk, used = build_run(model, feeds, tmp_path, target, "walk")
    assert not used
    assert got["y"].tobytes() == walk["y"].tobytes()
    if bad:
        assert np.isnan(got["y"]).any() and np.isinf(got["y"]).any()


@pytest.mark.parametrize("shape,scales,mode", [
    ((1, 2, 8, 8), [1, 1, 0.5, 2], "linear"),      # H shrinks
    ((1, 2, 4, 4), [1, 2, 2, 2], "linear"),        # a resized channel dim
    ((1, 2, 4, 4), [1, 1, 2, 2], "nearest"),
    ((1, 2, 3, 9), [1, 1, 1, 2], "linear"),        # H unchanged: an identity dim
])
def test_rows_not_taken(shape, scales, mode, tmp_path):
    model, feeds = model_of(shape, scales, mode=mode)
    got, used = build_run(model, feeds, tmp_path, "generic", "b")
    assert not used
    assert_close(got, reference(model, feeds))
