"""layout-nhwc: structure (which convs go channel-last, where the transposes stay), unchanged
cases, and compiled numerics against onnxruntime on generic and the host's SIMD targets
(portable and SIMD ConvNHWC / MatMul kernels, mode all and the targets' auto)."""
import numpy as np
import pytest

from aicc.config import Options
from aicc.errors import ConfigError
from aicc.targets import runnable_targets
from tests.oracle import check, make_model, pipeline_yaml
from tests.passes.helpers import assert_same_outputs, assert_unchanged, build, node, ops, rand, run_pass

TARGETS = ["generic"] + [t for t in runnable_targets() if t in ("x86-avx2", "x86-avx512")]


def w(*shape, seed):
    return (rand(*shape, seed=seed) * 0.3).astype(np.float32)


def block(c=16, hw=6, opset=17, mean="gap", extra_out=False, cin=3, s0=1):
    """MobileNetV2-like: 3x3 conv (stride s0) -> Relu, depthwise 3x3 -> Clip(0,6), pointwise
    1x1 + residual Add, depthwise 3x3 stride 2, pointwise, then a spatial mean and a Gemm
    head."""
    x = rand(1, cin, hw, hw, seed=1)
    inits = {"w0": w(c, cin, 3, 3, seed=2), "b0": w(c, seed=3), "w1": w(c, 1, 3, 3, seed=4),
             "b1": w(c, seed=5), "w2": w(c, c, 1, 1, seed=6), "b2": w(c, seed=7),
             "w3": w(c, 1, 3, 3, seed=8), "w4": w(2 * c, c, 1, 1, seed=9),
             "lo": np.array(0, np.float32), "hi": np.array(6, np.float32),
             "fw": w(2 * c, 5, seed=10), "fb": w(5, seed=11)}
    nodes = [node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1], strides=[s0, s0]),
             node("Relu", ["c0"], ["r0"]),
             node("Conv", ["r0", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], group=c),
             node("Clip", ["c1", "lo", "hi"], ["r1"]),
             node("Conv", ["r1", "w2", "b2"], ["c2"]),
             node("Add", ["c2", "r0"], ["a2"]),
             node("Conv", ["a2", "w3"], ["c3"], pads=[1, 1, 1, 1], strides=[2, 2], group=c),
             node("Conv", ["c3", "w4"], ["c4"])]
    if mean == "gap":
        nodes.append(node("GlobalAveragePool", ["c4"], ["m"]))
    elif opset >= 18:
        inits["ax"] = np.array([2, 3], np.int64)
        nodes.append(node("ReduceMean", ["c4", "ax"], ["m"], keepdims=int(mean == "keep")))
    else:
        nodes.append(node("ReduceMean", ["c4"], ["m"], axes=[-2, -1], keepdims=int(mean == "keep")))
    nodes += [node("Flatten", ["m"], ["f"]), node("Gemm", ["f", "fw", "fb"], ["y"])]
    outs = ["y", "c2"] if extra_out else ["y"]
    return nodes, {"x": x}, outs, inits, opset


def config(tmp_path, mode="all", ratio=None):
    opts = {"mode": mode, **({"ratio": ratio} if ratio is not None else {})}
    return pipeline_yaml(tmp_path / "layout.yaml", {"layout-nhwc": opts})


def fused(nodes, feeds, outs, inits, opset):
    """The graph after the passes before layout-nhwc (bias and activations fused)."""
    g = build(nodes, feeds, outs, inits, opset=opset)
    for name in ("fold-constants", "infer-shapes", "fuse-bias", "fuse-activation",
                 "fuse-binary-activation", "eliminate-dead-nodes"):
        g = run_pass(name, g)
    return g


