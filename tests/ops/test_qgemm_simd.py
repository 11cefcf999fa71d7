"""The integer GEMM kernels of the SIMD targets (kernels/qgemm/simd.py): QLinearConv / ConvInteger
with constant weights and QLinearMatMul / MatMulInteger with a constant b, on x86-avx2,
x86-avx512 and x86-avx512-vnni, give the generic target's values bit for bit and the numpy
reference's (exact integer sums, float64 requantization): implicit stride-1 convs (1-D / 2-D,
pads, dilations, groups, odd channel counts, wide planes that take several position blocks),
strided and 3-D convs (im2col panels), row / column / K tails, per-channel zero points of
uint8 weights (operands up to 255 in magnitude), bias, saturation, int32 wrap-around."""
import json
import re
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

from aicc.targets import runnable_targets
from tests.oracle import compile_and_run, make_model, rng
from tests.ops.test_qlinear import _conv_ref, _rand

# x86-avx512-amx runs the pair forms as x86-avx512-vnni does: only its quad forms here (VNNI
# below), the rest of its kernels in test_qgemm_amx.py
SIMD = [t for t in runnable_targets() if t.startswith("x86-") and t != "x86-avx512-amx"]
pytestmark = pytest.mark.skipif(not SIMD, reason="no x86 SIMD target runs on this machine")

