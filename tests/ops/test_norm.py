"""Normalizations and softmax: compiled C vs onnxruntime."""
import numpy as np
import pytest

from onnx import helper

from tests.oracle import assert_close, check, check_node, compile_and_run, make_model, rng


def _rand(r, shape, dt=np.float32):
    return r.normal(size=shape).astype(dt)


def _bn_params(r, c, dt=np.float32):
    return {"scale": _rand(r, (c,), dt), "bias": _rand(r, (c,), dt), "mean": _rand(r, (c,), dt),
            "var": r.uniform(0.1, 3, size=(c,)).astype(dt)}


# -- BatchNormalization -------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 17), (1, 5, 4, 3), (2, 1, 65), (3, 16, 2, 2, 2)])
@pytest.mark.parametrize("const", [True, False])
def test_batchnorm(shape, const, tmp_path):
    r = rng(len(shape))
    x = _rand(r, shape)
    p = _bn_params(r, shape[1])
    attrs = {"epsilon": 1e-3}
    if const:
        check_node("BatchNormalization", {"x": x}, tmp_path, initializers=p, attrs=attrs)
    else:
        check_node("BatchNormalization", {"x": x, **p}, tmp_path, attrs=attrs)


@pytest.mark.parametrize("opset", [9, 14, 15])
def test_batchnorm_opsets(opset, tmp_path):
    r = rng(1)
    check_node("BatchNormalization", {"x": _rand(r, (2, 4, 5))}, tmp_path,
               initializers=_bn_params(r, 4), opset=opset)


def test_batchnorm_spatial0(tmp_path):
    """Opset 7 spatial=0: statistics per (channel, position), shape [C, D]."""
    r = rng(20)
    p = {k: _rand(r, (3, 4)) for k in ("scale", "bias", "mean")}
    p["var"] = r.uniform(0.5, 2, size=(3, 4)).astype(np.float32)
    check_node("BatchNormalization", {"x": _rand(r, (2, 3, 4))}, tmp_path, initializers=p,
               attrs={"spatial": 0}, opset=7)


def test_batchnorm_mixed_const(tmp_path):
    r = rng(2)
    p = _bn_params(r, 6)
    x = _rand(r, (2, 6, 7))
    check_node("BatchNormalization", {"x": x, "mean": p.pop("mean")}, tmp_path,
               initializers=p, input_order=["x", "scale", "bias", "mean", "var"])


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (4, 3), (1, 2, 65)])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_batchnorm_training(shape, dt, tmp_path):
    """training_mode=1 (opset 14/15): batch statistics, running mean/var outputs."""
    r = rng(len(shape))
    x = _rand(r, shape, dt) * 2 + 1
    p = _bn_params(r, shape[1], dt)
    check_node("BatchNormalization", {"x": x, **p}, tmp_path, n_outputs=3, opset=15,
               attrs={"training_mode": 1, "momentum": 0.8, "epsilon": 1e-2})
    check_node("BatchNormalization", {"x": x}, tmp_path, initializers=p, opset=14,
               n_outputs=3, attrs={"training_mode": 1})
    # running statistics omitted: only Y (onnxruntime 1.32 crashes on this model: compare
    # with onnx.reference's Y of the full node)
    from onnx.reference import ReferenceEvaluator
    names = ["x", "scale", "bias", "mean", "var"]
    full = make_model([helper.make_node("BatchNormalization", names, ["y", "m", "v"],
                                        training_mode=1)], {"x": x, **p}, ["y", "m", "v"],
                      opset=15)
    want = ReferenceEvaluator(full).run(["y"], {"x": x, **p})[0]
    node = helper.make_node("BatchNormalization", names, ["y", "", ""], training_mode=1)
    got = compile_and_run(make_model([node], {"x": x, **p}, ["y"], opset=15), {"x": x, **p},
                          tmp_path)
    assert_close(got, {"y": want})


def test_batchnorm_float64(tmp_path):
    r = rng(3)
    check_node("BatchNormalization", {"x": _rand(r, (2, 3, 9), np.float64)}, tmp_path,
               initializers=_bn_params(r, 3, np.float64))


# -- LayerNormalization -------------------------------------------------------------------

@pytest.mark.parametrize("shape,axis", [((2, 17), -1), ((2, 3, 65), -1), ((4, 3, 5), 1),
                                        ((2, 3, 4, 5), -2), ((3, 7), 0), ((1, 1), -1),
                                        ((5, 3), 1)])
