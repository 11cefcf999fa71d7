"""fuse-bias: Before -> Expected structure, unchanged cases, numerics."""
import numpy as np
import pytest

from tests.passes.helpers import (assert_same_outputs, assert_unchanged, build, node, ops, rand,
                                  run_pass)


def conv_add(cshape, bias=False, swap=False, op="Conv", extra_nodes=(), outputs=("y",)):
    if op == "Conv":
        inits = {"W": rand(3, 2, 3, 3, seed=1)}
    else:
        inits = {"W": rand(2, 3, 3, 3, seed=1)}
    ins = ["x", "W"]
    if bias:
        inits["B"] = rand(3, seed=2)
        ins.append("B")
    inits["c"] = rand(*cshape, seed=3)
    add = node("Add", ["c", "t"] if swap else ["t", "c"], ["y"])
    feeds = {"x": rand(2, 2, 5, 5, seed=4)}
    g = build([node(op, ins, ["t"]), add, *extra_nodes], feeds, list(outputs), inits)
    return g, feeds


@pytest.mark.parametrize("cshape", [(3, 1, 1), (1, 3, 1, 1), (), (1,), (1, 1, 1, 1)])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("swap", [False, True])
def test_conv(cshape, bias, swap):
    before, feeds = conv_add(cshape, bias, swap)
    after = run_pass("fuse-bias", before)
    assert ops(after) == ["Conv"]
    conv = after.nodes[0]
    assert conv.outputs == ["y"] and conv.inputs[:2] == ["x", "W"] and len(conv.inputs) == 3
    b = after.constants[conv.inputs[2]]
    assert b.shape == (3,) and b.dtype == np.float32
    assert conv.inputs[2] not in before.constants
    want = np.broadcast_to(before.constants["c"].reshape(-1), (3,)) + (
        before.constants["B"] if bias else 0)
    np.testing.assert_allclose(b, want, rtol=1e-6)
    assert_same_outputs(before, after, feeds)


def test_conv_transpose():
    before, feeds = conv_add((3, 1, 1), op="ConvTranspose")
    after = run_pass("fuse-bias", before)
    assert ops(after) == ["ConvTranspose"] and after.nodes[0].outputs == ["y"]
    assert_same_outputs(before, after, feeds)


@pytest.mark.parametrize("a_shape,b_shape,cshape", [
    ((3, 4), (4, 5), (5,)), ((3, 4), (4, 5), (1, 5)), ((2, 3, 4), (4, 5), (1, 1, 5)),
    ((2, 3, 4), (4, 5), (5,)), ((2, 3, 4), (4, 5), ()), ((4,), (4, 5), (5,)),
    ((2, 3, 4), (2, 4, 5), (1, 5)),
])
@pytest.mark.parametrize("const_b", [True, False])
@pytest.mark.parametrize("swap", [False, True])
def test_matmul(a_shape, b_shape, cshape, const_b, swap):
    feeds = {"a": rand(*a_shape, seed=1)}
    inits = {"c": rand(*cshape, seed=3)}
    (inits if const_b else feeds)["B"] = rand(*b_shape, seed=2)
    before = build([node("MatMul", ["a", "B"], ["t"]),
                    node("Add", ["c", "t"] if swap else ["t", "c"], ["y"])], feeds, ["y"], inits)
    after = run_pass("fuse-bias", before)
    assert ops(after) == ["MatMul"]
    mm = after.nodes[0]
    assert mm.inputs[:2] == ["a", "B"] and mm.outputs == ["y"]
    assert after.constants[mm.inputs[2]].shape == (5,)
    assert_same_outputs(before, after, feeds)


def test_matmul_chain_and_existing_bias():
    """MatMul -> Add -> Add: the second Add folds into the bias created by the first."""
    inits = {"B": rand(4, 5, seed=2), "c1": rand(5, seed=3), "c2": rand(1, 5, seed=4)}
    feeds = {"a": rand(3, 4)}
    before = build([node("MatMul", ["a", "B"], ["t"]), node("Add", ["t", "c1"], ["u"]),
                    node("Add", ["c2", "u"], ["y"])], feeds, ["y"], inits)
    after = run_pass("fuse-bias", before)
    assert ops(after) == ["MatMul"] and after.nodes[0].outputs == ["y"]
    np.testing.assert_allclose(after.constants[after.nodes[0].inputs[2]],
                               inits["c1"] + inits["c2"][0], rtol=1e-6)
    assert_same_outputs(before, after, feeds)


@pytest.mark.parametrize("cshape,c_in", [((5,), False), ((3, 5), False), ((1, 1), False),
                                         ((5,), True), ((3, 1), False)])
