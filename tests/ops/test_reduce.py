"""Reductions (constant and run-time axes) and ArgMax/ArgMin: compiled C vs onnxruntime."""
import numpy as np
import pytest
from onnx import helper

from aicc.targets import runnable_targets
from tests.oracle import (assert_close, check, check_node, compile_and_run, make_model,
                          reference, rng)

REDUCE = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
          "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp", "ReduceLogSum"]

TARGETS = [t for t in runnable_targets(derived=False) if t in ("generic", "x86-avx2",
                                                                 "x86-avx512")]
AXES = [None, [0], [-1], [1], [0, 2], [1, 2], [-3, -1], [0, 1, 2], [2, 0]]


def _data(op, shape, dt=np.float32, seed=0):
    r = rng(seed)
    if op == "ReduceProd":
        return r.uniform(0.6, 1.5, size=shape).astype(dt)
    if op == "ReduceLogSum":
        return r.uniform(0.1, 2.0, size=shape).astype(dt)
    return (r.normal(size=shape) * 2).astype(dt)


def _run(op, x, tmp_path, axes=None, opset=18, keepdims=None, noop=None, rtol=1e-4, atol=1e-5):
    attrs = {}
    if keepdims is not None:
        attrs["keepdims"] = keepdims
    if noop is not None:
        attrs["noop_with_empty_axes"] = noop
    axes_input = opset >= (13 if op == "ReduceSum" else 18)
    inits = {}
    if axes is not None:
        if axes_input:
            inits["axes"] = np.array(axes, np.int64)
        else:
            attrs["axes"] = axes
    return check_node(op, {"x": x}, tmp_path, attrs=attrs, initializers=inits, opset=opset,
                      rtol=rtol, atol=atol)


@pytest.mark.parametrize("op", REDUCE)
@pytest.mark.parametrize("axes", AXES)
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_axes(op, axes, keepdims, tmp_path):
    _run(op, _data(op, (3, 5, 4)), tmp_path, axes=axes, keepdims=keepdims)


@pytest.mark.parametrize("op", REDUCE)
@pytest.mark.parametrize("opset", [11, 13])
def test_reduce_attr_axes(op, opset, tmp_path):
    """axes as an attribute (ReduceSum < 13, others < 18) or input (ReduceSum 13)."""
    _run(op, _data(op, (2, 3, 17)), tmp_path, axes=[-2], opset=opset)
    _run(op, _data(op, (2, 3, 17)), tmp_path, axes=None, opset=opset, keepdims=0)


@pytest.mark.parametrize("op", REDUCE)
@pytest.mark.parametrize("shape,axes", [((2, 3, 4, 5), [0, 2]), ((2, 3, 4, 5), [1, 3]),
                                        ((2, 3, 4, 5), [0, 1, 3]), ((65, 17), [0]),
                                        ((1, 65, 1, 3), [1]), ((4, 1, 6), [1]),
                                        ((2, 3, 1, 5), [0, 2, 3])])
def test_reduce_shapes(op, shape, axes, tmp_path):
    _run(op, _data(op, shape, seed=1), tmp_path, axes=axes)


@pytest.mark.parametrize("op", REDUCE)
def test_reduce_noop_with_empty_axes(op, tmp_path):
    x = _data(op, (3, 4), seed=2)
    _run(op, x, tmp_path, axes=[], noop=1)
    _run(op, x, tmp_path, axes=None, noop=1)
    _run(op, x, tmp_path, axes=[], noop=0, keepdims=0)


@pytest.mark.parametrize("op", REDUCE)
def test_reduce_float64(op, tmp_path):
    _run(op, _data(op, (3, 4, 5), np.float64, seed=3), tmp_path, axes=[1])
    _run(op, _data(op, (3, 4, 5), np.float64, seed=3), tmp_path, axes=[2])


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"])
@pytest.mark.parametrize("dt", [np.int32, np.int64])
def test_reduce_int(op, dt, tmp_path):
    r = rng(4)
    x = r.integers(-9, 9, size=(3, 4, 5)).astype(dt)
    for axes in ([1], [2], [0, 2], None):
        _run(op, x, tmp_path, axes=axes)


