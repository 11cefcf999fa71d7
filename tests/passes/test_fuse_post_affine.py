"""fuse-post-affine: Before -> Expected structure, the cases left alone, and the fused nodes'
values: bit for bit the unfused graph's on every target kind (portable passes over the
output, per tile in the SIMD GEMM drivers and the channel-last depthwise kernels), and close
to onnxruntime's."""
import json

import numpy as np
import onnx
import pytest
import yaml

import aicc
from aicc.config import DEFAULT_CONFIG
from aicc.runner import open_bundle
from aicc.targets import load_target, runnable_targets
from tests.oracle import STRICT_CFLAGS, assert_close, make_model, reference
from tests.passes.helpers import (assert_same_outputs, assert_unchanged, build, node, ops, rand,
                                  run_pass)


def mlp(act="Relu", bn_shape_2d=True, extra=(), outputs=("z",), dtype=np.float32,
        bn_consts=True):
    """x [10, 8] @ W [8, 12] + b -> act -> BatchNormalization -> z (BatchNorm1d on [N, C];
    bn_shape_2d False: reshaped to [2, 12, 5, 1] first, the norm over axis 1 of a 4-D
    tensor)."""
    feeds = {"x": rand(10, 8, seed=1).astype(dtype)}
    inits = {"W": rand(8, 12, seed=2).astype(dtype), "b": rand(12, seed=3).astype(dtype),
             "s": rand(12, seed=4, lo=0.5, hi=2).astype(dtype),
             "t": rand(12, seed=5).astype(dtype), "mu": rand(12, seed=6).astype(dtype),
             "var": rand(12, seed=7, lo=0.2, hi=3).astype(dtype)}
    nodes = [node("MatMul", ["x", "W"], ["m"]), node("Add", ["m", "b"], ["a"])]
    y = "a"
    if act:
        nodes.append(node(act, ["a"], ["y"]))
        y = "y"
    if not bn_shape_2d:
        inits["shape"] = np.array([2, 12, 5, 1], np.int64)
        nodes.append(node("Reshape", [y, "shape"], ["r"]))
        y = "r"
    if not bn_consts:
        feeds["var"] = inits.pop("var")
    nodes.append(node("BatchNormalization", [y, "s", "t", "mu", "var"], ["z"], epsilon=1e-3))
    return build(nodes + list(extra), feeds, list(outputs), inits), feeds


def pipeline(g):
    """fuse-bias, fuse-activation, fuse-post-affine (the default order)."""
    for name in ("fuse-bias", "fuse-activation", "fuse-post-affine"):
        g = run_pass(name, g)
    return g


@pytest.mark.parametrize("act", ["Relu", "Sigmoid"])
def test_fused(act):
    before, feeds = mlp(act)
    after = pipeline(before)
    assert ops(after) == ["MatMul"]
    n = after.nodes[0]
    assert n.inputs[:2] == ["x", "W"] and len(n.inputs) == 5 and n.outputs == ["z"]
    assert n.attrs["aicc_post_affine"] == 1 and n.attrs["aicc_act"] == act
    assert all(after.constants[i].dtype == np.float32 for i in n.inputs[3:])
    assert_same_outputs(before, after, feeds)    # bits: test_fused_values_equal_the_unfused_graph


@pytest.mark.parametrize("why, kw", [
    ("no activation: fold-batchnorm's", {"act": None}),
    ("the norm not over the last axis", {"bn_shape_2d": False}),
    ("run-time variance", {"bn_consts": False}),
    ("float64", {"dtype": np.float64}),
    ("the activation read twice", {"extra": [node("Neg", ["y"], ["q"])],
                                   "outputs": ("z", "q")}),
])
def test_not_fused(why, kw):
    before, _ = mlp(**kw)
    fused_before = run_pass("fuse-activation", run_pass("fuse-bias", before))
    assert_unchanged(fused_before, run_pass("fuse-post-affine", fused_before))


def test_second_run_changes_nothing():
    once = pipeline(mlp()[0])
    assert_unchanged(once, run_pass("fuse-post-affine", once))


TARGETS = (["generic"] + [t for t in runnable_targets() if t in ("x86-avx2", "x86-avx512")]
           + ([] if load_target("arm-neon").missing_tools() else ["arm-neon"]))


def _pipe(without=(), nhwc_all=False):
    d = yaml.safe_load(DEFAULT_CONFIG.read_text())
    return [({"layout-nhwc": {"mode": "all"}} if nhwc_all and p == "layout-nhwc" else p)
            for p in d["pipeline"] if p not in without]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("model", ["linear_relu_bn", "pointwise_conv_relu_bn"])
