"""The channel-last group-1 conv as shifted pointwise GEMMs over each tap's valid rectangle
(kernels/conv/taps.py, ConvNHWC's ``taps`` kernel) on x86-avx2 / x86-avx512 against
onnxruntime. Standard ONNX models (NCHW Conv, group 1, constant weights, bias or none, an
activation node after it) are compiled with layout-nhwc in mode ``all``, so each conv is an
aicc.ConvNHWC step; the manifest must name the taps kernel for every conv whose (position,
tap) pairs are at most half inside the input, and the im2col GEMM for the others.

Covered: DeepLabV3's ASPP shape scaled down (3x3, dilation 6 on 8 x 8: partial taps; 12 and
18: only the centre tap, one run over the whole plane), stride 2 with dilation, asymmetric
pads, non-square kernels and planes, batch 2, channel counts off the vector width and the K
block (Cin 200, Cout 20 / 3), no full-cover tap (Y zeroed first) and outputs with no valid
tap (act(bias)), fused Relu / Clip / Sigmoid / HardSigmoid or none, NaN / Inf inputs."""
import json
import zlib
from types import SimpleNamespace

import numpy as np
import onnx
import pytest
from onnx import helper

import aicc
from aicc.kernels.conv import taps as conv_taps
from aicc.ops.conv_nhwc import Geo
from aicc.targets import runnable_targets
from tests.oracle import STRICT_CFLAGS, assert_close, make_model, reference, rng
from tests.ops.test_conv_nhwc_dw import overrides

TARGETS = [t for t in runnable_targets() if t in ("x86-avx2", "x86-avx512")]
pytestmark = pytest.mark.skipif(not TARGETS, reason="host runs no x86 SIMD target")


def cv(cin, cout, hw, k=(3, 3), n=1, **o):
    """A case: NCHW x shape, weight shape, Conv attributes, options."""
    attrs = {a: o.pop(a) for a in ("strides", "pads", "dilations") if a in o}
    return (n, cin, *hw), (cout, cin, *k), attrs, o