def test_reduce_long_rows(tmp_path):
    # 4096 values per sum: float32 sums in ascending order differ from onnxruntime's
    # (blocked/pairwise) order by ~sqrt(n) * eps * sum|x|; atol loosened to 1e-4 for that.
    x = _data("ReduceSum", (3, 4096), seed=5)
    for op in ("ReduceSum", "ReduceMean", "ReduceL2", "ReduceLogSumExp"):
        _run(op, x, tmp_path, axes=[1], atol=1e-4)
        _run(op, np.ascontiguousarray(x.T), tmp_path, axes=[0], atol=1e-4)


def test_reduce_middle_axis_blocked_as_accurate_as_onnxruntime(tmp_path):
    """A long sum over a middle axis (a channel-last spatial mean, [1, H, W, C] over H and W,
    as layout-nhwc makes of a squeeze-excite block's mean) runs in blocks of 64 rows summed
    apart. Against float64 (mean absolute error): no further than onnxruntime's mean of the
    same values over contiguous planes ([1, C, H, W] over H and W: the model onnxruntime
    runs), and well under onnxruntime's own middle-axis sum (one ascending chain)."""
    r = rng(11)
    x = (np.abs(r.normal(size=(1, 112, 112, 24))) * 3).astype(np.float32)
    x64 = x.astype(np.float64)
    planes = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    for op, exact in (("ReduceMean", x64.mean(axis=(1, 2), keepdims=True)),
                      ("ReduceSum", x64.sum(axis=(1, 2), keepdims=True))):
        got, chain = _run(op, x, tmp_path, axes=[1, 2], atol=1e-4)
        node = helper.make_node(op, ["x", "axes"], ["y"])
        nchw = reference(make_model([node], {"x": planes}, ["y"],
                                    {"axes": np.array([2, 3], np.int64)}, opset=18),
                         {"x": planes})["y"].transpose(0, 2, 3, 1)
        err = lambda v: float(np.abs(np.asarray(v, np.float64) - exact).mean())  # noqa: E731
        assert err(got["y0"]) <= err(nchw) * 1.25, (op, err(got["y0"]), err(nchw))
        assert err(got["y0"]) < err(chain["y0"]) / 3, (op, err(got["y0"]), err(chain["y0"]))


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceProd", "ReduceL2", "ReduceLogSumExp",
                                "ReduceMean"])