@pytest.mark.parametrize("beta", [1.0, 0.5])
def test_gemm(cshape, c_in, beta):
    inits = {"B": rand(4, 5, seed=2), "c": rand(*cshape, seed=3)}
    ins = ["a", "B"]
    if c_in:
        inits["C"] = rand(3, 5, seed=5)
        ins.append("C")
    feeds = {"a": rand(3, 4)}
    before = build([node("Gemm", ins, ["t"], beta=beta, alpha=1.5), node("Add", ["t", "c"], ["y"])],
                   feeds, ["y"], inits)
    after = run_pass("fuse-bias", before)
    assert ops(after) == ["Gemm"]
    gemm = after.nodes[0]
    assert gemm.attrs["beta"] == 1.0 and gemm.attrs["alpha"] == 1.5 and len(gemm.inputs) == 3
    assert_same_outputs(before, after, feeds)


# -- Expected = Before ------------------------------------------------------------------

@pytest.mark.parametrize("why,cshape", [
    ("Add broadcasts the conv output to a bigger shape", (2, 5, 1, 1)),
    ("not per-channel (spatial)", (5, 1, 5)),
    ("[C] aligns with the last axis, not the channel axis", (5,)),
    ("rank grows", (1, 1, 5, 1, 1)),
    ("[1, C, 1] aligns with a spatial axis", (1, 5, 1)),
])
def test_conv_not_fused(why, cshape):
    inits = {"W": rand(5, 2, 3, 3, seed=1), "c": rand(*cshape, seed=3)}
    feeds = {"x": rand(1, 2, 7, 7)}   # conv output [1, 5, 5, 5]
    before = build([node("Conv", ["x", "W"], ["t"]), node("Add", ["t", "c"], ["y"])], feeds,
                   ["y"], inits)
    assert_unchanged(before, run_pass("fuse-bias", before))


@pytest.mark.parametrize("why,kw", [
    ("second consumer", dict(extra_nodes=[node("Relu", ["t"], ["r"])], outputs=("y", "r"))),
    ("intermediate is a graph output", dict(outputs=("y", "t"))),
])
def test_single_use_only(why, kw):
    before, _ = conv_add((3, 1, 1), **kw)
    assert_unchanged(before, run_pass("fuse-bias", before))


def test_matmul_not_fused():
    # Add broadcasts the MatMul output [3,5] to [2,3,5]
    inits = {"B": rand(4, 5), "c": rand(2, 1, 5)}
    g = build([node("MatMul", ["a", "B"], ["t"]), node("Add", ["t", "c"], ["y"])],
              {"a": rand(3, 4)}, ["y"], inits)
    assert_unchanged(g, run_pass("fuse-bias", g))
    # not on the last axis
    g = build([node("MatMul", ["a", "B"], ["t"]), node("Add", ["t", "c"], ["y"])],
              {"a": rand(3, 4)}, ["y"], {"B": rand(4, 5), "c": rand(3, 1)})
    assert_unchanged(g, run_pass("fuse-bias", g))
    # run-time addend
    g = build([node("MatMul", ["a", "B"], ["t"]), node("Add", ["t", "c"], ["y"])],
              {"a": rand(3, 4), "c": rand(5)}, ["y"], {"B": rand(4, 5)})
    assert_unchanged(g, run_pass("fuse-bias", g))
    # 1-D B: the output's last axis is not N
    g = build([node("MatMul", ["a", "B"], ["t"]), node("Add", ["t", "c"], ["y"])],
              {"a": rand(3, 4)}, ["y"], {"B": rand(4), "c": rand(3)})
    assert_unchanged(g, run_pass("fuse-bias", g))
    # x + x
    g = build([node("MatMul", ["a", "B"], ["t"]), node("Add", ["t", "t"], ["y"])],
              {"a": rand(3, 4)}, ["y"], {"B": rand(4, 5)})
    assert_unchanged(g, run_pass("fuse-bias", g))


def test_after_fused_activation_not_fused():
    before, _ = conv_add((3, 1, 1))
    before.nodes[0].attrs.update(aicc_act="Relu", aicc_act_params={})
    assert_unchanged(before, run_pass("fuse-bias", before))


def test_non_constant_existing_bias_not_fused():
    inits = {"W": rand(3, 2, 3, 3, seed=1), "c": rand(3, 1, 1)}
    g = build([node("Conv", ["x", "W", "B"], ["t"]), node("Add", ["t", "c"], ["y"])],
              {"x": rand(1, 2, 5, 5), "B": rand(3)}, ["y"], inits)
    assert_unchanged(g, run_pass("fuse-bias", g))


def test_sub_and_other_producers_untouched():
    inits = {"c": rand(3, 1, 1)}
    g = build([node("Relu", ["x"], ["t"]), node("Add", ["t", "c"], ["y"])],
              {"x": rand(1, 3, 5, 5)}, ["y"], inits)
    assert_unchanged(g, run_pass("fuse-bias", g))
