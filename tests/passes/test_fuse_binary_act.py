"""fuse-binary-activation: Before -> Expected structure, unchanged cases, and compiled numerics:
the fused graph gives the unfused graph's results bit for bit (generic and the host's SIMD
targets), and matches onnxruntime."""
import numpy as np
import onnx
import pytest
from onnx import helper

import aicc
from aicc.config import Options
from aicc.targets import runnable_targets
from tests.oracle import STRICT_CFLAGS, assert_close, make_model, reference
from tests.passes.helpers import assert_same_outputs, assert_unchanged, build, node, ops, rand, run_pass

ACTS = [
    ("Relu", {}, {}),
    ("LeakyRelu", {"alpha": 0.3}, {"alpha": 0.3}),
    ("Sigmoid", {}, {}),
    ("HardSigmoid", {}, {"alpha": 0.2, "beta": 0.5}),
    ("HardSwish", {}, {}),
    ("Tanh", {}, {}),
]


def graph(op="Add", act="Relu", attrs=None, sa=(2, 3, 4), sb=(2, 3, 4), dtype=np.float32,
          act_inputs=(), inits=None, extra=(), outputs=("y",)):
    feeds = {"a": rand(*sa, seed=1).astype(dtype), "b": (rand(*sb, seed=2) + 2).astype(dtype)}
    nodes = [node(op, ["a", "b"], ["t"]), node(act, ["t", *act_inputs], ["y"], **(attrs or {})),
             *extra]
    return build(nodes, feeds, list(outputs), dict(inits or {})), feeds


@pytest.mark.parametrize("act,attrs,params", ACTS, ids=lambda v: str(v))
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
def test_fused(op, act, attrs, params):
    before, feeds = graph(op, act, attrs)
    after = run_pass("fuse-binary-activation", before)
    assert ops(after) == [op]
    n = after.nodes[0]
    assert n.inputs == ["a", "b"] and n.outputs == ["y"]
    assert n.attrs["aicc_act"] == act
    assert n.attrs["aicc_act_params"] == pytest.approx(params)
    assert "t" not in after.types
    assert_same_outputs(before, after, feeds)


@pytest.mark.parametrize("lo,hi", [(0.0, 6.0), (0.5, None), (None, 0.25)])
def test_clip_constant_bounds(lo, hi):
    inits, ins = {}, []
    for k, v in (("lo", lo), ("hi", hi)):
        if v is not None:
            inits[k] = np.array(v, np.float32)
        ins.append(k if v is not None else "")
    while ins and not ins[-1]:
        ins.pop()
    before, feeds = graph("Add", "Clip", act_inputs=ins, inits=inits, sb=(4,))
    after = run_pass("fuse-binary-activation", before)
    assert ops(after) == ["Add"]
    assert after.nodes[0].attrs["aicc_act_params"] == {"min": lo, "max": hi}
    assert_same_outputs(before, after, feeds)


def test_broadcast_and_float64():
    before, feeds = graph("Add", "Relu", sa=(2, 3, 4), sb=(3, 1), dtype=np.float64)
    after = run_pass("fuse-binary-activation", before)
    assert ops(after) == ["Add"] and after.nodes[0].attrs["aicc_act"] == "Relu"
    assert_same_outputs(before, after, feeds)


def test_graph_output_name_kept():
    before, feeds = graph(extra=[node("Neg", ["y"], ["n"])], outputs=("y", "n"))
    after = run_pass("fuse-binary-activation", before)
    assert ops(after) == ["Add", "Neg"]
    assert after.nodes[0].outputs == ["y"] and after.outputs == ["y", "n"]
    assert_same_outputs(before, after, feeds)


def test_conv_relu_left_to_fuse_activation():
    """Default order: a Conv -> Relu is fused by fuse-activation first; the residual
    Add -> Relu after it by this pass; the Conv keeps its Relu, the Add gets the second."""
    feeds = {"x": rand(1, 2, 5, 5, seed=3)}
    inits = {"W": rand(2, 2, 3, 3, seed=4)}
    g = build([node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]), node("Relu", ["c"], ["r"]),
               node("Add", ["r", "x"], ["s"]), node("Relu", ["s"], ["y"])], feeds, ["y"], inits)
    mid = run_pass("fuse-activation", g)
    assert ops(mid) == ["Conv", "Add", "Relu"]
    after = run_pass("fuse-binary-activation", mid)
    assert ops(after) == ["Conv", "Add"]
    assert [n.attrs.get("aicc_act") for n in after.nodes] == ["Relu", "Relu"]
    assert_same_outputs(g, after, feeds)


# -- Expected = Before ------------------------------------------------------------------

@pytest.mark.parametrize("why,kw", [
    ("second consumer", dict(extra=[node("Neg", ["t"], ["n"])], outputs=("y", "n"))),
    ("intermediate is a graph output", dict(outputs=("y", "t"))),
    ("activation not in the list", dict(act="Elu")),
    ("activation not in the list", dict(act="Softplus")),
    ("integer Add", dict(dtype=np.int32)),
    ("integer Mul", dict(op="Mul", dtype=np.int64)),
    ("not an arithmetic producer", dict(op="Pow")),
    ("not an arithmetic producer", dict(op="Max")),
])
def test_not_fused(why, kw):
    before, _ = graph(**kw)
    assert_unchanged(before, run_pass("fuse-binary-activation", before))


