"""Reductions and ArgMax/ArgMin: compiled C vs onnxruntime."""
import numpy as np
import pytest
from onnx import helper

from tests.oracle import assert_close, check_node, compile_and_run, make_model, rng

REDUCE = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
          "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp"]

AXES = [None, [0], [-1], [1], [0, 2], [1, 2], [-3, -1], [0, 1, 2], [2, 0]]


def _data(op, shape, dt=np.float32, seed=0):
    r = rng(seed)
    if op == "ReduceProd":
        return r.uniform(0.6, 1.5, size=shape).astype(dt)
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


def test_runtime_axes_rejected(tmp_path):
    from aicc.errors import UnsupportedError
    feeds = {"x": np.ones((2, 3), np.float32), "axes": np.array([1], np.int64)}
    model = make_model([helper.make_node("ReduceSum", ["x", "axes"], ["y"])], feeds, ["y"],
                       opset=13, output_types={"y": (np.float32, [2, 1])})
    with pytest.raises(UnsupportedError, match="axes computed at run time"):
        compile_and_run(model, feeds, tmp_path)
