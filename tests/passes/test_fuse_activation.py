"""fuse-activation: Before -> Expected structure, unchanged cases, numerics."""
import numpy as np
import pytest

from tests.passes.helpers import (assert_same_outputs, assert_unchanged, build, node, ops, rand,
                                  run_pass)

ACTS = [
    ("Relu", {}, {}),
    ("LeakyRelu", {}, {"alpha": 0.01}),
    ("LeakyRelu", {"alpha": 0.3}, {"alpha": 0.3}),
    ("Sigmoid", {}, {}),
    ("HardSigmoid", {}, {"alpha": 0.2, "beta": 0.5}),
    ("HardSigmoid", {"alpha": 0.5, "beta": 0.25}, {"alpha": 0.5, "beta": 0.25}),
    ("HardSwish", {}, {}),
    ("Tanh", {}, {}),
]


def producer(op, feeds, inits, out="t"):
    """One producer node of each kind reading feeds['x'] ([2, 4, 6, 6] for convs, else 2-D)."""
    if op == "Conv":
        feeds["x"] = rand(2, 4, 6, 6, seed=1)
        inits.update(W=rand(3, 4, 3, 3, seed=2), B=rand(3, seed=3))
        return node("Conv", ["x", "W", "B"], [out], pads=[1, 1, 1, 1])
    if op == "ConvTranspose":
        feeds["x"] = rand(2, 4, 6, 6, seed=1)
        inits.update(W=rand(4, 3, 3, 3, seed=2))
        return node("ConvTranspose", ["x", "W"], [out], strides=[2, 2])
    if op == "Gemm":
        feeds["x"] = rand(3, 4, seed=1)
        inits.update(W=rand(5, 4, seed=2), C=rand(5, seed=3))
        return node("Gemm", ["x", "W", "C"], [out], transB=1, alpha=0.7)
    feeds["x"] = rand(2, 3, 4, seed=1)
    inits.update(W=rand(4, 5, seed=2))
    return node("MatMul", ["x", "W"], [out])


def act_graph(prod, act, attrs=None, act_inputs=(), extra_nodes=(), outputs=("y",), opset=17,
              act_inits=None):
    feeds, inits = {}, dict(act_inits or {})
    p = producer(prod, feeds, inits)
    a = node(act, ["t", *act_inputs], ["y"], **(attrs or {}))
    feeds["x"] = feeds["x"] * 3
    return build([p, a, *extra_nodes], feeds, list(outputs), inits, opset=opset), feeds


@pytest.mark.parametrize("act,attrs,params", ACTS, ids=lambda v: str(v))
@pytest.mark.parametrize("prod", ["Conv", "ConvTranspose", "Gemm", "MatMul"])
def test_fused(prod, act, attrs, params):
    before, feeds = act_graph(prod, act, attrs)
    after = run_pass("fuse-activation", before)
    assert ops(after) == [prod]
    p = after.nodes[0]
    assert p.outputs == ["y"] and p.inputs == before.nodes[0].inputs
    assert p.attrs["aicc_act"] == act
    assert p.attrs["aicc_act_params"] == pytest.approx(params)
    assert {k: v for k, v in p.attrs.items() if not k.startswith("aicc_")} == before.nodes[0].attrs
    assert "t" not in after.types
    assert_same_outputs(before, after, feeds)


@pytest.mark.parametrize("lo,hi", [(0.0, 6.0), (-1.0, None), (None, 0.5)])
@pytest.mark.parametrize("prod", ["Conv", "MatMul"])
def test_clip_inputs(prod, lo, hi):
    """Clip-11+: min/max are (optional) constant inputs."""
    inits = {}
    ins = []
    for k, v in (("lo", lo), ("hi", hi)):
        if v is not None:
            inits[k] = np.array(v, np.float32)
        ins.append(k if v is not None else "")
    while ins and not ins[-1]:
        ins.pop()
    before, feeds = act_graph(prod, "Clip", act_inputs=ins, act_inits=inits)
    after = run_pass("fuse-activation", before)
    assert ops(after) == [prod]
    assert after.nodes[0].attrs["aicc_act"] == "Clip"
    assert after.nodes[0].attrs["aicc_act_params"] == {"min": lo, "max": hi}
    assert_same_outputs(before, after, feeds)


def test_clip_attrs_opset10():
    before, feeds = act_graph("Conv", "Clip", {"min": 0.0, "max": 6.0}, opset=10)
    after = run_pass("fuse-activation", before)
    assert ops(after) == ["Conv"]
    assert after.nodes[0].attrs["aicc_act_params"] == {"min": 0.0, "max": 6.0}
    assert_same_outputs(before, after, feeds)


def test_graph_output_name_kept():
    feeds, inits = {}, {}
    p = producer("Conv", feeds, inits)
    before = build([p, node("Relu", ["t"], ["out"]), node("Sigmoid", ["out"], ["s"])], feeds,
                   ["out", "s"], inits)
    after = run_pass("fuse-activation", before)
    assert ops(after) == ["Conv", "Sigmoid"]
    assert after.nodes[0].outputs == ["out"] and after.nodes[1].inputs == ["out"]
    assert after.outputs == ["out", "s"]
    assert_same_outputs(before, after, feeds)


def test_second_activation_not_fused():
    """Conv -> Relu -> Sigmoid: the Conv takes the Relu; it then has an activation, so the
    Sigmoid stays (one fused activation per node)."""
    feeds, inits = {}, {}
    p = producer("Conv", feeds, inits)
    before = build([p, node("Relu", ["t"], ["u"]), node("Sigmoid", ["u"], ["y"])], feeds, ["y"],
                   inits)
    after = run_pass("fuse-activation", before)
    assert ops(after) == ["Conv", "Sigmoid"]
    assert after.nodes[0].attrs["aicc_act"] == "Relu" and after.nodes[0].outputs == ["u"]
    assert_same_outputs(before, after, feeds)
    again = run_pass("fuse-activation", after)
    assert_unchanged(after, again)


# -- Expected = Before ------------------------------------------------------------------

@pytest.mark.parametrize("why,kw", [
    ("second consumer", dict(extra_nodes=[node("Neg", ["t"], ["n"])], outputs=("y", "n"))),
    ("intermediate is a graph output", dict(outputs=("y", "t"))),
    ("activation not in the list", dict(act="Elu")),
    ("activation not in the list", dict(act="Softplus")),
])
def test_not_fused(why, kw):
    act = kw.pop("act", "Relu")
    before, _ = act_graph("Conv", act, **kw)
    assert_unchanged(before, run_pass("fuse-activation", before))


def test_clip_runtime_bound_not_fused():
    feeds, inits = {}, {}
    p = producer("MatMul", feeds, inits)
    feeds["lo"] = np.array(0.0, np.float32)
    before = build([p, node("Clip", ["t", "lo"], ["y"])], feeds, ["y"], inits)
    assert_unchanged(before, run_pass("fuse-activation", before))


def test_producer_already_fused():
    before, _ = act_graph("Gemm", "Tanh")
    before.nodes[0].attrs.update(aicc_act="Relu", aicc_act_params={})
    assert_unchanged(before, run_pass("fuse-activation", before))


def test_other_producers_untouched():
    g = build([node("Add", ["x", "x"], ["t"]), node("Relu", ["t"], ["y"])], {"x": rand(2, 3)},
              ["y"])
    assert_unchanged(g, run_pass("fuse-activation", g))
