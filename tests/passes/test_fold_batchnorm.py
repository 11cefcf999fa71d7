"""fold-batchnorm: Before -> Expected structure, unchanged cases, numerics."""
import numpy as np
import pytest

from aicc.ir import Graph, Node, TensorType
from tests.passes.helpers import (assert_same_outputs, assert_unchanged, build, find, node, ops,
                                  rand, run_pass)


def bn_stats(c, seed=1, prefix="bn"):
    r = np.random.default_rng(seed)
    return {f"{prefix}_s": r.uniform(0.5, 2, c).astype(np.float32),
            f"{prefix}_b": r.normal(size=c).astype(np.float32),
            f"{prefix}_m": r.normal(size=c).astype(np.float32),
            f"{prefix}_v": r.uniform(0.1, 2, c).astype(np.float32)}


def bn(x, y, prefix="bn", **kw):
    return node("BatchNormalization", [x, f"{prefix}_s", f"{prefix}_b", f"{prefix}_m",
                                       f"{prefix}_v"], [y], **kw)


def conv_bn(bias=True, group=1, c_in=4, c_out=8, spatial=(5, 5), epsilon=1e-3):
    k = (3,) * len(spatial)
    inits = {"W": rand(c_out, c_in // group, *k, seed=2), **bn_stats(c_out)}
    cin = ["x", "W"]
    if bias:
        inits["B"] = rand(c_out, seed=3)
        cin.append("B")
    nodes = [node("Conv", cin, ["t"], group=group, pads=[1] * (2 * len(spatial))),
             bn("t", "y", epsilon=epsilon)]
    feeds = {"x": rand(2, c_in, *spatial, seed=4)}
    return build(nodes, feeds, ["y"], inits), feeds


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("group,spatial", [(1, (5, 5)), (2, (5, 5)), (1, (7,)), (2, (3, 4, 3)),
                                           (4, (3, 3))])
def test_conv(bias, group, spatial):
    before, feeds = conv_bn(bias, group, spatial=spatial)
    after = run_pass("fold-batchnorm", before)
    assert ops(after) == ["Conv"]
    conv = after.nodes[0]
    assert conv.outputs == ["y"] and conv.inputs[0] == "x"
    assert conv.attrs == before.nodes[0].attrs
    # fresh constants: the originals stay untouched
    assert conv.inputs[1] not in before.constants and conv.inputs[2] not in before.constants
    assert after.constants[conv.inputs[2]].shape == (8,)
    assert "t" not in after.types
    assert_same_outputs(before, after, feeds)


@pytest.mark.parametrize("group", [1, 2, 3])
@pytest.mark.parametrize("bias", [True, False])
def test_conv_transpose(group, bias):
    c_in, c_out = 6, 6
    inits = {"W": rand(c_in, c_out // group, 3, 3, seed=5), **bn_stats(c_out, seed=6)}
    ins = ["x", "W"]
    if bias:
        inits["B"] = rand(c_out, seed=7)
        ins.append("B")
    nodes = [node("ConvTranspose", ins, ["t"], group=group, strides=[2, 2]), bn("t", "y")]
    feeds = {"x": rand(1, c_in, 4, 4, seed=8)}
    before = build(nodes, feeds, ["y"], inits)
    after = run_pass("fold-batchnorm", before)
    assert ops(after) == ["ConvTranspose"] and after.nodes[0].outputs == ["y"]
    assert after.nodes[0].attrs["group"] == group
    assert_same_outputs(before, after, feeds)


GEMM_CASES = [
    dict(), dict(transB=1), dict(alpha=0.5), dict(alpha=2.0, beta=0.25, c=(5,)),
    dict(transB=1, beta=3.0, c=(3, 1)), dict(c=(3, 5)), dict(c=()), dict(beta=0.0, c=(5,)),
    dict(transA=1, transB=1, c=(1, 5)),
]


@pytest.mark.parametrize("case", GEMM_CASES, ids=str)
def test_gemm(case):
    case = dict(case)
    cshape = case.pop("c", None)
    ta, tb = case.get("transA", 0), case.get("transB", 0)
    inits = {"B": rand(*((5, 4) if tb else (4, 5)), seed=9), **bn_stats(5, seed=10)}
    ins = ["a", "B"]
    if cshape is not None:
        inits["C"] = rand(*cshape, seed=11)
        ins.append("C")
    feeds = {"a": rand(*((4, 3) if ta else (3, 4)), seed=12)}
    before = build([node("Gemm", ins, ["t"], **case), bn("t", "y")], feeds, ["y"], inits)
    after = run_pass("fold-batchnorm", before)
    assert ops(after) == ["Gemm"]
    gemm = after.nodes[0]
    assert gemm.outputs == ["y"] and len(gemm.inputs) == 3
    assert gemm.attrs["beta"] == 1.0
    assert gemm.attrs.get("alpha", 1.0) == case.get("alpha", 1.0)
    assert gemm.attrs.get("transB", 0) == tb
    assert_same_outputs(before, after, feeds)


def test_gemm_beta0_nonfinite_c_not_folded():
    inits = {"B": rand(4, 5, seed=9), "C": np.full(5, np.inf, np.float32), **bn_stats(5)}
    feeds = {"a": rand(3, 4)}
    before = build([node("Gemm", ["a", "B", "C"], ["t"], beta=0.0), bn("t", "y")], feeds, ["y"],
                   inits)
    assert_unchanged(before, run_pass("fold-batchnorm", before))


@pytest.mark.parametrize("bias", [False, True])
def test_matmul_2d(bias):
    inits = {"B": rand(4, 5, seed=13), **bn_stats(5, seed=14)}
    feeds = {"a": rand(3, 4, seed=15)}
    before = build([node("MatMul", ["a", "B"], ["t"]), bn("t", "y")], feeds, ["y"], inits)
    if bias:   # a MatMul that already carries an aicc bias (as after fuse-bias)
        before.constants["mb"] = rand(5, seed=16)
        before.nodes[0].inputs.append("mb")
    after = run_pass("fold-batchnorm", before)
    assert ops(after) == ["MatMul"]
    mm = after.nodes[0]
    assert mm.outputs == ["y"] and len(mm.inputs) == 3
    assert after.constants[mm.inputs[2]].shape == (5,)
    assert_same_outputs(before, after, feeds)


def test_matmul_3d_not_folded():
    # BN's channel axis is 1 (M), not the last axis: nothing to fold into B
    inits = {"B": rand(4, 3, seed=13), **bn_stats(2, seed=14)}
    feeds = {"a": rand(5, 2, 4, seed=15)}
    before = build([node("MatMul", ["a", "B"], ["t"]), bn("t", "y")], feeds, ["y"], inits)
    assert_unchanged(before, run_pass("fold-batchnorm", before))


def test_output_name_kept_and_chain():
    """Conv -> BN -> BN: both fold (the second into the already rewritten Conv)."""
    inits = {"W": rand(3, 2, 1, 1, seed=1), **bn_stats(3, 2, "p"), **bn_stats(3, 3, "q")}
    feeds = {"x": rand(1, 2, 4, 4)}
    before = build([node("Conv", ["x", "W"], ["t"]), bn("t", "u", "p"), bn("u", "out", "q"),
                    node("Relu", ["out"], ["r"])], feeds, ["out", "r"], inits)
    after = run_pass("fold-batchnorm", before)
    assert ops(after) == ["Conv", "Relu"]
    assert after.nodes[0].outputs == ["out"] and after.outputs == ["out", "r"]
    assert_same_outputs(before, after, feeds)


def test_shared_weights_fold_separately():
    inits = {"W": rand(3, 2, 3, 3, seed=1), **bn_stats(3, 2, "p"), **bn_stats(3, 3, "q")}
    feeds = {"x": rand(1, 2, 5, 5)}
    before = build([node("Conv", ["x", "W"], ["t1"]), bn("t1", "y1", "p"),
                    node("Conv", ["x", "W"], ["t2"]), bn("t2", "y2", "q")], feeds, ["y1", "y2"],
                   inits)
    w = before.constants["W"].copy()
    after = run_pass("fold-batchnorm", before)
    assert ops(after) == ["Conv", "Conv"]
    w1, w2 = after.nodes[0].inputs[1], after.nodes[1].inputs[1]
    assert len({w1, w2, "W"}) == 3
    np.testing.assert_array_equal(after.constants["W"], w)
    assert_same_outputs(before, after, feeds)


# -- Expected = Before ------------------------------------------------------------------

def _conv_bn_graph(extra_nodes=(), outputs=("y",), w_input=False, stat_input=False,
                   bn_kw=None, opset=17, bias_input=False):
    inits = {"W": rand(3, 2, 3, 3, seed=1), **bn_stats(3)}
    feeds = {"x": rand(1, 2, 5, 5)}
    for flag, k in ((w_input, "W"), (stat_input, "bn_m")):
        if flag:
            feeds[k] = inits.pop(k)
    ins = ["x", "W"]
    if bias_input:
        feeds["B"] = rand(3)
        ins.append("B")
    nodes = [node("Conv", ins, ["t"]), bn("t", "y", **(bn_kw or {})), *extra_nodes]
    return build(nodes, feeds, list(outputs), inits, opset=opset)


@pytest.mark.parametrize("why,kw", [
    ("second consumer", dict(extra_nodes=[node("Relu", ["t"], ["r"])], outputs=("y", "r"))),
    ("conv output is a graph output", dict(outputs=("y", "t"))),
    ("weights not constant", dict(w_input=True)),
    ("bias not constant", dict(bias_input=True)),
    ("BN stats not constant", dict(stat_input=True)),
])
def test_not_folded(why, kw):
    before = _conv_bn_graph(**kw)
    assert_unchanged(before, run_pass("fold-batchnorm", before))


def test_training_mode_not_folded():
    inits = {"W": rand(3, 2, 3, 3, seed=1), **bn_stats(3)}
    g = build([node("Conv", ["x", "W"], ["t"]), bn("t", "y")], {"x": rand(1, 2, 5, 5)}, ["y"],
              inits)
    g.nodes[1].attrs["training_mode"] = 1
    assert_unchanged(g, run_pass("fold-batchnorm", g))


def test_infinite_scale_not_folded():
    inits = {"W": rand(3, 2, 3, 3, seed=1), **bn_stats(3)}
    inits["bn_v"] = np.array([1, 0, 1], np.float32)
    g = build([node("Conv", ["x", "W"], ["t"]), bn("t", "y", epsilon=0.0)],
              {"x": rand(1, 2, 5, 5)}, ["y"], inits)
    assert_unchanged(g, run_pass("fold-batchnorm", g))


def test_producer_not_foldable():
    """BN after a Relu, and after a Conv with a fused activation (BN follows the activation)."""
    inits = {"W": rand(3, 2, 3, 3, seed=1), **bn_stats(3)}
    g = build([node("Relu", ["x"], ["t"]), bn("t", "y")], {"x": rand(1, 3, 5, 5)}, ["y"],
              bn_stats(3))
    assert_unchanged(g, run_pass("fold-batchnorm", g))
    g = build([node("Conv", ["x", "W"], ["t"]), bn("t", "y")], {"x": rand(1, 2, 5, 5)}, ["y"],
              inits)
    g.nodes[0].attrs.update(aicc_act="Relu", aicc_act_params={})
    assert_unchanged(g, run_pass("fold-batchnorm", g))


def test_direct_graph_no_types_for_stats():
    """A Graph built directly: constants only in g.constants; BN output dtype float64."""
    w = np.arange(8, dtype=np.float64).reshape(2, 4)
    g = Graph(nodes=[Node("Gemm", ["a", "W"], ["t"], {}, "gemm"),
                     Node("BatchNormalization", ["t", "s", "b", "m", "v"], ["y"], {}, "bn")],
              inputs=["a"], outputs=["y"],
              types={"a": TensorType(np.dtype("float64"), (3, 2)),
                     "t": TensorType(np.dtype("float64"), (3, 4)),
                     "y": TensorType(np.dtype("float64"), (3, 4))},
              constants={"W": w, "s": np.ones(4), "b": np.arange(4.0), "m": np.zeros(4),
                         "v": np.full(4, 4.0)})
    after = run_pass("fold-batchnorm", g)
    gemm = find(after, "Gemm")
    assert gemm.outputs == ["y"]
    s = 1 / np.sqrt(4 + 1e-5)
    np.testing.assert_allclose(after.constants[gemm.inputs[1]], w * s)
    np.testing.assert_allclose(after.constants[gemm.inputs[2]], np.arange(4.0))
    assert after.constants[gemm.inputs[1]].dtype == np.float64
    assert_same_outputs(g, after, {"a": np.random.default_rng(0).normal(size=(3, 2))})