@pytest.mark.parametrize("bias", [True, False])
def test_layernorm(shape, axis, bias, tmp_path):
    r = rng(4)
    x = _rand(r, shape) * 3 + 1
    ax = axis % len(shape)
    inits = {"scale": _rand(r, shape[ax:])}
    if bias:
        inits["bias"] = _rand(r, shape[ax:])
    check_node("LayerNormalization", {"x": x}, tmp_path, initializers=inits,
               attrs={"axis": axis, "epsilon": 1e-4}, opset=17)


def test_layernorm_runtime_params_and_stats(tmp_path):
    r = rng(5)
    x, s, b = _rand(r, (3, 4, 10)), _rand(r, (10,)), _rand(r, (10,))
    check_node("LayerNormalization", {"x": x, "s": s, "b": b}, tmp_path, n_outputs=3, opset=17)


def test_layernorm_mean_only(tmp_path):
    r = rng(6)
    x = _rand(r, (6, 9))
    node = helper.make_node("LayerNormalization", ["x", "s"], ["y", "mu", ""], axis=1)
    model = make_model([node], {"x": x}, ["y", "mu"], {"s": _rand(r, (9,))}, opset=17)
    check(model, {"x": x}, tmp_path)


def test_layernorm_scalar_scale_and_float64(tmp_path):
    r = rng(7)
    check_node("LayerNormalization", {"x": _rand(r, (3, 8))}, tmp_path,
               initializers={"s": np.array([2.0], np.float32)}, opset=17)
    check_node("LayerNormalization", {"x": _rand(r, (3, 8), np.float64)}, tmp_path,
               initializers={"s": _rand(r, (8,), np.float64), "b": _rand(r, (8,), np.float64)},
               opset=17)


# -- Instance / Group normalization --------------------------------------------------------

@pytest.mark.parametrize("shape", [(2, 3, 5), (1, 4, 3, 3), (2, 1, 17), (3, 2, 65), (2, 5, 1)])
def test_instancenorm(shape, tmp_path):
    r = rng(8)
    c = shape[1]
    check_node("InstanceNormalization", {"x": _rand(r, shape) * 2 - 1}, tmp_path,
               initializers={"s": _rand(r, (c,)), "b": _rand(r, (c,))}, attrs={"epsilon": 1e-3})


def test_instancenorm_runtime_float64(tmp_path):
    r = rng(9)
    check_node("InstanceNormalization", {"x": _rand(r, (2, 3, 7), np.float64),
                                         "s": _rand(r, (3,), np.float64),
                                         "b": _rand(r, (3,), np.float64)}, tmp_path)


GROUPS = [((2, 6, 5), 3), ((1, 4, 3, 3), 2), ((2, 4, 7), 4), ((2, 4, 7), 1)]


@pytest.mark.parametrize("shape,groups", GROUPS)
def test_groupnorm(shape, groups, tmp_path):
    r = rng(10)
    opset, per = 21, shape[1]
    x = _rand(r, shape)
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=groups,
                            epsilon=1e-4)
    # onnx shape inference does not type this (function) op's output: give it explicitly
    model = make_model([node], {"x": x}, ["y"], {"s": _rand(r, (per,)), "b": _rand(r, (per,))},
                       opset=opset, output_types={"y": (np.float32, list(shape))})
    check(model, {"x": x}, tmp_path)


# -- Softmax family ------------------------------------------------------------------------

SOFT_SHAPES = [((2, 17), None), ((3, 4, 5), -1), ((3, 4, 5), 1), ((3, 4, 5), 0), ((3, 4, 5), -3),
               ((65,), 0), ((2, 3, 4, 5), 2), ((1, 1, 1), 1), ((4, 1, 3), 1)]


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("shape,axis", SOFT_SHAPES)
@pytest.mark.parametrize("opset", [11, 13])
def test_softmax(op, shape, axis, opset, tmp_path):
    r = rng(11)
    x = _rand(r, shape) * 4
    if op == "Hardmax":
        x = np.round(x)                     # ties: the first maximum wins
    attrs = {} if axis is None else {"axis": axis}
    check_node(op, {"x": x}, tmp_path, attrs=attrs, opset=opset)


