"""Depthwise convs are no further from float64 than onnxruntime's: the SIMD depthwise kernels
(NCHW kernels/conv/depthwise.py, channel-last kernels/conv/nhwc_dw.py) sum the taps from zero
and add the bias last, as onnxruntime's do; chains started from the bias were 1.4x (5x5) and
1.6x (9x9) onnxruntime's root-mean-square error with biases as large as the outputs
(docs/ACCURACY.md)."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

import aicc
from aicc.runner import open_bundle
from aicc.targets import host_supports, load_target
from tests.oracle import STRICT_CFLAGS, compile_and_run, make_model, reference

TARGETS = [t for t in ("x86-avx2", "x86-avx512") if host_supports(load_target(t))]


def _rms(e):
    return float(np.sqrt(np.mean(np.square(e))))


def _dw64(x, w, b, pad):
    """Float64 depthwise convolution, stride 1 (NCHW, one channel per group)."""
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    k = w.shape[-1]
    ho, wo = x.shape[2] - k + 1, x.shape[3] - k + 1
    y = np.zeros((x.shape[0], w.shape[0], ho, wo)) + b.astype(np.float64)[None, :, None, None]
    for i in range(k):
        for j in range(k):
            y += x[:, :, i:i + ho, j:j + wo] * w[None, :, 0, i, j, None, None].astype(np.float64)
    return y


def _check(got, ort, t):
    ea, eo = got - t, ort - t
    assert _rms(ea) <= 1.1 * _rms(eo), (_rms(ea), _rms(eo))
    assert np.abs(ea).max() <= 1.25 * np.abs(eo).max(), (np.abs(ea).max(), np.abs(eo).max())


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("k", [5, 9])
def test_depthwise_as_accurate_as_onnxruntime(target, k, tmp_path):
    r = np.random.default_rng(k)
    c = 48
    x = np.maximum(r.normal(size=(1, c, 28, 28)), 0).astype(np.float32)
    w = (r.normal(size=(c, 1, k, k)) * np.sqrt(2 / (k * k))).astype(np.float32)
    b = r.normal(size=c).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[k, k], group=c,
                            pads=[k // 2] * 4, name="dw")
    model = make_model([node], {"x": x}, ["y"], {"w": w, "b": b})
    got = compile_and_run(model, {"x": x}, tmp_path, target=target)["y"]
    _check(got, reference(model, {"x": x})["y"], _dw64(x, w, b, k // 2))


@pytest.mark.parametrize("target", TARGETS)
def test_channel_last_depthwise_as_accurate_as_onnxruntime(target, tmp_path):
    """A pointwise -> depthwise 7x7 -> pointwise chain, which the x86 targets run
    channel-last; the first pointwise conv copies input channels (one-hot weights), so the
    depthwise layer's input is exact and its own error is measured."""
    r = np.random.default_rng(3)
    x = np.maximum(r.normal(size=(1, 16, 28, 28)), 0).astype(np.float32)
    wp = np.zeros((64, 16, 1, 1), np.float32)
    wp[np.arange(64), np.arange(64) % 16] = 1.0
    w = (r.normal(size=(64, 1, 7, 7)) * np.sqrt(2 / 49)).astype(np.float32)
    b = r.normal(size=64).astype(np.float32)
    wq = (r.normal(size=(16, 64, 1, 1)) * np.sqrt(2 / 64)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "wp"], ["q"]),
             helper.make_node("Conv", ["q", "w", "b"], ["y"], kernel_shape=[7, 7], group=64,
                              pads=[3] * 4),
             helper.make_node("Conv", ["y", "wq"], ["z"])]
    model = make_model(nodes, {"x": x}, ["y", "z"], {"wp": wp, "w": w, "b": b, "wq": wq})
    onnx.save(model, tmp_path / "m.onnx")
    b_ = open_bundle(aicc.build(tmp_path / "m.onnx", target=target, out=tmp_path / "b"),
                     cflags=STRICT_CFLAGS)
    assert any(s["op"] in ("ConvNHWC", "PwDwNHWC") for s in b_.manifest["steps"]), \
        [s["op"] for s in b_.manifest["steps"]]
    got = b_.run({"x": x})["y"]
    _check(got, reference(model, {"x": x})["y"], _dw64(x[:, np.arange(64) % 16], w, b, 3))
