"""The SIMD channel-last depthwise kernel (kernels/conv/nhwc_dw.py) on x86-avx2 / x86-avx512
against onnxruntime. Standard ONNX models (NCHW depthwise Conv, group = C, constant weights,
bias or none, an activation node after it) are compiled with the layout-nhwc pass in mode
``all`` (auto skips large planes of few channels), so every conv becomes an aicc.ConvNHWC
step whose manifest kernel must be the target's ISA, with the activation fused.

Covered: C in {3, 8, 16, 17, 40, 64, 96, 100, 144} (lane tails masked, ymm vectors for
C <= 8 on avx512, several channel groups), stride 1 / 2 / mixed, dilation 2, 3x3 / 5x5 /
1x3 / 10x4 kernels, symmetric / asymmetric / no padding (and padding larger than the kernel
reach: outputs with no valid tap), planes 1x1 .. 56x56, batch 2, channel strips (wide rows),
fused Relu / Clip(0, 6) / LeakyRelu / Sigmoid (register clamp or the scalar pass, per row or
per batch item), NaN / Inf inputs and zero weights (0 * Inf), a run-time bias, clang. Several
convs share one model (one graph input and output each) to keep the file fast. Targets the
host cannot run are skipped."""
import json
import os
import shutil
import zlib
from types import SimpleNamespace

import numpy as np
import onnx
import pytest
import yaml
from onnx import helper

import aicc
from aicc.bundle.writer import write_bundle
from aicc.config import DEFAULT_CONFIG, Options
from aicc.emit_c.lower import lower
from aicc.frontend import import_model
from aicc.ir import TensorType
from aicc.kernels.conv import nhwc_dw as conv_nhwc_dw
from aicc.ops import load_all
from aicc.ops.conv_nhwc import Geo
from aicc.passes import run_pipeline
from aicc.targets import runnable_targets
from tests.oracle import CHECKED, STRICT_CFLAGS, assert_close, make_model, reference, rng

TARGETS = [t for t in runnable_targets() if t in ("x86-avx2", "x86-avx512")]
pytestmark = pytest.mark.skipif(not TARGETS, reason="host runs no x86 SIMD target")
ACT_NODES = {"Relu", "Clip", "LeakyRelu", "Sigmoid"}


def overrides() -> dict:
    """The default pipeline with layout-nhwc in mode all (+ checked memory under make checked)."""
    d = yaml.safe_load(DEFAULT_CONFIG.read_text())
    pipe = [{"layout-nhwc": {"mode": "all"}} if p == "layout-nhwc" else p
            for p in d["pipeline"]]
    assert {"layout-nhwc": {"mode": "all"}} in pipe
    over = {"pipeline": pipe}
    if CHECKED:
        over["memory"] = {"checked": True}
    return over


def dw(c, hw, k=(3, 3), n=1, **o):
    """A case: NCHW x shape, depthwise weight shape, Conv attributes, options."""
    attrs = {"group": c, **{a: o.pop(a) for a in ("strides", "pads", "dilations", "auto_pad")
                            if a in o}}
    return (n, c, *hw), (c, 1, *k), attrs, o


