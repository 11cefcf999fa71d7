"""The vectorizable float32 Erf (activations._erf: piecewise polynomials instead of libm's
erff; on the SIMD targets kernels/vmath/erf.py's FMA form) and the SIMD Softmax rows (softmax.py: vector exp) on every runnable target, against
float64 references on dense ranges, plus the special values."""
import math

import numpy as np
import pytest
from onnx import helper

from aicc.targets import runnable_targets
from tests.oracle import check_node, compile_and_run, make_model, rng

TARGETS = runnable_targets(derived=False)


@pytest.mark.parametrize("target", TARGETS)
def test_erf_dense_accuracy(target, tmp_path):
    """Within 1.5e-7 absolute of the exact erf over [-6, 6] and tiny magnitudes (relative
    3e-7 there), across every piece boundary (0.875, 2.25, 4)."""
    x = np.concatenate([np.linspace(-6, 6, 120001), np.logspace(-38, 0, 2000),
                        -np.logspace(-38, 0, 2000),
                        np.nextafter(np.float32([0.875, 2.25, 4.0]), np.float32(0)),
                        np.float32([0.875, 2.25, 4.0])]).astype(np.float32)
    m = make_model([helper.make_node("Erf", ["x"], ["y"])], {"x": x}, ["y"])
    y = compile_and_run(m, {"x": x}, tmp_path, target=target)["y"].astype(np.float64)
    ref = np.array([math.erf(v) for v in x.astype(np.float64)])
    err = np.abs(y - ref)
    assert err.max() <= 1.5e-7, x[err.argmax()]
    small = np.abs(x) < 0.5
    assert (err[small] / np.maximum(np.abs(ref[small]), 1e-38)).max() <= 3e-7


@pytest.mark.parametrize("target", TARGETS)
def test_erf_special_values(target, tmp_path):
    x = np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 3.4e38, -3.4e38, 10.0])
    m = make_model([helper.make_node("Erf", ["x"], ["y"])], {"x": x}, ["y"])
    y = compile_and_run(m, {"x": x}, tmp_path, target=target)["y"]
    assert np.signbit(y[1]) and not np.signbit(y[0]) and y[0] == 0 and y[1] == 0
    np.testing.assert_array_equal(y[[2, 3, 7, 8, 9]], np.float32([1, -1, 1, -1, 1]))
    assert np.isnan(y[4])
    assert abs(y[5]) <= 1e-44 and abs(y[6]) <= 1e-44


@pytest.mark.parametrize("target", [t for t in TARGETS if t != "generic"])
@pytest.mark.parametrize("op", ["Erf", "Gelu"])
def test_erf_gelu_vector_loop_bitwise(op, target, tmp_path):
    """The SIMD loops (kernels/vmath/erf.py's FMA polynomials: vector body + lane-0 tail) give the same
    bits for the same value in the body and in the tail, and stay within a few 1e-8 of the
    generic target's separate multiplies and adds, on every piece, the boundaries and the
    specials."""
    bounds = np.float32([0.875, 2.25, 4.0, -0.875, -2.25, -4.0])
    head = np.concatenate([[0.0, -0.0, np.inf, -np.inf, np.nan],
                           np.nextafter(bounds[:5], np.float32(0)), bounds[:5]])   # 15 values
    x = np.concatenate([head, np.linspace(-9, 9, 4001), np.logspace(-40, 38, 300),
                        -np.logspace(-40, 38, 300), np.nextafter(bounds, np.float32(0)),
                        bounds, rng(3).normal(size=37) * 3]).astype(np.float32)
    x = np.concatenate([x, np.zeros(-x.size % 16, np.float32), head]).astype(np.float32)
    assert x.size % 16 == 15 and x.size % 8 == 7      # head again as the tail of 15 / 7
    opset = 20 if op == "Gelu" else 17
    m = make_model([helper.make_node(op, ["x"], ["y"])], {"x": x}, ["y"], opset=opset)
    y = compile_and_run(m, {"x": x}, tmp_path, target=target)["y"]
    np.testing.assert_array_equal(y[-15:].view(np.uint32), y[:15].view(np.uint32))
    ref = compile_and_run(m, {"x": x}, tmp_path, target="generic")["y"]
    np.testing.assert_array_equal(np.isnan(y), np.isnan(ref))     # Gelu(-Inf): -Inf * 0
    ok = ~np.isnan(ref)
    np.testing.assert_array_equal(np.signbit(y[ok]), np.signbit(ref[ok]))
    inf = np.isinf(ref)
    np.testing.assert_array_equal(y[inf], ref[inf])
    fin = np.isfinite(ref)
    # Erf: a few 1e-8 absolute; Gelu: up to 2 ulp of max(|x|, 1) (the erf difference, times
    # 0.5 x, then rounded)
    scale, tol = (np.maximum(np.abs(x[fin]), 1.0), 2.4e-7) if op == "Gelu" else (1.0, 6e-8)
    assert (np.abs(y[fin].astype(np.float64) - ref[fin]) / scale).max() <= tol
    if op == "Erf":
        exact = np.array([math.erf(v) for v in x.astype(np.float64)])
        assert np.abs(y[ok] - exact[ok]).max() <= 1.5e-7


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape", [(3, 1), (2, 7), (4, 16), (3, 33), (2, 2, 128), (5, 1000),
                                   (1, 100), (7, 8), (1, 17)])
