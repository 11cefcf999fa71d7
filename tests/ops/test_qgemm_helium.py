"""The Helium (MVE) int8 kernels (kernels/qgemm/vdot.py: VMLADAVA.S8 dot products; vdw.py:
depthwise on int32 lanes; isa/helium) on cortex-m55 under qemu (mps3-an547), against the
generic target's bundle (the portable kernels) and exact integer sums.

ConvInteger (int32 sums, compared exactly with a float64 reference) with K not a multiple of
16 and K < 16, odd channel counts, an odd number of positions, int8 and uint8 inputs with
nonzero zero points (the column-sum correction; uint8 as x - 128), per-channel weight zero
points (uint8 weights: w - zp fits int8), groups, stride 2, dilation, padding (the zero point
in the channel-last copy), 1-D, 1x1 (the transposing scatter), a batch of 2; weights that do
not fit int8 (the portable kernel) and 3-D (the pair kernel); MatMulInteger with 1 and 5 rows,
int8 and uint8 a; QLinearConv 1x1 and 3x3 with per-channel scales and bias, QLinearMatMul with
1 and 5 rows (the requantization in the store). Depthwise convs: stride 1 and 2, uint8, a
channel multiplier, 1-D, 5x5, dilation, no padding, weight zero points, QLinearConv. Equal to
the generic bundle on every output.
"""
import json

import numpy as np
import onnx
import pytest
from onnx import helper

import aicc
from aicc.kernels.qgemm import vdot
from aicc.runner import open_bundle
from aicc.targets import load_target
from tests.oracle import PLAIN_CFLAGS, STRICT_CFLAGS, make_model
from tests.ops.test_qlinear import _conv_ref

M55 = "cortex-m55"
needs_m55 = pytest.mark.skipif(bool(load_target(M55).missing_tools()),
                               reason="make cross-toolchain")


