"""The float32 form of the SIMD requantization (kernels/qgemm/requant.py, ``_f32`` helpers): when
the build proves every sum within 2^24, QLinearConv / QLinearMatMul requantize in float32 and
must still give the float64 product's rounding, value for value. The hard cases are sums
whose float32 product rounds onto a half-integer that the exact product is not (the tie
correction), and exact ties (half to even). Sums that may pass 2^24 keep the float64 form.
Checked against the numpy reference (float64 product, as onnx.reference) and the generic target."""
import re

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


def _forms(d) -> set:
    """The float32 requantization forms ('' checked, 'f' by the fused multiply-add: kernels/qgemm/round.py;
    'c' after them: per-column constant multipliers) the builds in d call (_both builds the
    SIMD one and the generic one)."""
    return {f for p in d.glob("b*/model.c") for f in re.findall(r"_f32(f?c?)\(", p.read_text())}


def _uses_f32(d) -> bool:
    """Whether the SIMD build in d calls an _f32 helper (any form)."""
    return bool(_forms(d))


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


# MobileNetV2 int8's multipliers (y zero point): each has sums whose float32 product rounds
# onto a half-integer that the exact product is not
EDGE_MULTS = [(np.float32(0.0012248824), 114), (np.float32(0.0003111857), 101),
              (np.float32(0.009295096), 0)]


def _edge_sums(m: np.float32, yzp: int, amax: int) -> np.ndarray:
    """Positive sums up to amax whose exact products lie within 4 float32 ulps of a
    half-integer where rounding matters, with their neighbours."""
    h = np.arange(-yzp - 1, 256 - yzp, dtype=np.float64) + 0.5
    h = h[h > 0]
    u = 4 * np.spacing(h.astype(np.float32)).astype(np.float64)
    a = np.concatenate([np.arange(np.ceil((x - w) / m), np.floor((x + w) / m) + 1)
                        for x, w in zip(h, u)])
    a = np.unique((a[:, None] + np.arange(-1, 2)).reshape(-1))
    return a[(a > 0) & (a <= amax)].astype(np.int64)


def _sum_rows(sums: np.ndarray, cols: int, k: int = 17) -> tuple:
    """(a uint8 [len(sums), k], b int8 [k, cols]): b's rows 1, 127, ..., 127, so that
    row i of a @ b is sums[i] in every column (sums up to (k - 1) * 127 * 255 + 255)."""
    rows = np.zeros((len(sums), k), np.int64)
    q = np.minimum(sums // 127, (k - 1) * 255)
    rows[:, 0] = sums - 127 * q
    for j in range(1, k):
        rows[:, j] = np.minimum(q, 255)
        q = q - rows[:, j]
    b = np.full((k, cols), 127, np.int8)
    b[0] = 1
    return rows.astype(np.uint8), b


def _run_qmm(a, b, a_scale, b_scale, yzp, tmp_path, target):
    """QLinearMatMul (zero points 0, y scale 1, y zero point yzp) on target and generic:
    the reference's values."""
    inits = {"as": a_scale, "az": np.array([0], np.uint8), "b": b, "bs": b_scale,
             "bz": np.zeros(b_scale.size, np.int8), "ys": np.array([1], np.float32),
             "yz": np.array([yzp], np.uint8)}
    order = ["a", "as", "az", "b", "bs", "bz", "ys", "yz"]
    model = make_model([helper.make_node("QLinearMatMul", order, ["y"])], {"a": a}, ["y"],
                       inits, opset=10)
    got = _both(model, {"a": a}, tmp_path, target)
    np.testing.assert_array_equal(got, _qmm_ref({"a": a, **inits}))
    return got


@pytest.mark.parametrize("target", ALL)
@pytest.mark.parametrize("m,yzp", EDGE_MULTS)
def test_qlinearmatmul_check_free_forms(m, yzp, target, tmp_path):
    """QLinearMatMul rows whose sums are the edge sums of the multiplier (b = [1, 127, ...]:
    a row's sum is any integer up to 16 * 127 * 255 + 255), 16 columns: the C forms give the
    reference's values, by the fused multiply-add form."""
    amax = 16 * 127 * 255 + 255
    edge = _edge_sums(m, yzp, amax)
    assert len(edge) >= 9
    hard, _ = _hard_count(edge, np.asarray(m))
    assert hard >= 1                    # a sum whose float32 product lands on a half-integer
    a_sums = np.unique(np.concatenate([edge, rng(5).integers(0, amax + 1, size=300)]))
    a, b = _sum_rows(a_sums, 16)
    assert np.array_equal(a.astype(np.int64) @ b.astype(np.int64)[:, 0], a_sums)
    _run_qmm(a, b, np.array([m], np.float32), np.array([1], np.float32), yzp, tmp_path, target)
    assert _forms(tmp_path) == {"f"}


@pytest.mark.parametrize("target", ALL)
def test_qlinearmatmul_check_free_per_column(target, tmp_path):
    """Per-column b scales (the three edge multipliers and random ones, one y zero point):
    the multipliers become build-time constants and the fused multiply-add form runs per
    column ('fc'), on rows whose sums are each multiplier's edge sums."""
    yzp = 114
    amax = 16 * 127 * 255 + 255
    r = rng(11)
    ms = np.concatenate([[m for m, _ in EDGE_MULTS], r.uniform(3e-4, 1.2e-3, size=77)])   # 80: every loop
    ms = ms.astype(np.float32)
    a_sums = np.unique(np.concatenate([_edge_sums(m, yzp, amax) for m in ms[:3]]
                                      + [r.integers(0, 150000, size=200)]))
    a, b = _sum_rows(a_sums, len(ms))
    got = _run_qmm(a, b, np.array([1], np.float32), ms, yzp, tmp_path, target)
    assert ((got > 0) & (got < 255)).mean() > 0.3
    forms = _forms(tmp_path)
    assert forms == {"fc"}, forms


@pytest.mark.parametrize("target", ALL)
@pytest.mark.parametrize("top", [0.75, 0.76])
def test_qlinearmatmul_fma_form_range(top, target, tmp_path):
    """The fused multiply-add form at the edge of its range: per-column multipliers up to
    +-0.75 (F_MAX) on sums up to 2^24 (the sums_fit bound: 519 terms), where a m + 1.5 * 2^23
    reaches 0 and 2^24 + 2^23 (saturated outputs), and on small sums whose products are exact
    ties (m = 0.75, 0.5, 0.25: half to even) or near them. A multiplier above F_MAX (0.76)
    puts the op on the checked form ('c'): the same values."""
    k = 519
    amax = (k - 1) * 127 * 255 + 255
    assert amax <= 2**24
    ms = np.array([0.75, -0.75, 0.5, -0.5, 0.25, np.nextafter(np.float32(0.75), np.float32(0)),
                   top, -top, 1e-3, -3e-4, 0.1, 0.3, -0.6, 0.01, 0.7, 0.05], np.float32)
    r = rng(12)
    a_sums = np.unique(np.concatenate([np.arange(0, 700), amax - np.arange(0, 50),
                                       r.integers(0, amax + 1, size=200),
                                       np.arange(2**22 - 20, 2**22 + 20) * 4 // 3]))
    a, b = _sum_rows(a_sums, len(ms), k)
    assert np.array_equal(a.astype(np.int64) @ b.astype(np.int64)[:, 0], a_sums)
    got = _run_qmm(a, b, np.array([1], np.float32), ms, 114, tmp_path, target)
    assert ((got > 0) & (got < 255)).mean() > 0.2 and (got == 0).any() and (got == 255).any()
    assert _forms(tmp_path) == ({"fc"} if top <= 0.75 else {"c"})
