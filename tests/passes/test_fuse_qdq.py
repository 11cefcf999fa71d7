"""fuse-qdq: DequantizeLinear -> Conv / MatMul -> QuantizeLinear becomes QLinearConv /
QLinearMatMul: the structure, the cases left alone, and compiled numerics: the fused graph's
outputs are within one quantization step of the unfused graph's (onnx.reference, float
semantics) and of onnxruntime's (which fuses the same patterns) on every x86 target (on by
default on x86-avx512-vnni and x86-avx512-amx, through a build YAML on the others); off on
generic."""
import json
from pathlib import Path

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from aicc.frontend import prepare, to_graph
from aicc.targets import load_target, runnable_targets
from tests.oracle import compile_and_run, make_model, ort_exact, rng
from tests.passes.helpers import ops, run_pass

X86 = [t for t in runnable_targets() if t.startswith("x86-")]
TARGETS = ["generic"] + X86     # generic: the portable integer kernels (kernels/qgemm/portable.py)
# targets whose pass_options turn the pass on for every conv, and those where it is auto
# (depthwise and 1x1 convs only; configs/targets/*.yaml)
MODE = {t: load_target(t).pass_options.get("fuse-qdq", {}).get("mode") for t in TARGETS}
FUSED = {t for t in TARGETS if MODE[t] in ("on", True)}
AUTO = {t for t in TARGETS if MODE[t] == "auto"}


