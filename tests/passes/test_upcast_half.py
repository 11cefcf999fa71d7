"""upcast-half's commuting ops (Relu, Clip, MaxPool, Max, ... read their producer's float32
value), the float32 <-> float16 Casts of the x86 SIMD targets (kernels/vmath/half.py) and float16
conv chains channel-last: structure, and bundles whose outputs are the bits of the build
without the rewiring (``commute: false``) on every target, plus onnxruntime's values."""
import io

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import aicc
from aicc.targets import runnable_targets
from tests.oracle import STRICT_CFLAGS, check, compile_and_run, make_model, pipeline_yaml
from tests.passes.helpers import build, node, ops, run_pass

TARGETS = ["generic"] + [t for t in runnable_targets() if t in ("x86-avx2", "x86-avx512")]
F16 = TensorProto.FLOAT16


def _h(*shape, seed=0, scale=1.0):
    return (np.random.default_rng(seed).normal(size=shape) * scale).astype(np.float16)


def model(half=np.float16):
    """Conv -> Relu -> MaxPool -> Clip -> Max(., Neg(conv)) -> Abs; the Relu's half output is
    also a graph output, the conv's read by a LeakyRelu (which does not commute)."""
    x = _h(1, 3, 9, 9, seed=1).astype(half)
    inits = {"w": _h(8, 3, 3, 3, seed=2, scale=0.5).astype(half),
             "lo": np.array(-0.25, half), "hi": np.array(1.5, half)}
    nodes = [node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), node("Relu", ["c"], ["r"]),
             node("MaxPool", ["r"], ["m"], kernel_shape=[2, 2], strides=[1, 1]),
             node("Clip", ["m", "lo", "hi"], ["k"]), node("Neg", ["c"], ["n"]),
             node("Slice", ["n", "st", "en"], ["ns"]), node("Max", ["k", "ns"], ["mx"]),
             node("Abs", ["mx"], ["y"]), node("LeakyRelu", ["c"], ["l"], alpha=0.1)]
    inits.update(st=np.array([0, 0], np.int64), en=np.array([8, 8], np.int64))
    nodes[5] = node("Slice", ["n", "st", "en", "ax"], ["ns"])
    inits["ax"] = np.array([2, 3], np.int64)
    return nodes, {"x": x}, ["y", "r", "l"], inits


def test_commuting_ops_read_float32():
    nodes, feeds, outs, inits = model()
    g = build(nodes, feeds, outs, inits)
    after = run_pass("upcast-half", g)
    by_op = {n.op_type: n for n in after.nodes if n.op_type != "Cast"}
    conv32 = by_op["Conv"].outputs[0]
    assert by_op["Relu"].inputs == [conv32] and by_op["Neg"].inputs == [conv32]
    assert by_op["MaxPool"].inputs == [by_op["Relu"].outputs[0]]
    assert by_op["Clip"].inputs[0] == by_op["MaxPool"].outputs[0]
    assert by_op["Abs"].inputs == [by_op["Max"].outputs[0]]
    # Slice moves half bits: Max reads the Cast of its half output, and Clip's rounded value
    assert by_op["Max"].inputs[0] == by_op["Clip"].outputs[0]
    assert after.producers()[by_op["Max"].inputs[1]].op_type == "Cast"
    # LeakyRelu reads the rounded conv output: one RoundHalf (the conv's half output has
    # only float32 readers); the Relu's rounding stays a Cast for the graph output r; the
    # MaxPool's (read by nothing but Clip) is gone; Neg's half output feeds Slice (bits)
    lk = after.producers()[by_op["LeakyRelu"].inputs[0]]
    assert lk.op_type == "RoundHalf" and lk.inputs == [conv32] and lk.domain == "aicc"
    downs = {n.inputs[0] for n in after.nodes if n.op_type == "Cast"}
    assert by_op["Relu"].outputs[0] in downs and by_op["Neg"].outputs[0] in downs
    assert by_op["MaxPool"].outputs[0] not in downs and ops(after).count("RoundHalf") == 1
    assert "c" not in after.types          # no half tensor of the conv's output left
    off = run_pass("upcast-half", g, commute=False)
    assert ops(off).count("Cast") > ops(after).count("Cast")


def _config(tmp_path, commute):
    off = {} if commute else {"upcast-half": {"commute": False, "round_op": False}}
    return pipeline_yaml(tmp_path / f"commute_{commute}.yaml", off)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("half", [np.float16, "bfloat16"])
