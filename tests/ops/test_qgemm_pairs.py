"""The Cortex-M DSP pair kernels (kernels/qgemm/pairs.py, isa/dsp: SXTB16 / SMLAD) on
cortex-m4, cortex-m7 and cortex-m55 under qemu, against the generic target's bundle (the
portable kernels) and exact integer sums (on cortex-m55 the 1-D / 2-D convs, depthwise convs
and MatMuls take the Helium kernels first; 3-D convs stay on the pair kernel).

One model with the kernels' tails and fallbacks: ConvInteger (int32 sums, compared exactly
with a float64 reference) on the dot kernel with an odd channel count, K not a multiple of 4,
an odd number of positions, uint8 and int8 inputs with zero points, per-channel weight zero
points (uint8 weights: w - zp fits int8), groups, stride 2, dilation, 1-D, 1x1 (int8: the
SXTB16 gather, K even and odd; uint8: the portable gather); weights that do not fit int8 (the
portable kernel); depthwise on the pair kernel (3x3 stride 1 and 2, 1-D, a channel
multiplier; int8 inputs' packed fill with either column phase first) and its fallbacks (5x5,
dilation 2: too many tap pairs); MatMulInteger with one row (the matrix-vector kernel; N and K
not multiples of 4) and with 5 rows (the dot kernel);
QLinearConv and QLinearMatMul with per-tensor and per-channel scales (the requantization in
the kernels' store); QuantizeLinear by the FPU's VCVTR (isa/fpv4) with ties, NaN, +-Inf and
huge values into every 8- and 16-bit type. Equal to the generic bundle on every output.
"""
import json

import numpy as np
import onnx
import pytest
from onnx import helper

import aicc
from aicc.kernels.qgemm import pairs
from aicc.runner import open_bundle
from aicc.targets import load_target
from tests.oracle import PLAIN_CFLAGS, STRICT_CFLAGS, make_model
from tests.ops.test_qlinear import _conv_ref

M4 = "cortex-m4"
# the targets with the DSP extension's kernels: cortex-m7 and cortex-m55 extend cortex-m4 (the
# same kernels and integer requantization, compiled for their cores)
DSP_TARGETS = [pytest.param(t, marks=pytest.mark.skipif(bool(load_target(t).missing_tools()),
                                                        reason="make cross-toolchain"))
               for t in (M4, "cortex-m7", "cortex-m55")]


