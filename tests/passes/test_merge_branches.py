"""merge-branches: Before -> Expected structure, unchanged cases, numerics (the numpy
interpreter and, end to end, onnxruntime on the unmerged model)."""
import numpy as np
import pytest

from tests.oracle import check, make_model
from tests.passes.helpers import (assert_same_outputs, assert_unchanged, build, find, node, ops,
                                  rand, run_pass)
from tests.passes.test_fold_batchnorm import bn, bn_stats


def repvgg(c=6, group=1, spatial=(6, 5), bias=True, identity="bn", act=True, seed=0):
    """RepVGG block in its training form: Conv k3 + Conv k1 (+ BN(x) / x) summed, then Relu."""
    r = len(spatial)
    inits = {"W3": rand(c, c // group, *(3,) * r, seed=seed + 1),
             "W1": rand(c, c // group, *(1,) * r, seed=seed + 2)}
    i3, i1 = ["x", "W3"], ["x", "W1"]
    if bias:
        inits.update(B3=rand(c, seed=seed + 3), B1=rand(c, seed=seed + 4))
        i3.append("B3")
        i1.append("B1")
    nodes = [node("Conv", i3, ["a"], group=group, pads=[1] * (2 * r)),
             node("Conv", i1, ["b"], group=group), node("Add", ["a", "b"], ["s"])]
    last = "s"
    if identity == "bn":
        inits.update(bn_stats(c, seed=seed + 5))
        nodes += [bn("x", "n"), node("Add", ["s", "n"], ["t"])]
        last = "t"
    elif identity == "x":
        nodes += [node("Add", ["x", "s"], ["t"])]
        last = "t"
    if act:
        nodes.append(node("Relu", [last], ["y"]))
    else:
        nodes[-1].output[0] = "y"
    feeds = {"x": rand(2, c, *spatial, seed=seed + 6)}
    return nodes, feeds, inits


@pytest.mark.parametrize("identity", ["bn", "x", None])
@pytest.mark.parametrize("group,spatial", [(1, (6, 5)), (2, (6, 5)), (6, (6, 5)), (1, (9,))])
@pytest.mark.parametrize("bias", [True, False])
def test_repvgg_block(identity, group, spatial, bias):
    nodes, feeds, inits = repvgg(group=group, spatial=spatial, bias=bias, identity=identity)
    before = build(nodes, feeds, ["y"], inits)
    after = run_pass("merge-branches", before)
    assert ops(after) == ["Conv", "Relu"]
    conv = find(after, "Conv")
    assert conv.inputs[0] == "x" and conv.attrs["group"] == group
    assert after.constants[conv.inputs[1]].shape == before.constants["W3"].shape
    assert after.constants[conv.inputs[2]].dtype == np.float32
    assert_same_outputs(before, after, feeds, rtol=1e-5, atol=1e-5)


def test_mobileone_chain():
    """k depthwise 3x3 branches, a depthwise 1x1 'scale' branch and a BN over x, summed by a
    chain of Adds in any order: one conv."""
    c, k = 8, 4
    inits = {**bn_stats(c, seed=9)}
    nodes, terms = [], []
    for i in range(k):
        inits[f"W{i}"], inits[f"B{i}"] = rand(c, 1, 3, 3, seed=10 + i), rand(c, seed=20 + i)
        nodes.append(node("Conv", ["x", f"W{i}", f"B{i}"], [f"c{i}"], group=c, pads=[1] * 4))
        terms.append(f"c{i}")
    inits["S"] = rand(c, 1, 1, 1, seed=30)
    nodes.append(node("Conv", ["x", "S"], ["sc"], group=c))
    nodes.append(bn("x", "n"))
    terms = ["sc", terms[0], "n"] + terms[1:]
    acc = terms[0]
    for j, t in enumerate(terms[1:]):
        out = "y" if j == len(terms) - 2 else f"s{j}"
        nodes.append(node("Add", [t, acc] if j % 2 else [acc, t], [out]))
        acc = out
    feeds = {"x": rand(1, c, 7, 7, seed=31)}
    before = build(nodes, feeds, ["y"], inits)
    after = run_pass("merge-branches", before)
    assert ops(after) == ["Conv"] and after.nodes[0].outputs == ["y"]
    assert_same_outputs(before, after, feeds, rtol=1e-5, atol=2e-5)


def _conv(x, w, y, **attrs):
    return node("Conv", [x, w], [y], **attrs)


UNCHANGED = {
    "groups differ": ([_conv("x", "W3", "a", pads=[1] * 4), _conv("x", "W1g", "b", group=2),
                       node("Add", ["a", "b"], ["y"])], None),
    "different inputs": ([_conv("x", "W3", "a", pads=[1] * 4), _conv("z", "W1", "b"),
                          node("Add", ["a", "b"], ["y"])], None),
    "kernels not nested": ([_conv("x", "W13", "a", pads=[0, 1, 0, 1]),
                            _conv("x", "W31", "b", pads=[1, 0, 1, 0]),
                            node("Add", ["a", "b"], ["y"])], None),
    "branch read twice": ([_conv("x", "W3", "a", pads=[1] * 4), _conv("x", "W1", "b"),
                           node("Add", ["a", "b"], ["s"]), node("Mul", ["s", "b"], ["y"])],
                          None),
    "fused activation": ([_conv("x", "W3", "a", pads=[1] * 4), _conv("x", "W1", "b"),
                          node("Add", ["a", "b"], ["y"])], "Relu"),
    "identity off the taps": ([_conv("x", "W2", "a", pads=[1] * 4, dilations=[2, 2]),
                               node("Add", ["a", "x"], ["y"])], None),
    "no conv": ([bn("x", "n"), node("Add", ["n", "x"], ["y"])], None),
}


@pytest.mark.parametrize("case", sorted(UNCHANGED))
def test_unchanged(case):
    nodes, act = UNCHANGED[case]
    c = 4
    inits = {"W3": rand(c, c, 3, 3, seed=1), "W1": rand(c, c, 1, 1, seed=2),
             "W1g": rand(c, c // 2, 1, 1, seed=9),
             "W13": rand(c, c, 1, 3, seed=3), "W31": rand(c, c, 3, 1, seed=4),
             "W2": rand(c, c, 2, 2, seed=5), **bn_stats(c, seed=6)}
    used = {i for n in nodes for i in n.input}
    inits = {k: v for k, v in inits.items() if k in used}
    feeds = {"x": rand(1, c, 6, 6, seed=7)}
    if "z" in used:
        feeds["z"] = rand(1, c, 6, 6, seed=8)
    before = build(nodes, feeds, ["y"], inits)
    if act:       # as fuse-activation leaves a conv
        before.nodes[0].attrs["aicc_act"] = act
    after = run_pass("merge-branches", before)
    assert_unchanged(before, after)


def test_graph_output_branch_kept():
    nodes, feeds, inits = repvgg(identity=None, act=False)
    before = build(nodes, feeds, ["y", "b"], inits)
    after = run_pass("merge-branches", before)
    assert_unchanged(before, after)


@pytest.mark.parametrize("target", ["generic", "x86-avx2"])
def test_bundle_against_onnxruntime(target, tmp_path):
    """Two RepVGG blocks (the second strided: no identity branch) built with the default
    pipeline: equal to onnxruntime on the unmerged model."""
    nodes, feeds, inits = repvgg(c=16, spatial=(12, 12), seed=40)
    inits.update(W3b=rand(16, 16, 3, 3, seed=50), W1b=rand(16, 16, 1, 1, seed=51))
    nodes += [node("Conv", ["y", "W3b"], ["p"], pads=[1] * 4, strides=[2, 2]),
              node("Conv", ["y", "W1b"], ["q"], strides=[2, 2]), node("Add", ["p", "q"], ["o"])]
    model = make_model(nodes, feeds, ["o"], inits)
    check(model, feeds, tmp_path, target=target, rtol=1e-4, atol=1e-4)