def test_same_bits_as_without_commute(half, target, tmp_path):
    """The outputs of the build are those of the build with every rounding in place as a Cast
    pair (commute and round_op off), bit for bit (boundary values: halfway cases of the half type in x), and close to onnxruntime's
    (float16)."""
    import ml_dtypes
    ht = ml_dtypes.bfloat16 if half == "bfloat16" else np.float16
    nodes, feeds, outs, inits = model(ht)
    inits = {k: (v.astype(ht) if v.dtype.kind == "f" else v) for k, v in inits.items()}
    m = make_model(nodes, feeds, outs, inits, opset=17)
    got = [compile_and_run(m, feeds, tmp_path, target=target, config=_config(tmp_path, c))
           for c in (True, False)]
    for k in outs:
        np.testing.assert_array_equal(got[0][k].view(np.uint16), got[1][k].view(np.uint16))
    if half == np.float16:
        check(m, feeds, tmp_path, target=target, rtol=2e-3, atol=2e-3)


def _cast(x, to):
    return make_model([helper.make_node("Cast", ["x"], ["y"], to=to)], {"x": x}, ["y"])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("n", [4096 + 13, 7])
def test_cast_float16_exact(n, target, tmp_path):
    """float32 -> float16: numpy's values (nearest even, halfway cases both ways, overflow to
    Inf at 65520, subnormal and zero results, -0), vector body and tail; float16 -> float32:
    every half value exact; NaN stays NaN both ways."""
    edges = np.float32([65504, 65519.996, 65520, 1e6, -1e6, 2.0 ** -24, 2.0 ** -25,
                        2.0 ** -25 * 1.0000001, 1e-10, -0.0, np.inf, -np.inf, np.nan, 1 + 2 ** -11,
                        1 + 3 * 2 ** -11, 2.0 ** -14 * (1 - 2 ** -11)])
    r = np.random.default_rng(5)
    bits = r.integers(0x33000000, 0x47800000, size=4096, dtype=np.uint32).view(np.float32)
    x = np.concatenate([edges, bits * np.where(r.random(4096) < 0.5, -1, 1).astype(np.float32)])
    x = x[:n]
    y = compile_and_run(_cast(x, F16), {"x": x}, tmp_path, target=target)["y"]
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    nan = np.isnan(want)
    np.testing.assert_array_equal(y.view(np.uint16)[~nan], want.view(np.uint16)[~nan])
    assert np.isnan(y[nan]).all()
    h = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)[: n * 16]
    u = compile_and_run(_cast(h, TensorProto.FLOAT), {"x": h}, tmp_path, target=target)["y"]
    w = h.astype(np.float32)
    nan = np.isnan(w)
    np.testing.assert_array_equal(u.view(np.uint32)[~nan], w.view(np.uint32)[~nan])
    assert np.isnan(u[nan]).all()


@pytest.mark.parametrize("target", [t for t in TARGETS if t != "generic"])
def test_float16_chain_channel_last(target, tmp_path):
    """A float16 depthwise-separable chain runs channel-last (layout-nhwc through the Casts)
    with the Relus fused, and gives the NCHW build's values (within half rounding)."""
    x = _h(1, 16, 12, 10, seed=7)
    inits = {"w1": _h(16, 1, 3, 3, seed=8, scale=0.3), "w2": _h(24, 16, 1, 1, seed=9, scale=0.3),
             "w3": _h(24, 1, 3, 3, seed=10, scale=0.3)}
    nodes = [node("Conv", ["x", "w1"], ["a"], group=16, pads=[1, 1, 1, 1]),
             node("Relu", ["a"], ["ar"]), node("Conv", ["ar", "w2"], ["b"]),
             node("Relu", ["b"], ["br"]), node("Conv", ["br", "w3"], ["c"], group=24,
                                               pads=[1, 1, 1, 1]), node("Relu", ["c"], ["y"])]
    m = make_model(nodes, {"x": x}, ["y"], inits, opset=17)
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    trace = io.StringIO()
    out = aicc.build(p, target=target, out=tmp_path / "b", dump_ir=trace)
    ir = trace.getvalue().rsplit("# after ", 1)[1]          # the graph the C is made of
    # channel-last from the input's Transpose to the output's: none between the convs
    assert ir.count("ConvNHWC(") == 2 and ir.count("Transpose(") == 2 and "Relu(" not in ir
    got = aicc.load(out, cflags=STRICT_CFLAGS).run({"x": x})["y"]
    nchw = pipeline_yaml(tmp_path / "nchw.yaml", {"layout-nhwc": {"mode": "off"}},
                         target=target)
    want = compile_and_run(m, {"x": x}, tmp_path, target=target, config=nchw)["y"]
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-3,
                               atol=2e-3)