def _conv_model(per_channel=True, bias=True, bias_scale=1.0, extra_use=False, const_w=True,
                xdt=np.uint8, attrs=None, kernel=(3, 3), group=1):
    r = rng(5)
    m, c = (12, 8) if group == 1 else (8, 8)
    xs, sx, zx = (1, c, 11, 10), np.float32(0.04), xdt(7 if xdt == np.uint8 else -3)
    w = r.integers(-127, 128, (m, c // group, *kernel)).astype(np.int8)
    sw = (r.uniform(0.002, 0.01, m) if per_channel else np.array(0.005)).astype(np.float32)
    inits = {"sx": np.array(sx), "zx": np.array(zx), "w": w, "sw": sw,
             "sy": np.array(np.float32(0.08)), "zy": np.array(xdt(128 if xdt == np.uint8 else 1))}
    nodes = [helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["x"]),
             helper.make_node("DequantizeLinear", ["w", "sw"], ["wf"], axis=0)]
    conv_in = ["x", "wf"]
    if bias:
        inits["b"] = r.integers(-3000, 3000, m).astype(np.int32)
        inits["sb"] = (sx * sw * np.float32(bias_scale)).astype(np.float32)
        nodes.append(helper.make_node("DequantizeLinear", ["b", "sb"], ["bf"], axis=0))
        conv_in.append("bf")
    attrs = attrs or ({"pads": [1, 1, 1, 1], "strides": [2, 1]} if kernel == (3, 3) else {})
    if group > 1:
        attrs = {**attrs, "group": group}
    nodes += [helper.make_node("Conv", conv_in, ["v"], name="conv", **attrs),
              helper.make_node("QuantizeLinear", ["v", "sy", "zy"], ["y"])]
    outs = ["y"]
    if extra_use:
        nodes.append(helper.make_node("Relu", ["v"], ["v2"]))
        outs.append("v2")
    feeds = {"xq": r.integers(np.iinfo(xdt).min, int(np.iinfo(xdt).max) + 1, xs).astype(xdt)}
    if not const_w:
        feeds["w"] = inits.pop("w")
    return make_model(nodes, feeds, outs, inits, opset=21), feeds


def _matmul_model(per_col=True):
    r = rng(6)
    k, n = 40, 33
    b = r.integers(-127, 128, (k, n)).astype(np.int8)
    inits = {"sa": np.array(np.float32(0.03)), "za": np.array(np.uint8(120)), "b": b,
             "sbw": (r.uniform(0.002, 0.01, n) if per_col else np.array(0.004)).astype(np.float32),
             "sy": np.array(np.float32(0.5)), "zy": np.array(np.uint8(100))}
    nodes = [helper.make_node("DequantizeLinear", ["aq", "sa", "za"], ["a"]),
             helper.make_node("DequantizeLinear", ["b", "sbw"], ["bf"], axis=1),
             helper.make_node("MatMul", ["a", "bf"], ["v"], name="mm"),
             helper.make_node("QuantizeLinear", ["v", "sy", "zy"], ["y"])]
    feeds = {"aq": r.integers(0, 256, (2, 7, k)).astype(np.uint8)}
    return make_model(nodes, feeds, ["y"], inits, opset=21), feeds


def _graph(model):
    return to_graph(prepare(model))


ON = {"pipeline": [{"fuse-qdq": {"mode": "on"}}, "fold-constants", "infer-shapes",
                   "eliminate-dead-nodes", "memory-order", "materialize-outputs"]}


def _ort(model, feeds) -> list:
    """[onnxruntime's output y], or [] on a CPU where its 8-bit integer sums saturate
    (oracle.ort_exact)."""
    if not ort_exact(model):
        return []
    import onnxruntime as ort
    o = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return [o.run(None, feeds)[0]]


def _check_numerics(model, feeds, tmp_path, target, fused_op):
    cfg = None
    if target not in FUSED:               # the pass is on (for every conv) there only
        cfg = Path(tmp_path) / "on.yaml"
        cfg.write_text(json.dumps(ON))
    got = compile_and_run(model, feeds, tmp_path, target=target, config=cfg)["y"]
    steps = {s["op"] for p in Path(tmp_path).glob("b*/manifest.json")
             for s in json.loads(p.read_text())["steps"]}
    assert fused_op in steps and "QuantizeLinear" not in steps, steps
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
    assert diff.max() <= 1 and (diff == 0).mean() > 0.97, (diff.max(), (diff == 0).mean())
    for want in _ort(model, feeds):
        assert np.abs(got.astype(np.int64) - want.astype(np.int64)).max() <= 1
    lo, hi = np.iinfo(got.dtype).min, np.iinfo(got.dtype).max
    assert ((got > lo) & (got < hi)).mean() > 0.5          # not saturated: a real comparison


@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("xdt", [np.uint8, np.int8])
def test_conv_structure(per_channel, bias, xdt):
    model, _ = _conv_model(per_channel, bias, xdt=xdt)
    after = run_pass("fuse-qdq", _graph(model), mode="on")
    q = [n for n in after.nodes if n.op_type == "QLinearConv"]
    assert len(q) == 1 and "Conv" not in ops(after) and "QuantizeLinear" not in ops(after)
    n = q[0]
    assert n.inputs[:2] == ["xq", "sx"] and n.inputs[3:5] == ["w", "sw"] and n.outputs == ["y"]
    assert n.inputs[6] == "sy" and len(n.inputs) == (9 if bias else 8)
    assert {k: list(v) for k, v in n.attrs.items()} == {"pads": [1, 1, 1, 1], "strides": [2, 1]}
    assert after.const(n.inputs[5]).dtype == np.int8 and not after.const(n.inputs[5]).any()


@pytest.mark.parametrize("why,kw", [
    ("bias scale is not x_scale * w_scale", {"bias_scale": 1.5}),
    ("the conv output has another reader", {"extra_use": True}),
    ("run-time weights", {"const_w": False}),
])
def test_conv_left_alone(why, kw):
    model, _ = _conv_model(**kw)
    after = run_pass("fuse-qdq", _graph(model), mode="on")
    assert "Conv" in ops(after) and "QLinearConv" not in ops(after), why


def test_off_by_default():
    model, _ = _conv_model()
    g = _graph(model)
    assert ops(run_pass("fuse-qdq", g)) == ops(g)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize("xdt", [np.uint8, np.int8])
def test_conv_numerics(per_channel, xdt, target, tmp_path):
    model, feeds = _conv_model(per_channel, True, xdt=xdt)
    _check_numerics(model, feeds, tmp_path, target, "QLinearConv")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("per_col", [True, False])
def test_matmul_numerics(per_col, target, tmp_path):
    model, feeds = _matmul_model(per_col)
    after = run_pass("fuse-qdq", _graph(model), mode="on")
    assert "QLinearMatMul" in ops(after) and "MatMul" not in ops(after)
    _check_numerics(model, feeds, tmp_path, target, "QLinearMatMul")


@pytest.mark.parametrize("target", [t for t in TARGETS if t not in FUSED])
def test_float_chain_by_default(target, tmp_path):
    model, feeds = _conv_model()
    got = compile_and_run(model, feeds, tmp_path, target=target)["y"]
    steps = {s["op"] for p in Path(tmp_path).glob("b*/manifest.json")
             for s in json.loads(p.read_text())["steps"]}
    assert "QLinearConv" not in steps
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    assert np.abs(got.astype(np.int64) - want.astype(np.int64)).max() <= 1


def _float_out_model(op="Gemm", per_channel=True, bias=True, xdt=np.uint8, alpha=1.0):
    """A quantized classifier: DequantizeLinear(xq) and DequantizeLinear(w) into a Gemm
    (transB, DequantizeLinear of an int32 bias) or a MatMul, float output, no QuantizeLinear."""
    r = rng(9)
    k, n = 70, 37
    gemm = op == "Gemm"
    w = r.integers(-127, 128, (n, k) if gemm else (k, n)).astype(np.int8)
    sx = np.float32(0.05)
    sw = (r.uniform(0.002, 0.01, n) if per_channel else np.array(0.004)).astype(np.float32)
    inits = {"sx": np.array(sx), "zx": np.array(xdt(9 if xdt == np.uint8 else -4)), "w": w,
             "sw": sw}
    nodes = [helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["x"]),
             helper.make_node("DequantizeLinear", ["w", "sw"], ["wf"], axis=0 if gemm else 1)]
    ins = ["x", "wf"]
    if bias:
        inits["b"] = r.integers(-5000, 5000, n).astype(np.int32)
        inits["sb"] = (sx * sw).astype(np.float32)
        nodes.append(helper.make_node("DequantizeLinear", ["b", "sb"], ["bf"], axis=0))
        ins.append("bf")
    attrs = {"transB": 1, "alpha": alpha} if gemm else {}
    nodes.append(helper.make_node(op, ins, ["y"], name="fc", **attrs))
    shape = (3, k) if gemm else (2, 3, k)
    feeds = {"xq": r.integers(np.iinfo(xdt).min, int(np.iinfo(xdt).max) + 1, shape).astype(xdt)}
    return make_model(nodes, feeds, ["y"], inits, opset=21), feeds


