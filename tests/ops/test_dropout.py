"""Dropout: inference is an identity (mask all true); training mode with a seed reproduces
onnx.reference (numpy's RandomState(seed)); without a seed it is refused."""
import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from aicc.errors import UnsupportedError
from tests.oracle import assert_close, check_node, compile_and_run, make_model, rng


@pytest.mark.parametrize("shape", [(3, 4, 5), (7,), (1, 1)])
@pytest.mark.parametrize("n_out", [1, 2])
def test_dropout_inference(tmp_path, shape, n_out):
    x = rng(1).standard_normal(shape).astype(np.float32)
    check_node("Dropout", {"x": x}, tmp_path, n_outputs=n_out)


def test_dropout_inference_ratio_input_int(tmp_path):
    x = rng(2).integers(-5, 5, (4, 6)).astype(np.int32)
    r = np.array(0.3, np.float32)
    check_node("Dropout", {"x": x}, tmp_path, initializers={"r": r}, n_outputs=2)


def _reference(model, feeds):
    names = [o.name for o in model.graph.output]
    return dict(zip(names, ReferenceEvaluator(model).run(None, feeds)))


def test_dropout_opset10_mask(tmp_path):
    # onnxruntime returns an all-false mask in inference at opset 10; onnx.reference (and
    # the spec's intent: nothing is dropped) an all-true one
    feeds = {"x": rng(3).standard_normal((2, 9)).astype(np.float32)}
    node = helper.make_node("Dropout", ["x"], ["y0", "y1"], ratio=0.4)
    model = make_model([node], feeds, ["y0", "y1"], opset=10)
    assert_close(compile_and_run(model, feeds, tmp_path), _reference(model, feeds))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ratio,train", [(0.5, True), (0.75, True), (0.0, True), (0.3, False)])
@pytest.mark.parametrize("seed", [0, 12345])
def test_dropout_training_seeded(tmp_path, dtype, ratio, train, seed):
    x = rng(4).standard_normal((5, 7, 9)).astype(dtype)
    feeds = {"x": x, "r": np.array(ratio, np.float32), "t": np.array(train)}
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y0", "y1"], seed=seed)
    model = make_model([node], feeds, ["y0", "y1"], opset=22)
    got = compile_and_run(model, feeds, tmp_path)
    assert_close(got, _reference(model, feeds))


def test_dropout_training_unseeded_refused(tmp_path):
    feeds = {"x": np.ones((3, 3), np.float32), "r": np.array(0.5, np.float32),
             "t": np.array(True)}
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y0"])
    model = make_model([node], feeds, ["y0"], opset=22)
    with pytest.raises(UnsupportedError, match="random in training mode"):
        compile_and_run(model, feeds, tmp_path)