def test_arrange_layout():
    """Words [block][Kp / 16][2][16] (zeros past K and in the padding channel), column sums."""
    r = np.random.default_rng(0)
    for rows, k in [(5, 7), (6, 40), (1, 16), (3, 33)]:
        w = r.integers(-128, 128, size=(1, rows, k))
        words, cs = vdot.arrange(w, 16)
        kp = -(-k // 16) * 16
        b = words.reshape(-1, kp // 16, 2, 16).transpose(0, 2, 1, 3).reshape(-1, kp)
        np.testing.assert_array_equal(b[:rows, :k], w[0])
        assert not b[rows:].any() and not b[:, k:].any()
        np.testing.assert_array_equal(cs[:rows], w[0].sum(axis=1))
        assert len(cs) == -(-rows // 2) * 2 and not cs[rows:].any()
    assert vdot.arrange(np.array([[[128]]]), 16) is None


def _model(r):
    i8 = lambda *s: r.integers(-128, 128, size=s).astype(np.int8)     # noqa: E731
    shape = (1, 6, 7, 5)       # 35 positions: odd
    xs = i8(*shape)
    xu = r.integers(0, 256, size=shape).astype(np.uint8)
    feeds = {"xs": xs, "xu": xu, "xw": i8(1, 20, 5, 3), "x1": i8(1, 6, 13),
             "x3": i8(1, 3, 4, 5, 3), "a1": i8(1, 37), "a5": i8(5, 37), "u5": None,
             "a9": i8(1, 9), "xb": i8(2, 4, 5, 6)}
    feeds["u5"] = r.integers(0, 256, size=(5, 37)).astype(np.uint8)
    feeds["u1"] = r.integers(0, 256, size=(1, 37)).astype(np.uint8)
    inits = {"zs": np.int8(-3), "zu": np.uint8(131), "z0": np.int8(0)}
    nodes, outs, refs = [], [], {}

    def conv(name, x, w, attrs, wz=None):
        wzn = f"{name}_wz"
        inits[f"{name}_w"] = w
        inits[wzn] = np.zeros((), w.dtype) if wz is None else wz
        xz = "zu" if feeds[x].dtype == np.uint8 else "zs"
        nodes.append(helper.make_node("ConvInteger", [x, f"{name}_w", xz, wzn], [name],
                                      **attrs))
        outs.append(name)
        refs[name] = _conv_ref({"x": feeds[x], "w": w, "xz": inits[xz], "wz": inits[wzn]},
                               None, ["x", "w", "xz", "wz"], attrs)

    p1 = {"pads": [1, 1, 1, 1]}
    conv("v_odd", "xs", i8(5, 6, 3, 3), p1)                         # 5 channels, K 54
    conv("v_u8", "xu", i8(7, 6, 3, 3), p1)                          # uint8 x, zero point 131
    conv("v_grp", "xu", i8(8, 3, 3, 3), {**p1, "group": 2})         # K 27 per group
    conv("v_s2", "xs", i8(7, 6, 3, 3), {**p1, "strides": [2, 2]})
    conv("v_dil", "xu", i8(4, 6, 3, 3), {"pads": [2, 2, 2, 2], "dilations": [2, 2]})
    wzu = r.integers(126, 131, size=6).astype(np.uint8)             # uint8 w - zp in int8
    wu = (wzu.reshape(-1, 1, 1, 1) + r.integers(-126, 125, size=(6, 6, 2, 3))).astype(np.uint8)
    conv("v_wzp", "xs", wu, {"pads": [0, 1, 1, 0]}, wz=wzu)
    conv("v_1x1", "xu", i8(9, 6, 1, 1), {})                         # K 6 < 16
    conv("v_1x1s", "xs", i8(9, 6, 1, 1), {})
    conv("v_1x1k", "xw", i8(9, 20, 1, 1), {})                       # K 20: one tail of 4
    conv("v_1x1g", "xs", i8(8, 3, 1, 1), {"group": 2})              # K 3
    conv("v_wide", "xs", r.integers(0, 256, size=(4, 6, 3, 3)).astype(np.uint8), p1)
    conv("v_1d", "x1", i8(6, 6, 5), {"pads": [2, 1], "strides": [2]})
    conv("p_3d", "x3", i8(5, 3, 2, 3, 2), {"pads": [1, 0, 1, 1, 1, 0]})
    # depthwise (kernels/qgemm/vdw.py): stride 1 and 2, uint8, a channel multiplier, 1-D,
    # 5x5, dilation, asymmetric padding, per-channel weight zero points
    conv("dw_s1", "xs", i8(6, 1, 3, 3), {**p1, "group": 6})
    conv("dw_s2", "xu", i8(6, 1, 3, 3), {**p1, "group": 6, "strides": [2, 2]})
    conv("dw_s2s", "xs", i8(6, 1, 3, 3), {"pads": [0, 0, 1, 1], "group": 6, "strides": [2, 2]})
    conv("dw_mult", "xs", i8(12, 1, 3, 3), {**p1, "group": 6})      # 2 outputs per channel
    conv("dw_1d", "x1", i8(6, 1, 3), {"pads": [1, 1], "group": 6})
    conv("dw_5x5", "xu", i8(6, 1, 5, 5), {"pads": [2, 1, 2, 2], "group": 6})
    conv("dw_dil", "xs", i8(6, 1, 3, 3), {"pads": [2, 2, 2, 2], "dilations": [2, 2],
                                          "group": 6})
    conv("dw_nopad", "xw", i8(20, 1, 3, 2), {"group": 20, "strides": [1, 2]})
    wzd = r.integers(126, 131, size=6).astype(np.uint8)
    wd = (wzd.reshape(-1, 1, 1, 1) + r.integers(-126, 125, size=(6, 1, 3, 3))).astype(np.uint8)
    conv("dw_wzp", "xs", wd, {**p1, "group": 6}, wz=wzd)
    conv("v_batch", "xb", i8(5, 4, 3, 3), p1)                       # batch 2
    conv("v_batch1", "xb", i8(5, 4, 1, 1), {})
    conv("dw_batch", "xb", i8(4, 1, 3, 3), {**p1, "group": 4, "strides": [2, 1]})
    # matmuls: one row, five rows, int8 and uint8 a; N 11, K 37 (two blocks and a tail of 5)
    for a, az in (("a1", "zs"), ("a5", "zs"), ("u5", "zu"), ("u1", "zu")):
        b = r.integers(-126, 128, size=(37, 11)).astype(np.int8)     # b - 2 in int8
        inits[f"{a}_b"], inits[f"{a}_bz"] = b, np.int8(2)
        nodes.append(helper.make_node("MatMulInteger", [a, f"{a}_b", az, f"{a}_bz"],
                                      [f"mm_{a}"]))
        outs.append(f"mm_{a}")
        refs[f"mm_{a}"] = ((feeds[a].astype(np.int64) - inits[az].astype(np.int64))
                           @ (b.astype(np.int64) - 2))
    b9 = i8(9, 4)                                                   # K 9 < 16, N 4
    inits["a9_b"] = b9
    nodes.append(helper.make_node("MatMulInteger", ["a9", "a9_b", "zs"], ["mm_a9"]))
    outs.append("mm_a9")
    refs["mm_a9"] = (feeds["a9"].astype(np.int64) + 3) @ b9.astype(np.int64)
    # requantized: QLinearConv 3x3 and 1x1 per channel with bias, QLinearMatMul 1 and 5 rows
    f32 = np.float32
    inits.update({"s_x": f32(0.05), "s_y": f32(0.4), "yz": np.int8(3),
                  "qc_w": i8(5, 6, 3, 3), "qc_ws": r.uniform(0.002, 0.004, 5).astype(f32),
                  "qc_wz": np.zeros(5, np.int8), "qc_b": r.integers(-500, 500, 5).astype(np.int32),
                  "qp_w": i8(7, 6, 1, 1), "qp_ws": r.uniform(0.02, 0.04, 7).astype(f32),
                  "qp_wz": np.zeros(7, np.int8), "qp_b": r.integers(-50, 50, 7).astype(np.int32),
                  "qd_w": i8(6, 1, 3, 3), "qd_ws": r.uniform(0.005, 0.02, 6).astype(f32),
                  "qd_wz": np.zeros(6, np.int8),
                  "qm_b": i8(37, 10), "qm_bs": r.uniform(0.002, 0.004, 10).astype(f32),
                  "qm_bz": np.zeros(10, np.int8)})
    nodes += [helper.make_node("QLinearConv", ["xs", "s_x", "zs", "qc_w", "qc_ws", "qc_wz",
                                               "s_y", "yz", "qc_b"], ["qconv"], **p1),
              helper.make_node("QLinearConv", ["xs", "s_x", "zs", "qp_w", "qp_ws", "qp_wz",
                                               "s_y", "yz", "qp_b"], ["qconv1"]),
              helper.make_node("QLinearConv", ["xs", "s_x", "zs", "qd_w", "qd_ws", "qd_wz",
                                               "s_y", "yz"], ["qdw"], group=6, **p1),
              helper.make_node("QLinearMatMul", ["a1", "s_x", "zs", "qm_b", "qm_bs", "qm_bz",
                                                 "s_y", "yz"], ["qmv"]),
              helper.make_node("QLinearMatMul", ["a5", "s_x", "zs", "qm_b", "qm_bs", "qm_bz",
                                                 "s_y", "yz"], ["qmm"])]
    outs += ["qconv", "qconv1", "qdw", "qmv", "qmm"]
    return make_model(nodes, feeds, outs, inits, opset=13), feeds, refs


@needs_m55
def test_helium_kernels_match_generic_and_exact_sums(tmp_path):
    model, feeds, refs = _model(np.random.default_rng(52))
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    outs = {}
    for t in (M55, "generic"):
        b = aicc.build(path, target=t, out=tmp_path / t)
        outs[t] = open_bundle(b, cflags=PLAIN_CFLAGS if t == M55 else STRICT_CFLAGS).run(feeds)
    steps = json.loads((tmp_path / M55 / "manifest.json").read_text())["steps"]
    kern = {s["outputs"][0]: s.get("kernel", "") for s in steps}
    for k, v in kern.items():       # the Helium kernel, or the fallbacks
        want = ("generic idot4" if k == "v_wide" else "helium qvdw" if k.startswith(("dw", "qdw"))
                else "dsp qpdot2" if k.startswith("p_") else "helium qvdot2")
        assert v == want, (k, v)
    got, gen = outs[M55], outs["generic"]
    assert set(gen) == set(got)
    for k in gen:
        np.testing.assert_array_equal(got[k], gen[k], err_msg=k)
    for k, ref in refs.items():
        np.testing.assert_array_equal(got[k].astype(np.int64), ref.astype(np.int64), err_msg=k)
    for k in ("qconv", "qconv1", "qdw", "qmv", "qmm"):
        live = ((got[k] > -128) & (got[k] < 127)).mean()
        assert live > 0.3, (k, live)


@needs_m55
def test_quantize_alone_compiles_strict(tmp_path):
    """QuantizeLinear on helium (VCVTR, __ssat) with no other Arm kernel in the bundle: the
    description's prelude declares ACLE's saturations (arm_mve.h does not)."""
    xq = (np.arange(-40, 40) * 0.75).astype(np.float32)
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])
    model = make_model([node], {"x": xq}, ["y"], {"s": np.float32(0.5), "z": np.int8(1)},
                       opset=13)
    path = tmp_path / "q.onnx"
    onnx.save(model, str(path))
    b = aicc.build(path, target=M55, out=tmp_path / "b")
    steps = json.loads((b / "manifest.json").read_text())["steps"]
    assert [s.get("kernel") for s in steps] == ["helium"]
    got = open_bundle(b, cflags=PLAIN_CFLAGS).run({"x": xq})["y"]
    want = np.clip(np.rint(xq / 0.5) + 1, -128, 127).astype(np.int8)
    np.testing.assert_array_equal(got, want)


@needs_m55
def test_depthwise_alone_compiles_strict(tmp_path):
    """A bundle whose only Helium kernel is the depthwise one (no unused dot kernel under
    -Werror), against the exact sums."""
    r = np.random.default_rng(3)
    x = r.integers(-128, 128, size=(1, 5, 9, 11)).astype(np.int8)
    w = r.integers(-128, 128, size=(5, 1, 3, 3)).astype(np.int8)
    inits = {"w": w, "xz": np.int8(7), "wz": np.zeros((), np.int8)}
    attrs = {"pads": [1, 1, 1, 1], "group": 5, "strides": [2, 2]}
    node = helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], **attrs)
    path = tmp_path / "dw.onnx"
    onnx.save(make_model([node], {"x": x}, ["y"], inits, opset=13), str(path))
    b = aicc.build(path, target=M55, out=tmp_path / "b")
    steps = json.loads((b / "manifest.json").read_text())["steps"]
    assert [s.get("kernel") for s in steps] == ["helium qvdw"]
    got = open_bundle(b, cflags=PLAIN_CFLAGS).run({"x": x})["y"]
    ref = _conv_ref({"x": x, **inits}, None, ["x", "w", "xz", "wz"], attrs)
    np.testing.assert_array_equal(got.astype(np.int64), ref.astype(np.int64))