def test_reduce_nan_inf(op, tmp_path):
    x = np.array([[1, np.nan, 3], [np.inf, 1, 2], [-np.inf, 0, 1], [-np.inf, -np.inf, -np.inf],
                  [np.inf, np.inf, 0], [1e30, 1e30, -1e30]], np.float32)
    _run(op, x, tmp_path, axes=[1])
    _run(op, np.ascontiguousarray(x.T), tmp_path, axes=[0])


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
def test_reduce_max_nan(op, tmp_path):
    """NaN propagates (numpy / onnx.reference); onnxruntime propagates it only when the
    reduced axis is not the contiguous trailing one, so compare with numpy here."""
    x = np.array([[1, np.nan, 3], [np.inf, 1, 2], [-np.inf, 0, 1]], np.float32)
    fn = np.max if op == "ReduceMax" else np.min
    for axis in (0, 1):
        node_model = make_model(
            [helper.make_node(op, ["x", "axes"], ["y"], keepdims=0)],
            {"x": x}, ["y"], {"axes": np.array([axis], np.int64)}, opset=18)
        got = compile_and_run(node_model, {"x": x}, tmp_path)
        assert_close(got, {"y": fn(x, axis=axis)})


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
def test_reduce_max_long_rows(op, target, tmp_path):
    """Contiguous rows of 1 to 1000 values (the 32 running extrema, the lanes and the tail):
    numpy's values; a NaN anywhere in a row (a lane's first value, later, the tail) gives NaN,
    +-Inf and the largest floats kept."""
    fn = np.max if op == "ReduceMax" else np.min
    for d in (1, 31, 32, 33, 64, 95, 1000):
        x = rng(d).normal(size=(6, d)).astype(np.float32) * 1e3
        x[1, -1] = np.nan
        x[2, 0] = np.nan
        x[3, d // 2] = np.nan
        x[4, d - 1] = np.inf if op == "ReduceMax" else -np.inf
        x[5, :] = np.float32(3.4e38) if op == "ReduceMin" else np.float32(-3.4e38)
        m = make_model([helper.make_node(op, ["x", "axes"], ["y"], keepdims=0)], {"x": x},
                       ["y"], {"axes": np.array([1], np.int64)}, opset=18)
        got = compile_and_run(m, {"x": x}, tmp_path, target=target)["y"]
        np.testing.assert_array_equal(got, fn(x, axis=1), err_msg=str(d))


@pytest.mark.parametrize("op", REDUCE)
def test_reduce_empty_axis(op, tmp_path):
    """Reducing a zero-size axis gives the reduction's identity (as onnxruntime), except
    ReduceMean: 0/0 = NaN (onnxruntime returns 0; ONNX leaves it undefined)."""
    x = np.zeros((2, 0, 3), np.float32)
    if op == "ReduceMean":
        node_model = make_model(
            [helper.make_node(op, ["x", "axes"], ["y"], keepdims=0)],
            {"x": x}, ["y"], {"axes": np.array([1], np.int64)}, opset=18)
        got = compile_and_run(node_model, {"x": x}, tmp_path)["y"]
        assert got.shape == (2, 3) and np.isnan(got).all()
        return
    _run(op, x, tmp_path, axes=[1], keepdims=0)
    _run(op, np.zeros((0, 3), np.float32), tmp_path, axes=[1])      # empty output


# -- ArgMax / ArgMin -----------------------------------------------------------------------

@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2])
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("last", [0, 1])
def test_argmax(op, axis, keepdims, last, tmp_path):
    r = rng(6)
    x = r.integers(-3, 3, size=(3, 17, 4)).astype(np.float32)     # many ties
    check_node(op, {"x": x}, tmp_path, opset=13,
               attrs={"axis": axis, "keepdims": keepdims, "select_last_index": last})


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("dt", [np.int32, np.int64, np.float64])
def test_argmax_dtypes(op, dt, tmp_path):
    r = rng(7)
    x = r.integers(-50, 50, size=(4, 65)).astype(dt)
    check_node(op, {"x": x}, tmp_path, opset=13, attrs={"axis": 1})
    check_node(op, {"x": x}, tmp_path, opset=11, attrs={"axis": 0, "keepdims": 0})


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_argmax_nan(op, tmp_path):
    x = np.array([[np.nan, 1, 3], [4, 5, np.nan], [2, np.nan, -1]], np.float32)
    check_node(op, {"x": x}, tmp_path, opset=13, attrs={"axis": 1})
    check_node(op, {"x": x}, tmp_path, opset=13, attrs={"axis": 0})


# -- run-time axes ---------------------------------------------------------------------------

def _out_shape(shape, axes, keepdims, noop):
    rank = len(shape)
    red = {a % rank for a in axes} if axes else (set() if noop else set(range(rank)))
    if keepdims:
        return [1 if d in red else n for d, n in enumerate(shape)]
    return [n for d, n in enumerate(shape) if d not in red]


def _run_rt(op, x, axes, tmp_path, keepdims=1, noop=0, opset=18, atol=1e-5, want=None):
    """axes as a graph input (fed at run time); the output shape declared statically."""
    a = np.array(axes, np.int64)
    feeds = {"x": x, "axes": a}
    node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=keepdims,
                            noop_with_empty_axes=noop)
    model = make_model([node], feeds, ["y"], opset=opset,
                       output_types={"y": (x.dtype, _out_shape(x.shape, axes, keepdims, noop))})
    if want is None:
        return check(model, feeds, tmp_path, atol=atol)
    got = compile_and_run(model, feeds, tmp_path)
    assert_close(got, {"y": want})
    return got


@pytest.mark.parametrize("op", REDUCE)
@pytest.mark.parametrize("axes", [[1], [-1], [2, 0], [0, 1, 2], [1, -2]])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_runtime_axes(op, axes, keepdims, tmp_path):
    _run_rt(op, _data(op, (3, 5, 4), seed=8), axes, tmp_path, keepdims=keepdims)


@pytest.mark.parametrize("op", REDUCE)
@pytest.mark.parametrize("shape,axes", [((7,), [0]), ((2, 3, 4, 5), [1, 3]), ((1, 9, 1), [0, 2]),
                                        ((4, 1, 6), [1]), ((2, 0, 3), [1]), ((2, 0, 3), [2]),
                                        ((33, 3), [0])])
def test_reduce_runtime_axes_shapes(op, shape, axes, tmp_path):
    x = _data(op, shape, seed=9)
    if op == "ReduceMean" and 0 in shape and 0 in [shape[a] for a in axes]:
        return      # 0/0: onnxruntime 0, aicc NaN (see test_reduce_empty_axis)
    _run_rt(op, x, axes, tmp_path, keepdims=1)
    _run_rt(op, x, axes, tmp_path, keepdims=0)


