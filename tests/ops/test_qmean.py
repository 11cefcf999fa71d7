"""aicc.QMean (pass fuse-qmean): QDQ global average pooling summed in integers.

- Structure: GlobalAveragePool, ReduceMean (axes as attribute, as input, negative, none,
  keepdims 0), AveragePool over the whole plane, with reshapes before the QuantizeLinear,
  become one QMean; a mean over other axes, a window smaller than the plane, padding, a
  per-channel DequantizeLinear and a mean read twice are left alone.
- Values on the host targets and on cortex-m4 under qemu (32-bit integer requantization):
  equal to the float64 form computed here (sum of x - zx, times x_scale / (y_scale n) as
  float32, rint half to even, + zy, saturated), and within one step of onnxruntime and of
  onnx.reference (the float chain) on nearly every output.
"""
import json

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import aicc
from aicc.frontend import prepare, to_graph
from aicc.runner import open_bundle
from aicc.targets import load_target, runnable_targets
from tests.oracle import PLAIN_CFLAGS, STRICT_CFLAGS, make_model
from tests.passes.helpers import ops, run_pass

M4 = "cortex-m4"
HOST = ["generic"] + [t for t in runnable_targets() if t == "x86-avx2"]
TARGETS = HOST + ([] if load_target(M4).missing_tools() else [M4])


def _model(pool="gap", xdt=np.int8, shape=(2, 24, 7, 5), extra=None, seed=3, sx=0.0473,
           sy=0.0217):
    """DQ(x) -> pool -> [Reshape] -> Q; pool names a variant below. (Scales as a quantizer
    writes them: with round ones, x_scale / (y_scale n) is a fraction of small denominator and
    many means are exact half-integers, which the float chain's roundings send either way.)"""
    r = np.random.default_rng(seed)
    lo, hi = np.iinfo(xdt).min, np.iinfo(xdt).max
    zx, zy = (xdt(-20), xdt(5)) if xdt == np.int8 else (xdt(120), xdt(130))
    inits = {"sx": np.float32(sx), "zx": np.asarray(zx), "sy": np.float32(sy),
             "zy": np.asarray(zy)}
    nodes = [helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["x"])]
    opset, out = 19, "m"      # (ReduceMean's axes attribute: opset 17)
    if pool == "gap":
        nodes.append(helper.make_node("GlobalAveragePool", ["x"], ["m"]))
    elif pool == "mean_attr":
        opset = 17
        nodes.append(helper.make_node("ReduceMean", ["x"], ["m"], axes=[2, 3], keepdims=1))
    elif pool == "mean_input":
        inits["axes"] = np.array([-1, -2], np.int64)
        nodes.append(helper.make_node("ReduceMean", ["x", "axes"], ["m"], keepdims=0))
    elif pool == "mean_all":
        nodes.append(helper.make_node("ReduceMean", ["x"], ["m"], keepdims=0))
    elif pool == "mean_c":                         # over the channels: left alone
        opset = 17
        nodes.append(helper.make_node("ReduceMean", ["x"], ["m"], axes=[1], keepdims=1))
    elif pool == "avg":
        nodes.append(helper.make_node("AveragePool", ["x"], ["m"], kernel_shape=list(shape[2:])))
    elif pool == "avg_small":                      # a window smaller than the plane
        nodes.append(helper.make_node("AveragePool", ["x"], ["m"], kernel_shape=[2, 2]))
    elif pool == "avg_pad":
        nodes.append(helper.make_node("AveragePool", ["x"], ["m"], kernel_shape=list(shape[2:]),
                                      pads=[1, 1, 1, 1]))
    if extra == "reshape":
        inits["shp"] = np.array([shape[0], -1], np.int64)
        nodes.append(helper.make_node("Reshape", ["m", "shp"], ["v"]))
        out = "v"
    elif extra == "second_reader":
        nodes.append(helper.make_node("Relu", ["m"], ["r"]))
    elif extra == "per_channel":
        inits["sx"] = np.linspace(0.04, 0.06, shape[1]).astype(np.float32)
        inits["zx"] = np.full(shape[1], zx, xdt)
        nodes[0] = helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["x"], axis=1)
    nodes.append(helper.make_node("QuantizeLinear", [out, "sy", "zy"], ["y"]))
    feeds = {"xq": r.integers(lo, int(hi) + 1, shape).astype(xdt)}
    outs = ["y"] + (["r"] if extra == "second_reader" else [])
    return make_model(nodes, feeds, outs, inits, opset=opset), feeds


def _float64_form(model, feeds, axis=2):
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
    x = feeds["xq"].astype(np.int64) - int(inits["zx"])
    n = int(np.prod(x.shape[axis:]))
    a = x.reshape(int(np.prod(x.shape[:axis])), n).sum(axis=1)
    m = np.float32(np.float64(inits["sx"]) / (np.float64(inits["sy"]) * n))
    info = np.iinfo(inits["zy"].dtype)
    return np.clip(np.rint(a * np.float64(m)) + int(inits["zy"]), info.min, info.max)


@pytest.mark.parametrize("pool,extra", [("gap", None), ("mean_attr", None), ("mean_input", None),
                                        ("mean_all", None), ("avg", None), ("gap", "reshape"),
                                        ("mean_attr", "reshape")])
def test_fused(pool, extra):
    model, _ = _model(pool, extra=extra)
    after = run_pass("fuse-qmean", to_graph(prepare(model)))
    assert ops(after) == ["DequantizeLinear", "QMean"], ops(after)
    q = after.nodes[-1]
    assert q.outputs == ["y"] and q.attrs["axis"] == (0 if pool == "mean_all" else 2)


@pytest.mark.parametrize("pool,extra", [("mean_c", None), ("avg_small", None), ("avg_pad", None),
                                        ("gap", "per_channel"), ("gap", "second_reader")])
def test_left_alone(pool, extra):
    model, _ = _model(pool, extra=extra)
    after = run_pass("fuse-qmean", to_graph(prepare(model)))
    assert "QMean" not in ops(after) and "QuantizeLinear" in ops(after)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("pool,xdt,shape", [("gap", np.int8, (2, 24, 7, 5)),
                                            ("mean_input", np.uint8, (1, 16, 25, 5)),
                                            ("avg", np.int8, (1, 40, 8, 8)),
                                            ("mean_all", np.uint8, (3, 50))])
def test_values(pool, xdt, shape, target, tmp_path):
    model, feeds = _model(pool, xdt, shape, extra="reshape" if pool == "gap" else None)
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    out = aicc.build(path, target=target, out=tmp_path / "b")
    steps = [s["op"] for s in json.loads((out / "manifest.json").read_text())["steps"]]
    assert steps == ["QMean"], steps
    y = open_bundle(out, cflags=PLAIN_CFLAGS if target == M4 else STRICT_CFLAGS).run(feeds)["y"]
    got = y.astype(np.int64)
    want = _float64_form(model, feeds, 0 if pool == "mean_all" else 2)
    np.testing.assert_array_equal(got.reshape(-1), want.reshape(-1))
    info = np.iinfo(y.dtype)          # real values: not saturated, and (but one output) varied
    assert ((got > info.min) & (got < info.max)).mean() > 0.9
    assert got.size == 1 or np.unique(got).size > 5
    import onnxruntime as ort
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for chain in (sess.run(None, feeds)[0], ReferenceEvaluator(model).run(None, feeds)[0]):
        d = np.abs(got.reshape(-1) - chain.astype(np.int64).reshape(-1))
        assert d.max() <= 1 and (d == 0).mean() >= 0.95, (d.max(), (d == 0).mean())
