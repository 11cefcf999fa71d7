"""Gather, GatherElements, GatherND and Slice: compiled C (data and, where allowed, indices fed
at run time) against onnxruntime; aicc's documented out-of-range index behaviour against numpy."""
import numpy as np
import pytest
from onnx import helper

from aicc.errors import UnsupportedError
from tests.oracle import check_node, compile_and_run, make_model, rng
from tests.ops.test_shape_ops import DTYPES, data, i64


# -- Gather -------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("axis", [0, 1, 2, -1])
@pytest.mark.parametrize("ishape", [(), (4,), (2, 3)])
def test_gather(dt, axis, ishape, tmp_path):
    x = data((3, 4, 5), dt)
    n = x.shape[axis]
    idx = rng(7).integers(-n, n, size=ishape).astype(np.int64)
    check_node("Gather", {"x": x, "i": idx}, tmp_path, attrs={"axis": axis})


@pytest.mark.parametrize("idt", [np.int32, np.int64])
def test_gather_index_dtypes_and_constant(idt, tmp_path):
    x = data((6, 3), np.float32)
    check_node("Gather", {"x": x, "i": np.array([5, -6, 0, 2], idt)}, tmp_path)
    # embedding lookup: constant table, run-time ids
    table = data((10, 4), np.float32, seed=3)
    ids = np.array([[1, 9, -1], [0, 0, 3]], idt)
    check_node("Gather", {"ids": ids}, tmp_path, initializers={"table": table},
               input_order=["table", "ids"])
    check_node("Gather", {"x": x}, tmp_path, initializers={"i": np.array(-1, idt)},
               attrs={"axis": 1})


def test_gather_empty_indices(tmp_path):
    check_node("Gather", {"x": data((3, 4), np.float32), "i": np.zeros((0, 2), np.int64)},
               tmp_path, attrs={"axis": 1})


def _run_one(op, x, idx, tmp_path, **attrs):
    node = helper.make_node(op, ["x", "i"], ["y"], **attrs)
    model = make_model([node], {"x": x, "i": idx}, ["y"])
    return compile_and_run(model, {"x": x, "i": idx}, tmp_path)["y"]


def test_gather_out_of_range_gives_zeros(tmp_path):
    """aicc's documented behaviour (onnxruntime raises): never read out of bounds, write 0."""
    x = data((4, 3), np.float32) + 10
    idx = np.array([0, 4, -5, 3, 1000, -1, np.iinfo(np.int64).min, np.iinfo(np.int64).max])
    got = _run_one("Gather", x, idx, tmp_path, axis=0)
    want = np.zeros((8, 3), np.float32)
    for k, j in enumerate(idx):
        if -4 <= j < 4:
            want[k] = x[j]
    np.testing.assert_array_equal(got, want)
    got = _run_one("Gather", x, np.array([[2, 3], [-3, 7]], np.int32), tmp_path, axis=1)
    want = np.stack([x[:, 2], np.zeros(4, np.float32), x[:, 0], np.zeros(4, np.float32)], 1)
    np.testing.assert_array_equal(got.reshape(4, 4), want)


# -- GatherElements / GatherND ----------------------------------------------------------------

@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("ishape", [(3, 4, 5), (2, 4, 3), (3, 1, 5)])
def test_gather_elements(dt, axis, ishape, tmp_path):
    x = data((3, 4, 5), dt)
    n = x.shape[axis]
    idx = rng(8).integers(-n, n, size=ishape).astype(np.int64)
    check_node("GatherElements", {"x": x, "i": idx}, tmp_path, attrs={"axis": axis})


def test_gather_elements_out_of_range(tmp_path):
    x = data((2, 3), np.int64) + 1000
    idx = np.array([[0, 5, -1], [-3, 2, -4]], np.int64)
    got = _run_one("GatherElements", x, idx, tmp_path, axis=0)
    want = np.array([[x[0, 0], 0, x[1, 2]], [0, 0, 0]], np.int64)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("ishape,b", [((2, 2), 0), ((3, 1), 0), ((2, 3), 0), ((4, 2, 1), 0),
                                      ((2, 1), 1), ((2, 3, 2), 1), ((2, 4, 1), 2)])
def test_gather_nd(dt, ishape, b, tmp_path):
    x = data((2, 4, 3), dt)
    k = ishape[-1]
    dims = x.shape[b:b + k]
    r = rng(9)
    idx = np.stack([r.integers(-d, d, size=ishape[:-1]) for d in dims], -1).astype(np.int64)
    if b == 2:
        x = data((2, 4, 3, 5), dt)
        idx = np.stack([r.integers(-3, 3, size=ishape[:-1])], -1).astype(np.int64)
    check_node("GatherND", {"x": x, "i": idx}, tmp_path, attrs={"batch_dims": b}, opset=13)


def test_gather_nd_out_of_range(tmp_path):
    x = data((3, 2), np.float32) + 5
    idx = np.array([[0, 1], [3, 0], [-1, -3], [2, 1]], np.int64)
    got = _run_one("GatherND", x, idx, tmp_path)
    np.testing.assert_array_equal(got, np.array([x[0, 1], 0, 0, x[2, 1]], np.float32))


# -- Slice --------------------------------------------------------------------------------------

BIG = 2 ** 63 - 1
SLICES = [  # starts, ends, axes, steps
    ([1], [3], [0], None),
    ([0, 1], [2, -1], None, None),
    ([-2], [BIG], [-1], None),
    ([4], [-BIG - 1], [2], [-1]),
    ([-1, 0], [-100, 10], [1, 2], [-2, 3]),
    ([10], [20], [0], None),                       # empty: start clamped to the end
    ([-100], [100], [1], [2]),
    ([3, 1, 2], [0, 4, -6], [0, 1, 2], [-1, 2, -2]),
    ([0], [1], [1], None),
    ([2], [2], [2], None),
]


@pytest.mark.parametrize("starts,ends,axes,steps", SLICES)
@pytest.mark.parametrize("dt", DTYPES)
def test_slice(starts, ends, axes, steps, dt, tmp_path):
    x = data((4, 5, 6), dt)
    inits = {"s": i64(*starts), "e": i64(*ends)}
    order = ["x", "s", "e"]
    if axes is not None:
        inits["a"] = i64(*axes)
        order.append("a")
    if steps is not None:
        if axes is None:
            inits["a"] = i64(*range(len(starts)))
            order.append("a")
        inits["t"] = i64(*steps)
        order.append("t")
    check_node("Slice", {"x": x}, tmp_path, initializers=inits, input_order=order)


def test_slice_int32_params(tmp_path):
    x = data((4, 5), np.float32)
    inits = {"s": np.array([3, 0], np.int32), "e": np.array([0, 5], np.int32),
             "a": np.array([0, 1], np.int32), "t": np.array([-1, 2], np.int32)}
    check_node("Slice", {"x": x}, tmp_path, initializers=inits)


@pytest.mark.parametrize("attrs", [{"starts": [1], "ends": [3]},
                                   {"starts": [0, -3], "ends": [100, -1], "axes": [0, 2]},
                                   {"starts": [1], "ends": [BIG], "axes": [1]}])
def test_slice_opset1(attrs, tmp_path):
    check_node("Slice", {"x": data((4, 5, 6), np.float32)}, tmp_path, attrs=attrs, opset=9)


def test_slice_runtime_starts_need_static_output(tmp_path):
    with pytest.raises(UnsupportedError, match="no static shape"):
        check_node("Slice", {"x": data((4, 5), np.float32), "s": i64(1)}, tmp_path,
                   initializers={"e": i64(3)})