def test_clip_runtime_bound_not_fused():
    feeds = {"a": rand(3, 4, seed=1), "b": rand(3, 4, seed=2), "lo": np.array(0.0, np.float32)}
    g = build([node("Add", ["a", "b"], ["t"]), node("Clip", ["t", "lo"], ["y"])], feeds, ["y"])
    assert_unchanged(g, run_pass("fuse-binary-activation", g))


def test_already_fused_and_second_activation():
    """Add -> Relu -> Sigmoid: the Add takes the Relu, then has an activation: the Sigmoid
    stays, and a second run changes nothing."""
    before, feeds = graph(extra=[node("Sigmoid", ["y"], ["z"])], outputs=("z",))
    after = run_pass("fuse-binary-activation", before)
    assert ops(after) == ["Add", "Sigmoid"]
    assert_same_outputs(before, after, feeds)
    assert_unchanged(after, run_pass("fuse-binary-activation", after))


# -- compiled: fused == unfused bit for bit ------------------------------------------------

TARGETS = ["generic"] + [t for t in runnable_targets() if t in ("x86-avx2", "x86-avx512")]
UNFUSED = [p for p in Options.load().pipeline if p[0] != "fuse-binary-activation"]
SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30, 1e-40], np.float32)


def _chain_model(dtype):
    """Every binary op with every fusable activation (broadcasting operands), each pair
    fused; a two-consumer Add and an integer Add -> Relu stay apart."""
    r = np.random.default_rng(7)
    a = (r.normal(size=(2, 3, 5, 7)) * 4).astype(dtype)
    a.flat[:SPECIAL.size] = SPECIAL
    b = (r.normal(size=(3, 1, 7)) * 4).astype(dtype)
    b.flat[3:6] = [np.nan, np.inf, 0.0]
    inits = {"lo": np.array(-0.5, dtype), "hi": np.array(1.5, dtype)}
    nodes, outs = [], []
    acts = [("Relu", [], {}), ("LeakyRelu", [], {"alpha": 0.1}), ("Sigmoid", [], {}),
            ("HardSigmoid", [], {"alpha": 0.3, "beta": 0.4}), ("HardSwish", [], {}),
            ("Tanh", [], {}), ("Clip", ["lo", "hi"], {}), ("Clip", ["", "hi"], {})]
    for op in ("Add", "Sub", "Mul", "Div"):
        for k, (act, extra, attrs) in enumerate(acts):
            t, y = f"{op}{k}_t", f"{op}_{act}{k}"
            ins = ["a", "b"] if k % 2 == 0 else ["b", "a"]
            nodes += [helper.make_node(op, ins, [t]), helper.make_node(act, [t, *extra], [y], **attrs)]
            outs.append(y)
    nodes += [helper.make_node("Add", ["a", "b"], ["shared"]),
              helper.make_node("Relu", ["shared"], ["shared_relu"]),
              helper.make_node("Neg", ["shared"], ["shared_neg"]),
              helper.make_node("Cast", ["a"], ["ai"], to=onnx.TensorProto.INT32),
              helper.make_node("Add", ["ai", "ai"], ["it"]),
              helper.make_node("Relu", ["it"], ["int_relu"])]
    outs += ["shared_relu", "shared_neg", "int_relu"]
    return make_model(nodes, {"a": a, "b": b}, outs, inits), {"a": a, "b": b}, len(acts) * 4


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("target", TARGETS)
def test_compiled_fused_equals_unfused_bitwise(target, dtype, tmp_path):
    model, feeds, n_fused = _chain_model(dtype)
    feeds_ok = {k: np.where(np.isfinite(v) & (abs(v) < 1e3) & (abs(v) > 1e-3), v, 0.5).astype(v.dtype)
                for k, v in feeds.items()}
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    fused = aicc.load(aicc.build(path, target=target, out=tmp_path / "f"), cflags=STRICT_CFLAGS)
    plain = aicc.load(aicc.build(path, target=target, out=tmp_path / "u",
                                 overrides={"pipeline": [n for n, _ in UNFUSED]}),
                      cflags=STRICT_CFLAGS)
    steps = fused.manifest["steps"]
    assert sum(1 for s in steps if s.get("fused", {}).get("act")) == n_fused
    assert len(plain.manifest["steps"]) == len(steps) + n_fused
    for fd in (feeds, feeds_ok):
        got, want = fused.run(fd), plain.run(fd)
        for k in want:
            assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape, k
            assert got[k].tobytes() == want[k].tobytes(), k
    # and against onnxruntime on tame inputs (with Inf, onnxruntime's Clip without a min
    # clamps -Inf to the lowest float, aicc's standalone Clip too keeps -Inf)
    assert_close(fused.run(feeds_ok), reference(model, feeds_ok), rtol=1e-5, atol=1e-6)
