"""Long reductions are no further from float64 than onnxruntime's: the SIMD GEMM sums each K
block of kc from zero and adds the blocks (gemm/tile.py tile_partial), so the error of a
K = 1024 - 2048 sum stays at onnxruntime's instead of growing with sqrt(K) (one FMA chain
over all of K was 2.6-3.5x onnxruntime's root-mean-square error: docs/ACCURACY.md)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from aicc.targets import host_supports, load_target
from tests.oracle import compile_and_run, make_model, reference

TARGETS = [t for t in ("generic", "x86-avx2", "x86-avx512") if host_supports(load_target(t))]


def _rms(e):
    return float(np.sqrt(np.mean(np.square(e))))


@pytest.mark.parametrize("target", TARGETS)
def test_long_sums_as_accurate_as_onnxruntime(target, tmp_path):
    r = np.random.default_rng(7)
    # a 1x1 conv with K = 1024 (ResNet-50's) and a MatMul with K = 2048: ReLU'd N(0, 1)
    # inputs, He-scaled weights, so the outputs are ~N(0, 1) and the sums long
    x = np.maximum(r.normal(size=(1, 1024, 7, 7)), 0).astype(np.float32)
    w = (r.normal(size=(96, 1024, 1, 1)) * np.sqrt(2 / 1024)).astype(np.float32)
    a = np.maximum(r.normal(size=(40, 2048)), 0).astype(np.float32)
    b = (r.normal(size=(2048, 72)) * np.sqrt(2 / 2048)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"]),
             helper.make_node("MatMul", ["a", "b"], ["z"])]
    model = make_model(nodes, {"x": x, "a": a}, ["y", "z"], {"w": w, "b": b})
    feeds = {"x": x, "a": a}
    got = compile_and_run(model, feeds, tmp_path, target=target)
    ort = reference(model, feeds)
    truth = {"y": np.einsum("nchw,kc->nkhw", x.astype(np.float64), w[:, :, 0, 0].astype(np.float64)),
             "z": a.astype(np.float64) @ b.astype(np.float64)}
    for k, t in truth.items():
        ea, eo = got[k] - t, ort[k] - t
        assert _rms(ea) <= 1.25 * _rms(eo), (k, _rms(ea), _rms(eo))
        assert np.abs(ea).max() <= 1.5 * np.abs(eo).max(), (k, np.abs(ea).max(), np.abs(eo).max())
