"""A network's first conv (3 input channels, 3x3, stride 2: K = 27 fits one K block) is no
further from float64 than onnxruntime's: the SIMD conv sums each input channel's 9 taps from
zero and adds the channels' sums (conv/schedule.py channel_blocks), as onnxruntime's
NCHW-input conv kernel does; one FMA chain over all 27 products was 1.36x onnxruntime's
root-mean-square error and 1.4x its largest (docs/ACCURACY.md)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from aicc.targets import host_supports, load_target
from tests.oracle import compile_and_run, conv2d_f64, make_model, reference

TARGETS = [t for t in ("x86-avx2", "x86-avx512") if host_supports(load_target(t))]


def _rms(e):
    return float(np.sqrt(np.mean(np.square(e))))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("seed", [0, 1])
def test_first_conv_as_accurate_as_onnxruntime(target, seed, tmp_path):
    r = np.random.default_rng(seed)
    x = r.normal(size=(1, 3, 96, 96)).astype(np.float32)
    w = (r.normal(size=(32, 3, 3, 3)) * np.sqrt(2 / 27)).astype(np.float32)
    b = (r.normal(size=32) * 0.5).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[3, 3],
                            strides=[2, 2], pads=[1, 1, 1, 1])
    model = make_model([node], {"x": x}, ["y"], {"w": w, "b": b})
    got = compile_and_run(model, {"x": x}, tmp_path, target=target)["y"]
    ort = reference(model, {"x": x})["y"]
    t = conv2d_f64(x, w, b, [1, 1, 1, 1], [2, 2])
    ea, eo = got - t, ort - t
    assert _rms(ea) <= 1.1 * _rms(eo), (_rms(ea), _rms(eo))
    assert np.abs(ea).max() <= 1.25 * np.abs(eo).max(), (np.abs(ea).max(), np.abs(eo).max())
