"""aicc.QConvNHWC (ops/qconv_nhwc.py): chains of QLinearConvs (pointwise -> depthwise ->
pointwise, as MobileNetV2's int8 blocks) that layout-nhwc runs channel-last, on generic and
every runnable x86 target: the values of the numpy reference layer by layer (exact integer
sums, float64 requantization) bit for bit; with a QDQ residual Add, the values of the same
model run NCHW (layout-nhwc off, qlinear.py's loops on generic). Awkward shapes: channel
counts that are not multiples of the vector width (masked tails, the 8-lane AVX-512 form for
<= 8 channels), K not a multiple of 4 (rows copied, not read in place), stride 2,
dilation, asymmetric padding, a 5x5 kernel, batch 2, per-channel scales and zero points,
uint8 weights (the pair form), int8 activations."""
import json
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

from aicc.targets import runnable_targets
from tests.oracle import compile_and_run, make_model, pipeline_yaml, rng
from tests.ops.test_qgemm_simd import _qconv_ref
from tests.ops.test_qlinear import _conv_ref, _rand

TARGETS = ["generic"] + [t for t in runnable_targets() if t.startswith("x86-")]

CASES = {   # x shape [N, C, H, W], expanded channels E, the depthwise conv's attributes
    "mv2": ((1, 16, 7, 7), 96, {"pads": [1, 1, 1, 1]}),
    "tail_s2": ((1, 12, 9, 9), 40, {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    "narrow_dil": ((2, 5, 10, 10), 7, {"pads": [2, 2, 2, 2], "dilations": [2, 2]}),
    "5x5_asym": ((1, 24, 13, 11), 144, {"kernel_shape": [5, 5], "pads": [2, 1, 1, 2],
                                        "strides": [2, 1]}),
}


def _config(tmp_path, mode):
    return pipeline_yaml(Path(tmp_path) / f"layout_{mode}.yaml", {"layout-nhwc": {"mode": mode}})


def _layer(r, name, x, cout, k, attrs, xt, wt, per_channel, bias):
    """A QLinearConv's initializers (output scale set for outputs spread ~ +-40) and its
    numpy output."""
    cin = x.shape[1]
    group = cin if k != 1 else 1
    ws = (cout, cin // group, *k) if isinstance(k, tuple) else (cout, cin // group, k, k)
    nch = cout if per_channel else 1
    v = {"x": x, "xs": np.array(np.float32(0.05)), "xz": np.array(_rand(r, xt, ())),
         "w": _rand(r, wt, ws), "wsc": r.uniform(0.002, 0.02, size=(nch,)).astype(np.float32),
         "wz": (r.integers(100, 156, size=(nch,)).astype(wt) if wt == np.uint8
                else np.zeros((nch,), wt)),
         "yz": np.array(_rand(r, xt, ())),
         "b": (r.integers(-20000, 20000, size=(cout,)) if bias
               else np.zeros(cout, np.int64)).astype(np.int32)}
    a = {"group": group, **attrs}
    acc = _conv_ref({"x": x}, {k: v[k] for k in ("w", "xz", "wz")}, ["x", "w", "xz", "wz"], a)
    v["ys"] = np.array(np.float32(acc.std() * 0.05 * float(v["wsc"].mean()) / 40))
    y = _qconv_ref(v, a)
    inits = {f"{name}_{k}": v[k] for k in ("xs", "xz", "w", "wsc", "wz", "ys", "yz", "b")}
    order = [f"{name}_{k}" for k in ("xs", "xz", "w", "wsc", "wz", "ys", "yz")]
    if bias:
        order.append(f"{name}_b")
    else:
        del inits[f"{name}_b"]
    return inits, order, a, y


def _chain(case, xt, wt, per_channel, seed):
    """(model, feeds, numpy output of the three convs) of pw -> dw -> pw."""
    xs, e, dwa = CASES[case]
    r = rng(seed)
    x = _rand(r, xt, xs)
    dwa = dict(dwa)
    k = tuple(dwa.pop("kernel_shape", [3, 3]))
    nodes, inits, cur, prev = [], {}, x, "x"
    for i, (cout, kk, attrs) in enumerate([(e, 1, {}), (e, k, dwa), (xs[1], 1, {})]):
        li, order, a, cur = _layer(r, f"l{i}", cur, cout, kk, attrs, xt, wt,
                                   per_channel and i != 1, bias=i != 2)
        inits.update(li)
        out = f"q{i}" if i < 2 else "y"
        nodes.append(helper.make_node("QLinearConv", [prev] + order, [out], **a))
        prev = out
    model = make_model(nodes, {"x": x}, ["y"], inits, opset=13)
    return model, {"x": x}, cur


def _run(model, feeds, tmp_path, target, mode):
    got = compile_and_run(model, feeds, tmp_path, target=target, config=_config(tmp_path, mode))
    builds = sorted(Path(tmp_path).glob("b*/manifest.json"), key=lambda p: p.stat().st_mtime)
    steps = json.loads(builds[-1].read_text())["steps"]
    return got["y"], steps


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_qconv_nhwc_chain(case, target, tmp_path):
    model, feeds, want = _chain(case, np.uint8, np.int8, per_channel=case != "mv2",
                                seed=len(case))
    got, steps = _run(model, feeds, tmp_path, target, "all")
    convs = [s for s in steps if s["op"] == "QConvNHWC"]
    assert len(convs) == 3
    isa = "generic" if target == "generic" else target.split("-")[1]
    assert {s["kernel"] for s in convs} == {isa}
    np.testing.assert_array_equal(got, want)
    assert ((got > 0) & (got < 255)).mean() > 0.3       # mostly not saturated: a real test


@pytest.mark.parametrize("target", [t for t in TARGETS if t != "generic"])
@pytest.mark.parametrize("xt,wt", [(np.int8, np.int8), (np.uint8, np.uint8)])
def test_qconv_nhwc_dtypes(xt, wt, target, tmp_path):
    model, feeds, want = _chain("tail_s2", xt, wt, per_channel=True, seed=7)
    got, _ = _run(model, feeds, tmp_path, target, "all")
    np.testing.assert_array_equal(got, want)
    lo, hi = np.iinfo(xt).min, np.iinfo(xt).max
    assert ((got > lo) & (got < hi)).mean() > 0.3


@pytest.mark.parametrize("target", [t for t in TARGETS if t != "generic"])
def test_qconv_nhwc_residual(target, tmp_path):
    """The QDQ residual (DequantizeLinear of both branches, Add, QuantizeLinear) runs on the
    channel-last tensors too: the NCHW build's values, with two transposes in all."""
    model, feeds, _ = _chain("mv2", np.uint8, np.int8, per_channel=False, seed=3)
    g = model.graph
    for n in g.node:
        if n.output[0] == "y":
            n.output[0] = "p"
    consts = {"s_p": 0.11, "s_x": 0.05, "s_y": 0.15}
    for k, v in consts.items():
        g.initializer.append(helper.make_tensor(k, 1, [], [v]))
    for k, v in (("z_p", 128), ("z_x", 128), ("z_y", 120)):
        g.initializer.append(helper.make_tensor(k, 2, [], [v]))
    g.node.extend([
        helper.make_node("DequantizeLinear", ["p", "s_p", "z_p"], ["dp"]),
        helper.make_node("DequantizeLinear", ["x", "s_x", "z_x"], ["dx"]),
        helper.make_node("Add", ["dp", "dx"], ["s"]),
        helper.make_node("QuantizeLinear", ["s", "s_y", "z_y"], ["y"])])
    got, steps = _run(model, feeds, tmp_path, target, "all")
    assert sum(s["op"] == "Transpose" for s in steps) == 2, [s["op"] for s in steps]
    want, _ = _run(model, feeds, tmp_path, "generic", "off")
    np.testing.assert_array_equal(got, want)
    assert ((got > 0) & (got < 255)).mean() > 0.3