def test_chain_runs_channel_last():
    args = block()
    before = fused(*args)
    after = run_pass("eliminate-dead-nodes", run_pass("layout-nhwc", before, mode="all"))
    assert ops(after) == ["ConvNHWC", "ConvNHWC", "MatMul", "Add", "ConvNHWC",
                          "MatMul", "ReduceMean", "Transpose", "Flatten", "Gemm"]
    # the first conv (3 input channels) reads the NCHW input itself: no Transpose in
    c0 = after.nodes[0]
    assert c0.inputs[0] == "x" and c0.attrs["aicc_nchw_in"] == 1
    assert "aicc_nchw_in" not in after.nodes[1].attrs
    # activations stay fused; the pointwise weights are transposed to [Cin, Cout]
    assert after.nodes[1].attrs["aicc_act"] == "Clip"
    mm = after.nodes[2]
    assert after.constants[mm.inputs[1]].shape == (16, 16) and mm.inputs[2] == "b2"
    np.testing.assert_array_equal(after.constants[mm.inputs[1]],
                                  before.constants["w2"].reshape(16, 16).T)
    # the mean's [1,1,1,C] result is moved back to [1,C,1,1] (a copy of C floats)
    assert after.nodes[7].attrs["perm"] == [0, 3, 1, 2]
    assert_same_outputs(before, after, args[1], rtol=1e-4, atol=1e-5)
    # 5 input channels: the input is transposed in
    args5 = block(cin=5)
    five = run_pass("eliminate-dead-nodes", run_pass("layout-nhwc", fused(*args5), mode="all"))
    assert ops(five)[:2] == ["Transpose", "ConvNHWC"] and five.nodes[0].inputs == ["x"]
    assert "aicc_nchw_in" not in five.nodes[1].attrs


def test_auto_keeps_a_winograd_conv_nchw():
    """auto: a 3x3 stride-1 group-1 conv of more than 4 input channels stays NCHW, where
    Winograd takes it (Xception-41's 32 -> 64 at 150 x 150); the chain after it goes
    channel-last from its output. At stride 2 the same conv runs channel-last."""
    args = block(c=16, cin=5)
    before = fused(*args)
    after = run_pass("eliminate-dead-nodes", run_pass("layout-nhwc", before, mode="auto"))
    assert ops(after)[:3] == ["Conv", "Transpose", "ConvNHWC"]
    assert after.nodes[0].inputs[0] == "x"
    assert_same_outputs(before, after, args[1], rtol=1e-4, atol=1e-5)
    every = run_pass("layout-nhwc", before, mode="all")
    assert ops(every)[:2] == ["Transpose", "ConvNHWC"]


def test_auto_keeps_large_planes_nchw():
    """auto: only convs with max(Cin, Cout) * ratio >= output positions: at ratio 32 on a
    40x40 plane the 16-channel convs stay NCHW (1600 > 16 * 32), after the stride-2
    depthwise (20x20) they go channel-last; the transpose sits where the two parts meet."""
    args = block(hw=40)
    before = fused(*args)
    after = run_pass("eliminate-dead-nodes", run_pass("layout-nhwc", before, mode="auto",
                                                      ratio=32))
    assert ops(after)[:7] == ["Conv", "Conv", "Conv", "Add", "Transpose", "ConvNHWC", "MatMul"]
    assert_same_outputs(before, after, args[1], rtol=1e-4, atol=1e-5)
    wide = run_pass("eliminate-dead-nodes", run_pass("layout-nhwc", before, mode="auto",
                                                     ratio=100))
    assert ops(wide).count("ConvNHWC") == 3 and ops(wide).count("Conv") == 0


