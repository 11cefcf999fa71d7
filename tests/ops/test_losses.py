import numpy as np
import pytest
from onnx import helper

from tests.oracle import check, check_node, compile_and_run, make_model, rng

SHAPES = [(3, 5), (2, 4, 3), (2, 3, 2, 5), (1, 7, 1, 2, 3)]


def _data(shape, tdt, seed, ignore=None):
    r = rng(seed)
    x = r.normal(size=shape).astype(np.float32)
    tshape = shape[:1] + shape[2:]
    t = r.integers(0, shape[1], size=tshape).astype(tdt)
    if ignore is not None:
        t.reshape(-1)[:: 3] = ignore
    return x, t


@pytest.mark.parametrize("op", ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_loss_plain(op, shape, reduction, tmp_path):
    x, t = _data(shape, np.int64, 1)
    check_node(op, {"x": x, "t": t}, tmp_path, attrs={"reduction": reduction}, opset=13)


@pytest.mark.parametrize("op", ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("ignore", [None, 1, -1])
@pytest.mark.parametrize("tdt", [np.int32, np.int64])
def test_loss_weight_ignore(op, reduction, ignore, tdt, tmp_path):
    x, t = _data((4, 5, 3), tdt, 2, ignore)
    w = rng(3).uniform(0.2, 2.0, size=(5,)).astype(np.float32)
    attrs = {"reduction": reduction}
    if ignore is not None:
        attrs["ignore_index"] = ignore
    # weight fed at run time
    check_node(op, {"x": x, "t": t, "w": w}, tmp_path, attrs=attrs, opset=13)


@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_loss_ignore_no_weight(reduction, tmp_path):
    x, t = _data((3, 4, 2, 2), np.int64, 4, ignore=-100)
    check_node("NegativeLogLikelihoodLoss", {"x": x, "t": t}, tmp_path,
               attrs={"reduction": reduction, "ignore_index": -100}, opset=13)
    check_node("SoftmaxCrossEntropyLoss", {"x": x, "t": t}, tmp_path,
               attrs={"reduction": reduction, "ignore_index": -100}, opset=13)


def test_loss_weight_initializer_float64(tmp_path):
    x, t = _data((5, 3, 4), np.int64, 5)
    x = x.astype(np.float64)
    w = np.array([0.5, 1.0, 3.0], np.float64)
    check_node("NegativeLogLikelihoodLoss", {"x": x, "t": t}, tmp_path, initializers={"w": w},
               attrs={"reduction": "mean"}, opset=13)
    check_node("SoftmaxCrossEntropyLoss", {"x": x, "t": t}, tmp_path, initializers={"w": w},
               attrs={"reduction": "sum"}, opset=13)


@pytest.mark.parametrize("shape", [(3, 5), (2, 4, 3), (2, 3, 2, 5)])
@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_sce_log_prob(shape, reduction, tmp_path):
    x, t = _data(shape, np.int64, 6, ignore=0)
    x = x * 4
    check_node("SoftmaxCrossEntropyLoss", {"x": x, "t": t}, tmp_path, n_outputs=2,
               attrs={"reduction": reduction, "ignore_index": 0}, opset=13)


def test_loss_all_ignored_mean_is_nan(tmp_path):
    """No counted sample: mean is 0/0 (NaN), as onnxruntime and numpy give."""
    x = rng(7).normal(size=(2, 3)).astype(np.float32)
    t = np.array([2, 2], np.int64)
    check_node("NegativeLogLikelihoodLoss", {"x": x, "t": t}, tmp_path,
               attrs={"reduction": "mean", "ignore_index": 2}, opset=13)


def _nll_numpy(x, t, reduction):
    n, c = x.shape[:2]
    xr = x.reshape(n, c, -1)
    tr = t.reshape(n, -1)
    loss = np.zeros(tr.shape, x.dtype)
    cnt = 0
    for i in range(n):
        for d in range(tr.shape[1]):
            k = tr[i, d]
            if 0 <= k < c:
                loss[i, d] = -xr[i, k, d]
                cnt += 1
    if reduction == "none":
        return loss.reshape(t.shape)
    if reduction == "sum":
        return np.array(loss.sum(), x.dtype)
    return np.array(loss.sum() / cnt, x.dtype)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_nll_out_of_range_target_is_ignored(reduction, tmp_path):
    """Documented aicc behaviour (onnxruntime raises): targets outside [0, C) count as ignored."""
    x = rng(8).normal(size=(4, 3, 2)).astype(np.float32)
    t = np.array([[0, 5], [-3, 2], [1, 1], [3, 0]], np.int64)
    node = helper.make_node("NegativeLogLikelihoodLoss", ["x", "t"], ["y"], reduction=reduction)
    model = make_model([node], {"x": x, "t": t}, ["y"], opset=13)
    got = compile_and_run(model, {"x": x, "t": t}, tmp_path)["y"]
    np.testing.assert_allclose(got, _nll_numpy(x, t, reduction), rtol=1e-5, atol=1e-6)


def test_sce_in_graph(tmp_path):
    """A loss fed by another op (scores computed, labels from the graph input)."""
    r = rng(9)
    a = r.normal(size=(6, 4)).astype(np.float32)
    b = r.normal(size=(4, 5)).astype(np.float32)
    t = r.integers(0, 5, size=(6,)).astype(np.int32)
    nodes = [helper.make_node("MatMul", ["a", "b"], ["s"]),
             helper.make_node("SoftmaxCrossEntropyLoss", ["s", "t"], ["y", "lp"])]
    model = make_model(nodes, {"a": a, "b": b, "t": t}, ["y", "lp"], opset=13)
    check(model, {"a": a, "b": b, "t": t}, tmp_path)
