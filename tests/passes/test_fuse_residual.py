"""fuse-residual: Before -> Expected structure, unchanged cases, node order, and the numpy
interpreter's values of the fused graph against the unfused one."""
import numpy as np
import pytest

from tests.passes.helpers import (assert_same_outputs, assert_unchanged, build, node, ops, rand,
                                  run_pass)


def block(add_inputs=("c", "x"), act=None, bias=True, dtype=np.float32, extra=(),
          outputs=("y",), conv_act=False):
    """x [1, 4, 5, 5] -> Conv 3x3 pad 1 (4 -> 4) -> c; Add(add_inputs) [-> act] -> y."""
    feeds = {"x": rand(1, 4, 5, 5, seed=1).astype(dtype)}
    inits = {"W": rand(4, 4, 3, 3, seed=2).astype(dtype)}
    ins = ["x", "W"]
    if bias:
        inits["B"] = rand(4, seed=3).astype(dtype)
        ins.append("B")
    nodes = [node("Conv", ins, ["c0" if conv_act else "c"], pads=[1, 1, 1, 1])]
    if conv_act:
        nodes.append(node("Relu", ["c0"], ["c"]))
    nodes.append(node("Add", list(add_inputs), ["s" if act else "y"]))
    if act:
        nodes.append(node(act, ["s"], ["y"]))
    return build(nodes + list(extra), feeds, list(outputs), inits), feeds


def pipeline(g):
    """fuse-activation, fuse-binary-activation, fuse-residual (the default order)."""
    for name in ("fuse-activation", "fuse-binary-activation", "fuse-residual"):
        g = run_pass(name, g)
    return g


@pytest.mark.parametrize("order", [("c", "x"), ("x", "c")])
@pytest.mark.parametrize("act", [None, "Relu", "Sigmoid"])
@pytest.mark.parametrize("bias", [True, False])
def test_fused(order, act, bias):
    before, feeds = block(order, act, bias)
    after = pipeline(before)
    assert ops(after) == ["Conv"]
    n = after.nodes[0]
    assert n.inputs == ["x", "W", "B" if bias else "", "x"] and n.outputs == ["y"]
    assert n.attrs["aicc_residual"] == 1
    assert n.attrs.get("aicc_act") == act
    assert "c" not in after.types
    assert_same_outputs(before, after, feeds)


def test_float64():
    before, feeds = block(act="Relu", dtype=np.float64)
    after = pipeline(before)
    assert ops(after) == ["Conv"] and after.nodes[0].attrs["aicc_residual"] == 1
    assert_same_outputs(before, after, feeds)


def test_fused_node_moves_after_the_residual_producer():
    """Add(conv, shortcut) where the shortcut conv comes after the main conv in the node
    order (a downsampling block): the first Add input (the main conv) takes the Add, placed
    after the shortcut conv."""
    feeds = {"x": rand(1, 4, 6, 6, seed=1)}
    inits = {"W": rand(8, 4, 3, 3, seed=2), "S": rand(8, 4, 1, 1, seed=3)}
    g = build([node("Conv", ["x", "W"], ["main"], pads=[1, 1, 1, 1], strides=[2, 2]),
               node("Conv", ["x", "S"], ["short"], strides=[2, 2]),
               node("Add", ["main", "short"], ["s"]), node("Relu", ["s"], ["y"])],
              feeds, ["y"], inits)
    after = pipeline(g)
    assert ops(after) == ["Conv", "Conv"]
    assert after.nodes[0].outputs == ["short"]
    assert after.nodes[1].inputs == ["x", "W", "", "short"] and after.nodes[1].outputs == ["y"]
    assert after.nodes[1].attrs["aicc_act"] == "Relu"
    assert_same_outputs(g, after, feeds)


def test_graph_output_sum_kept_name():
    before, feeds = block(extra=[node("Neg", ["y"], ["n"])], outputs=("y", "n"))
    after = pipeline(before)
    assert ops(after) == ["Conv", "Neg"] and after.outputs == ["y", "n"]
    assert_same_outputs(before, after, feeds)


# -- Expected = Before ------------------------------------------------------------------

@pytest.mark.parametrize("why,kw", [
    ("conv output read twice", dict(extra=[node("Neg", ["c"], ["n"])], outputs=("y", "n"))),
    ("conv output is a graph output", dict(outputs=("y", "c"))),
    ("activation between conv and Add", dict(conv_act=True)),
    ("Add of the conv with itself", dict(add_inputs=("c", "c"))),
])
def test_not_fused(why, kw):
    before, _ = block(**kw)
    mid = run_pass("fuse-binary-activation", run_pass("fuse-activation", before))
    assert_unchanged(mid, run_pass("fuse-residual", mid))


def test_broadcast_residual_not_fused():
    """A per-channel Add (a bias fuse-bias did not take: not constant) broadcasts: left."""
    feeds = {"x": rand(1, 4, 5, 5, seed=1), "b": rand(1, 4, 1, 1, seed=2)}
    g = build([node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]), node("Add", ["c", "b"], ["y"])],
              feeds, ["y"], {"W": rand(4, 4, 3, 3, seed=3)})
    assert_unchanged(g, run_pass("fuse-residual", g))


def test_not_a_conv_and_second_run():
    feeds = {"a": rand(1, 4, 5, 5, seed=1), "b": rand(1, 4, 5, 5, seed=2)}
    g = build([node("MaxPool", ["a"], ["m"], kernel_shape=[1, 1]), node("Add", ["m", "b"], ["y"])],
              feeds, ["y"])
    assert_unchanged(g, run_pass("fuse-residual", g))
    before, _ = block(act="Relu")
    once = pipeline(before)
    assert_unchanged(once, run_pass("fuse-residual", once))
