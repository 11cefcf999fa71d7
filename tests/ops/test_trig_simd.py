"""Sin, Cos, Atan, Asin and Acos (kernels/vmath/trig.py on the x86 SIMD targets, the C library on
generic): accuracy against float64, special values, large arguments through the C library in
the same vector as small ones, and the vector body and the lane-0 tail giving the same bits."""
import numpy as np
import pytest
from onnx import helper

from aicc.targets import runnable_targets
from tests.oracle import check, compile_and_run, make_model, rng

TARGETS = runnable_targets(derived=False)
SIMD = [t for t in TARGETS if t in ("x86-avx2", "x86-avx512")]
F64 = {"Sin": np.sin, "Cos": np.cos, "Atan": np.arctan, "Asin": np.arcsin, "Acos": np.arccos}


def _run(op, x, tmp_path, target):
    m = make_model([helper.make_node(op, ["x"], ["y"])], {"x": x}, ["y"], opset=18)
    return compile_and_run(m, {"x": x}, tmp_path, target=target)["y"]


def _ulp(y, ref, floor=0.0):
    return np.abs(y - ref) / np.spacing(np.maximum(np.abs(ref), floor).astype(np.float32))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op", ["Sin", "Cos"])
def test_sin_cos_accuracy(op, target, tmp_path):
    """|x| <= 8192: within 1 ulp of 1.0 absolute and 2 ulp relative of float64 (within 1.6
    ulp for |x| <= 100); beyond, and +-Inf (NaN), the C library's values: within 1 ulp."""
    x = np.concatenate([np.linspace(-8192, 8192, 100001), np.linspace(-10, 10, 50001),
                        np.logspace(-40, 1, 2001), -np.logspace(-40, 1, 2001)]).astype(np.float32)
    y = _run(op, x, tmp_path, target).astype(np.float64)
    ref = F64[op](x.astype(np.float64))
    err = np.abs(y - ref)
    assert err.max() <= np.spacing(np.float32(1)), x[err.argmax()]
    rel = np.minimum(_ulp(y, ref), err / np.spacing(np.float32(0.5)))
    assert rel.max() <= 2.0, x[rel.argmax()]
    assert rel[np.abs(x) <= 100].max() <= 1.6
    big = np.float32([8192.01, -9000.5, 1e5, -3e38, 123456.7, 1e9, np.inf, -np.inf])
    yb = _run(op, big, tmp_path, target).astype(np.float64)
    assert np.isnan(yb[-2:]).all()
    assert _ulp(yb[:-2], F64[op](big[:-2].astype(np.float64))).max() <= 1.0


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op", ["Atan", "Asin", "Acos"])
def test_inverse_accuracy(op, target, tmp_path):
    """Within 2.5 ulp of float64 (acos 1.25; Cephes' forms; the C library's within 1) over
    the domain, around the branch points (tan(pi/8), tan(3pi/8), +-1/2) and down to subnormals; the
    specials: atan(+-Inf) = +-pi/2, -0 stays, |x| > 1 gives NaN for asin / acos, NaN stays."""
    if op == "Atan":
        x = np.concatenate([np.linspace(-100, 100, 100001), np.logspace(-40, 38, 4001),
                            -np.logspace(-40, 38, 4001),
                            np.linspace(0.41, 0.42, 2001), np.linspace(2.41, 2.42, 2001)])
    else:
        x = np.concatenate([np.linspace(-1, 1, 100001), np.logspace(-40, 0, 2001),
                            -np.logspace(-40, 0, 2001), np.linspace(0.49, 0.51, 2001),
                            np.linspace(-0.51, -0.49, 2001), [1 - 2 ** -24, -1 + 2 ** -24]])
    x = x.astype(np.float32)
    y = _run(op, x, tmp_path, target).astype(np.float64)
    ulp = _ulp(y, F64[op](x.astype(np.float64)), 1e-37)
    assert ulp.max() <= (1.25 if op == "Acos" else 2.5), x[ulp.argmax()]
    s = _run(op, np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 1.5, -1.0000001]),
             tmp_path, target)
    assert np.isnan(s[4])
    if op == "Atan":
        assert s[2] == np.float32(np.pi / 2) and s[3] == -np.float32(np.pi / 2)
        assert s[1] == 0 and np.signbit(s[1]) and not np.signbit(s[0])
    else:
        assert np.isnan(s[2:]).all()
        assert (s[0], s[1]) == ((0, 0) if op == "Asin" else (np.float32(np.pi / 2),) * 2)
        assert np.signbit(s[1]) == (op == "Asin")


@pytest.mark.parametrize("target", SIMD)
@pytest.mark.parametrize("op", ["Sin", "Cos", "Atan", "Asin", "Acos"])
def test_tail_same_bits(op, target, tmp_path):
    """Values in the vector body and the same values in the lane-0 tail: the same bits,
    large arguments (the C library's lanes) among them; onnxruntime's values on the rest."""
    v = np.concatenate([rng(3).uniform(-1, 1, size=36) * (1 if op[0] == "A" else 20),
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-39, 0.5, -0.5, 2.5, 9000.0,
                         -2e4, 0.9999]]).astype(np.float32)
    x = np.concatenate([v, v[:15]])
    y = _run(op, x, tmp_path, target)
    np.testing.assert_array_equal(y[48:].view(np.uint32), y[:15].view(np.uint32))
    xr = (rng(4).uniform(-1, 1, size=(3, 5, 7)) * (0.999 if op[0] == "A" else 9)).astype(
        np.float32)
    m = make_model([helper.make_node(op, ["x"], ["y"])], {"x": xr}, ["y"], opset=18)
    check(m, {"x": xr}, tmp_path, target=target)