def test_fused_values_equal_the_unfused_graph(model, target, tmp_path):
    """Built with and without the pass: the same bits. A Linear -> ReLU -> BatchNorm1d over
    [70, 40] (tiles with column and row tails), and a 1x1 conv -> ReLU6 -> BatchNorm2d over 3
    x 7 x 7 positions of 20 channels (layout-nhwc all: a channel-last MatMul and norm)."""
    r = np.random.default_rng(11)
    if model == "linear_relu_bn":
        x = r.normal(size=(70, 24)).astype(np.float32)
        nodes = [node("MatMul", ["x", "W"], ["m"]), node("Add", ["m", "b"], ["a"]),
                 node("Relu", ["a"], ["y"])]
        inits = {"W": r.normal(size=(24, 40)).astype(np.float32),
                 "b": r.normal(size=40).astype(np.float32)}
        c = 40
    else:
        x = r.normal(size=(3, 16, 7, 7)).astype(np.float32)
        nodes = [node("Conv", ["x", "W", "b"], ["a"]), node("Clip", ["a", "lo", "hi"], ["y"])]
        inits = {"W": (r.normal(size=(20, 16, 1, 1)) / 4).astype(np.float32),
                 "b": r.normal(size=20).astype(np.float32),
                 "lo": np.array(0, np.float32), "hi": np.array(6, np.float32)}
        c = 20
    inits.update(s=r.uniform(-2, 2, size=c).astype(np.float32),
                 t=r.normal(size=c).astype(np.float32), mu=r.normal(size=c).astype(np.float32),
                 var=r.uniform(0.1, 3, size=c).astype(np.float32))
    nodes.append(node("BatchNormalization", ["y", "s", "t", "mu", "var"], ["z"]))
    m = make_model(nodes, {"x": x}, ["z"], inits)
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    nhwc = model != "linear_relu_bn"
    got = {}
    for name, pipe in (("fused", _pipe(nhwc_all=nhwc)),
                       ("plain", _pipe(("fuse-post-affine",), nhwc_all=nhwc))):
        out = aicc.build(path, target=target, out=tmp_path / name, overrides={"pipeline": pipe})
        b = open_bundle(out, cflags=STRICT_CFLAGS)     # arm-neon: under qemu
        steps = [s["op"] for s in json.loads((out / "manifest.json").read_text())["steps"]]
        assert ("BatchNormalization" in steps) == (name == "plain"), (name, steps)
        got[name] = b.run({"x": x})["z"]
    assert np.array_equal(got["fused"].view(np.uint32), got["plain"].view(np.uint32))
    assert_close({"z": got["fused"]}, reference(m, {"x": x}))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("act", ["Relu", "HardSwish"])
def test_convmixer_block_equals_the_unfused_graph(act, target, tmp_path):
    """x -> depthwise 3x3 (20 channels, 9 x 11) -> act -> BatchNorm2d -> + x -> 1x1 conv ->
    act -> BatchNorm2d, channel-last (layout-nhwc all): both norms and the Add fused (the
    depthwise kernels apply a clamp's post-affine and residual in registers, HardSwish's after
    its pass over the rows), the same bits as without the pass."""
    r = np.random.default_rng(5)
    c = 20
    x = r.normal(size=(1, c, 9, 11)).astype(np.float32)
    inits = {"dw": (r.normal(size=(c, 1, 3, 3)) / 3).astype(np.float32),
             "db": r.normal(size=c).astype(np.float32),
             "pw": (r.normal(size=(c, c, 1, 1)) / 4).astype(np.float32),
             "pb": r.normal(size=c).astype(np.float32)}
    for k in ("1", "2"):
        inits.update({f"s{k}": r.uniform(-2, 2, size=c).astype(np.float32),
                      f"t{k}": r.normal(size=c).astype(np.float32),
                      f"mu{k}": r.normal(size=c).astype(np.float32),
                      f"var{k}": r.uniform(0.1, 3, size=c).astype(np.float32)})
    nodes = [node("Conv", ["x", "dw", "db"], ["d"], group=c, pads=[1, 1, 1, 1]),
             node(act, ["d"], ["da"]),
             node("BatchNormalization", ["da", "s1", "t1", "mu1", "var1"], ["dn"]),
             node("Add", ["dn", "x"], ["s"]),
             node("Conv", ["s", "pw", "pb"], ["p"]), node(act, ["p"], ["pa"]),
             node("BatchNormalization", ["pa", "s2", "t2", "mu2", "var2"], ["z"])]
    m = make_model(nodes, {"x": x}, ["z"], inits)
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    got = {}
    for name, pipe in (("fused", _pipe(nhwc_all=True)),
                       ("plain", _pipe(("fuse-post-affine",), nhwc_all=True))):
        out = aicc.build(path, target=target, out=tmp_path / name, overrides={"pipeline": pipe})
        steps = [s["op"] for s in json.loads((out / "manifest.json").read_text())["steps"]]
        fused = name == "fused"
        assert ("BatchNormalization" in steps) != fused and ("Add" in steps) != fused, steps
        got[name] = open_bundle(out, cflags=STRICT_CFLAGS).run({"x": x})["z"]
    assert np.array_equal(got["fused"].view(np.uint32), got["plain"].view(np.uint32))
    assert_close({"z": got["fused"]}, reference(m, {"x": x}))