@pytest.mark.parametrize("op,bias", [("Gemm", True), ("Gemm", False), ("MatMul", False)])
@pytest.mark.parametrize("per_channel", [True, False])
def test_float_out_structure(op, bias, per_channel):
    model, _ = _float_out_model(op, per_channel, bias)
    after = run_pass("fuse-qdq", _graph(model), mode="on")
    assert op not in ops(after)
    mi = next(n for n in after.nodes if n.op_type == "MatMulInteger")
    assert mi.inputs[0] == "xq"
    w = after.const(mi.inputs[1])
    want = model.graph.initializer[[i.name for i in model.graph.initializer].index("w")]
    from onnx import numpy_helper
    wq = numpy_helper.to_array(want)
    np.testing.assert_array_equal(w, wq.T if op == "Gemm" else wq)       # transB at build time
    tail = [n.op_type for n in after.nodes[after.nodes.index(mi):]]
    assert tail[:3] == ["MatMulInteger", "Cast", "Mul"] and ("Add" in tail) == bias
    assert after.nodes[-1].outputs == ["y"]


def test_float_out_left_alone():
    model, _ = _float_out_model(alpha=0.5)           # alpha != 1: not rewritten
    after = run_pass("fuse-qdq", _graph(model), mode="on")
    assert "Gemm" in ops(after) and "MatMulInteger" not in ops(after)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op,per_channel,xdt", [("Gemm", True, np.uint8), ("Gemm", False, np.int8),
                                                ("MatMul", True, np.int8)])
def test_float_out_numerics(op, per_channel, xdt, target, tmp_path):
    """Against onnx.reference (the float chain) and onnxruntime (QGemm): rounding only."""
    model, feeds = _float_out_model(op, per_channel, op == "Gemm", xdt)
    cfg = None
    if target not in FUSED:
        cfg = Path(tmp_path) / "on.yaml"
        cfg.write_text(json.dumps(ON))
    got = compile_and_run(model, feeds, tmp_path, target=target, config=cfg)["y"]
    steps = {s["op"] for p in Path(tmp_path).glob("b*/manifest.json")
             for s in json.loads(p.read_text())["steps"]}
    assert "MatMulInteger" in steps and op not in steps, steps
    for want in [ReferenceEvaluator(model).run(None, feeds)[0], *_ort(model, feeds)]:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    assert np.abs(got).max() > 1.0 and np.unique(got).size > 50        # real values


@pytest.mark.parametrize("kernel,group,fused", [((3, 3), 1, False), ((1, 1), 1, True),
                                                ((3, 3), 8, True)])
def test_auto_structure(kernel, group, fused):
    """mode auto (targets without VNNI): depthwise and 1x1 convs only; dense 3 x 3 convs stay
    on the float chain."""
    model, _ = _conv_model(kernel=kernel, group=group)
    after = run_pass("fuse-qdq", _graph(model), mode="auto")
    assert ("QLinearConv" in ops(after)) == fused and ("Conv" in ops(after)) != fused


