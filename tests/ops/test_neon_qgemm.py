"""The integer GEMMs on arm-neon (kernels/qgemm/simd.py with the NEON description's pair form,
isa/neon/qgemm.py: SMLAL / SMLAL2 into unreduced accumulators, ADDP at the store; the float64
requantization) under qemu-aarch64, against the numpy reference (exact integer sums, float64
requantization) and the generic bundle bit for bit: QLinearConv per tensor and per channel,
uint8 / int8 operands, zero points, odd K (odd channel counts), row tiles of every height up
to MR and column tails, 1x1 / 3x3 / dilated / strided / grouped / 1-D / 3-D (im2col) convs,
ConvInteger, QLinearMatMul and MatMulInteger (wrap-around modulo 2^32), saturation and a NaN
scale; depthwise convs on kernels/qgemm/depthwise.py's exact float32 sums (NEON row
splitter and tail store). The cases share few models (one build each: the emulated runs are
the cost)."""
import json
import re
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

from aicc.targets import load_target
from tests.oracle import compile_and_run, make_model, rng
from tests.ops.test_qgemm_simd import _qconv_ref, _qmm_ref
from tests.ops.test_qlinear import _conv_ref, _rand

T = "arm-neon"
pytestmark = pytest.mark.skipif(bool(load_target(T).missing_tools()),
                                reason="arm-neon toolchain or qemu-aarch64 missing "
                                       "(make cross-toolchain)")
# arm-neon-dot: the quad form (SDOT) where w - wzp fits int8 (int8 weights of zero point 0),
# the pair form elsewhere
TARGETS = ["arm-neon", "arm-neon-dot"]

CONVS = {   # x shape, w shape, attrs, x type, w type, per-channel scales
    # 24 rows: 4 tiles of 6; uint8 x int8, per channel
    "3x3_pad": ((1, 16, 9, 9), (24, 16, 3, 3), {"pads": [1, 1, 1, 1]}, np.uint8, np.int8, True),
    # odd cin (a zero channel in the last pair), 33 rows (tiles of 6 and 5), dilation, pads
    "odd_cin_dil": ((1, 9, 8, 7), (33, 9, 3, 2), {"dilations": [2, 1], "pads": [0, 2, 1, 0]},
                    np.int8, np.int8, False),
    # uint8 weights with per-channel zero points (operands up to 255), strided phases
    "stride2": ((2, 8, 7, 6), (5, 8, 3, 2), {"strides": [2, 1], "dilations": [1, 2],
                                             "pads": [1, 0, 2, 1]}, np.uint8, np.uint8, True),
    "1x1": ((2, 32, 5, 5), (19, 32, 1, 1), {}, np.int8, np.int8, False),
    "stride2_1x1": ((1, 24, 9, 9), (10, 24, 1, 1), {"strides": [2, 2]}, np.uint8, np.int8,
                    False),
    # 2 groups of 4 rows (a tile below MR)
    "group": ((1, 12, 6, 6), (8, 6, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}, np.int8,
              np.uint8, True),
    "1d": ((2, 5, 13), (7, 5, 4), {"pads": [2, 1], "dilations": [2]}, np.uint8, np.int8, True),
    "3d": ((1, 4, 4, 5, 3), (6, 4, 2, 3, 2), {"pads": [1, 0, 1, 0, 1, 1]}, np.uint8, np.int8,
           False),
    # rows 1 .. 3 (tile heights below MR), 45 positions: a column tail
    "rows1": ((1, 8, 5, 9), (1, 8, 3, 3), {"pads": [1, 1, 1, 1]}, np.uint8, np.int8, False),
    "rows3": ((1, 8, 5, 9), (3, 8, 3, 3), {"pads": [1, 1, 1, 1]}, np.int8, np.int8, True),
    # depthwise (kernels/qgemm/depthwise.py: exact float32 sums): rows of 21 (a masked tail),
    # stride 2 on rows of 37 (the row splitter's 16-byte steps and its scalar rest), 5x5
    "dw3x3": ((1, 5, 9, 21), (5, 1, 3, 3), {"group": 5, "pads": [1, 1, 1, 1]}, np.uint8,
              np.int8, True),
    "dw3x3_s2": ((1, 4, 20, 37), (4, 1, 3, 3), {"group": 4, "strides": [2, 2],
                                                "pads": [1, 1, 1, 1]}, np.int8, np.int8, True),
    "dw5x5_u8": ((2, 3, 11, 8), (3, 1, 5, 5), {"group": 3, "pads": [2, 2, 2, 2]}, np.uint8,
                 np.uint8, False),
}


def _kernels(tmp_path, target) -> dict:
    """{op type: set of kernels} of the target's build in tmp_path."""
    (m,) = [p for p in Path(tmp_path).glob("b*/manifest.json")
            if json.loads(p.read_text())["target"] == target]
    out = {}
    for s in json.loads(m.read_text())["steps"]:
        out.setdefault(s["op"], set()).add(s["kernel"])
    return out


