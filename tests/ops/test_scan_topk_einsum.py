"""CumSum/CumProd, TopK, Einsum: compiled C vs onnxruntime (onnx.reference where
onnxruntime lacks the op/opset, e.g. CumProd at opset 26)."""
import numpy as np
import pytest
from onnx import helper

from tests.oracle import assert_close, check, check_node, compile_and_run, make_model, rng


# -- CumSum / CumProd ---------------------------------------------------------------------------

def _scan_data(op, shape, dt, seed=0):
    r = rng(seed)
    if dt in (np.float32, np.float64):
        lo, hi = (0.7, 1.3) if op == "CumProd" else (-2, 2)
        return r.uniform(lo, hi, size=shape).astype(dt)
    if np.dtype(dt).kind == "u":
        return r.integers(0, 5, size=shape).astype(dt)
    return r.integers(-4, 5, size=shape).astype(dt)


@pytest.mark.parametrize("op,opset", [("CumSum", 14), ("CumProd", 26)])
@pytest.mark.parametrize("axis", [0, 1, -1, 2])
@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("runtime", [False, True])
def test_scan(op, opset, axis, exclusive, reverse, runtime, tmp_path):
    x = _scan_data(op, (3, 4, 5), np.float32, seed=axis + 3)
    a = np.array(axis, np.int64)
    attrs = {"exclusive": exclusive, "reverse": reverse}
    if runtime:
        check_node(op, {"x": x, "axis": a}, tmp_path, attrs=attrs, opset=opset)
    else:
        check_node(op, {"x": x}, tmp_path, attrs=attrs, initializers={"axis": a}, opset=opset)


@pytest.mark.parametrize("op,opset", [("CumSum", 14), ("CumProd", 26)])
@pytest.mark.parametrize("dt", [np.float64, np.int32, np.int64, np.uint32, np.uint64])
def test_scan_dtypes(op, opset, dt, tmp_path):
    x = _scan_data(op, (4, 9), dt, seed=1)
    for axis, adt in ((1, np.int32), (0, np.int64)):
        check_node(op, {"x": x, "axis": np.array(axis, adt)}, tmp_path, opset=opset,
                   attrs={"exclusive": 1, "reverse": axis})


@pytest.mark.parametrize("shape", [(7,), (1, 65), (65, 1), (2, 1, 3)])
def test_scan_shapes(shape, tmp_path):
    x = _scan_data("CumSum", shape, np.float32, seed=2)
    for axis in range(len(shape)):
        check_node("CumSum", {"x": x}, tmp_path, initializers={"axis": np.array(axis)}, opset=11)


def test_scan_int_wraps(tmp_path):
    """Integer overflow wraps around (unsigned arithmetic in C, as numpy)."""
    x = np.array([2 ** 30, 2 ** 30, 2 ** 30, 3], np.int32)
    for op, opset, fn in (("CumSum", 14, np.cumsum), ("CumProd", 26, np.cumprod)):
        m = make_model([helper.make_node(op, ["x", "axis"], ["y"])], {"x": x}, ["y"],
                       {"axis": np.array(0, np.int64)}, opset=opset)
        assert_close(compile_and_run(m, {"x": x}, tmp_path), {"y": fn(x, dtype=np.int32)})


def test_scan_runtime_axis_out_of_range(tmp_path):
    x = _scan_data("CumSum", (3, 4), np.float32)
    m = make_model([helper.make_node("CumSum", ["x", "axis"], ["y"])],
                   {"x": x, "axis": np.array(0, np.int64)}, ["y"], opset=14)
    for a in (2, -3, -2 ** 63):
        got = compile_and_run(m, {"x": x, "axis": np.array(a, np.int64)}, tmp_path)["y"]
        assert np.isnan(got).all()
    got = compile_and_run(m, {"x": x, "axis": np.array(-2, np.int64)}, tmp_path)["y"]
    np.testing.assert_allclose(got, np.cumsum(x, axis=0), rtol=1e-5)


# -- TopK ----------------------------------------------------------------------------------------

def _topk(x, k, tmp_path, runtime=False, opset=11, **attrs):
    kk = np.array([k], np.int64)
    if not runtime:
        return check_node("TopK", {"x": x}, tmp_path, attrs=attrs, initializers={"k": kk},
                          n_outputs=2, opset=opset)
    shape = list(x.shape)
    shape[attrs.get("axis", -1)] = k
    feeds = {"x": x, "k": kk}
    m = make_model([helper.make_node("TopK", ["x", "k"], ["v", "i"], **attrs)], feeds,
                   ["v", "i"], opset=opset,
                   output_types={"v": (x.dtype, shape), "i": (np.int64, shape)})
    return check(m, feeds, tmp_path)


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("largest", [0, 1])
@pytest.mark.parametrize("k", [1, 3, 5])
def test_topk(axis, largest, k, tmp_path):
    x = rng(k).normal(size=(5, 6, 7)).astype(np.float32)
    _topk(x, k, tmp_path, axis=axis, largest=largest)


@pytest.mark.parametrize("largest", [0, 1])
def test_topk_ties(largest, tmp_path):
    """Equal values: the lower index first (the spec's tie-break)."""
    x = rng(1).integers(-2, 3, size=(4, 33)).astype(np.float32)
    _topk(x, 20, tmp_path, largest=largest)
    _topk(np.ascontiguousarray(x.T), 4, tmp_path, axis=0, largest=largest)


@pytest.mark.parametrize("dt", [np.float64, np.int8, np.int32, np.int64, np.uint8, np.uint64])
def test_topk_dtypes(dt, tmp_path):
    r = rng(2)
    x = (r.normal(size=(3, 50)) * 40).astype(dt) if np.dtype(dt).kind != "u" else \
        r.integers(0, 200, size=(3, 50)).astype(dt)
    _topk(x, 7, tmp_path)
    _topk(x, 50, tmp_path, largest=0)


