"""The portable integer GEMM (kernels/qgemm/portable.py: int16 dot products in int32 sums) of
QLinearConv, ConvInteger, QLinearMatMul and MatMulInteger on the generic target: exact against
the numpy / onnx.reference values (and onnxruntime within one unit of the requantized outputs)
on shapes that reach every part of it: K not a multiple of the 8-value padding, output
channel blocks of 4 with 1-3 rows left, tiles of positions (rows) with an odd count left (the
4 x 1 tail), several tiles, groups, batches, strides, padding, dilation, 1-D and 3-D, per-channel
zero points, the extremes |w - w_zp| = |x - x_zp| = 255; and the sums that could overflow
int32, which keep qlinear.py's wrapping loops."""
import json
from pathlib import Path

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from aicc.kernels.qgemm import portable as qgemm_c
from tests.oracle import compile_and_run, make_model, ort_exact, rng
from tests.ops.test_qlinear import _conv_ref, _rand

DOT = "generic idot4"


def _mid(t):
    """The zero point in the middle of dtype t's range."""
    return np.array(0 if t == np.int8 else 128, t)


def _live(y):
    """At least half of the outputs inside the range (the sums reach them unsaturated)."""
    info = np.iinfo(y.dtype)
    assert ((y > info.min) & (y < info.max)).mean() >= 0.5


def _kernel(tmp_path) -> str:
    builds = sorted(Path(tmp_path).glob("b*/manifest.json"))
    return json.loads(builds[-1].read_text())["steps"][0]["kernel"]


def _ort(model, feeds):
    import onnxruntime as rt
    try:
        sess = rt.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return sess.run(None, feeds)[0]
    except Exception:  # noqa: BLE001 - onnxruntime lacks the case (per-channel zero points)
        return None


def _check(op, feeds, inits, order, attrs, tmp_path, kernel=DOT, opset=10):
    node = helper.make_node(op, order, ["y"], **(attrs or {}))
    model = make_model([node], feeds, ["y"], inits, opset=opset)
    got = compile_and_run(model, feeds, tmp_path)["y"]
    assert _kernel(tmp_path) == kernel
    if "Conv" in op:
        want = _conv_ref(feeds, inits, order, attrs)
    else:
        want = ReferenceEvaluator(model).run(None, {**feeds})[0]
    np.testing.assert_array_equal(got, want)
    ort = _ort(model, feeds) if inits is None and ort_exact(model) else None
    if ort is not None:
        tol = 1 if op.startswith("QLinear") else 0     # onnxruntime requantizes in float32
        assert np.abs(got.astype(np.int64) - ort.astype(np.int64)).max() <= tol
    return got