def build_model(cases):
    """(model, feeds): one depthwise Conv (-> activation) per case, inputs x{i}, outputs y{i}."""
    feeds, inits, nodes = {}, {}, []
    for i, (xs, ws, attrs, o) in enumerate(cases):
        r = rng(zlib.crc32(repr((xs, ws, sorted(attrs.items()))).encode()) % 1000)
        x = r.normal(size=xs).astype(np.float32)
        for idx, v in o.get("bad", ()):
            x[idx] = v
        feeds[f"x{i}"] = x
        w = (r.normal(size=ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
        for c in o.get("zero_w", ()):
            w[c] = 0.0
        inits[f"w{i}"] = w
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
            params = {"alpha": 0.1} if act == "LeakyRelu" else {}
            nodes.append(helper.make_node(act, [f"t{i}"], [f"y{i}"], **params))
    outs = [f"y{i}" for i in range(len(cases))]
    return make_model(nodes, feeds, outs, inits, opset=17), feeds


def manifest_checks(out, target, n):
    steps = json.loads((out / "manifest.json").read_text())["steps"]
    conv = [s for s in steps if s["op"] == "ConvNHWC"]
    assert len(conv) == n, steps
    assert all(s["kernel"] == target.split("-")[1] for s in conv), conv
    assert not [s for s in steps if s["op"] in ACT_NODES | {"Conv"}], steps   # all fused


def check_cases(tmp_path, target, cases, marks=()):
    model, feeds = build_model(cases)
    want = reference(model, feeds)
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    out = aicc.build(path, target=target, out=tmp_path / "b", overrides=overrides())
    manifest_checks(out, target, len(cases))
    text = (out / "model.c").read_text()
    for m in marks:
        assert m in text, m
    got = aicc.load(out, cflags=STRICT_CFLAGS).run(feeds)
    assert_close(got, want)
    return got, want


P1 = {"pads": [1, 1, 1, 1]}
SHAPES = {
    "small_c": [
        dw(3, (7, 7), act="Relu", **P1),
        dw(8, (28, 28), act="Clip", **P1),
        dw(16, (8, 8)),                                           # no padding
        dw(17, (9, 11), strides=[2, 2], pads=[0, 1, 1, 0], act="LeakyRelu"),
        dw(8, (2, 3), k=(5, 5), pads=[2, 2, 2, 2], act="Sigmoid"),
        dw(16, (56, 56), strides=[2, 2], act="Clip", **P1),
        dw(3, (1, 1), **P1),
        dw(2, (6, 5), k=(1, 3), strides=[1, 2], pads=[0, 1, 0, 1]),
    ],
    "wide_c": [
        dw(40, (2, 3), k=(5, 5), pads=[2, 2, 2, 2], act="Sigmoid"),
        dw(64, (1, 1), bias=False, **P1),
        dw(96, (14, 14), dilations=[2, 2], pads=[2, 2, 2, 2], act="Clip"),
        dw(144, (7, 7), k=(1, 3), pads=[0, 1, 0, 1], act="Relu"),
        dw(40, (12, 9), k=(10, 4), pads=[2, 1, 3, 2], act="LeakyRelu"),
        dw(17, (13, 10), n=2, strides=[2, 1], pads=[1, 0, 2, 1], bias=False),
        dw(64, (7, 7), strides=[2, 2], auto_pad="SAME_UPPER", act="Clip"),
        dw(40, (5, 4), pads=[4, 3, 5, 4], act="Relu"),           # rows / columns without taps
    ],
    "large": [
        dw(8, (56, 56), act="Clip", **P1),
        dw(32, (28, 28), act="Relu", **P1),
        dw(96, (28, 28), strides=[2, 2], act="Clip", **P1),
        dw(24, (19, 23), k=(5, 5), dilations=[2, 1], pads=[4, 2, 3, 1]),
    ],
    "strips": [           # input rows wider than the L1 budget: channel strips
        dw(100, (30, 40), n=2, act="LeakyRelu", **P1),
        dw(144, (56, 56), act="Clip", **P1),
        dw(200, (9, 64), strides=[2, 2], act="Relu", **P1),
        dw(96, (11, 70), k=(5, 5), pads=[2, 2, 2, 2], act="Sigmoid", bias=False),
        dw(44, (5, 150), act="Relu", **P1),     # one vector's rows past the budget
    ],
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("group", sorted(SHAPES))
def test_dw_shapes(group, target, tmp_path):
    marks = ["aicc_dwn_avx512y_"] if target == "x86-avx512" and group == "small_c" else []
    if target == "x86-avx512" and group == "wide_c":
        marks.append("AICC_PIN(s);")     # the 16-lane kernels keep their inputs in registers
    check_cases(tmp_path, target, SHAPES[group], marks)


def test_dw_strips_are_used():
    """The strips cases really split the channels (and the masked tail is a strip's), in
    strips of at least a cache line (64 bytes) of channels."""
    for xs, ws, attrs, _ in SHAPES["strips"]:
        node = SimpleNamespace(attrs={k: v for k, v in attrs.items() if k != "auto_pad"})
        geo = Geo(node, (xs[0], xs[2], xs[3], xs[1]), ws)
        for fl in ("avx2", "avx512"):
            gen = conv_nhwc_dw._Gen(fl, geo)
            assert gen.sv < gen.nv, (xs, fl)
            assert gen.sv * gen.L * 4 >= 64, (xs, fl)


@pytest.mark.parametrize("target", TARGETS)
def test_dw_nan_inf(target, tmp_path):
    """IEEE: NaN / +-Inf inputs reach exactly the outputs whose valid taps cover them
    (padding never multiplies), 0 * Inf = NaN for zero weights; NaN passes Relu / Clip."""
    bad = [((0, 0, 1, 1), np.nan), ((0, 1, 4, 2), np.inf), ((0, 2, 5, 5), -np.inf),
           ((0, 16, 0, 0), np.inf), ((0, 16, 3, 6), np.nan), ((0, 5, 5, 0), -np.inf)]
    cases = [dw(17, (6, 7), act=act, bad=bad, zero_w=[1], **P1)
             for act in (None, "Relu", "Clip", "Sigmoid")]
    cases.append(dw(3, (6, 7), bad=bad[:3], zero_w=[0], strides=[2, 2], **P1))
    got, _ = check_cases(tmp_path, target, cases)
    assert np.isnan(got["y0"]).any() and np.isinf(got["y0"]).any()
    assert np.isnan(got["y1"]).any() and np.isnan(got["y2"]).any()


@pytest.mark.parametrize("target", TARGETS)
def test_dw_runtime_bias(target, tmp_path):
    """A ConvNHWC whose bias is not a constant (the pass never makes one; the op allows it):
    the padded bias is copied into scratch at run time."""
    model, feeds = build_model([dw(20, (5, 6), act="Relu", **P1)])
    want = reference(model, feeds)
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    load_all()
    opts = Options.load(target, overrides=overrides())
    g = run_pipeline(import_model(path), opts.pipeline)
    (node,) = [n for n in g.nodes if n.op_type == "ConvNHWC"]
    b = node.inputs[2]
    feeds[b] = g.constants.pop(b)
    g.types[b] = TensorType(np.dtype(np.float32), feeds[b].shape)
    g.inputs.append(b)
    prog = lower(g, opts)
    out = write_bundle(prog, tmp_path / "b", name=opts.name, target=opts.target, opts=opts,
                       model_sha="0" * 64,
                       original_inputs=[{"name": k, "shape": list(v.shape)}
                                        for k, v in feeds.items()])
    assert "bpad" in (out / "model.c").read_text()
    assert_close(aicc.load(out, cflags=STRICT_CFLAGS).run(feeds), want)


@pytest.mark.skipif(shutil.which("clang") is None or os.environ.get("AICC_SANITIZE") == "1",
                    reason="no clang (or a sanitizer build: gcc's runtimes are preloaded)")
@pytest.mark.parametrize("target", TARGETS)
def test_dw_clang(target, tmp_path, monkeypatch):
    """The generated kernels also compile warning-free with clang."""
    monkeypatch.setenv("CC", "clang")
    check_cases(tmp_path, target, [dw(17, (9, 11), strides=[2, 2], pads=[0, 1, 1, 0],
                                      act="LeakyRelu"),
                                   dw(8, (5, 6), k=(1, 3), pads=[0, 1, 0, 1], act="Clip"),
                                   dw(100, (30, 40), act="Relu", **P1)])