def test_auto_keeps_a_narrow_first_conv_nchw():
    """auto: a 3x3 stride-2 group-1 conv with fewer than 16 output channels and more than 4
    input channels stays NCHW (im2col + GEMM would fill few lanes); the depthwise chain after
    it still goes channel-last. With at most 4 input channels (the broadcast kernel's) it runs
    channel-last, reading its NCHW input (MobileNetV1-0.25's 3 -> 8 first conv)."""
    args = block(c=8, cin=5, s0=2)
    before = fused(*args)
    after = run_pass("eliminate-dead-nodes", run_pass("layout-nhwc", before, mode="auto"))
    assert ops(after)[:3] == ["Conv", "Transpose", "ConvNHWC"]
    assert_same_outputs(before, after, args[1], rtol=1e-4, atol=1e-5)
    wide = run_pass("layout-nhwc", fused(*block(c=16, cin=5, s0=2)), mode="auto")
    assert ops(wide)[:2] == ["Transpose", "ConvNHWC"]
    args = block(c=8)
    before = fused(*args)
    few = run_pass("eliminate-dead-nodes", run_pass("layout-nhwc", before, mode="auto"))
    assert ops(few)[:2] == ["ConvNHWC", "ConvNHWC"] and few.nodes[0].attrs["aicc_nchw_in"] == 1
    assert_same_outputs(before, few, args[1], rtol=1e-4, atol=1e-5)


def test_auto_needs_a_depthwise_conv():
    """A chain of group-1 convs (a ResNet) keeps its NCHW kernels (Winograd etc.) in auto."""
    feeds = {"x": rand(1, 8, 5, 5, seed=1)}
    inits = {"w0": w(8, 8, 3, 3, seed=2), "w1": w(8, 8, 1, 1, seed=3)}
    before = fused([node("Conv", ["x", "w0"], ["c0"], pads=[1, 1, 1, 1]),
                    node("Conv", ["c0", "w1"], ["y"])], feeds, ["y"], inits, 17)
    assert_unchanged(before, run_pass("layout-nhwc", before, mode="auto"))
    after = run_pass("layout-nhwc", before, mode="all")
    assert "ConvNHWC" in ops(after) and "MatMul" in ops(after)


def test_off_and_bad_mode():
    before = fused(*block())
    assert_unchanged(before, run_pass("layout-nhwc", before))           # default: off
    with pytest.raises(ConfigError, match="mode 'sideways'"):
        run_pass("layout-nhwc", before, mode="sideways")


def test_not_eligible_left_alone():
    """Grouped (not depthwise) convs, run-time weights, 1-D convs and per-node overrides stay."""
    feeds = {"x": rand(1, 8, 5, 5, seed=1), "wr": w(8, 1, 3, 3, seed=9)}
    inits = {"wg": w(8, 2, 3, 3, seed=2), "w1": w(8, 1, 3, 3, seed=3)}
    before = fused([node("Conv", ["x", "wg"], ["c0"], pads=[1, 1, 1, 1], group=4),
                    node("Conv", ["c0", "wr"], ["c1"], group=8),
                    node("Conv", ["c1", "w1"], ["y"], group=8)], feeds, ["y"], inits, 17)
    before.nodes[2].attrs["aicc_schedule"] = {"algo": "depthwise"}
    assert_unchanged(before, run_pass("layout-nhwc", before, mode="all"))


def test_graph_output_inside_the_chain():
    """A tensor of the chain that is also a graph output keeps its NCHW producer (Transpose)."""
    args = block(extra_out=True)
    before = fused(*args)
    after = run_pass("eliminate-dead-nodes", run_pass("layout-nhwc", before, mode="all"))
    tr = [n for n in after.nodes if n.op_type == "Transpose" and n.outputs == ["c2"]]
    assert len(tr) == 1 and tr[0].attrs["perm"] == [0, 3, 1, 2]
    assert_same_outputs(before, after, args[1], rtol=1e-4, atol=1e-5)


def test_sinking_needs_matching_shapes():
    """An Add that broadcasts a [1,C,1,1] tensor is not moved: it reads the NCHW tensor."""
    feeds = {"x": rand(1, 8, 4, 4, seed=1), "s": rand(1, 8, 1, 1, seed=2)}
    inits = {"w1": w(8, 1, 3, 3, seed=3), "k": np.array([2.0], np.float32)}
    before = fused([node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1], group=8),
                    node("Add", ["c1", "s"], ["a"]), node("Mul", ["c1", "k"], ["y2"]),
                    node("Relu", ["a"], ["y"])], feeds, ["y", "y2"], inits, 17)
    after = run_pass("eliminate-dead-nodes", run_pass("layout-nhwc", before, mode="all"))
    add = [n for n in after.nodes if n.op_type == "Add"][0]
    assert add.inputs == ["c1", "s"]
    mul = [n for n in after.nodes if n.op_type == "Mul"][0]
    assert mul.inputs[0].endswith("_nhwc") and after.constants[mul.inputs[1]].shape == ()
    assert_same_outputs(before, after, feeds, rtol=1e-5, atol=1e-6)