# x shape, w shape, attributes: K = cin_g * taps; tiles hold 32768 // Kp positions
CONV = {
    # K 576 (Kp 576): tiles of 56 positions, 143 = 56 + 56 + 31 (odd: the 4 x 1 tail)
    "3x3_tiles": ((1, 64, 11, 13), (7, 64, 3, 3), {"pads": [1, 1, 1, 1]}),
    # K 27 -> Kp 32, 2 batch items, stride 2, asymmetric padding, 5 channels (4 + 1)
    "first_s2": ((2, 3, 15, 12), (5, 3, 3, 3), {"strides": [2, 2], "pads": [1, 0, 2, 1]}),
    "dilated": ((1, 8, 12, 12), (6, 8, 3, 3), {"dilations": [2, 3], "pads": [2, 3, 2, 3]}),
    # groups of 8 -> 6 channels (4 + 2), K 72
    "group": ((1, 16, 9, 9), (12, 8, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    # the 1x1 stride-1 gather; K 40 (Kp 40 on generic: 8 lanes); 840 = 819 + 21 positions
    "1x1": ((1, 40, 21, 40), (9, 40, 1, 1), {}),
    "1x1_s2": ((1, 40, 9, 9), (8, 40, 1, 1), {"strides": [2, 2]}),
    "1d": ((2, 12, 37), (4, 12, 5), {"pads": [2, 1]}),
    "3d": ((1, 4, 5, 6, 4), (5, 4, 2, 3, 2), {"pads": [1, 0, 1, 0, 1, 1]}),
    # one output channel, K 96 >= 64: three zero rows in its block
    "one_out": ((1, 32, 6, 6), (1, 32, 1, 3), {"pads": [0, 1, 0, 1]}),
}


@pytest.mark.parametrize("case", sorted(CONV))
@pytest.mark.parametrize("xt,wt", [(np.uint8, np.int8), (np.int8, np.uint8),
                                   (np.uint8, np.uint8)])
def test_qlinearconv_dot(case, xt, wt, tmp_path):
    xs, ws, attrs = CONV[case]
    r = rng(len(case) * 7 + (xt == np.int8) + 2 * (wt == np.uint8))
    m = ws[0]
    feeds = {"x": _rand(r, xt, xs), "xs": np.array(np.float32(0.05)),
             "xz": np.array(_rand(r, xt, ())), "w": _rand(r, wt, ws), "wz": _rand(r, wt, (m,)),
             "ys": np.array(np.float32(0.05)), "yz": _mid(xt)}
    # scales and bias from the sums: per channel, centred, about 40 units per deviation
    acc = _conv_ref(feeds, None, ["x", "w", "xz", "wz"], attrs).astype(np.float64)
    acc = np.moveaxis(acc, 1, 0).reshape(m, -1)
    feeds["wsc"] = (r.uniform(0.5, 1.5, size=(m,)) * 40 / (acc.std() + 1)).astype(np.float32)
    feeds["b"] = (r.integers(-50, 50, size=(m,)) - acc.mean(axis=1).round()).astype(np.int32)
    got = _check("QLinearConv", feeds, None, ["x", "xs", "xz", "w", "wsc", "wz", "ys", "yz", "b"],
                 attrs, tmp_path)
    _live(got)


@pytest.mark.parametrize("case", ["3x3_tiles", "group", "1x1", "3d"])
def test_convinteger_dot_const_weights(case, tmp_path):
    xs, ws, attrs = CONV[case]
    r = rng(len(case))
    feeds = {"x": _rand(r, np.uint8, xs), "xz": np.array(_rand(r, np.uint8, ()))}
    inits = {"w": _rand(r, np.uint8, ws), "wz": _rand(r, np.uint8, (ws[0],))}
    _check("ConvInteger", feeds, inits, ["x", "w", "xz", "wz"], attrs, tmp_path)


# constant weights, one group: patches from the padded channel-last copy (kernels/qgemm/cpad.py)
PADDED = {
    # 14 channels -> 16 (two zero-point channels per tap), asymmetric padding
    "c14": ((1, 14, 9, 11), (6, 14, 3, 3), {"pads": [1, 0, 2, 1]}),
    # stride 2 over an even input without padding: its last row and column are never read
    "s2_unread": ((2, 16, 10, 10), (5, 16, 3, 3), {"strides": [2, 2]}),
    "s21_dilated": ((1, 8, 13, 12), (9, 8, 3, 2), {"strides": [2, 1], "dilations": [2, 3],
                                                   "pads": [2, 3, 1, 0]}),
    "1x1_s2": ((1, 24, 9, 7), (10, 24, 1, 1), {"strides": [2, 2]}),
    "1d_s3": ((2, 16, 40), (7, 16, 5), {"strides": [3], "pads": [2, 2]}),
    # K 576: tiles of 56 positions, 143 = 56 + 56 + 31 (the 4 x 1 tail)
    "3x3_tiles": CONV["3x3_tiles"],
}


@pytest.mark.parametrize("case", sorted(PADDED))
@pytest.mark.parametrize("xt,wt", [(np.uint8, np.int8), (np.int8, np.uint8)])
def test_qlinearconv_dot_padded_volume(case, xt, wt, tmp_path):
    """Per-channel weight zero points (the padding channels' weights are each row's), exact
    against the reference."""
    xs, ws, attrs = PADDED[case]
    r = rng(len(case) * 5 + (xt == np.int8))
    m = ws[0]
    feeds = {"x": _rand(r, xt, xs)}
    inits = {"xs": np.array(np.float32(0.05)), "xz": np.array(_rand(r, xt, ())),
             "w": _rand(r, wt, ws), "wz": _rand(r, wt, (m,)), "ys": np.array(np.float32(0.05)),
             "yz": _mid(xt)}
    acc = _conv_ref({**feeds, **inits}, None, ["x", "w", "xz", "wz"], attrs).astype(np.float64)
    acc = np.moveaxis(acc, 1, 0).reshape(m, -1)
    inits["wsc"] = (r.uniform(0.5, 1.5, size=(m,)) * 40 / (acc.std() + 1)).astype(np.float32)
    inits["b"] = (r.integers(-50, 50, size=(m,)) - acc.mean(axis=1).round()).astype(np.int32)
    got = _check("QLinearConv", feeds, inits,
                 ["x", "xs", "xz", "w", "wsc", "wz", "ys", "yz", "b"], attrs, tmp_path)
    _live(got)
    src = sorted(Path(tmp_path).glob("b*/model.c"))[-1].read_text()
    assert "patches from a padded channel-last copy" in src


def test_padded_volume_budget(tmp_path):
    """schedule: qconv: pad_kb bounds the padded copy: 0 gathers from the NCHW input (the
    same exact values), cortex-m4's default (its RAM holds the arena)."""
    import aicc
    xs, ws, attrs = PADDED["c14"]
    r = rng(77)
    feeds = {"x": _rand(r, np.uint8, xs), "xz": np.array(_rand(r, np.uint8, ()))}
    inits = {"w": _rand(r, np.int8, ws), "wz": _rand(r, np.int8, (ws[0],))}
    node = helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], **attrs)
    model = make_model([node], feeds, ["y"], inits, opset=10)
    got = compile_and_run(model, feeds, tmp_path,
                          overrides={"schedule": {"qconv": {"pad_kb": 0}}})["y"]
    src = sorted(Path(tmp_path).glob("b*/model.c"))[-1].read_text()
    assert "patches from the NCHW input" in src and "padded channel-last" not in src
    np.testing.assert_array_equal(got, _conv_ref({**feeds, **inits}, None,
                                                 ["x", "w", "xz", "wz"], attrs))
    import onnx
    onnx.save(model, str(tmp_path / "m4.onnx"))
    out = aicc.build(tmp_path / "m4.onnx", target="cortex-m4", out=tmp_path / "m4")
    assert "patches from the NCHW input" in (Path(out) / "model.c").read_text()


