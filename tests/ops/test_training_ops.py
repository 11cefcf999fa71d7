"""ai.onnx.preview.training Momentum / Adam / Adagrad against onnx.reference (onnxruntime's
CPU provider lacks them)."""
import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from aicc.errors import UnsupportedError
from tests.oracle import assert_close, compile_and_run, rng

D = "ai.onnx.preview.training"


def _model(op, feeds, outs, attrs, default_domain=False):
    node = helper.make_node(op, list(feeds), outs, domain=D, **attrs)
    ins = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype),
                                         list(v.shape)) for k, v in feeds.items()]
    n = {"Momentum": 3, "Adagrad": 3, "Adam": 4}[op]
    groups = (len(feeds) - 2) // n
    outv = []
    for j, o in enumerate(outs):
        src = list(feeds)[2 + j % groups]
        dt = helper.np_dtype_to_tensor_dtype(feeds[src].dtype)
        outv.append(helper.make_tensor_value_info(o, dt, list(feeds[src].shape)))
    imports = [helper.make_opsetid(D, 1)] + ([helper.make_opsetid("", 17)] if default_domain
                                             else [])
    g = helper.make_graph([node], "g", ins, outv)
    return helper.make_model(g, opset_imports=imports)


def _check(op, feeds, outs, attrs, tmp_path, default_domain=False, rtol=1e-4):
    model = _model(op, feeds, outs, attrs, default_domain)
    want = dict(zip(outs, ReferenceEvaluator(model).run(None, feeds)))
    want = {k: np.asarray(v).astype(feeds["X0"].dtype) for k, v in want.items()}
    got = compile_and_run(model, feeds, tmp_path)
    assert_close(got, want, rtol=rtol, atol=1e-5)


def _feeds(shapes, n_states, dtype, t, seed=0):
    r = rng(seed)
    f = {"R": np.array(0.1, dtype), "T": np.array(t, np.int64)}
    for kind in ["X", "G"] + [f"S{j}" for j in range(n_states)]:
        for i, s in enumerate(shapes):
            v = r.standard_normal(s).astype(dtype)
            # Adam's second state (H) is a sum of squares: non-negative
            f[f"{kind}{i}"] = np.abs(v) if kind == "S1" else v
    return f


def _outs(n, k):
    return [f"o{j}_{i}" for j in range(k) for i in range(n)]


SHAPES = [[(2,)], [(1,), (2, 3)], [(3, 4, 5), (7,), (1,)]]


@pytest.mark.parametrize("shapes", SHAPES)
@pytest.mark.parametrize("mode", ["standard", "nesterov"])
@pytest.mark.parametrize("t", [0, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_momentum(shapes, mode, t, dtype, tmp_path):
    feeds = _feeds(shapes, 1, dtype, t)
    _check("Momentum", feeds, _outs(len(shapes), 2),
           {"alpha": 0.95, "beta": 0.85, "mode": mode, "norm_coefficient": 0.001}, tmp_path)


@pytest.mark.parametrize("shapes", SHAPES)
@pytest.mark.parametrize("t", [0, 5])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_adagrad(shapes, t, dtype, tmp_path):
    feeds = _feeds(shapes, 1, dtype, t)
    for i in range(len(shapes)):
        feeds[f"S0{i}"] = np.abs(feeds[f"S0{i}"])
    _check("Adagrad", feeds, _outs(len(shapes), 2),
           {"decay_factor": 0.1, "epsilon": 1e-5, "norm_coefficient": 0.001}, tmp_path)


@pytest.mark.parametrize("shapes", SHAPES)
@pytest.mark.parametrize("t", [0, 4])
@pytest.mark.parametrize("post", [0.0, 0.02])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_adam(shapes, t, post, dtype, tmp_path):
    feeds = _feeds(shapes, 2, dtype, t)
    _check("Adam", feeds, _outs(len(shapes), 3),
           {"alpha": 0.9, "beta": 0.85, "epsilon": 1e-2, "norm_coefficient": 0.001,
            "norm_coefficient_post": post}, tmp_path, rtol=1e-3)


def test_training_with_default_domain_import(tmp_path):
    feeds = _feeds([(4,)], 1, np.float32, 1)
    _check("Momentum", feeds, _outs(1, 2),
           {"alpha": 0.9, "beta": 0.5, "mode": "standard", "norm_coefficient": 0.0}, tmp_path,
           default_domain=True)


def test_momentum_bad_mode_refused(tmp_path):
    feeds = _feeds([(4,)], 1, np.float32, 1)
    model = _model("Momentum", feeds, _outs(1, 2),
                   {"alpha": 0.9, "beta": 0.5, "mode": "odd", "norm_coefficient": 0.0})
    with pytest.raises(UnsupportedError, match="mode"):
        compile_and_run(model, feeds, tmp_path)
