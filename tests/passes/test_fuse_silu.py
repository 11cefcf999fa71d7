"""fuse-silu: Before -> Expected structure, unchanged cases, and compiled numerics: the fused
Swish gives the unfused Sigmoid -> Mul's bits on every target (special values and a vector
tail included), within rounding of the exact float64 value, and matches onnxruntime."""
import numpy as np
import onnx
import pytest
from onnx import helper

import aicc
from aicc.config import Options
from aicc.targets import runnable_targets
from tests.oracle import STRICT_CFLAGS, make_model, reference
from tests.passes.helpers import (assert_same_outputs, assert_unchanged, build, node, ops,
                                  rand, run_pass)

TARGETS = ["generic"] + [t for t in runnable_targets() if t in ("x86-avx2", "x86-avx512")]


def graph(swap=False, opset=17, extra=(), outputs=("y",), shape=(3, 37), other="x"):
    feeds = {"x": rand(*shape, seed=3) * 4}
    if other != "x":
        feeds[other] = rand(*shape, seed=4)
    ins = ["s", other] if swap else [other, "s"]
    nodes = [node("Sigmoid", ["x"], ["s"]), node("Mul", ins, ["y"]), *extra]
    return build(nodes, feeds, list(outputs), opset=opset), feeds


@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("opset", [17, 24])
def test_fused(swap, opset):
    before, feeds = graph(swap, opset)
    after = run_pass("fuse-silu", before)
    assert ops(after) == ["Swish"]
    n = after.nodes[0]
    assert n.inputs == ["x"] and n.outputs == ["y"] and n.attrs == {}
    assert n.domain == ("" if opset >= 24 else "aicc") and "s" not in after.types
    assert_same_outputs(before, after, feeds, rtol=1e-5, atol=1e-6)   # onnxruntime: MLAS logistic


@pytest.mark.parametrize("why,kw", [
    ("sigmoid read twice", dict(extra=[node("Neg", ["s"], ["n"])], outputs=("y", "n"))),
    ("sigmoid is a graph output", dict(outputs=("y", "s"))),
    ("other multiplicand", dict(other="z")),
])
def test_not_fused(why, kw):
    before, _ = graph(**kw)
    assert_unchanged(before, run_pass("fuse-silu", before))


def test_broadcast_not_fused():
    feeds = {"x": rand(3, 1, seed=1), "z": rand(3, 4, seed=2)}
    g = build([node("Sigmoid", ["x"], ["s"]), node("Mul", ["x", "s"], ["m"]),
               node("Add", ["m", "z"], ["y"])], feeds, ["y"])
    after = run_pass("fuse-silu", g)
    assert ops(after) == ["Swish", "Add"]          # same shape: fused; x feeds nothing else
    h = build([node("Sigmoid", ["z"], ["s"]), node("Mul", ["x", "s"], ["y"])], feeds, ["y"])
    assert_unchanged(h, run_pass("fuse-silu", h))  # Mul(x, Sigmoid(z)): not a SiLU


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("target", TARGETS)
def test_compiled_same_bits(target, dtype, tmp_path):
    x = (np.random.default_rng(5).normal(size=(5, 37)) * 6).astype(dtype)
    x[0, :10] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 90.0, -90.0, 1e-30, -120.0, 20.0]
    model = make_model([helper.make_node("Sigmoid", ["x"], ["s"]),
                        helper.make_node("Mul", ["s", "x"], ["y"])], {"x": x}, ["y"])
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    fused = aicc.load(aicc.build(path, target=target, out=tmp_path / "f"), cflags=STRICT_CFLAGS)
    plain = aicc.load(aicc.build(path, target=target, out=tmp_path / "u", overrides={
        "pipeline": [n for n, _ in Options.load().pipeline if n != "fuse-silu"]}),
        cflags=STRICT_CFLAGS)
    assert [s["op"] for s in fused.manifest["steps"]] == ["Swish"]
    got, want = fused.run({"x": x})["y"], plain.run({"x": x})["y"]
    assert got.tobytes() == want.tobytes()
    with np.errstate(all="ignore"):             # exact x * sigmoid(x), in float64
        x64 = x.astype(np.float64)
        exact = x64 * (1 / (1 + np.exp(-x64)))
    rtol = 5e-7 if dtype == np.float32 else 1e-14
    np.testing.assert_allclose(got, exact, rtol=rtol, atol=1e-36, equal_nan=True)
    if dtype == np.float32:                     # onnxruntime: its logistic is approximate
        np.testing.assert_allclose(got, reference(model, {"x": x})["y"], rtol=1e-4,
                                   atol=1e-5, equal_nan=True)