def test_qlinearconv_no_output_channels(tmp_path):
    """Constant weights of zero output channels: an empty output, no requantization rows (the
    float32 rows' check of the sums read the empty weights)."""
    x = rng(5).integers(0, 256, size=(1, 4, 5, 5)).astype(np.uint8)
    inits = {"xs": np.float32(1), "xz": np.uint8(3), "w": np.zeros((0, 4, 3, 3), np.int8),
             "ws": np.zeros((0,), np.float32), "wz": np.zeros((0,), np.int8),
             "ys": np.float32(1), "yz": np.uint8(0)}
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"])
    got = compile_and_run(make_model([node], {"x": x}, ["y"], inits, opset=10), {"x": x},
                          tmp_path)["y"]
    assert got.shape == (1, 0, 3, 3) and got.dtype == np.uint8


def test_convinteger_dot_extremes(tmp_path):
    """Every product -255 * 255 (x = 255, x_zp = 0, w = 0, w_zp = 255) and its mirror: the
    int16 operands' ends, sums of 576 * 65025 in int32."""
    x = np.full((1, 64, 5, 5), 255, np.uint8)
    x[0, 1::2] = 0
    w = np.zeros((5, 64, 3, 3), np.uint8)
    w[1::2] = 255
    feeds = {"x": x, "w": w, "xz": np.array(0, np.uint8), "wz": np.array(255, np.uint8)}
    got = _check("ConvInteger", feeds, None, ["x", "w", "xz", "wz"], {"pads": [1, 1, 1, 1]},
                 tmp_path)
    assert got.min() == -32 * 9 * 65025