def test_arrange_layout():
    """Words [block][k / 4][R], bytes k = 0, 2, 1, 3: lo / hi halves give (k0, k1), (k2, k3)."""
    r = np.random.default_rng(0)
    for rows, k, per in [(5, 7, 2), (6, 9, 4), (3, 4, 4), (1, 1, 2)]:
        w = r.integers(-128, 128, size=(1, rows, k))
        words = pairs.arrange(w, per)
        b = words.view(np.int8).reshape(-1, -(-k // 4), per, 4)      # [block][k/4][R][4]
        back = b[..., [0, 2, 1, 3]].transpose(0, 2, 1, 3).reshape(-1, -(-k // 4) * 4)
        np.testing.assert_array_equal(back[:rows, :k], w[0])
        assert not back[rows:].any() and not back[:, k:].any()
    assert pairs.arrange(np.array([[[128]]])) is None


def _model(r):
    i8 = lambda *s: r.integers(-128, 128, size=s).astype(np.int8)     # noqa: E731
    shape = (1, 6, 7, 5)       # 35 positions: odd
    xs = i8(*shape)
    xu = r.integers(0, 256, size=shape).astype(np.uint8)
    x1 = i8(1, 6, 13)
    feeds = {"xs": xs, "xu": xu, "x1": x1, "a1": i8(1, 33), "a5": i8(5, 33)}
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
    conv("dot_odd", "xs", i8(5, 6, 3, 3), p1)                       # 5 channels, K 54
    conv("dot_grp", "xu", i8(8, 3, 3, 3), {**p1, "group": 2})       # K 27 per group
    conv("dot_s2", "xs", i8(7, 6, 3, 3), {**p1, "strides": [2, 2]})
    conv("dot_dil", "xu", i8(4, 6, 3, 3), {"pads": [2, 2, 2, 2], "dilations": [2, 2]})
    wzu = r.integers(126, 131, size=6).astype(np.uint8)             # uint8 w - zp in int8
    wu = (wzu.reshape(-1, 1, 1, 1) + r.integers(-126, 125, size=(6, 6, 2, 3))).astype(np.uint8)
    conv("dot_wzp", "xs", wu, {"pads": [0, 1, 1, 0]}, wz=wzu)
    conv("dot_1x1", "xu", i8(9, 6, 1, 1), {})
    conv("dot_1x1s", "xs", i8(9, 6, 1, 1), {})                      # int8: the SXTB16 gather
    conv("dot_1x1g", "xs", i8(8, 3, 1, 1), {"group": 2})            # K 3
    conv("dot_wide", "xs", r.integers(0, 256, size=(4, 6, 3, 3)).astype(np.uint8), p1)
    conv("dot_1d", "x1", i8(6, 6, 5), {"pads": [2, 1], "strides": [2]})
    conv("dw_s1", "xs", i8(6, 1, 3, 3), {**p1, "group": 6})
    conv("dw_s2", "xu", i8(6, 1, 3, 3), {**p1, "group": 6, "strides": [2, 2]})
    conv("dw_mult", "xs", i8(12, 1, 3, 3), {**p1, "group": 6})      # 2 outputs per channel
    conv("dw_1d", "x1", i8(6, 1, 3), {"pads": [1, 1], "group": 6})
    # int8 input: the packed fill, stride 1 and 2, both column phases first
    conv("dw_s2s", "xs", i8(6, 1, 3, 3), {**p1, "group": 6, "strides": [2, 2]})
    conv("dw_s2p0", "xs", i8(6, 1, 3, 3), {"pads": [0, 0, 1, 1], "group": 6, "strides": [2, 2]})
    conv("dw_1d_s2", "x1", i8(6, 1, 3), {"pads": [1, 0], "group": 6, "strides": [2]})
    conv("dw_5x5", "xs", i8(6, 1, 5, 5), {"pads": [2, 2, 2, 2], "group": 6})
    conv("dw_dil", "xu", i8(6, 1, 3, 3), {"pads": [2, 2, 2, 2], "dilations": [2, 2],
                                          "group": 6})
    # matmuls: one row (matrix-vector kernel), five rows (dot kernel); N 10, K 33
    for a in ("a1", "a5"):
        b = r.integers(-126, 128, size=(33, 10)).astype(np.int8)     # b - 2 in int8
        inits[f"{a}_b"], inits[f"{a}_bz"] = b, np.int8(2)
        nodes.append(helper.make_node("MatMulInteger", [a, f"{a}_b", "zs", f"{a}_bz"],
                                      [f"mm_{a}"]))
        outs.append(f"mm_{a}")
        refs[f"mm_{a}"] = (feeds[a].astype(np.int64) + 3) @ (b.astype(np.int64) - 2)
    # requantized: QLinearConv per channel with bias (dot kernel, depthwise), QLinearMatMul
    f32 = np.float32
    inits.update({"s_x": f32(0.05), "s_y": f32(0.4), "yz": np.int8(3),
                  "qc_w": i8(5, 6, 3, 3), "qc_ws": r.uniform(0.002, 0.004, 5).astype(f32),
                  "qc_wz": np.zeros(5, np.int8), "qc_b": r.integers(-500, 500, 5).astype(np.int32),
                  "qd_w": i8(6, 1, 3, 3), "qd_ws": f32(0.01), "qd_wz": np.int8(0),
                  "qm_b": i8(33, 10), "qm_bs": r.uniform(0.002, 0.004, 10).astype(f32),
                  "qm_bz": np.zeros(10, np.int8)})
    nodes += [helper.make_node("QLinearConv", ["xs", "s_x", "zs", "qc_w", "qc_ws", "qc_wz",
                                               "s_y", "yz", "qc_b"], ["qconv"], **p1),
              helper.make_node("QLinearConv", ["xs", "s_x", "zs", "qd_w", "qd_ws", "qd_wz",
                                               "s_y", "yz"], ["qdw"], group=6, **p1),
              helper.make_node("QLinearMatMul", ["a1", "s_x", "zs", "qm_b", "qm_bs", "qm_bz",
                                                 "s_y", "yz"], ["qmv"])]
    outs += ["qconv", "qdw", "qmv"]
    # QuantizeLinear by the FPU's rounding conversion (isa/fpv4): ties, NaN, +-Inf, huge
    # values, each output type, zero points at the ends
    xq = (r.integers(-700, 700, size=64) * 0.25).astype(f32)
    xq[:8] = [np.nan, np.inf, -np.inf, 3e38, -3e38, 1e-40, -0.0, 2.5]
    feeds["xq"] = xq
    for t, zp in [(np.int8, -128), (np.uint8, 255), (np.int16, 7), (np.uint16, 40000)]:
        name = f"q_{np.dtype(t).name}"
        inits[f"{name}_z"] = np.array(zp, t)
        nodes.append(helper.make_node("QuantizeLinear", ["xq", "s_q", f"{name}_z"], [name]))
        outs.append(name)
    inits["s_q"] = f32(0.5)
    return make_model(nodes, feeds, outs, inits, opset=13), feeds, refs


@pytest.mark.parametrize("target", DSP_TARGETS)
def test_pair_kernels_match_generic_and_exact_sums(target, tmp_path):
    model, feeds, refs = _model(np.random.default_rng(51))
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    outs = {}
    for t in (target, "generic"):
        b = aicc.build(path, target=t, out=tmp_path / t)
        outs[t] = open_bundle(b, cflags=PLAIN_CFLAGS if t == target else STRICT_CFLAGS) \
            .run(feeds)
    steps = json.loads((tmp_path / target / "manifest.json").read_text())["steps"]
    kern = {s["outputs"][0]: s.get("kernel", "") for s in steps}
    m55 = target == "cortex-m55"
    for k, v in kern.items():       # the pair kernels, or the portable fallbacks; on
        # cortex-m55 the Helium kernels first (tests/ops/test_qgemm_helium.py)
        want = (("helium" if m55 else "fpv4") if k.startswith("q_") else
                "generic idot4" if k == "dot_wide" else
                "helium qvdw" if m55 and k.startswith(("dw", "qdw")) else
                "" if k in ("dw_5x5", "dw_dil") else
                "dsp qpdw" if k.startswith(("dw", "qdw")) else
                "helium qvdot2" if m55 else
                "dsp qpgemv4" if k in ("mm_a1", "qmv") else "dsp qpdot2")
        assert v == want, (k, v)
    got, gen = outs[target], outs["generic"]
    for k in gen:
        np.testing.assert_array_equal(got[k], gen[k], err_msg=k)
    for k, ref in refs.items():
        np.testing.assert_array_equal(got[k].astype(np.int64), ref.astype(np.int64), err_msg=k)
    for k in ("qconv", "qdw", "qmv"):
        live = ((got[k] > -128) & (got[k] < 127)).mean()
        assert live > 0.3, (k, live)