def build_model(cases):
    feeds, inits, nodes = {}, {}, []
    for i, (xs, ws, attrs, o) in enumerate(cases):
        r = rng(zlib.crc32(repr((xs, ws, sorted(attrs.items()))).encode()) % 1000)
        x = r.normal(size=xs).astype(np.float32)
        for idx, v in o.get("bad", ()):
            x[idx] = v
        feeds[f"x{i}"] = x
        inits[f"w{i}"] = (r.normal(size=ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
        names = [f"x{i}", f"w{i}"]
        if o.get("bias", True):
            inits[f"b{i}"] = r.normal(size=(ws[0],)).astype(np.float32)
            names.append(f"b{i}")
        act = o.get("act")
        nodes.append(helper.make_node("Conv", names, [f"t{i}" if act else f"y{i}"], **attrs))
        if act == "Clip":
            inits[f"lo{i}"], inits[f"hi{i}"] = np.float32(0.0), np.float32(6.0)
            nodes.append(helper.make_node("Clip", [f"t{i}", f"lo{i}", f"hi{i}"], [f"y{i}"]))
        elif act:
            nodes.append(helper.make_node(act, [f"t{i}"], [f"y{i}"]))
    return make_model(nodes, feeds, [f"y{i}" for i in range(len(cases))], inits,
                      opset=17), feeds


def check_cases(tmp_path, target, cases, taps):
    """Build, check the kernels (taps: per case, the taps kernel expected), compare."""
    model, feeds = build_model(cases)
    want = reference(model, feeds)
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    out = aicc.build(path, target=target, out=tmp_path / "b", overrides=overrides())
    steps = json.loads((out / "manifest.json").read_text())["steps"]
    conv = [s for s in steps if s["op"] == "ConvNHWC"]
    assert [s["kernel"].endswith(" taps") for s in conv] == taps, conv
    assert not [s for s in steps if s["op"] in ("Conv", "Relu", "Clip", "Sigmoid")], steps
    got = aicc.load(out, cflags=STRICT_CFLAGS).run(feeds)
    assert_close(got, want)
    return got, want


def geo_of(case):
    xs, ws, attrs, _ = case
    node = SimpleNamespace(attrs=attrs)
    return Geo(node, (xs[0], xs[2], xs[3], xs[1]), ws)


ASPP = [
    cv(96, 32, (8, 8), dilations=[6, 6], pads=[6, 6, 6, 6], act="Relu"),
    cv(96, 32, (8, 8), dilations=[12, 12], pads=[12, 12, 12, 12], act="Relu"),
    cv(96, 32, (8, 8), dilations=[18, 18], pads=[18, 18, 18, 18], bias=False),
]
ODD = [
    cv(200, 20, (9, 11), n=2, dilations=[6, 5], pads=[6, 5, 6, 5], act="Clip"),
    cv(17, 3, (10, 7), k=(3, 2), strides=[2, 2], dilations=[5, 6], pads=[3, 6, 5, 2],
       act="Sigmoid"),
    cv(24, 40, (5, 5), k=(2, 2), dilations=[4, 4], pads=[2, 2, 2, 2], act="HardSigmoid"),
    cv(16, 24, (4, 4), k=(2, 2), dilations=[6, 6], pads=[3, 3, 3, 3], act="Relu"),
    cv(8, 16, (6, 13), k=(1, 5), dilations=[1, 6], pads=[0, 12, 0, 12]),
]


def test_fractions():
    """The cases take the paths they are meant to: ASPP's inside fractions, the centre tap
    alone at dilation >= the plane, a zeroed Y without a full-cover tap, positions without
    taps, and an ordinary 3x3 conv left to the im2col GEMM."""
    fr = [conv_taps.inside_fraction(geo_of(c)) for c in ASPP]
    assert fr[0] == pytest.approx((2 * 2 + 8) ** 2 / (64 * 9)) and fr[1] == fr[2] == 1 / 9
    assert [t for t, _, _, _ in conv_taps.rectangles(geo_of(ASPP[1]))] == [4]
    taps, tiles, first0 = conv_taps.tile_table(geo_of(ASPP[1]), 6)
    assert first0 and taps == [(4, 0, len(tiles))] and sum(r for _, _, r in tiles) == 64
    for c in ODD[2:4]:
        assert not conv_taps.tile_table(geo_of(c), 6)[2]
    g = geo_of(ODD[3])
    covered = {(oy, ox) for _, ry, rx, _ in conv_taps.rectangles(g)
               for oy in range(*ry) for ox in range(*rx)}
    assert len(covered) < g.oh * g.ow
    assert conv_taps.inside_fraction(geo_of(cv(16, 16, (8, 8), pads=[1, 1, 1, 1]))) > 0.5


@pytest.mark.parametrize("target", TARGETS)
def test_taps_aspp(target, tmp_path):
    check_cases(tmp_path, target, ASPP, [True] * 3)


@pytest.mark.parametrize("target", TARGETS)
def test_taps_odd(target, tmp_path):
    """Other geometries, plus an ordinary padded 3x3 conv beside them (im2col)."""
    cases = ODD + [cv(16, 16, (8, 8), pads=[1, 1, 1, 1], act="Relu")]
    check_cases(tmp_path, target, cases, [True] * len(ODD) + [False])


@pytest.mark.parametrize("target", TARGETS)
def test_taps_nan_inf(target, tmp_path):
    """NaN / Inf inputs reach the outputs whose valid taps read them, not the others."""
    bad = [((0, 0, 1, 1), np.nan), ((0, 5, 6, 2), np.inf), ((0, 9, 7, 7), -np.inf)]
    cases = [cv(16, 8, (8, 8), dilations=[6, 6], pads=[6, 6, 6, 6], bad=bad, act=a)
             for a in (None, "Relu")]
    got, _ = check_cases(tmp_path, target, cases, [True, True])
    y = got["y0"]
    assert np.isnan(y).any() and not np.isnan(y).all() and np.isfinite(y).any()
