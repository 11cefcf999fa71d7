"""The SIMD GEMM's tile epilogue with an activation that has a vector form
(kernels/gemm/epilogue.py: the affine loop, then vmath/vector.py's in-place pass per row)
on x86-avx2 / x86-avx512, against onnxruntime and bit for bit against the scalar epilogue
(the same build with the vector pass turned off). Gemm with alpha / beta and a C of one row
or one column, MatMul with a fused bias, a 1x1 Conv (NCHW, the conv tile GEMM) and its
channel-last form (layout-nhwc: MatMul), each followed by HardSwish / HardSigmoid / Sigmoid /
Tanh / LeakyRelu, sizes off the vector width, NaN / Inf inputs."""
import json

import numpy as np
import onnx
import pytest
import yaml
from onnx import helper

import aicc
from aicc.config import DEFAULT_CONFIG
from aicc.kernels.gemm import epilogue as gemm_epilogue
from aicc.targets import runnable_targets
from tests.oracle import STRICT_CFLAGS, assert_close, make_model, reference, rng

TARGETS = [t for t in runnable_targets() if t in ("x86-avx2", "x86-avx512")]
pytestmark = pytest.mark.skipif(not TARGETS, reason="host runs no x86 SIMD target")
ACTS = ["HardSwish", "HardSigmoid", "Sigmoid", "Tanh", "LeakyRelu"]


def build_model(act):
    r = rng(len(act))
    feeds, inits, nodes, outs = {}, {}, [], []

    def add(i, node_inputs, op, **attrs):
        nodes.append(helper.make_node(op, node_inputs, [f"t{i}"], **attrs))
        nodes.append(helper.make_node(act, [f"t{i}"], [f"y{i}"]))
        outs.append(f"y{i}")

    x = r.normal(size=(37, 45)).astype(np.float32) * 3
    x[0, 0], x[5, 7], x[9, 1] = np.nan, np.inf, -np.inf
    feeds["a"] = x
    inits["wg"] = r.normal(size=(45, 70)).astype(np.float32) / 7
    inits["crow"] = r.normal(size=(1, 70)).astype(np.float32)
    inits["ccol"] = r.normal(size=(37, 1)).astype(np.float32)
    add(0, ["a", "wg", "crow"], "Gemm", alpha=0.5, beta=2.0)
    add(1, ["a", "wg", "ccol"], "Gemm", alpha=1.0, beta=-1.5)
    inits["bm"] = r.normal(size=(70,)).astype(np.float32)
    nodes.append(helper.make_node("MatMul", ["a", "wg"], ["m2"]))
    add(2, ["m2", "bm"], "Add")
    feeds["xc"] = r.normal(size=(1, 24, 9, 11)).astype(np.float32) * 3
    inits["wc"] = r.normal(size=(100, 24, 1, 1)).astype(np.float32) / 5
    inits["bc"] = r.normal(size=(100,)).astype(np.float32)
    add(3, ["xc", "wc", "bc"], "Conv")
    return make_model(nodes, feeds, outs, inits, opset=20), feeds


def build_run(model, feeds, tmp_path, target, name, nhwc):
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    d = yaml.safe_load(DEFAULT_CONFIG.read_text())
    mode = {"layout-nhwc": {"mode": "all" if nhwc else "off"}}
    over = {"pipeline": [mode if p == "layout-nhwc" else p for p in d["pipeline"]]}
    out = aicc.build(path, target=target, out=tmp_path / name, overrides=over)
    steps = json.loads((out / "manifest.json").read_text())["steps"]
    assert all(s["op"] in ("Gemm", "MatMul", "Conv", "Transpose") for s in steps), steps
    text = (out / "model.c").read_text()
    return aicc.load(out, cflags=STRICT_CFLAGS).run(feeds), text


@pytest.mark.parametrize("nhwc", [False, True])
@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("target", TARGETS)
def test_vector_epilogue(target, act, nhwc, tmp_path, monkeypatch):
    model, feeds = build_model(act)
    got, text = build_run(model, feeds, tmp_path, target, "vec", nhwc)
    assert f"aicc_act_{act.lower()}_" in text and "then " + act + " by" in text
    assert_close(got, reference(model, feeds))
    assert np.isnan(got["y0"]).any()
    monkeypatch.setattr(gemm_epilogue, "array_act", lambda *a: None)
    scalar, text = build_run(model, feeds, tmp_path, target, "scalar", nhwc)
    assert "then " + act + " by" not in text
    for k in got:
        assert got[k].tobytes() == scalar[k].tobytes(), k