def _hardmax_sequential(x):
    """The running argmax (x[d] > x[best]) of each row, as one-hot rows."""
    y = np.zeros_like(x)
    for r, row in enumerate(x):
        best = 0
        for d in range(1, len(row)):
            if row[d] > row[best]:
                best = d
        y[r, best] = 1
    return y


@pytest.mark.parametrize("d", [1, 31, 32, 33, 100, 1000])
def test_hardmax_rows(d, tmp_path):
    """Contiguous rows (32 running maxima, then the first index of the maximum): the running
    argmax's index with ties of the maximum (the first wins, -0 and +0 tie), NaN anywhere (it
    never wins; a NaN first element keeps index 0), all -Inf, and onnxruntime's values."""
    x = np.round(rng(d).normal(size=(9, d)) * 3).astype(np.float32)
    x[1, 0] = np.nan
    x[2, d // 2] = np.nan
    x[3, :] = -np.inf
    x[4, :] = np.nan
    x[5, :] = 0.0
    x[5, d - 1:] = -0.0
    x[6, -1] = 50.0
    x[7, 0] = -np.inf
    if d > 1:
        x[8, 1:] = np.nan
    m = make_model([helper.make_node("Hardmax", ["x"], ["y"], axis=1)], {"x": x}, ["y"],
                   opset=13)
    got = compile_and_run(m, {"x": x}, tmp_path)["y"]
    np.testing.assert_array_equal(got, _hardmax_sequential(x))
    ok = ~np.isnan(x).any(axis=1)
    check(make_model([helper.make_node("Hardmax", ["x"], ["y"], axis=1)], {"x": x[ok]}, ["y"],
                     opset=13), {"x": x[ok]}, tmp_path)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_inf_nan(op, tmp_path):
    x = np.array([[-np.inf, 1, 2], [-np.inf, -np.inf, -np.inf], [np.inf, 0, 1],
                  [np.nan, 0, 1], [1e30, -1e30, 0], [88, 89, 90]], np.float32)
    check_node(op, {"x": x}, tmp_path, opset=13)
    check_node(op, {"x": np.ascontiguousarray(x.T)}, tmp_path, attrs={"axis": 0}, opset=13)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
def test_softmax_float64(op, tmp_path):
    r = rng(12)
    check_node(op, {"x": _rand(r, (3, 5, 2), np.float64)}, tmp_path, attrs={"axis": 1}, opset=13)
    check_node(op, {"x": _rand(r, (3, 5), np.float64)}, tmp_path, opset=13)


def test_softmax_empty(tmp_path):
    check_node("Softmax", {"x": np.zeros((0, 3), np.float32)}, tmp_path, opset=13)
    check_node("Softmax", {"x": np.zeros((3, 0), np.float32)}, tmp_path, opset=13)


@pytest.mark.parametrize("shape,groups", GROUPS)
def test_groupnorm_opset18(shape, groups, tmp_path):
    """Opset 18-20 GroupNormalization (scale/bias per group) fails onnx's checker (the op
    version is deprecated), so build the IR directly and compare with numpy."""
    import aicc
    from aicc.bundle.writer import write_bundle
    from aicc.compiler import compile_graph
    from aicc.config import Options
    from aicc.ir import Graph, Node, TensorType
    from tests.oracle import STRICT_CFLAGS
    r = rng(13)
    x, s, b = _rand(r, shape), _rand(r, (groups,)), _rand(r, (groups,))
    f32 = np.dtype(np.float32)
    g = Graph(nodes=[Node("GroupNormalization", ["x", "s", "b"], ["y"],
                          {"num_groups": groups, "epsilon": 1e-4})],
              inputs=["x"], outputs=["y"],
              types={"x": TensorType(f32, shape), "y": TensorType(f32, shape)},
              constants={"s": s, "b": b}, opset=18)
    opts = Options.load("generic")
    _, prog = compile_graph(g, opts)
    out = write_bundle(prog, tmp_path / "b", name=opts.name, target=opts.target, opts=opts,
                       model_sha="0" * 64, original_inputs=[])
    got = aicc.load(out, cflags=STRICT_CFLAGS).run({"x": x})["y"]
    xg = x.astype(np.float64).reshape(shape[0], groups, -1)
    mu, var = xg.mean(-1, keepdims=True), xg.var(-1, keepdims=True)
    y = ((xg - mu) / np.sqrt(var + 1e-4)).reshape(shape[0], groups, shape[1] // groups, -1)
    want = (y * s[:, None, None] + b[:, None, None]).reshape(shape)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
