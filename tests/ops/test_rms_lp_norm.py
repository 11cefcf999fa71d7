"""RMSNormalization, LpNormalization, MeanVarianceNormalization, LRN: compiled C vs
onnxruntime (onnx.reference where onnxruntime lacks the op/opset)."""
import numpy as np
import pytest
from onnx import helper

from tests.oracle import assert_close, check, check_node, compile_and_run, make_model, rng


def _rand(r, shape, dt=np.float32):
    return (r.normal(size=shape) * 1.5).astype(dt)


# -- RMSNormalization -------------------------------------------------------------------------

@pytest.mark.parametrize("shape,axis", [((2, 3, 5), -1), ((2, 3, 5), 1), ((2, 3, 5), 0),
                                        ((4, 65), -1), ((1, 7), 0), ((3, 2, 2, 17), 2),
                                        ((5,), 0)])
@pytest.mark.parametrize("const", [True, False])
def test_rms_norm(shape, axis, const, tmp_path):
    r = rng(len(shape) + axis)
    x = _rand(r, shape)
    ax = axis % len(shape)
    s = _rand(r, shape[ax:])
    attrs = {"axis": axis, "epsilon": 1e-3}
    if const:
        check_node("RMSNormalization", {"x": x}, tmp_path, attrs=attrs, initializers={"s": s},
                   opset=23)
    else:
        check_node("RMSNormalization", {"x": x, "s": s}, tmp_path, attrs=attrs, opset=23)


@pytest.mark.parametrize("sshape", [(1,), (), (1, 5), (3, 1), (2, 3, 5), (1, 1, 5), (2, 1, 1)])
def test_rms_norm_broadcast_scale(sshape, tmp_path):
    """A scalar, a partial or a per-row scale (unidirectional broadcast to X)."""
    r = rng(3)
    x, s = _rand(r, (2, 3, 5)), _rand(r, sshape)
    check_node("RMSNormalization", {"x": x, "s": s}, tmp_path, attrs={"axis": 1}, opset=23)


def test_rms_norm_float64_and_zero_rows(tmp_path):
    r = rng(4)
    x = _rand(r, (3, 8), np.float64)
    x[1] = 0
    check_node("RMSNormalization", {"x": x}, tmp_path, initializers={"s": _rand(r, (8,),
               np.float64)}, opset=23)


# -- LpNormalization ------------------------------------------------------------------------

@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("shape,axis", [((2, 3, 4), -1), ((2, 3, 4), 1), ((2, 3, 4), 0),
                                        ((5,), 0), ((3, 65), 0), ((65, 3), 1)])
def test_lp_norm(p, shape, axis, tmp_path):
    x = _rand(rng(p + axis), shape)
    check_node("LpNormalization", {"x": x}, tmp_path, attrs={"p": p, "axis": axis}, opset=22)


@pytest.mark.parametrize("p", [1, 2])
def test_lp_norm_zero_vector(p, tmp_path):
    """A zero vector normalizes to 0 (opset 22 spec); onnx.reference gives NaN there."""
    x = np.array([[0, 0, 0], [3, -4, 0], [1e-30, 0, 0]], np.float32)
    node = helper.make_node("LpNormalization", ["x"], ["y"], p=p, axis=1)
    m = make_model([node], {"x": x}, ["y"], opset=22)
    nrm = np.abs(x).sum(1, keepdims=True) if p == 1 else np.sqrt((x * x).sum(1, keepdims=True))
    with np.errstate(all="ignore"):
        want = np.where(nrm == 0, 0, x / nrm).astype(np.float32)
    assert_close(compile_and_run(m, {"x": x}, tmp_path), {"y": want})


def test_lp_norm_float64_opset1(tmp_path):
    x = _rand(rng(5), (4, 6), np.float64)
    check_node("LpNormalization", {"x": x}, tmp_path, attrs={"axis": 0}, opset=13)


# -- MeanVarianceNormalization -------------------------------------------------------------

@pytest.mark.parametrize("shape,axes", [((3, 3, 3, 1), None), ((2, 3, 4, 5), None),
                                        ((2, 3, 4, 5), [1]), ((2, 3, 4, 5), [0, 3]),
                                        ((2, 3, 4, 5), [-1, -2]), ((4, 7), [0, 1]),
                                        ((4, 7), [1])])
def test_mvn(shape, axes, tmp_path):
    x = _rand(rng(len(shape)), shape) + 2
    if axes is not None:
        check_node("MeanVarianceNormalization", {"x": x}, tmp_path, attrs={"axes": axes},
                   opset=13)
        return
    # default axes: onnx's strict shape inference fails on this node (the function body's
    # Constant <value_ints = @axes> is not bound to the default; the aicc frontend writes
    # the default out, frontend/quirks.py), so the test model is built without inference
    m = _untyped_model(helper.make_node("MeanVarianceNormalization", ["x"], ["y"]), x, 13)
    check(m, {"x": x}, tmp_path)


def _untyped_model(node, x, opset):
    vi = helper.make_tensor_value_info
    g = helper.make_graph([node], "t", [vi("x", helper.np_dtype_to_tensor_dtype(x.dtype),
                                           list(x.shape))],
                          [vi("y", helper.np_dtype_to_tensor_dtype(x.dtype), list(x.shape))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def test_mvn_constant_group(tmp_path):
    """A constant group (with an exactly representable mean) gives 0, not NaN (two-pass
    variance: never negative)."""
    x = np.full((2, 3, 2, 2), 0.75, np.float32)
    m = _untyped_model(helper.make_node("MeanVarianceNormalization", ["x"], ["y"]), x, 13)
    assert_close(compile_and_run(m, {"x": x}, tmp_path), {"y": np.zeros_like(x)})


# -- LRN ----------------------------------------------------------------------------------------
# onnxruntime supports float32, 4-D, odd sizes only; onnx.reference's LRN loops over the batch
# dim instead of the channels (wrong whenever N != C), so the rest is checked against the
# spec's formula in numpy.

def _lrn_ref(x, size, alpha=1e-4, beta=0.75, bias=1.0):
    c = x.shape[1]
    y = np.empty_like(x)
    for k in range(c):
        lo, hi = max(0, k - (size - 1) // 2), min(c - 1, k + size // 2)
        ss = (x[:, lo:hi + 1].astype(np.float64) ** 2).sum(1)
        y[:, k] = x[:, k] / (bias + alpha / size * ss) ** beta
    return y


@pytest.mark.parametrize("size", [1, 3, 5, 9])
@pytest.mark.parametrize("shape", [(2, 7, 3, 4), (2, 16, 2, 2)])
def test_lrn(size, shape, tmp_path):
    x = _rand(rng(size), shape)
    check_node("LRN", {"x": x}, tmp_path, opset=13,
               attrs={"size": size, "alpha": 2e-2, "beta": 0.7, "bias": 1.5})


@pytest.mark.parametrize("size,shape,dt", [(2, (2, 7, 3, 4), np.float32),
                                           (4, (1, 5, 6), np.float32),
                                           (8, (3, 6), np.float32),
                                           (3, (1, 6, 4, 4), np.float64),
                                           (6, (2, 3, 2, 2, 2), np.float64)])
def test_lrn_spec(size, shape, dt, tmp_path):
    x = _rand(rng(size), shape, dt)
    node = helper.make_node("LRN", ["x"], ["y"], size=size, alpha=2e-2, beta=0.7, bias=1.5)
    m = make_model([node], {"x": x}, ["y"], opset=13)
    assert_close(compile_and_run(m, {"x": x}, tmp_path),
                 {"y": _lrn_ref(x, size, 2e-2, 0.7, 1.5).astype(dt)})