def test_topk_runtime_k_and_opsets(tmp_path):
    x = rng(3).normal(size=(4, 9)).astype(np.float32)
    _topk(x, 4, tmp_path, runtime=True)
    _topk(x, 4, tmp_path, runtime=True, largest=0, axis=0)
    _topk(x, 2, tmp_path, opset=10)
    m = make_model([helper.make_node("TopK", ["x"], ["v", "i"], k=3, axis=1)], {"x": x},
                   ["v", "i"], opset=9)
    check(m, {"x": x}, tmp_path)


def test_topk_runtime_k_mismatch(tmp_path):
    """K at run time different from the static k: NaN values, indices -1 (no UB)."""
    x = rng(4).normal(size=(4, 9)).astype(np.float32)
    feeds = {"x": x, "k": np.array([3], np.int64)}
    m = make_model([helper.make_node("TopK", ["x", "k"], ["v", "i"])], feeds, ["v", "i"],
                   opset=11, output_types={"v": (np.float32, [4, 3]), "i": (np.int64, [4, 3])})
    feeds["k"] = np.array([5], np.int64)
    got = compile_and_run(m, feeds, tmp_path)
    assert np.isnan(got["v"]).all() and (got["i"] == -1).all()


def test_topk_nan(tmp_path):
    """NaN sorts above every number: first with largest=1, last with largest=0."""
    x = np.array([[1, np.nan, 3, -np.inf, np.inf, np.nan, 0]], np.float32)
    for largest, order in ((1, [1, 5, 4, 2, 0, 6, 3]), (0, [3, 6, 0, 2, 4, 1, 5])):
        m = make_model([helper.make_node("TopK", ["x", "k"], ["v", "i"], largest=largest)],
                       {"x": x}, ["v", "i"], {"k": np.array([7], np.int64)}, opset=11)
        got = compile_and_run(m, {"x": x}, tmp_path)
        np.testing.assert_array_equal(got["i"], [order])
        np.testing.assert_array_equal(got["v"], x[:, order])


@pytest.mark.parametrize("largest", [0, 1])
@pytest.mark.parametrize("k", [1, 5, 32, 33])
def test_topk_selection_path(k, largest, tmp_path):
    """k <= 32 (one scan keeping the first k sorted) and k = 33 (merge sort) on rows of 100
    with ties, NaN and +-Inf: the stable order (NaN above every number, the lower index
    first among equals), as numpy's stable sort; without NaN also as onnxruntime."""
    r = rng(k + 10 * largest)
    x = r.integers(-20, 20, size=(6, 100)).astype(np.float32)
    _topk(x, k, tmp_path, largest=largest)
    x[0, [3, 50, 99]] = np.nan
    x[1, [0, 7]] = [np.inf, -np.inf]
    x[2, :] = 1.0
    m = make_model([helper.make_node("TopK", ["x", "k"], ["v", "i"], largest=largest)],
                   {"x": x}, ["v", "i"], {"k": np.array([k], np.int64)}, opset=11)
    got = compile_and_run(m, {"x": x}, tmp_path)
    nan = np.isnan(x)
    key = np.where(nan, 0.0, -x if largest else x)
    order = np.stack([np.lexsort((key[j], ~nan[j] if largest else nan[j]))
                      for j in range(x.shape[0])])[:, :k]
    np.testing.assert_array_equal(got["i"], order)
    np.testing.assert_array_equal(got["v"], np.take_along_axis(x, order, axis=1))


# -- Einsum ----------------------------------------------------------------------------------

@pytest.mark.parametrize("eq,shapes", [
    ("bij,bjk->bik", [(5, 2, 3), (5, 3, 4)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("ij->ji", [(3, 4)]),
    ("ij->i", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("i,i", [(5,), (5,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("...ii->...i", [(3, 5, 5)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (1, 3, 4, 2)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 8), (2, 3, 5, 8)]),
    ("ijk,ikl,ilm->ijm", [(2, 3, 4), (2, 4, 2), (2, 2, 3)]),
    ("a b c -> c a b", [(2, 3, 4)]),
    ("i...->...", [(3, 2, 2)]),
    ("->", [()]),
    ("i,->i", [(3,), ()]),
    ("ij,ij->ij", [(3, 0), (3, 0)]),
    ("ij,jk->ik", [(2, 0), (0, 3)]),
])
def test_einsum(eq, shapes, tmp_path):
    r = rng(len(eq))
    inputs = {f"x{k}": r.normal(size=s).astype(np.float32) for k, s in enumerate(shapes)}
    check_node("Einsum", inputs, tmp_path, attrs={"equation": eq}, opset=12)


@pytest.mark.parametrize("dt", [np.float64, np.int32, np.int64])
def test_einsum_dtypes(dt, tmp_path):
    r = rng(5)
    a = (r.normal(size=(2, 3, 4)) * 5).astype(dt)
    b = (r.normal(size=(2, 4, 3)) * 5).astype(dt)
    check_node("Einsum", {"a": a, "b": b}, tmp_path, attrs={"equation": "bij,bjk->bik"},
               opset=12)
    check_node("Einsum", {"a": a}, tmp_path, attrs={"equation": "bij->jb"}, opset=12)


def test_einsum_rejects():
    from aicc.ops.einsum import parse
    for eq, shapes in (("ij,jk->ik", [(2, 3), (4, 5)]), ("ij->ii", [(2, 2)]),
                       ("ij", [(2, 3, 4)]), ("i,j", [(2,)]), ("i->k", [(2,)])):
        with pytest.raises(ValueError):
            parse(eq, shapes)