def test_softmax_rows(shape, target, tmp_path):
    x = (rng(sum(shape)).normal(size=shape) * 5).astype(np.float32)
    check_node("Softmax", {"x": x}, tmp_path, attrs={"axis": -1}, target=target)
    check_node("LogSoftmax", {"x": x}, tmp_path, attrs={"axis": -1}, target=target)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("width", [40, 43])
def test_softmax_rows_nan_inf(width, target, tmp_path):
    """NaN anywhere -> NaN row; -Inf -> 0; +Inf or all -Inf -> NaN row (onnxruntime's); 43
    wide: specials in the row tails too (x86: masked loads and stores)."""
    x = rng(1).normal(size=(7, width)).astype(np.float32)
    if width == 43:
        x[2, 41] = np.inf
        x[3, 42] = -np.inf
        x[5, 40] = np.nan
    x[0, 3] = np.nan
    x[1, :] = -np.inf
    x[2, 5] = np.inf
    x[3, 7] = -np.inf
    x[4, :] = -200
    x[4, 0] = 0
    x[5, 39] = np.nan
    x[6, 33:] = -np.inf
    check_node("Softmax", {"x": x}, tmp_path, attrs={"axis": -1}, target=target)


@pytest.mark.parametrize("target", TARGETS)
def test_softmax_exp_range(target, tmp_path):
    """A row spanning the whole float exp range: relative error within 2e-5 of float64 (as
    the libm scalar helper; the extreme ratios are the limit)."""
    x = np.linspace(-87.3, 0, 20001).astype(np.float32)[None, :]
    m = make_model([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], {"x": x}, ["y"])
    y = compile_and_run(m, {"x": x}, tmp_path, target=target)["y"]
    e = np.exp(x.astype(np.float64))
    ref = e / e.sum()
    assert (np.abs(y - ref) / ref).max() <= 2e-5


@pytest.mark.parametrize("target", TARGETS)
def test_softmax_masked_rows_flush(target, tmp_path):
    """Causally masked attention rows (float32's lowest, -Inf, and values down the exp range's
    tail): results as onnxruntime's; on the SIMD targets, where exp(x - max) is below FLT_MIN
    the result is +0, not a subnormal (the vector exp selects 0 there; the row sums are
    unchanged). The generic target's portable exp keeps the subnormals."""
    r = rng(7)
    x = r.normal(size=(2, 64, 64)).astype(np.float32) * 3
    mask = np.triu(np.ones((64, 64), bool), 1)
    x[0][mask] = np.finfo(np.float32).min
    x[1][mask] = -np.inf
    x[0, 5, :40] = np.linspace(-120, -80, 40)      # exp(x - max) across FLT_MIN
    x[0, 5, 40] = 0.0
    check_node("Softmax", {"x": x}, tmp_path, attrs={"axis": -1}, target=target)
    check_node("LogSoftmax", {"x": x}, tmp_path, attrs={"axis": -1}, target=target)
    if target == "generic":
        return
    m = make_model([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], {"x": x}, ["y"])
    y = compile_and_run(m, {"x": x}, tmp_path, target=target)["y"]
    d = x.astype(np.float64) - x.astype(np.float64).max(-1, keepdims=True)
    below = np.exp(d) < np.finfo(np.float32).tiny
    assert below.sum() > 2000 and np.all(y[below] == 0) and not np.signbit(y[below]).any()
    assert np.all(y[~below] > 0)
