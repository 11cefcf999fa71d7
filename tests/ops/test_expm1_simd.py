"""Elu, Celu and Selu (kernels/vmath/expm1.py on the x86 SIMD targets; on generic the C library, Selu
through kernels/vmath/portable.py's exp), and the select forms of LeakyRelu (kernels/vmath/exp.py) and PRelu
(pointwise.py): accuracy against float64 and numpy, special values, the vector body and the
lane-0 tail giving the same bits, fused epilogues giving the standalone op's bits, and
onnxruntime on real values."""
import numpy as np
import pytest
from onnx import helper

from aicc.targets import runnable_targets
from tests.oracle import check, compile_and_run, make_model, rng

TARGETS = runnable_targets(derived=False)
SIMD = [t for t in TARGETS if t in ("x86-avx2", "x86-avx512")]
SELU_A, SELU_G = 1.67326319217681884765625, 1.05070102214813232421875


def _run(op, x, tmp_path, target, **attrs):
    m = make_model([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x}, ["y"], opset=18)
    return compile_and_run(m, {"x": x}, tmp_path, target=target)["y"]


def _ref(op, d, alpha):
    if op == "Elu":
        return np.where(d < 0, alpha * np.expm1(d), d)
    if op == "Celu":
        return np.where(d < 0, alpha * np.expm1(d / alpha), d)
    return np.where(d <= 0, SELU_G * (SELU_A * np.exp(d) - SELU_A), SELU_G * d)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op,alpha", [("Elu", 1.0), ("Elu", 0.7), ("Celu", 1.3), ("Selu", None)])
def test_accuracy_and_specials(op, alpha, target, tmp_path):
    """Within 2.5 ulp of float64 (three roundings; Elu with alpha 1: 1 ulp, the expm1 itself)
    from -100 to 80 and down to the smallest normal results (subnormal ones: exact for Elu
    with alpha 1, whose expm1(x) is x there, else within one rounding); Selu, whose spec
    form gamma (alpha e^x - alpha) cancels near 0, within 2.5 ulp of 1 there. -Inf gives
    -alpha (Selu: -gamma alpha), +Inf, NaN and -0 stay."""
    x = np.concatenate([-np.logspace(-45, 2, 30001), np.logspace(-45, 1.9, 10001),
                        np.linspace(-20, 5, 20001)]).astype(np.float32)
    attrs = {} if alpha is None else {"alpha": alpha}
    y = _run(op, x, tmp_path, target, **attrs).astype(np.float64)
    ref = _ref(op, x.astype(np.float64), alpha)
    ok = np.abs(ref) >= np.finfo(np.float32).tiny    # normal results; subnormal ones below
    scale = np.maximum(np.abs(ref), 1.0) if op == "Selu" else np.abs(ref)
    ulp = np.abs(y[ok] - ref[ok]) / np.spacing(scale[ok].astype(np.float32))
    assert ulp.max() <= (1.0 if (op, alpha) == ("Elu", 1.0) else 2.5), x[ok][ulp.argmax()]
    tiny = ~ok & (x < 0)
    if alpha == 1.0:
        np.testing.assert_array_equal(y[tiny], ref[tiny].astype(np.float32))
    np.testing.assert_allclose(y[tiny], ref[tiny], rtol=0, atol=1.5e-45)   # one rounding
    s = _run(op, np.float32([-np.inf, np.inf, np.nan, -0.0, 0.0]), tmp_path, target, **attrs)
    low = -SELU_G * SELU_A if op == "Selu" else -alpha
    assert s[0] == np.float32(low) and s[1] == np.inf and np.isnan(s[2])
    if op != "Selu":          # Selu(-0) = gamma * (alpha - alpha) = +0
        assert s[3] == 0 and np.signbit(s[3]) and s[4] == 0 and not np.signbit(s[4])


@pytest.mark.parametrize("target", SIMD)
@pytest.mark.parametrize("op,attrs", [("Elu", {}), ("Celu", {"alpha": 0.6}), ("Selu", {}),
                                      ("LeakyRelu", {"alpha": 0.1})])
def test_tail_same_bits(op, attrs, target, tmp_path):
    """Values in the vector body and the same values in the lane-0 tail: the same bits (NaN,
    +-0, +-Inf, subnormals, past the clamps)."""
    v = np.concatenate([rng(3).normal(size=40) * 8, [0.0, -0.0, np.inf, -np.inf, np.nan,
                                                     -1e-39, -40.0, -0.3]]).astype(np.float32)
    x = np.concatenate([v, v[:15]])
    y = _run(op, x, tmp_path, target, **attrs)
    np.testing.assert_array_equal(y[48:].view(np.uint32), y[:15].view(np.uint32))


@pytest.mark.parametrize("target", SIMD)
def test_fused_leakyrelu_same_bits(target, tmp_path):
    """A Conv with LeakyRelu fused (the epilogue's vector pass) gives the standalone op's bits
    on the conv's output, and onnxruntime's values."""
    xc = (rng(4).normal(size=(1, 3, 7, 9)) * 3).astype(np.float32)
    w = rng(5).normal(size=(5, 3, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("LeakyRelu", ["c"], ["y"], alpha=0.2)]
    m = make_model(nodes, {"x": xc}, ["y", "c"], {"w": w}, opset=18)
    got, _ = check(m, {"x": xc}, tmp_path, target=target)
    alone = _run("LeakyRelu", got["c"].reshape(-1), tmp_path, target, alpha=0.2)
    np.testing.assert_array_equal(got["y"].reshape(-1).view(np.uint32), alone.view(np.uint32))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape,sshape", [((2, 5, 7, 3), (5, 1, 1)), ((2, 7, 3, 6), (6,)),
                                          ((3, 17), (1,))])
def test_prelu(shape, sshape, target, tmp_path):
    """PRelu with the slope per channel, along the last axis and one value: onnxruntime's
    values; x < 0 takes slope * x, NaN, -0, +0 and +Inf stay, -Inf gives -Inf * slope."""
    x = (rng(6).normal(size=shape) * 4).astype(np.float32)
    flat = x.reshape(-1)
    flat[:6] = [np.nan, -0.0, 0.0, np.inf, -np.inf, -1e-40]
    s = (rng(7).normal(size=sshape)).astype(np.float32)
    s.reshape(-1)[0] = -0.5
    m = make_model([helper.make_node("PRelu", ["x", "s"], ["y"])], {"x": x}, ["y"], {"s": s},
                   opset=16)
    got = check(m, {"x": x}, tmp_path, target=target)[0]["y"]
    want = np.where(x < 0, np.broadcast_to(s, x.shape) * x, x)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
