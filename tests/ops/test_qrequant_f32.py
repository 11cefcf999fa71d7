"""The float32 form of the SIMD requantization (ops/qrequant_simd.py, ``_f32`` helpers): when
the build proves every sum within 2^24, QLinearConv / QLinearMatMul requantize in float32 and
must still give the float64 product's rounding, value for value. The hard cases are sums
whose float32 product rounds onto a half-integer that the exact product is not (the tie
correction), and exact ties (half to even). Sums that may pass 2^24 keep the float64 form.
Checked against the numpy reference (float64 product, as onnx.reference) and the generic target."""
import numpy as np
import pytest
from onnx import helper

from tests.oracle import make_model, rng
from tests.ops.test_qgemm_simd import SIMD, _both, _qconv_ref, _qmm_ref

ALL = SIMD + [t for t in ("x86-avx512-amx",) if t in __import__(
    "aicc.targets", fromlist=["runnable_targets"]).runnable_targets()]


def _hard_scales(r, acc0: np.ndarray) -> np.ndarray:
    """Per channel c a float32 multiplier m_c near (k + 1/2) / acc0[c] for k up to 100: the
    float32 product acc0[c] * m_c often rounds onto k + 1/2 while the exact one is off it."""
    k = r.integers(-100, 100, size=acc0.shape)
    return ((k + 0.5) / acc0).astype(np.float32)


def _hard_scale(acc0: int, k: int) -> np.float32:
    """A float32 multiplier m within a few ulps of (k + 1/2) / acc0 whose float32 product
    with acc0 is k + 1/2 while the exact one is not (None if none is)."""
    m0 = np.float32((k + 0.5) / acc0)
    for j in range(-8, 9):
        m = np.float32(m0 + np.float32(j) * np.spacing(m0))
        hard, _ = _hard_count(np.array([acc0]), np.array([m]))
        if hard:
            return m
    return None


def _hard_count(acc: np.ndarray, m: np.ndarray) -> tuple:
    """(float32 products on a half-integer whose exact product is not one, exact ties)."""
    p = (acc.astype(np.float32) * m.astype(np.float32)).astype(np.float64)
    x = acc.astype(np.float64) * m.astype(np.float64)
    half_p, half_x = p - np.floor(p) == 0.5, x - np.floor(x) == 0.5
    return int((half_p & ~half_x).sum()), int(half_x.sum())


def _uses_f32(d) -> bool:
    """Whether the SIMD build in d (_both builds it and the generic one) calls an _f32 helper."""
    return any("_f32(" in p.read_text() for p in d.glob("b*/model.c"))


@pytest.mark.parametrize("target", ALL)
@pytest.mark.parametrize("kind", ["1x1", "depthwise"])
@pytest.mark.parametrize("big", [False, True])
def test_qlinearconv_requant_f32(kind, big, target, tmp_path):
    """acc = x + bias per channel (unit weights); each channel's multiplier puts some of its
    products on the rounding edge. big: biases near 2^25, past the float32 range of exact
    integers: the float64 form must run."""
    r = rng(90 + big + 2 * (kind == "1x1"))
    c = 48
    sign = r.choice([-1, 1], size=c)
    x0 = r.integers(0, 256, size=c)
    if big:     # multiplier 2^-s, x0 + bias = +-2^25 + 2^(s-1): an exact tie (half to even)
        s = r.integers(19, 21, size=c)
        bias = sign * (1 << 25) + (1 << (s - 1)) - x0
        wsc = np.float32(2.0) ** -s.astype(np.float32)
    else:
        bias = r.integers(40000, 120000, size=c) * sign
        wsc = _hard_scales(r, (x0 + bias).astype(np.float64))
    cin = 16 if kind == "1x1" else c            # 1x1: output channel c reads input c % 16
    x = np.arange(256, dtype=np.int64).reshape(1, 1, 16, 16) * np.ones((1, cin, 16, 16), np.int64)
    x = ((x + r.integers(0, 256, size=(1, cin, 1, 1))) % 256).astype(np.uint8)
    feeds = {"x": x}
    attrs = {} if kind == "1x1" else {"group": c}
    w = np.zeros((c, cin // c if kind != "1x1" else cin, 1, 1), np.int8)
    w[np.arange(c), np.arange(c) % w.shape[1]] = 1
    xc = x[:, np.arange(c) % cin]                # the input each output channel sums
    inits = {"xs": np.array(np.float32(1)), "xz": np.array(np.uint8(0)), "w": w, "wsc": wsc,
             "wz": np.zeros((c,), np.int8), "ys": np.array(np.float32(1)),
             "yz": np.array(np.uint8(128)), "b": bias.astype(np.int32)}
    order = ["x", "xs", "xz", "w", "wsc", "wz", "ys", "yz", "b"]
    model = make_model([helper.make_node("QLinearConv", order, ["y"], **attrs)], feeds, ["y"],
                       inits, opset=10)
    got = _both(model, feeds, tmp_path, target, dw=kind == "depthwise")
    np.testing.assert_array_equal(got, _qconv_ref({**feeds, **inits}, attrs))
    acc = xc.astype(np.int64) + bias.reshape(1, c, 1, 1)
    hard, ties = _hard_count(acc, wsc.reshape(1, c, 1, 1))
    assert (ties if big else hard) >= 5, (hard, ties)         # the edge cases are there
    assert ((got > 0) & (got < 255)).mean() > 0.5
    assert _uses_f32(tmp_path) == (not big)


@pytest.mark.parametrize("target", ALL)
@pytest.mark.parametrize("ta", [np.uint8, np.int8])
def test_qlinearmatmul_requant_f32(ta, target, tmp_path):
    """Per-tensor multiplier 2^-7 (sums 64 modulo 128 are exact ties: half to even), one that
    puts the float32 product of one sum (repeated in 8 rows) on the rounding edge, and one
    above 64 (the float64 loop runs: the float32 form's int32 would overflow)."""
    r = rng(95 + (ta == np.int8))
    a = r.integers(np.iinfo(ta).min, int(np.iinfo(ta).max) + 1, size=(64, 50)).astype(ta)
    a[8:16] = a[8]
    b = r.integers(-127, 128, size=(50, 45)).astype(np.int8)     # rows of 45: every tail
    acc = a.astype(np.int64) @ b.astype(np.int64)
    j = int(np.argmax(np.abs(acc[8])))
    hard = next(m for k in range(30, 60) if (m := _hard_scale(int(acc[8, j]), k)) is not None)
    for i, m in enumerate([np.float32(2.0 ** -7), hard, np.float32(65536.5)]):
        inits = {"as": np.array([m], np.float32), "az": np.array([0], ta), "b": b,
                 "bs": np.array([1], np.float32), "bz": np.array([0], np.int8),
                 "ys": np.array([1], np.float32), "yz": np.array([3], ta)}
        order = ["a", "as", "az", "b", "bs", "bz", "ys", "yz"]
        model = make_model([helper.make_node("QLinearMatMul", order, ["y"])], {"a": a}, ["y"],
                           inits, opset=10)
        got = _both(model, {"a": a}, tmp_path / str(i), target)
        np.testing.assert_array_equal(got, _qmm_ref({"a": a, **inits}))
        if i == 2:        # |m| > 64: the float64 loop (saturated but for sums near 0)
            assert (got > np.iinfo(ta).min).any() and (got < np.iinfo(ta).max).any()
            continue
        h, ties = _hard_count(acc, np.asarray(m))
        assert (ties if i == 0 else h) >= (5 if i == 0 else 8), (h, ties)
        assert _uses_f32(tmp_path / str(i))