@pytest.mark.parametrize("op", REDUCE)
def test_reduce_runtime_axes_float64(op, tmp_path):
    _run_rt(op, _data(op, (3, 4, 5), np.float64, seed=10), [0, 2], tmp_path)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"])
@pytest.mark.parametrize("dt", [np.int32, np.int64])
def test_reduce_runtime_axes_int(op, dt, tmp_path):
    x = rng(11).integers(-9, 9, size=(3, 4, 5)).astype(dt)
    _run_rt(op, x, [1], tmp_path, keepdims=0)
    _run_rt(op, x, [0, -1], tmp_path)


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
def test_reduce_bool(op, tmp_path):
    x = rng(12).integers(0, 2, size=(4, 3, 5)).astype(bool)
    x[0] = True
    x[1] = False
    fn = np.any if op == "ReduceMax" else np.all
    for axes in ([1], [0, 2], [-1]):
        for keepdims in (0, 1):
            want = fn(x, axis=tuple(axes), keepdims=bool(keepdims))
            _run_rt(op, x, axes, tmp_path, keepdims=keepdims, opset=20, want=want)
            m = make_model([helper.make_node(op, ["x", "axes"], ["y"], keepdims=keepdims)],
                           {"x": x}, ["y"], {"axes": np.array(axes, np.int64)}, opset=20)
            assert_close(compile_and_run(m, {"x": x}, tmp_path), {"y": want})
    e = np.zeros((2, 0), bool)
    _run_rt(op, e, [1], tmp_path, opset=20, want=fn(e, axis=1, keepdims=True))


def test_reduce_runtime_noop_and_empty_axes(tmp_path):
    """A statically empty axes input is compile-time: all axes, or the identity map with
    noop_with_empty_axes."""
    x = _data("ReduceSum", (3, 4), seed=13)
    for op in ("ReduceSum", "ReduceMean", "ReduceL1", "ReduceLogSumExp"):
        _run_rt(op, x, [], tmp_path, keepdims=1)
        _run_rt(op, x, [], tmp_path, keepdims=0)
        _run_rt(op, x, [], tmp_path, noop=1)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceLogSumExp", "ReduceMax"])
def test_reduce_runtime_invalid_axes(op, tmp_path):
    """Axes out of range, or not matching the static output shape: NaN output, no UB."""
    x = _data(op, (3, 4, 5), seed=14)
    node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=1)
    for axes in ([3], [-4], [2], [0, 1], [-9223372036854775807 - 1]):
        feeds = {"x": x, "axes": np.array(axes, np.int64)}
        model = make_model([node], feeds, ["y"], opset=18,
                           output_types={"y": (np.float32, [3, 1, 5])})
        got = compile_and_run(model, feeds, tmp_path)["y"]
        assert got.shape == (3, 1, 5) and np.isnan(got).all(), axes
    # keepdims=0: the kept dims must match the declared output in order
    node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=0)
    feeds = {"x": x, "axes": np.array([1], np.int64)}
    model = make_model([node], feeds, ["y"], opset=18, output_types={"y": (np.float32, [3, 5])})
    assert_close(compile_and_run(model, feeds, tmp_path), reference(model, feeds))
    feeds["axes"] = np.array([0], np.int64)
    assert np.isnan(compile_and_run(model, feeds, tmp_path)["y"]).all()


def test_reduce_runtime_axes_chain(tmp_path):
    """A run-time-axes reduction feeding unary ops: onnx leaves the intermediate unshaped;
    the shapes flow back from the declared output (frontend/backprop_shapes.py)."""
    x = _data("ReduceSum", (3, 4, 5), seed=15)
    feeds = {"x": x, "axes": np.array([1], np.int64)}
    nodes = [helper.make_node("Mul", ["x", "x"], ["sq"]),
             helper.make_node("ReduceSum", ["sq", "axes"], ["s"], keepdims=0),
             helper.make_node("Sqrt", ["s"], ["r"]),
             helper.make_node("CastLike", ["r", "x"], ["y"])]
    model = make_model(nodes, feeds, ["y"], opset=18, output_types={"y": (np.float32, [3, 5])})
    check(model, feeds, tmp_path)