@pytest.mark.parametrize("target", sorted(AUTO))
@pytest.mark.parametrize("kernel,group", [((1, 1), 1), ((3, 3), 8)])
def test_auto_by_default(kernel, group, target, tmp_path):
    """x86-avx2 / x86-avx512 fuse depthwise and 1x1 QDQ convs by default; the values are
    within one quantization step of onnx.reference's and onnxruntime's."""
    model, feeds = _conv_model(kernel=kernel, group=group)
    got = compile_and_run(model, feeds, tmp_path, target=target)["y"]
    steps = {s["op"] for p in Path(tmp_path).glob("b*/manifest.json")
             for s in json.loads(p.read_text())["steps"]}
    assert "QLinearConv" in steps and "QuantizeLinear" not in steps, steps
    for want in [ReferenceEvaluator(model).run(None, feeds)[0], *_ort(model, feeds)]:
        diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
        assert diff.max() <= 1 and (diff == 0).mean() > 0.97, (diff.max(), (diff == 0).mean())
    assert ((got > 0) & (got < 255)).mean() > 0.5


def _qgemm_model(rows=3, trans=True, bias_shape=(37,), per_channel=True, xdt=np.int8,
                 alpha=1.0):
    """A QDQ fully connected layer: QuantizeLinear(Gemm(DQ(xq), DQ(w), DQ(int32 bias)))."""
    r = rng(13)
    k, n = 70, 37
    w = r.integers(-127, 128, (n, k) if trans else (k, n)).astype(np.int8)
    sx = np.float32(0.05)
    sw = (r.uniform(0.002, 0.01, n) if per_channel else np.array(0.004)).astype(np.float32)
    inits = {"sx": np.array(sx), "zx": np.array(xdt(9 if xdt == np.uint8 else -4)), "w": w,
             "sw": sw, "sy": np.array(np.float32(0.6)),
             "zy": np.array(xdt(128 if xdt == np.uint8 else 3))}
    nodes = [helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["x"]),
             helper.make_node("DequantizeLinear", ["w", "sw"], ["wf"], axis=0 if trans else 1)]
    ins = ["x", "wf"]
    if bias_shape is not None:
        nb = int(np.prod(bias_shape))
        inits["b"] = r.integers(-5000, 5000, bias_shape).astype(np.int32)
        inits["sb"] = (sx * (sw if nb > 1 else sw.reshape(-1)[:1])).astype(np.float32)
        nodes.append(helper.make_node("DequantizeLinear", ["b", "sb"], ["bf"],
                                      axis=len(bias_shape) - 1))
        ins.append("bf")
    nodes += [helper.make_node("Gemm", ins, ["v"], name="fc", transB=int(trans), alpha=alpha),
              helper.make_node("QuantizeLinear", ["v", "sy", "zy"], ["y"])]
    feeds = {"xq": r.integers(np.iinfo(xdt).min, int(np.iinfo(xdt).max) + 1,
                              (rows, k)).astype(xdt)}
    return make_model(nodes, feeds, ["y"], inits, opset=21), feeds


@pytest.mark.parametrize("bias_shape,kind", [((37,), "QGemm"), ((1, 37), "QGemm"),
                                             (None, "QLinearMatMul")])
@pytest.mark.parametrize("trans", [True, False])
def test_qgemm_structure(bias_shape, kind, trans):
    model, _ = _qgemm_model(trans=trans, bias_shape=bias_shape)
    after = run_pass("fuse-qdq", _graph(model), mode="on")
    q = [n for n in after.nodes if n.op_type == kind]
    assert len(q) == 1 and "Gemm" not in ops(after) and "QuantizeLinear" not in ops(after)
    assert q[0].domain == ("aicc" if kind == "QGemm" else "") and q[0].outputs == ["y"]
    assert after.const(q[0].inputs[3]).shape == (70, 37)         # b as [K, N]
    if kind == "QGemm":
        assert after.const(q[0].inputs[8]).shape == (37,)


def test_qgemm_left_alone():
    model, _ = _qgemm_model(alpha=0.5)
    after = run_pass("fuse-qdq", _graph(model), mode="on")
    assert "Gemm" in ops(after) and "QGemm" not in ops(after)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("rows,per_channel,xdt", [(1, True, np.int8), (3, False, np.uint8),
                                                  (5, True, np.uint8)])
def test_qgemm_numerics(rows, per_channel, xdt, target, tmp_path):
    """Within one step of the float chain (onnx.reference) and of onnxruntime's QGemm."""
    model, feeds = _qgemm_model(rows, per_channel=per_channel, xdt=xdt)
    _check_numerics(model, feeds, tmp_path, target, "QGemm")