def _both(model, feeds, tmp_path, target):
    """The target's outputs, checked equal to the generic bundle's."""
    got = compile_and_run(model, feeds, tmp_path, target=target)
    gen = compile_and_run(model, feeds, tmp_path, target="generic")
    for k in got:
        np.testing.assert_array_equal(got[k], gen[k], err_msg=k)
    return got


def _conv_case(r, name):
    xs, ws, attrs, xt, wt, pc = CONVS[name]
    m = ws[0]
    x = _rand(r, xt, xs)
    inits = {"xs": np.array(np.float32(0.05)), "xz": np.array(_rand(r, xt, ())),
             "w": _rand(r, wt, ws),
             "wsc": (r.uniform(0.002, 0.02, size=(m,)) if pc else np.array([0.01]))
             .astype(np.float32),
             "wz": _rand(r, wt, (m,)) if wt == np.uint8 else np.zeros((m,), wt),
             "yz": np.array(_rand(r, xt, ())),
             "b": r.integers(-20000, 20000, size=(m,)).astype(np.int32)}
    acc = _conv_ref({"x": x}, {k: inits[k] for k in ("w", "xz", "wz")}, ["x", "w", "xz", "wz"],
                    attrs)
    inits["ys"] = np.array(np.float32(acc.std() * 0.05 * 0.01 / 40))   # outputs spread ~ +-40
    return x, inits, attrs


def _forms(tmp_path, target) -> set:
    """The dot-product forms (simd.FORMS) in the target's model.c."""
    (m,) = [p for p in Path(tmp_path).glob("b*/manifest.json")
            if json.loads(p.read_text())["target"] == target]
    c = (m.parent / "model.c").read_text()
    assert "vmlal_high_s16" in c or "form p)" not in c
    return set(re.findall(r"form (\w+)\)", c))


@pytest.mark.parametrize("target", TARGETS)
def test_neon_qlinearconv(target, tmp_path):
    """Every conv of CONVS in one model, plus a ConvInteger (uint8 weights with zero points)
    and a saturating conv with a NaN channel scale."""
    r = rng(49)
    nodes, feeds, inits, want = [], {}, {}, {}
    order = ["x", "xs", "xz", "w", "wsc", "wz", "ys", "yz", "b"]
    for i, name in enumerate(sorted(CONVS)):
        x, ini, attrs = _conv_case(r, name)
        feeds[f"x{i}"] = x
        inits.update({f"{k}{i}": v for k, v in ini.items()})
        nodes.append(helper.make_node("QLinearConv", [f"{k}{i}" for k in order], [f"y{i}"],
                                      **attrs))
        want[f"y{i}"] = _qconv_ref({"x": x, **ini}, attrs)
    # ConvInteger: int32 sums
    xs, ws, attrs = (1, 8, 7, 6), (5, 8, 3, 3), {"pads": [1, 1, 1, 1]}
    feeds["xc"] = _rand(r, np.uint8, xs)
    ci = {"wc": _rand(r, np.uint8, ws), "xzc": np.array(_rand(r, np.uint8, ())),
          "wzc": _rand(r, np.uint8, (ws[0],))}
    inits.update(ci)
    nodes.append(helper.make_node("ConvInteger", ["xc", "wc", "xzc", "wzc"], ["yc"], **attrs))
    want["yc"] = _conv_ref({"xc": feeds["xc"]}, ci, ["xc", "wc", "xzc", "wzc"], attrs)
    # a tiny output scale saturates both ways; a NaN weight scale gives the zero point
    xs, ws, attrs = (1, 16, 9, 9), (8, 16, 3, 3), {"pads": [1, 1, 1, 1]}
    feeds["xn"] = _rand(r, np.int8, xs)
    wsc = r.uniform(0.002, 0.02, size=(8,)).astype(np.float32)
    wsc[3] = np.nan
    inits.update({"xsn": np.array(np.float32(0.05)), "xzn": np.array(np.int8(3)),
                  "wn": _rand(r, np.int8, ws), "wscn": wsc, "wzn": np.zeros((8,), np.int8),
                  "ysn": np.array(np.float32(1e-4)), "yzn": np.array(np.int8(-7))})
    nodes.append(helper.make_node("QLinearConv", [f"{k}n" for k in order[:8]], ["yn"], **attrs))
    # a bias of ~2^26: the sums pass 2^24, the float64 forms (one multiplier: 4 per step;
    # per channel: 2 per step)
    for i, name in enumerate(["1x1", "3x3_pad"]):
        x, ini, attrs = _conv_case(r, name)
        ini["b"] = (ini["b"].astype(np.int64) + (1 << 26)).astype(np.int32)
        ini["ys"] = np.array(np.float32(2.0**26 * 0.05 * 0.01 / 100))
        feeds[f"x{i}f"] = x
        inits.update({f"{k}{i}f": v for k, v in ini.items()})
        nodes.append(helper.make_node("QLinearConv", [f"{k}{i}f" for k in order], [f"y{i}f"],
                                      **attrs))
        want[f"y{i}f"] = _qconv_ref({"x": x, **ini}, attrs)
    outs = sorted(want) + ["yn"]
    model = make_model(nodes, feeds, outs, inits, opset=10)
    got = _both(model, feeds, tmp_path, target)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
    for i, name in enumerate(sorted(CONVS)):     # mostly not saturated: a real test
        lo, hi = np.iinfo(got[f"y{i}"].dtype).min, np.iinfo(got[f"y{i}"].dtype).max
        assert ((got[f"y{i}"] > lo) & (got[f"y{i}"] < hi)).mean() > 0.3, name
    assert (got["yn"][0, 3] == -7).all()
    other = np.delete(got["yn"][0], 3, axis=0)
    assert (other == 127).any() and (other == -128).any()
    ks = _kernels(tmp_path, target)
    assert ks["QLinearConv"] == {"neon"} and ks["ConvInteger"] == {"neon"}, ks
    assert _forms(tmp_path, target) == ({"p", "qb"} if target == "arm-neon-dot" else {"p"})
    (m,) = [p for p in Path(tmp_path).glob("b*/manifest.json")
            if json.loads(p.read_text())["target"] == target]
    assert "aicc_qdwde2_neon" in (m.parent / "model.c").read_text()