CONVS = {   # x shape, w shape, attrs
    "3x3_pad": ((1, 16, 9, 9), (24, 16, 3, 3), {"pads": [1, 1, 1, 1]}),
    "wide": ((1, 8, 40, 45), (13, 8, 3, 3), {"pads": [1, 1, 1, 1]}),
    "odd_cin_dil": ((1, 9, 8, 7), (33, 9, 3, 2), {"dilations": [2, 1], "pads": [0, 2, 1, 0]}),
    "1x1": ((2, 32, 5, 5), (19, 32, 1, 1), {}),
    "group": ((1, 12, 6, 6), (8, 6, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    "1d": ((2, 5, 13), (7, 5, 4), {"pads": [2, 1], "dilations": [2]}),
    "stride2": ((2, 8, 7, 6), (5, 8, 3, 2), {"strides": [2, 1], "dilations": [1, 2],
                                             "pads": [1, 0, 2, 1]}),
    "stride2_1x1": ((1, 24, 9, 9), (10, 24, 1, 1), {"strides": [2, 2]}),
    "stride3_pad": ((1, 6, 11, 13), (7, 6, 3, 3), {"strides": [3, 3], "pads": [1, 2, 0, 1]}),
    # a grid row wider than a position block (64 channels: 384 positions): row by row output
    "1d_long": ((1, 8, 700), (64, 8, 3), {"pads": [1, 1]}),
    "3d": ((1, 4, 4, 5, 3), (6, 4, 2, 3, 2), {"pads": [1, 0, 1, 0, 1, 1]}),
}


def _both(model, feeds, tmp_path, target, form=None, dw=False):
    Path(tmp_path).mkdir(exist_ok=True)
    got = compile_and_run(model, feeds, tmp_path, target=target)["y"]
    builds = list(Path(tmp_path).glob("b*/manifest.json"))
    assert len(builds) == 1
    kernels = {s["kernel"] for s in json.loads(builds[0].read_text())["steps"]}
    assert kernels == {target.split("-")[1]}, kernels      # the SIMD kernel ran
    c = (builds[0].parent / "model.c").read_text()
    if form is not None:     # the dot-product form (qgemm_simd.FORMS) the model's C uses
        assert f"form {form})" in c, form
    assert ("kernels/qgemm/depthwise.py" in c) == dw
    gen = compile_and_run(model, feeds, tmp_path, target="generic")["y"]
    np.testing.assert_array_equal(got, gen)
    return got


def _qconv_ref(v, attrs):
    """QLinearConv: the exact wrapped int32 sums (ConvInteger's reference) plus bias, times
    the float32 multiplier in float64, rounded half to even, saturated."""
    acc = _conv_ref({"x": v["x"]}, {k: v[k] for k in ("w", "xz", "wz")}, ["x", "w", "xz", "wz"],
                    attrs).astype(np.int64)
    sh = (1, -1) + (1,) * (v["x"].ndim - 2)
    acc = (acc + v["b"].astype(np.int64).reshape(sh) + 2**31) % 2**32 - 2**31
    mult = (v["xs"] * v["wsc"] / v["ys"]).astype(np.float32).astype(np.float64).reshape(sh)
    info = np.iinfo(v["yz"].dtype)
    y = np.rint(acc.astype(np.float64) * mult) + float(v["yz"])
    with np.errstate(invalid="ignore"):        # NaN (a NaN scale): the caller's business
        return np.clip(y, info.min, info.max).astype(v["yz"].dtype)


@pytest.mark.sweep
@pytest.mark.parametrize("target", SIMD)
@pytest.mark.parametrize("case", sorted(CONVS))
@pytest.mark.parametrize("xt,wt", [(np.uint8, np.int8), (np.int8, np.int8), (np.uint8, np.uint8)])
def test_qlinearconv_simd(case, xt, wt, target, tmp_path):
    xs, ws, attrs = CONVS[case]
    r = rng(len(case) + 3 * (xt == np.int8) + 5 * (wt == np.uint8))
    m = ws[0]
    feeds = {"x": _rand(r, xt, xs)}
    inits = {"xs": np.array(np.float32(0.05)), "xz": np.array(_rand(r, xt, ())),
             "w": _rand(r, wt, ws), "wsc": r.uniform(0.002, 0.02, size=(m,)).astype(np.float32),
             "wz": _rand(r, wt, (m,)) if wt == np.uint8 else np.zeros((m,), wt),
             "ys": np.array(np.float32(0.4)), "yz": np.array(_rand(r, xt, ())),
             "b": r.integers(-20000, 20000, size=(m,)).astype(np.int32)}
    order = ["x", "xs", "xz", "w", "wsc", "wz", "ys", "yz", "b"]
    acc = _conv_ref(feeds, {k: inits[k] for k in ("w", "xz", "wz")}, ["x", "w", "xz", "wz"], attrs)
    inits["ys"] = np.array(np.float32(acc.std() * 0.05 * 0.01 / 40))   # outputs spread ~ +-40
    model = make_model([helper.make_node("QLinearConv", order, ["y"], **attrs)], feeds, ["y"],
                       inits, opset=10)
    got = _both(model, feeds, tmp_path, target)
    np.testing.assert_array_equal(got, _qconv_ref({**feeds, **inits}, attrs))
    lo, hi = np.iinfo(xt).min, np.iinfo(xt).max
    assert ((got > lo) & (got < hi)).mean() > 0.3       # mostly not saturated: a real test


ONE_SCALE = {   # 1x1 convs without garbage columns: all channels requantized in one call
    "1x1": CONVS["1x1"], "stride2_1x1": CONVS["stride2_1x1"],
    # 2 groups of 32 channels, 900 positions: two position blocks
    "1x1_group_blocks": ((1, 32, 30, 30), (64, 16, 1, 1), {"group": 2}),
}


@pytest.mark.parametrize("target", SIMD)
@pytest.mark.parametrize("case", sorted(ONE_SCALE))
@pytest.mark.parametrize("big_bias", [False, True])
def test_qlinearconv_one_scale(case, big_bias, target, tmp_path):
    """One weight scale for all channels: each position block's channels go through one
    requantization call, each with its own bias and zero-point correction (the helper's
    float32 form; with a bias of ~2^26 the sums pass 2^24: its float64 form)."""
    xs, ws, attrs = ONE_SCALE[case]
    r = rng(70 + len(case) + big_bias)
    m = ws[0]
    feeds = {"x": _rand(r, np.uint8, xs)}
    inits = {"xs": np.array(np.float32(0.05)), "xz": np.array(_rand(r, np.uint8, ())),
             "w": _rand(r, np.int8, ws), "wsc": np.array([0.01], np.float32),
             "wz": np.zeros((1,), np.int8), "yz": np.array(_rand(r, np.uint8, ()))}
    acc = _conv_ref(feeds, {k: inits[k] for k in ("w", "xz", "wz")}, ["x", "w", "xz", "wz"], attrs)
    inits["ys"] = np.array(np.float32(acc.std() * 0.05 * 0.01 / 40))
    b = r.integers(-3 * int(acc.std()), 3 * int(acc.std()), size=(m,)).astype(np.int64)
    if big_bias:     # outputs still spread: the bias is mostly cancelled by a shifted y zero point
        b += 1 << 26
        inits["ys"] = np.array(np.float32(2.0**26 * 0.05 * 0.01 / 100))
    inits["b"] = b.astype(np.int32)
    order = ["x", "xs", "xz", "w", "wsc", "wz", "ys", "yz", "b"]
    model = make_model([helper.make_node("QLinearConv", order, ["y"], **attrs)], feeds, ["y"],
                       inits, opset=10)
    got = _both(model, feeds, tmp_path, target)
    np.testing.assert_array_equal(got, _qconv_ref({**feeds, **inits}, attrs))
    (c,) = [f.read_text() for f in Path(tmp_path).glob("b*/model.c") if "qadd" in f.read_text()]
    assert "_ra(" in c                                   # the one-call (bias per row) helper
    assert bool(re.search(r"_f32f?_ra\(", c)) != big_bias   # its form (float32: any)
    if not big_bias:
        assert ((got > 0) & (got < 255)).mean() > 0.3   # mostly not saturated: a real test


@pytest.mark.parametrize("target", SIMD)
@pytest.mark.parametrize("case", ["3x3_pad", "stride2", "1d"])
def test_convinteger_simd(case, target, tmp_path):
    xs, ws, attrs = CONVS[case]
    r = rng(40 + len(case))
    feeds = {"x": _rand(r, np.uint8, xs)}
    inits = {"w": _rand(r, np.uint8, ws), "xz": np.array(_rand(r, np.uint8, ())),
             "wz": _rand(r, np.uint8, (ws[0],))}
    order = ["x", "w", "xz", "wz"]
    model = make_model([helper.make_node("ConvInteger", order, ["y"], **attrs)], feeds, ["y"],
                       inits, opset=10)
    got = _both(model, feeds, tmp_path, target)
    np.testing.assert_array_equal(got, _conv_ref(feeds, inits, order, attrs))


def _qmm(r, sa, sb, ta, tb, per_col):
    n = sb[-1]
    feeds = {"a": _rand(r, ta, sa)}
    inits = {"as": np.array([0.02], np.float32), "az": np.array([_rand(r, ta, ())]),
             "b": _rand(r, tb, sb),
             "bs": (r.uniform(0.005, 0.05, size=(n,)) if per_col
                    else np.array([0.03])).astype(np.float32),
             "bz": _rand(r, tb, (n,)) if per_col else np.array([_rand(r, tb, ())]),
             "ys": np.array([2.0], np.float32), "yz": np.array([_rand(r, ta, ())])}
    return feeds, inits


def _qmm_ref(f):
    a = f["a"].astype(np.int64) - f["az"].astype(np.int64)
    b = f["b"].astype(np.int64) - f["bz"].astype(np.int64)
    acc = ((a @ b + 2**31) % 2**32 - 2**31).astype(np.float64)
    mult = (f["as"] * f["bs"] / f["ys"]).astype(np.float32).astype(np.float64)
    info = np.iinfo(f["yz"].dtype)
    y = np.rint(acc * mult) + f["yz"].astype(np.float64)
    return np.clip(y, info.min, info.max).astype(f["yz"].dtype)


@pytest.mark.sweep
@pytest.mark.parametrize("target", SIMD)
@pytest.mark.parametrize("sa,sb", [((5, 16), (16, 6)), ((70, 33), (33, 45)), ((1, 7), (7, 3)),
                                   ((2, 3, 9, 24), (24, 40)), ((20,), (20, 17)),
                                   ((9, 40), (1, 40, 33))])
@pytest.mark.parametrize("per_col", [False, True])
@pytest.mark.parametrize("ta,tb", [(np.uint8, np.int8), (np.int8, np.int8), (np.uint8, np.uint8)])
def test_qlinearmatmul_simd(sa, sb, per_col, ta, tb, target, tmp_path):
    r = rng(sa[0] + 3 * sb[-1] + per_col)
    feeds, inits = _qmm(r, sa, sb, ta, tb, per_col)
    a = feeds["a"].astype(np.int64) - inits["az"].astype(np.int64)
    acc = a @ (inits["b"].astype(np.int64) - inits["bz"].astype(np.int64))
    inits["ys"] = np.array([np.abs(acc).max() * 0.02 * 0.03 / 100], np.float32)  # |y - yz| <= 100
    inits["yz"] = np.array([(int(np.iinfo(ta).min) + int(np.iinfo(ta).max)) // 2 + 3], ta)
    order = ["a", "as", "az", "b", "bs", "bz", "ys", "yz"]
    model = make_model([helper.make_node("QLinearMatMul", order, ["y"])], feeds, ["y"], inits,
                       opset=10)
    got = _both(model, feeds, tmp_path, target)
    np.testing.assert_array_equal(got, _qmm_ref({**feeds, **inits}))
    info = np.iinfo(ta)
    assert ((got > info.min) & (got < info.max)).mean() > 0.3


def _requant_inits(r, acc, xt, m):
    """QLinearConv's scales, output zero point and bias for sums acc: |y - yz| <= 100, yz in the
    middle of xt's range (outputs mostly not saturated)."""
    return {"xs": np.array(np.float32(0.05)), "wsc": np.full((m,), 0.01, np.float32),
            "ys": np.array(np.float32(np.abs(acc).max() * 0.05 * 0.01 / 100)),
            "yz": np.array((int(np.iinfo(xt).min) + int(np.iinfo(xt).max)) // 2, xt),
            "b": r.integers(-20000, 20000, size=(m,)).astype(np.int32)}


DW = {   # depthwise: exact float32 sums (kernels/qgemm/depthwise.py)
    "3x3": ((1, 16, 19, 21), (16, 1, 3, 3), {"pads": [1, 1, 1, 1]}),
    "s2": ((2, 5, 13, 11), (5, 1, 3, 3), {"pads": [1, 0, 2, 1], "strides": [2, 2]}),
    "1d_dil": ((1, 3, 40), (3, 1, 5), {"pads": [2, 2], "dilations": [2]}),
    "5x5_s13": ((1, 4, 9, 37), (4, 1, 5, 5), {"pads": [2, 2, 2, 2], "strides": [1, 3]}),
    "wide_s2": ((1, 3, 5, 301), (3, 1, 3, 3), {"pads": [1, 1, 1, 0], "strides": [1, 2]}),
    "wide": ((1, 2, 4, 150), (2, 1, 3, 3), {"pads": [1, 1, 1, 1]}),
    "7x7": ((1, 6, 7, 7), (6, 1, 3, 3), {"pads": [1, 1, 1, 1]}),
    "s2_dil": ((1, 3, 14, 13), (3, 1, 3, 3), {"pads": [2, 1, 1, 1], "strides": [2, 2],
                                              "dilations": [2, 1]}),
    "s3_rows": ((1, 2, 17, 9), (2, 1, 3, 3), {"pads": [1, 1, 0, 1], "strides": [3, 1]}),
    # stride-2 rows split by vectors (qconv_dw.DE2): 59 = 32 + a masked tail of 27 (avx512),
    # 3 x 16 + 11 scalar (avx2); 64: no tail
    "s2_w59": ((1, 2, 5, 59), (2, 1, 3, 3), {"pads": [1, 0, 1, 1], "strides": [2, 2]}),
    "s2_w64": ((1, 2, 4, 64), (2, 1, 3, 3), {"pads": [0, 1, 1, 0], "strides": [2, 2]}),
    # planes above qconv_dw.PLANE_KB: bands of output rows (the last one shorter), padding
    # rows in the first and last bands of every channel
    "s2_banded": ((1, 2, 90, 90), (2, 1, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    "dil_banded": ((1, 2, 84, 84), (2, 1, 3, 3), {"pads": [2, 2, 2, 2], "dilations": [2, 2]}),
}
# qconv_dw.use_run: rows of OW outputs, or one run over all rows (short rows); both on each ISA
DW_RUN = {"avx512": {"7x7": True, "s2": True, "5x5_s13": False, "1d_dil": False},
          "avx2": {"7x7": False, "s2": True, "5x5_s13": True, "3x3": False}}


@pytest.mark.sweep
@pytest.mark.parametrize("target", SIMD)
@pytest.mark.parametrize("case", sorted(DW))
@pytest.mark.parametrize("xt,wt", [(np.uint8, np.uint8), (np.int8, np.int8)])
def test_depthwise(case, xt, wt, target, tmp_path):
    """Depthwise QLinearConv / ConvInteger: uint8 weights with per-channel zero points (w - wzp
    up to 255 in magnitude), int8; a NaN channel scale gives the zero point."""
    xs, ws, attrs = DW[case]
    attrs = {**attrs, "group": ws[0]}
    r = rng(50 + len(case) + (xt == np.int8))
    m = ws[0]
    feeds = {"x": _rand(r, xt, xs)}
    inits = {"w": _rand(r, wt, ws), "xz": np.array(_rand(r, xt, ())), "wz": _rand(r, wt, (m,))}
    acc = _conv_ref(feeds, inits, ["x", "w", "xz", "wz"], attrs)
    inits.update(_requant_inits(r, acc, xt, m))
    inits["wsc"][-1] = np.nan
    order = ["x", "xs", "xz", "w", "wsc", "wz", "ys", "yz", "b"]
    model = make_model([helper.make_node("QLinearConv", order, ["y"], **attrs)], feeds, ["y"],
                       inits, opset=10)
    got = _both(model, feeds, tmp_path, target, dw=True)
    (c,) = [t for t in (f.read_text() for f in Path(tmp_path).glob("b*/model.c"))
            if "kernels/qgemm/depthwise.py" in t]
    run = DW_RUN[target.split("-")[1]].get(case)
    if run is not None:
        assert ("one run of" in c) == run
    assert ("bands of" in c) == case.endswith("banded")
    want = _qconv_ref({**feeds, **inits}, attrs)
    want[:, -1] = inits["yz"]                                   # NaN scale -> zero point
    np.testing.assert_array_equal(got, want)
    assert ((got > np.iinfo(xt).min) & (got < np.iinfo(xt).max)).mean() > 0.5
    node = helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], **attrs)
    model = make_model([node], feeds, ["y"], {k: inits[k] for k in ("w", "xz", "wz")}, opset=10)
    np.testing.assert_array_equal(_both(model, feeds, tmp_path / "ci", target, dw=True), acc)


VNNI = [t for t in runnable_targets() if t in ("x86-avx512-vnni", "x86-avx512-amx")]


@pytest.mark.parametrize("target", VNNI)
@pytest.mark.parametrize("case", ["3x3_pad", "odd_cin_dil", "1d", "group", "stride2",
                                  "stride2_1x1", "stride3_pad"])
@pytest.mark.parametrize("xt,wt,wz", [(np.uint8, np.int8, 0), (np.int8, np.int8, 0),
                                      (np.uint8, np.uint8, 128), (np.int8, np.int8, 5)])
def test_quad_form(case, xt, wt, wz, target, tmp_path):
    """With VNNI, weights whose w - wzp fit int8 run as uint8 x int8 quads (vpdpbusd) with the
    zero point's share subtracted; w - wzp outside int8 (wz 5 with -128) falls back to pairs."""
    xs, ws, attrs = CONVS[case]
    r = rng(7 + len(case) + wz)
    m = ws[0]
    feeds = {"x": _rand(r, xt, xs)}
    w = _rand(r, wt, ws)
    inits = {"w": w, "xz": np.array(_rand(r, xt, ())), "wz": np.full((m,), wz, wt)}
    acc = _conv_ref(feeds, inits, ["x", "w", "xz", "wz"], attrs)
    inits.update(_requant_inits(r, acc, xt, m))
    order = ["x", "xs", "xz", "w", "wsc", "wz", "ys", "yz", "b"]
    model = make_model([helper.make_node("QLinearConv", order, ["y"], **attrs)], feeds, ["y"],
                       inits, opset=10)
    fits = (w.astype(np.int64) - wz).min() >= -128 and (w.astype(np.int64) - wz).max() <= 127
    assert fits == (wz != 5)
    got = _both(model, feeds, tmp_path, target, form="qb" if fits else "pv")
    np.testing.assert_array_equal(got, _qconv_ref({**feeds, **inits}, attrs))
    # ConvInteger (int32 out) and QLinearMatMul with the same operands
    node = helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], **attrs)
    model = make_model([node], feeds, ["y"], {k: inits[k] for k in ("w", "xz", "wz")}, opset=10)
    np.testing.assert_array_equal(_both(model, feeds, tmp_path / "ci", target), acc)


def quad_matmul(r, sa, sb, ta):
    """QLinearMatMul with int8 weights (zero point 0: the quad form) and per-column scales:
    (model, feeds, inits, the exact int32 sums)."""
    feeds, inits = _qmm(r, sa, sb, ta, np.int8, True)
    inits["bz"] = np.zeros_like(inits["bz"])
    a = feeds["a"].astype(np.int64) - inits["az"].astype(np.int64)
    acc = a @ inits["b"].astype(np.int64)
    inits["ys"] = np.array([np.abs(acc).max() * 0.02 * 0.03 / 100], np.float32)
    inits["yz"] = np.array([(int(np.iinfo(ta).min) + int(np.iinfo(ta).max)) // 2], ta)
    order = ["a", "as", "az", "b", "bs", "bz", "ys", "yz"]
    model = make_model([helper.make_node("QLinearMatMul", order, ["y"])], feeds, ["y"], inits,
                       opset=10)
    return model, feeds, inits, acc


@pytest.mark.parametrize("target", VNNI)
@pytest.mark.parametrize("ta", [np.uint8, np.int8])
def test_quad_form_matmul(ta, target, tmp_path):
    model, feeds, inits, acc = quad_matmul(rng(31), (37, 70), (70, 41), ta)
    got = _both(model, feeds, tmp_path, target, form="qa")
    np.testing.assert_array_equal(got, _qmm_ref({**feeds, **inits}))
    node = helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])
    model = make_model([node], feeds, ["y"], {k: inits[k] for k in ("b", "az", "bz")}, opset=10)
    np.testing.assert_array_equal(_both(model, feeds, tmp_path / "mi", target, form="qa"),
                                  acc.astype(np.int32))


@pytest.mark.parametrize("target", SIMD)
def test_matmulinteger_simd_wraps(target, tmp_path):
    """K = 40000 products of 255 * 255 pass 2^31: the sum wraps modulo 2^32 as in numpy."""
    k = 40000
    a = np.full((3, k), 255, np.uint8)
    a[1, ::3] = 0
    a[2, :] = rng(3).integers(0, 256, k)
    b = np.full((k, 5), 255, np.uint8)
    feeds = {"a": a}
    model = make_model([helper.make_node("MatMulInteger", ["a", "b"], ["y"])], feeds, ["y"],
                       {"b": b}, opset=10)
    got = _both(model, feeds, tmp_path, target)
    want = ((a.astype(np.int64) @ b.astype(np.int64)) + 2**31) % 2**32 - 2**31
    np.testing.assert_array_equal(got, want.astype(np.int32))
    assert got[0, 0] < 0


@pytest.mark.parametrize("target", SIMD)
def test_qlinear_simd_saturation_and_nan_scale(target, tmp_path):
    """A tiny output scale saturates both ways; a NaN weight scale gives the zero point."""
    r = rng(8)
    xs, ws, attrs = CONVS["3x3_pad"]
    m = ws[0]
    feeds = {"x": _rand(r, np.int8, xs)}
    wsc = r.uniform(0.002, 0.02, size=(m,)).astype(np.float32)
    wsc[3] = np.nan
    inits = {"xs": np.array(np.float32(0.05)), "xz": np.array(np.int8(3)),
             "w": _rand(r, np.int8, ws), "wsc": wsc, "wz": np.zeros((m,), np.int8),
             "ys": np.array(np.float32(1e-4)), "yz": np.array(np.int8(-7))}
    order = ["x", "xs", "xz", "w", "wsc", "wz", "ys", "yz"]
    model = make_model([helper.make_node("QLinearConv", order, ["y"], **attrs)], feeds, ["y"],
                       inits, opset=10)
    got = _both(model, feeds, tmp_path, target)
    assert (got[0, 3] == -7).all()
    other = np.delete(got[0], 3, axis=0)
    assert (other == 127).any() and (other == -128).any()