def se_block(c=16, hw=6):
    """Squeeze-excite (MobileNetV3): depthwise conv -> HardSwish, mean, 1x1 -> Relu, 1x1 ->
    HardSigmoid, the scale [1,C,1,1] times the conv output, a constant [1,C,1,1] times that,
    then a pointwise conv."""
    x = rand(1, c, hw, hw, seed=1)
    x[0, 3, 2, 2], x[0, 5, 0, 1] = np.nan, np.inf
    inits = {"w1": w(c, 1, 3, 3, seed=2), "wf1": w(c // 2, c, 1, 1, seed=3),
             "bf1": w(c // 2, seed=4), "wf2": w(c, c // 2, 1, 1, seed=5), "bf2": w(c, seed=6),
             "kc": rand(1, c, 1, 1, seed=7), "wp": w(24, c, 1, 1, seed=8)}
    nodes = [node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1], group=c),
             node("HardSwish", ["c1"], ["h1"]), node("GlobalAveragePool", ["h1"], ["m"]),
             node("Conv", ["m", "wf1", "bf1"], ["f1"]), node("Relu", ["f1"], ["r1"]),
             node("Conv", ["r1", "wf2", "bf2"], ["f2"]), node("HardSigmoid", ["f2"], ["s"]),
             node("Mul", ["h1", "s"], ["e"]), node("Mul", ["e", "kc"], ["e2"]),
             node("Conv", ["e2", "wp"], ["y"])]
    return nodes, {"x": x}, ["y"], inits, 17


def test_sinking_broadcasts_channel_last():
    """A Mul by a [1,C,1,1] scale that has an NHWC twin (squeeze-excite's, computed channel
    last as [1,1,1,C]) or is a constant (transposed at compile time) runs on the twins: no
    transpose out of the chain and back."""
    args = se_block()
    before = fused(*args)
    after = run_pass("eliminate-dead-nodes", run_pass("layout-nhwc", before, mode="all"))
    assert ops(after) == ["Transpose", "ConvNHWC", "ReduceMean", "MatMul", "MatMul", "Mul",
                          "Mul", "MatMul", "Transpose"]
    prod = {o: n for n in after.nodes for o in n.outputs}
    m1, m2 = after.nodes[5], after.nodes[6]
    assert [prod[t].op_type for t in m1.inputs] == ["ConvNHWC", "MatMul"]
    assert after.types[m1.inputs[1]].shape == (1, 1, 1, 16)
    np.testing.assert_array_equal(after.constants[m2.inputs[1]],
                                  np.transpose(before.constants["kc"], (0, 2, 3, 1)))
    assert_same_outputs(before, after, args[1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_se_compiled_against_onnxruntime(target, tmp_path):
    nodes, feeds, outs, inits, opset = se_block(c=40, hw=7)
    model = make_model(nodes, feeds, outs, inits, opset=opset)
    check(model, feeds, tmp_path, target=target, config=config(tmp_path), rtol=1e-4, atol=1e-4)


def test_sinking_transposes_the_other_inputs_in():
    """An Add of a channel-last conv's output and an NCHW tensor of the same shape (a shortcut
    from code that stays NCHW, here a conv with run-time weights) runs channel-last with that
    input transposed in; a full-shape constant input is transposed at compile time."""
    feeds = {"x": rand(1, 8, 4, 5, seed=1), "wr": w(8, 8, 1, 1, seed=9)}
    inits = {"w1": w(8, 1, 3, 3, seed=3), "k": rand(1, 8, 4, 5, seed=4)}
    before = fused([node("Conv", ["x", "wr"], ["s"]),
                    node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1], group=8),
                    node("Add", ["c1", "s"], ["a"]), node("Mul", ["a", "k"], ["y"])],
                   feeds, ["y"], inits, 17)
    after = run_pass("eliminate-dead-nodes", run_pass("layout-nhwc", before, mode="all"))
    assert ops(after) == ["Conv", "Transpose", "ConvNHWC", "Transpose", "Add", "Mul", "Transpose"]
    add, mul = after.nodes[4], after.nodes[5]
    assert add.inputs[1] == after.nodes[3].outputs[0] and after.nodes[3].inputs == ["s"]
    np.testing.assert_array_equal(after.constants[mul.inputs[1]],
                                  np.transpose(before.constants["k"], (0, 2, 3, 1)))
    assert_same_outputs(before, after, feeds, rtol=1e-5, atol=1e-6)


