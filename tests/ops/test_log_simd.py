"""Log, Softplus and Mish (kernels/vmath/log.py on the x86 SIMD targets, kernels/vmath/portable.py on generic):
accuracy against float64 over the float32 range, special values, the vector body and the
lane-0 tail giving the same bits, and the fused Conv epilogue giving the standalone op's bits."""
import numpy as np
import pytest
from onnx import helper

from aicc.targets import runnable_targets
from tests.oracle import compile_and_run, make_model, reference, rng

TARGETS = runnable_targets(derived=False)
SIMD = [t for t in TARGETS if t in ("x86-avx2", "x86-avx512")]


def _run(op, x, tmp_path, target):
    m = make_model([helper.make_node(op, ["x"], ["y"])], {"x": x}, ["y"], opset=18)
    return compile_and_run(m, {"x": x}, tmp_path, target=target)["y"]


def _softplus(d):
    return np.logaddexp(0.0, d)


@pytest.mark.parametrize("target", TARGETS)
def test_log_accuracy_and_specials(target, tmp_path):
    """Within 1 ulp of float64 from the smallest subnormal to FLT_MAX; around sqrt(2) (the
    mantissa fold); 0 -> -Inf, negative and NaN -> NaN, +Inf -> +Inf."""
    x = np.concatenate([np.logspace(-45, 38.5, 40001), np.linspace(0.7, 1.5, 4001),
                        np.float32([1.4142135, 1.4142137, 1.0, 2.0, 1e-40, 3.4e38])])
    x = x.astype(np.float32)
    y = _run("Log", x, tmp_path, target).astype(np.float64)
    ref = np.log(x.astype(np.float64))
    ok = ref != 0
    ulp = np.abs(y[ok] - ref[ok]) / np.spacing(np.abs(ref[ok]).astype(np.float32))
    assert ulp.max() <= 1.0, x[ok][ulp.argmax()]
    assert y[x == 1.0][0] == 0
    s = _run("Log", np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, -1e-40]),
             tmp_path, target)
    assert s[0] == -np.inf and s[1] == -np.inf and s[2] == np.inf and np.isnan(s[3:]).all()


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op", ["Softplus", "Mish"])
def test_softplus_mish_accuracy(op, target, tmp_path):
    """Relative error within 3e-7 of float64 (results above 1e-35); Softplus(-Inf) = 0,
    Softplus(+Inf) = Mish(+Inf) = +Inf, NaN stays NaN, large x gives x."""
    x = np.concatenate([np.linspace(-100, 100, 40001), np.logspace(-30, 1, 2001),
                        -np.logspace(-30, 1, 2001)]).astype(np.float32)
    y = _run(op, x, tmp_path, target).astype(np.float64)
    d = x.astype(np.float64)
    ref = _softplus(d) if op == "Softplus" else d * np.tanh(_softplus(d))
    ok = np.abs(ref) > 1e-35    # (Mish near -90: x times a subnormal softplus)
    rel = np.abs(y[ok] - ref[ok]) / np.abs(ref[ok])
    assert rel.max() <= 3e-7, x[ok][rel.argmax()]
    s = _run(op, np.float32([np.inf, np.nan, 1e30, -1e30, 90.0]), tmp_path, target)
    assert s[0] == np.inf and np.isnan(s[1]) and s[2] == np.float32(1e30)
    assert s[4] == np.float32(90.0)
    assert (s[3] == 0) if op == "Softplus" else (s[3] == 0 or np.isnan(s[3]))


@pytest.mark.parametrize("target", SIMD)
@pytest.mark.parametrize("op", ["Log", "Softplus", "Mish"])
def test_tail_and_fused_same_bits(op, target, tmp_path):
    """Values in the vector body and the same values in the lane-0 tail: the same bits; a
    Conv with the op fused (its epilogue's vector pass) gives the standalone op's bits on the
    conv's output."""
    v = np.concatenate([rng(3).normal(size=40) * 8, [0.0, -0.0, np.inf, -np.inf, np.nan,
                                                     1e-39, 88.0, -20.0]]).astype(np.float32)
    x = np.concatenate([v, v[:15]])
    y = _run(op, x, tmp_path, target)
    np.testing.assert_array_equal(y[48:].view(np.uint32), y[:15].view(np.uint32))
    xc = (rng(4).normal(size=(1, 3, 7, 9)) * 3).astype(np.float32)
    w = rng(5).normal(size=(5, 3, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node(op, ["c"], ["y"])]
    m = make_model(nodes, {"x": xc}, ["y", "c"], {"w": w}, opset=18)
    got = compile_and_run(m, {"x": xc}, tmp_path, target=target)
    alone = _run(op, got["c"].reshape(-1), tmp_path, target)
    np.testing.assert_array_equal(got["y"].reshape(-1).view(np.uint32), alone.view(np.uint32))
    ref = reference(m, {"x": xc})["y"]
    np.testing.assert_allclose(got["y"], ref, rtol=1e-4, atol=1e-5)