MATMULS = [  # a shape, b shape, per column, a type, b type, b's zero point 0 (int8: quad form)
    ((5, 16), (16, 6), False, np.uint8, np.int8, False),
    ((70, 33), (33, 45), True, np.uint8, np.int8, True),   # odd K, 2 row blocks, column tail
    ((1, 7), (7, 3), False, np.int8, np.int8, True),
    ((2, 3, 9, 24), (24, 40), True, np.int8, np.int8, True),   # int8 rows read in place
    ((20,), (20, 17), True, np.uint8, np.uint8, False),
    ((9, 40), (1, 40, 33), False, np.uint8, np.uint8, False),
]


@pytest.mark.parametrize("target", TARGETS)
def test_neon_qlinearmatmul(target, tmp_path):
    """QLinearMatMul (per tensor / per column, every type pair) and MatMulInteger with sums
    past 2^31 (wrapping modulo 2^32 as in numpy), in one model."""
    r = rng(50)
    nodes, feeds, inits, want = [], {}, {}, {}
    order = ["a", "as", "az", "b", "bs", "bz", "ys", "yz"]
    for i, (sa, sb, pc, ta, tb, bz0) in enumerate(MATMULS):
        n = sb[-1]
        a = _rand(r, ta, sa)
        ini = {"as": np.array([0.02], np.float32), "az": np.array([_rand(r, ta, ())]),
               "b": _rand(r, tb, sb),
               "bs": (r.uniform(0.005, 0.05, size=(n,)) if pc else np.array([0.03]))
               .astype(np.float32),
               "bz": _rand(r, tb, (n,)) if pc else np.array([_rand(r, tb, ())])}
        if bz0:
            ini["bz"] = np.zeros_like(ini["bz"])
        acc = (a.astype(np.int64) - ini["az"].astype(np.int64)) @ \
            (ini["b"].astype(np.int64) - ini["bz"].astype(np.int64))
        ini["ys"] = np.array([np.abs(acc).max() * 0.02 * 0.03 / 100], np.float32)
        ini["yz"] = np.array([(int(np.iinfo(ta).min) + int(np.iinfo(ta).max)) // 2 + 3], ta)
        feeds[f"a{i}"] = a
        inits.update({f"{k}{i}": v for k, v in ini.items() if k != "a"})
        nodes.append(helper.make_node("QLinearMatMul", [f"{k}{i}" for k in order], [f"y{i}"]))
        want[f"y{i}"] = _qmm_ref({"a": a, **ini})
    k = 40000                      # 255 * 255 products: the sums pass 2^31 and wrap
    aw = np.full((3, k), 255, np.uint8)
    aw[1, ::3] = 0
    aw[2, :] = r.integers(0, 256, k)
    feeds["aw"] = aw
    inits["bw"] = np.full((k, 5), 255, np.uint8)
    nodes.append(helper.make_node("MatMulInteger", ["aw", "bw"], ["yw"]))
    want["yw"] = (((aw.astype(np.int64) @ inits["bw"].astype(np.int64)) + 2**31) % 2**32
                  - 2**31).astype(np.int32)
    model = make_model(nodes, feeds, sorted(want), inits, opset=10)
    got = _both(model, feeds, tmp_path, target)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    assert got["yw"][0, 0] < 0
    for i in range(len(MATMULS)):
        y = got[f"y{i}"]
        info = np.iinfo(y.dtype)
        assert ((y > info.min) & (y < info.max)).mean() > 0.3
    ks = _kernels(tmp_path, target)
    assert ks["QLinearMatMul"] == {"neon"} and ks["MatMulInteger"] == {"neon"}, ks
    assert _forms(tmp_path, target) == ({"p", "qa"} if target == "arm-neon-dot" else {"p"})