def mixer_block(c=16, hw=6, bn_in=False):
    """ConvMixer: depthwise conv -> Relu -> BatchNormalization, + the block's input, pointwise
    conv -> Relu -> BatchNormalization (the BNs follow activations: nothing to fold them
    into), with NaN / Inf in the input; bn_in: the block's input is a BatchNormalization of
    the graph input."""
    x = rand(1, c, hw, hw, seed=1)
    x[0, 2, 1, 1], x[0, 7, 3, 0] = np.nan, -np.inf

    def bn(seed):
        r = np.random.default_rng(seed)
        return [r.uniform(0.5, 1.5, c).astype(np.float32), r.normal(0, 0.5, c).astype(np.float32),
                r.normal(0, 0.5, c).astype(np.float32), r.uniform(0.5, 2, c).astype(np.float32)]
    inits = {"w1": w(c, 1, 5, 5, seed=2), "b1": w(c, seed=3), "w2": w(c, c, 1, 1, seed=4),
             "b2": w(c, seed=5)}
    inits.update(zip(("s1", "t1", "m1", "v1"), bn(6)))
    inits.update(zip(("s2", "t2", "m2", "v2"), bn(7)))
    xb = "xb" if bn_in else "x"
    nodes = [node("BatchNormalization", ["x", "s2", "t2", "m2", "v2"], ["xb"])] if bn_in else []
    nodes += [node("Conv", [xb, "w1", "b1"], ["c1"], pads=[2, 2, 2, 2], group=c),
              node("Relu", ["c1"], ["r1"]),
              node("BatchNormalization", ["r1", "s1", "t1", "m1", "v1"], ["n1"], epsilon=1e-3),
              node("Add", ["n1", xb], ["a1"]),
              node("Conv", ["a1", "w2", "b2"], ["c2"]), node("Relu", ["c2"], ["r2"]),
              node("BatchNormalization", ["r2", "s2", "t2", "m2", "v2"], ["y"])]
    return nodes, {"x": x}, ["y"], inits, 17


def test_batchnorm_after_an_activation_runs_channel_last():
    """An inference BatchNormalization with constant parameters that a chain's tensor feeds
    joins the chain (ConvMixer's block was two lone convs) and maps the NHWC twin per channel
    on its last axis."""
    args = mixer_block()
    before = fused(*args)
    after = run_pass("eliminate-dead-nodes", run_pass("layout-nhwc", before, mode="auto"))
    assert ops(after) == ["Transpose", "ConvNHWC", "BatchNormalization", "Add", "MatMul",
                          "BatchNormalization", "Transpose"]
    bns = [n for n in after.nodes if n.op_type == "BatchNormalization"]
    assert all(n.attrs["aicc_channels_last"] == 1 for n in bns)
    assert after.types[bns[0].inputs[0]].shape == (1, 6, 6, 16)
    assert_same_outputs(before, after, args[1], rtol=1e-5, atol=1e-6)