def test_convinteger_overflow_keeps_wrapping_loop(tmp_path):
    """K = 9 * 3700: sums can pass 2^31, so the build keeps the modulo-2^32 loops."""
    x = np.full((1, 3700, 3, 3), 255, np.uint8)
    inits = {"w": np.full((4, 3700, 3, 3), 255, np.uint8)}
    feeds = {"x": x}
    assert 9 * 3700 * 255 * 255 > qgemm_c.LIMIT
    got = _check("ConvInteger", feeds, inits, ["x", "w"], {}, tmp_path, kernel="")
    assert got[0, 0, 0, 0] < 0        # wrapped


MM = [((2, 65, 300), (300, 7)),     # 130 rows: tiles of 107 + 23 (odd); 7 columns = 4 + 3
      ((3, 20), (20, 4)), ((1, 2, 16), (16, 9)), ((1, 37), (37, 5))]   # one row: the 4 x 1 tail


@pytest.mark.parametrize("sa,sb", MM)
@pytest.mark.parametrize("ta,tb", [(np.uint8, np.int8), (np.int8, np.int8),
                                   (np.uint8, np.uint8)])
def test_qlinearmatmul_dot(sa, sb, ta, tb, tmp_path):
    r = rng(sa[-1] + sb[-1] + (ta == np.int8) + 2 * (tb == np.uint8))
    n = sb[-1]
    feeds = {"a": _rand(r, ta, sa), "as": np.array([0.02], np.float32),
             "az": np.array([_rand(r, ta, ())]), "ys": np.array([0.9], np.float32),
             "yz": _mid(ta).reshape(1)}
    inits = {"b": _rand(r, tb, sb), "bs": r.uniform(0.001, 0.01, size=(n,)).astype(np.float32),
             "bz": _rand(r, tb, (n,))}
    got = _check("QLinearMatMul", feeds, inits, ["a", "as", "az", "b", "bs", "bz", "ys", "yz"],
                 None, tmp_path)
    _live(got)


@pytest.mark.parametrize("sa,sb", MM)
def test_matmulinteger_dot(sa, sb, tmp_path):
    r = rng(sa[0] * 3 + sb[-1])
    feeds = {"a": _rand(r, np.uint8, sa), "az": np.array(_rand(r, np.uint8, ()))}
    inits = {"b": _rand(r, np.int8, sb), "bz": np.array(_rand(r, np.int8, ()))}
    _check("MatMulInteger", feeds, inits, ["a", "b", "az", "bz"], None, tmp_path)


def test_matmulinteger_overflow_keeps_wrapping_loop(tmp_path):
    k = 40000
    a = np.full((3, k), 255, np.uint8)
    a[1] = 0
    inits = {"b": np.full((k, 2), 255, np.uint8)}
    got = _check("MatMulInteger", {"a": a}, inits, ["a", "b"], None, tmp_path, kernel="")
    assert got[0, 0] < 0


def _requant_want(acc, mult, yz):
    """onnx's requantization in float64 with the special values spelled out: NaN -> the zero
    point, +-Inf saturate (acc 0 times Inf is NaN)."""
    info = np.iinfo(yz.dtype)
    v = acc.astype(np.float64) * mult.astype(np.float64).reshape(1, -1, 1, 1)
    with np.errstate(invalid="ignore"):
        r = np.clip(np.rint(v) + float(yz), info.min, info.max)
    return np.where(np.isnan(v), yz, r).astype(yz.dtype)


@pytest.mark.parametrize("group", [1, 8])       # the dot kernel, and the depthwise loops
@pytest.mark.parametrize("yt", [np.uint8, np.int8])
def test_qlinearconv_requant_special_scales(group, yt, tmp_path):
    """Per-channel weight scales 0, +-Inf, NaN, 3e38, tiny, negative and a ~0.5 multiplier:
    each row's portable requantization (vectorized blocks of 16 and the n % 16 rest, 7 x 5 =
    35 outputs) against float64."""
    r = rng(21 + group)
    w = r.integers(-127, 128, size=(8, 8 // group, 3, 3)).astype(np.int8)
    wsc = np.array([0, np.inf, -np.inf, np.nan, 3e38, 1e-30, -0.004, 0.5], np.float32)
    feeds = {"x": r.integers(0, 256, size=(1, 8, 7, 5)).astype(np.uint8)}
    inits = {"xs": np.float32(1.0), "xz": np.uint8(128), "w": w, "wsc": wsc,
             "wz": np.zeros(8, np.int8), "ys": np.float32(1.0),
             "yz": np.array(3 if yt == np.int8 else 130, yt)}
    attrs = {"pads": [1, 1, 1, 1], "group": group}
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "wsc", "wz", "ys", "yz"],
                            ["y"], **attrs)
    got = compile_and_run(make_model([node], feeds, ["y"], inits, opset=10), feeds,
                          tmp_path)["y"]
    assert _kernel(tmp_path) == (DOT if group == 1 else "")
    acc = _conv_ref({**feeds, "w": w, "xz": inits["xz"]}, None, ["x", "w", "xz"], attrs)
    want = _requant_want(acc, wsc, inits["yz"])
    np.testing.assert_array_equal(got, want)
    assert (got[0, 7] != got[0, 7].flat[0]).any()      # the 0.5 channel is not constant


@pytest.mark.parametrize("group", [1, 8])       # the dot kernel, and the depthwise loops
@pytest.mark.parametrize("yt", [np.uint8, np.int8])
@pytest.mark.parametrize("per_channel", [False, True])
def test_qlinearconv_requant_float32_rows(group, yt, per_channel, tmp_path):
    """Constant weights, zero points, scales and bias: the float32 rows (qgemm_c.RQROW_F) give
    the float64 requantization's values, over sums of both signs that saturate at both ends
    (vectorized blocks of 16 and the n % 16 rest: 9 x 7 = 63 outputs per channel)."""
    r = rng(40 + group + 2 * per_channel + 4 * (yt == np.int8))
    w = r.integers(-127, 128, size=(8, 8 // group, 3, 3)).astype(np.int8)
    x = r.integers(0, 256, size=(1, 8, 9, 7)).astype(np.uint8)
    xz = np.uint8(r.integers(100, 156))
    acc = _conv_ref({"x": x, "w": w, "xz": xz}, None, ["x", "w", "xz"],
                    {"pads": [1, 1, 1, 1], "group": group}).astype(np.float64)
    # multipliers putting the sums' spread at about 150 output units: both ends saturate
    mult = (r.uniform(0.7, 1.3, size=8 if per_channel else 1) * 150 / acc.std())
    wsc = (mult / 0.5).astype(np.float32)        # x scale 1, y scale 2: m = wsc / 2 exactly
    bias = r.integers(-3000, 3000, size=8).astype(np.int32)
    yz = np.array(-5 if yt == np.int8 else 120, yt)
    inits = {"xs": np.float32(1.0), "xz": xz, "w": w, "wsc": wsc,
             "wz": np.zeros(8 if per_channel else 1, np.int8), "ys": np.float32(2.0),
             "yz": yz, "b": bias}
    attrs = {"pads": [1, 1, 1, 1], "group": group}
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "wsc", "wz", "ys", "yz", "b"],
                            ["y"], **attrs)
    got = compile_and_run(make_model([node], {"x": x}, ["y"], inits, opset=10), {"x": x},
                          tmp_path)["y"]
    assert "aicc_rqrow_f_" in sorted(Path(tmp_path).glob("b*/model.c"))[-1].read_text()
    m = np.broadcast_to((wsc / np.float32(2.0)).astype(np.float32), (8,))
    want = _requant_want(acc + bias.reshape(1, -1, 1, 1), m, yz)
    np.testing.assert_array_equal(got, want)
    info = np.iinfo(yt)
    assert (got == info.min).any() and (got == info.max).any() and (acc < 0).any()