def test_batchnorm_without_a_twin_stays_nchw():
    """A BatchNormalization of a tensor that no channel-last code computes (here the graph
    input) stays as it is; the conv after it transposes its output."""
    args = mixer_block(bn_in=True)
    before = fused(*args)
    after = run_pass("eliminate-dead-nodes", run_pass("layout-nhwc", before, mode="auto"))
    assert ops(after) == ["BatchNormalization", "Transpose", "ConvNHWC", "BatchNormalization",
                          "Add", "MatMul", "BatchNormalization", "Transpose"]
    assert after.nodes[0].inputs[0] == "x" and "aicc_channels_last" not in after.nodes[0].attrs
    assert after.nodes[1].inputs == ["xb"]
    assert_same_outputs(before, after, args[1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_mixer_compiled_against_onnxruntime(target, tmp_path):
    nodes, feeds, outs, inits, opset = mixer_block(c=40, hw=9)
    model = make_model(nodes, feeds, outs, inits, opset=opset)
    check(model, feeds, tmp_path, target=target, config=config(tmp_path, mode="auto"),
          rtol=1e-4, atol=1e-4)


def test_target_defaults_and_override(tmp_path):
    for t in ("x86-avx2", "x86-avx512"):
        assert dict(Options.load(t).pipeline)["layout-nhwc"] == {"mode": "auto"}
    assert dict(Options.load("generic").pipeline)["layout-nhwc"] == {}
    p = config(tmp_path, mode="off")
    assert dict(Options.load("x86-avx512", p).pipeline)["layout-nhwc"] == {"mode": "off"}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("mean,opset", [("gap", 17), ("keep", 17), ("drop", 18)])
def test_compiled_against_onnxruntime(target, mean, opset, tmp_path):
    nodes, feeds, outs, inits, opset = block(c=24, hw=9, opset=opset, mean=mean, extra_out=True)
    model = make_model(nodes, feeds, outs, inits, opset=opset)
    check(model, feeds, tmp_path, target=target, config=config(tmp_path), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("k,s,d,pads,cin,cout", [
    ((3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 5, 20),
    ((3, 3), (2, 2), (1, 1), (0, 1, 1, 0), 3, 33),
    ((5, 2), (1, 2), (2, 1), (2, 0, 1, 1), 7, 16),
    ((1, 1), (2, 2), (1, 1), (0, 0, 0, 0), 16, 40),
    ((10, 4), (2, 2), (1, 1), (4, 1, 5, 2), 1, 64),
    ((3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 3, 8),
    ((3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 4, 40),
    ((5, 5), (2, 1), (1, 2), (2, 3, 1, 0), 2, 24),
])
def test_group1_conv_nhwc(target, k, s, d, pads, cin, cout, tmp_path):
    """aicc.ConvNHWC's im2col + GEMM path (mode all), padding on every side, with a depthwise
    conv after it; NaN and Inf in the input reach the outputs they cover. Up to 4 input
    channels it reads the NCHW input (aicc_nchw_in): on the broadcast kernel where that
    takes it, else (generic; x86-avx2 past 4 channel vectors) on a transposed copy."""
    x = rand(2, cin, 11, 9, seed=1)
    x[0, 0, 3, 4], x[1, -1, 7, 2] = np.nan, np.inf
    inits = {"w": w(cout, cin, *k, seed=2), "b": w(cout, seed=3), "wd": w(cout, 1, 3, 3, seed=4)}
    nodes = [node("Conv", ["x", "w", "b"], ["c"], kernel_shape=list(k), strides=list(s),
                  dilations=list(d), pads=list(pads)),
             node("LeakyRelu", ["c"], ["r"], alpha=0.1),
             node("Conv", ["r", "wd"], ["y"], pads=[1, 1, 1, 1], group=cout)]
    model = make_model(nodes, {"x": x}, ["y"], inits)
    check(model, {"x": x}, tmp_path, target=target, config=config(tmp_path), rtol=1e-4,
          atol=1e-4)