# one input channel per group: kernels/qgemm/planes.py's stride phases of the padded plane
DEPTHWISE = {
    "wide_rows_s1": ((1, 4, 5, 43), (4, 1, 3, 3), {"pads": [1, 1, 1, 1]}),
    "wide_rows_s2": ((1, 4, 5, 86), (4, 1, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    "s23_dilated": ((2, 3, 13, 17), (3, 1, 3, 3), {"strides": [2, 3], "dilations": [2, 1],
                                                   "pads": [2, 1, 0, 2]}),
    "s2_unread": ((1, 2, 8, 8), (2, 1, 3, 3), {"strides": [2, 2]}),
    "multiplier2": ((1, 3, 7, 9), (6, 1, 3, 3), {"pads": [1, 0, 1, 2]}),
    "1d_s3": ((1, 4, 23), (4, 1, 5), {"strides": [3], "pads": [2, 2]}),
    # left padding beyond the stride: the phases' first columns
    "s3_pad4": ((1, 2, 9, 20), (2, 1, 3, 5), {"strides": [1, 3], "pads": [1, 4, 1, 4]}),
}


@pytest.mark.parametrize("case", sorted(DEPTHWISE))
def test_depthwise_phase_planes(case, tmp_path):
    """Exact int32 sums against the reference (per-channel zero points, run-time weights)."""
    xs, ws, attrs = DEPTHWISE[case]
    r = rng(len(case) + 30)
    attrs = {**attrs, "group": xs[1]}
    feeds = {"x": _rand(r, np.uint8, xs), "w": _rand(r, np.uint8, ws),
             "xz": np.array(_rand(r, np.uint8, ())), "wz": _rand(r, np.uint8, (ws[0],))}
    _check("ConvInteger", feeds, None, ["x", "w", "xz", "wz"], attrs, tmp_path, kernel="")
    src = sorted(Path(tmp_path).glob("b*/model.c"))[-1].read_text()
    assert "aicc_iconvq_" in src


def test_depthwise_phase_planes_extremes(tmp_path):
    """|w - w_zp| = |x - x_zp| = 255 at every tap: sums of 9 * 65025 of both signs."""
    x = np.full((1, 2, 6, 6), 255, np.uint8)
    w = np.zeros((2, 1, 3, 3), np.uint8)
    w[1] = 255
    feeds = {"x": x, "w": w, "xz": np.array(0, np.uint8), "wz": np.array([255, 0], np.uint8)}
    got = _check("ConvInteger", feeds, None, ["x", "w", "xz", "wz"],
                 {"group": 2, "pads": [1, 1, 1, 1]}, tmp_path, kernel="")
    assert got[0, 0].min() == -9 * 255 * 255 and got[0, 1].max() == 9 * 255 * 255


@pytest.mark.parametrize("stride", [1, 2])
def test_depthwise_wide_rows(stride, tmp_path):
    """Depthwise convs keep qlinear.py's plane loops, whose rows run in vectorized blocks of 16
    and 8 (stride 1) or 8 (stride 2) before the rest: output rows of 43 and 21 positions."""
    r = rng(30 + stride)
    xs, ws = (1, 4, 5, 43 * stride), (4, 1, 3, 3)
    attrs = {"group": 4, "pads": [1, 1, 1, 1], "strides": [stride, stride]}
    feeds = {"x": _rand(r, np.uint8, xs), "w": _rand(r, np.uint8, ws),
             "xz": np.array(_rand(r, np.uint8, ())), "wz": _rand(r, np.uint8, (4,))}
    _check("ConvInteger", feeds, None, ["x", "w", "xz", "wz"], attrs, tmp_path, kernel="")
