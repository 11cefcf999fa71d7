"""`aicc bench` (latency, per-step profile) and the build YAML's `schedule:` / `nodes:`
overrides (per-node kernel and schedule), checked against onnxruntime."""
import json

import numpy as np
import onnx
import pytest
from onnx import helper

import aicc
from aicc.errors import ConfigError
from aicc.targets import runnable_targets
from tests.oracle import make_model, reference, rng
from tests.test_cli import aicc as cli

SIMD = [t for t in runnable_targets() if t in ("x86-avx2", "x86-avx512")]


def conv_model(tmp_path):
    """Conv 3x3 (pads 1) -> Relu -> Conv 1x1 -> Softmax over channels, named nodes."""
    r = rng(5)
    x = r.normal(size=(1, 8, 12, 11)).astype(np.float32)
    inits = {"w1": (r.normal(size=(16, 8, 3, 3)) * 0.2).astype(np.float32),
             "b1": r.normal(size=(16,)).astype(np.float32),
             "w2": (r.normal(size=(6, 16, 1, 1)) * 0.2).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv_a", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu_a"),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], name="conv_b"),
             helper.make_node("Softmax", ["c2"], ["y"], name="soft", axis=1)]
    p = tmp_path / "conv.onnx"
    onnx.save(make_model(nodes, {"x": x}, ["y"], inits), p)
    return p, x


def build_and_check(tmp_path, model, x, target, cfg_text, tag):
    cfg = tmp_path / f"{tag}.yaml"
    cfg.write_text(cfg_text)
    out = aicc.build(model, target=target, out=tmp_path / tag, config=cfg)
    got = aicc.load(out).run({"x": x})["y"]
    np.testing.assert_allclose(got, reference(onnx.load(model), {"x": x})["y"], rtol=1e-4,
                               atol=1e-5)
    return out, (out / "model.c").read_text(), json.loads((out / "manifest.json").read_text())


@pytest.mark.parametrize("target", SIMD)
def test_node_kernel_and_schedule_overrides(target, tmp_path):
    model, x = conv_model(tmp_path)
    _, src, man = build_and_check(tmp_path, model, x, target, "name: model\n", "plain")
    isa = target.split("-")[1]
    assert f"aicc_cv_{isa}" in src
    # the 3x3 conv forced to im2col, the 1x1 conv to the portable kernels
    _, src2, man2 = build_and_check(tmp_path, model, x, target, (
        "nodes:\n  conv_a: {schedule: {algo: im2col, mr: 4}}\n  conv_b: {kernel: generic}\n"),
        "forced")
    steps = {s["node"]: s for s in man2["steps"]}
    assert "im2col" in src2 and src2 != src
    assert steps["conv_a"]["fused"]["schedule"] == {"algo": "im2col", "mr": 4}
    assert steps["conv_b"]["fused"]["kernel"] == "generic"
    # the chosen kernel and the resolved schedule of every step are recorded
    assert steps["conv_a"]["kernel"] == f"{isa} im2col", steps["conv_a"]
    assert steps["conv_a"]["schedule"]["algo"] == "im2col"
    assert steps["conv_a"]["schedule"]["mr"] == 4
    plain = {s["node"]: s for s in man["steps"]}
    assert plain["conv_a"]["schedule"]["algo"] == "auto" and plain["conv_a"]["schedule"]["mr"] > 4
    assert steps["conv_b"]["kernel"].startswith("generic")          # the portable conv:
    assert "mr" not in steps["conv_b"]["schedule"]                  # its conv_c schedule
    # the YAML schedule: section merges over the target's (every conv forced to im2col)
    _, src3, _ = build_and_check(tmp_path, model, x, target,
                                 "schedule:\n  conv: {algo: im2col}\n", "sched")
    assert src3.count("im2col tiles") >= 2


@pytest.mark.parametrize("target", SIMD)
def test_override_keeps_conv_out_of_layout_nhwc(target, tmp_path):
    """A depthwise chain runs channel-last on the SIMD targets (layout-nhwc); a conv named in
    `nodes:` stays a Conv so its kernel / schedule apply, the others still convert."""
    r = rng(6)
    x = r.normal(size=(1, 16, 7, 7)).astype(np.float32)
    inits = {"wd": (r.normal(size=(16, 1, 3, 3)) * 0.3).astype(np.float32),
             "wp": (r.normal(size=(16, 16, 1, 1)) * 0.3).astype(np.float32),
             "we": (r.normal(size=(16, 1, 3, 3)) * 0.3).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "wd"], ["a"], name="dw1", pads=[1, 1, 1, 1], group=16),
             helper.make_node("Conv", ["a", "wp"], ["b"], name="pw"),
             helper.make_node("Conv", ["b", "we"], ["y"], name="dw2", pads=[1, 1, 1, 1], group=16)]
    model = tmp_path / "dw.onnx"
    onnx.save(make_model(nodes, {"x": x}, ["y"], inits), model)
    _, _, man = build_and_check(tmp_path, model, x, target, "name: model\n", "auto")
    ops = {s["node"]: s["op"] for s in man["steps"]}
    assert ops["dw1"] == ops["dw2"] == "ConvNHWC" and ops["pw"] == "MatMul"
    _, _, man = build_and_check(tmp_path, model, x, target,
                                "nodes:\n  dw2: {schedule: {algo: depthwise}}\n", "kept")
    steps = {s["node"]: s for s in man["steps"]}
    assert steps["dw2"]["op"] == "Conv" and steps["dw2"]["kernel"].endswith("depthwise")
    assert steps["dw1"]["op"] == "ConvNHWC" and steps["pw"]["op"] == "MatMul"


def test_node_override_errors(tmp_path):
    model, _ = conv_model(tmp_path)
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("nodes:\n  no_such: {kernel: generic}\n  also_missing: {kernel: generic}\n")
    with pytest.raises(ConfigError, match="no_such.*also_missing|also_missing.*no_such"):
        aicc.build(model, target="generic", out=tmp_path / "o1", config=cfg)
    assert not (tmp_path / "o1").exists()
    cfg.write_text("nodes:\n  conv_a: {kernel: avx9000}\n")
    with pytest.raises(ConfigError, match="avx9000.*not one of target generic"):
        aicc.build(model, target="generic", out=tmp_path / "o2", config=cfg)
    cfg.write_text("nodes:\n  relu_a: {kernel: generic}\n")      # fused into conv_a by then
    with pytest.raises(ConfigError, match="relu_a"):
        aicc.build(model, target="generic", out=tmp_path / "o3", config=cfg)
    cfg.write_text("nodes:\n  conv_a: {tiles: 4}\n")
    r = cli("build", model, "-o", tmp_path / "o4", "-c", cfg)
    assert r.returncode == 2 and "conv_a" in r.stderr and "Traceback" not in r.stderr
    cfg.write_text("schedule: [conv]\n")
    r = cli("build", model, "-o", tmp_path / "o5", "-c", cfg)
    assert r.returncode == 2 and "schedule" in r.stderr
    # a variant forced on a conv it cannot take (conv_b is 1x1): the node named, exit 2, no
    # traceback, no output folder (was exit 3, "a bug in aicc")
    cfg.write_text("nodes:\n  conv_b: {schedule: {algo: winograd}}\n")
    for target in ["generic"] + SIMD:
        r = cli("build", model, "-t", target, "-o", tmp_path / "o6", "-c", cfg)
        assert r.returncode == 2, (target, r.stderr)
        assert "conv_b" in r.stderr and "winograd" in r.stderr and "Traceback" not in r.stderr
        assert not (tmp_path / "o6").exists()


def test_bench_and_profile(tmp_path):
    model, _ = conv_model(tmp_path)
    out = aicc.build(model, target="generic", out=tmp_path / "b")
    r = cli("bench", out, "--model", model, "--seconds", "0.2", "--json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["aicc"]["runs"] >= 10 and res["onnxruntime"]["runs"] >= 10
    assert res["aicc"]["median_ms"] > 0 and res["ratio"] > 0
    assert res["aicc"]["p90_ms"] >= res["aicc"]["median_ms"]
    feeds = {i["name"]: rng(5).normal(size=i["shape"]).astype(np.float32)
             for i in json.loads((out / "manifest.json").read_text())["inputs"]}
    np.savez(tmp_path / "in.npz", **feeds)
    r = cli("bench", out, "--model", model, "-i", tmp_path / "in.npz", "--seconds", "0.1",
            "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["onnxruntime"]["runs"] >= 10
    bad = {k: v[..., :1] for k, v in feeds.items()}          # a shape onnxruntime refuses
    np.savez(tmp_path / "bad.npz", **bad)
    r = cli("bench", tmp_path / "b", "--model", model, "-i", tmp_path / "bad.npz",
            "--seconds", "0.1")
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("aicc: error: onnxruntime cannot run ") \
        and len(r.stderr.splitlines()) == 1, r.stderr
    r = cli("bench", out, "--profile", "0", "--json")
    assert r.returncode == 0, r.stderr
    prof = json.loads(r.stdout)
    man = json.loads((out / "manifest.json").read_text())
    assert [(s["index"], s["op"], s["node"]) for s in prof["steps"]] == \
        [(s["index"], s["op"], s["node"]) for s in man["steps"]]
    assert all(s["ms"] > 0 for s in prof["steps"])
    assert abs(sum(s["share"] for s in prof["steps"]) - 1) < 1e-9
    assert prof["sum_ms"] > 0 and prof["plain_ms"] > 0
    r = cli("bench", out, "--profile", "1")
    assert r.returncode == 0 and len(r.stdout.strip().splitlines()) == 3, r.stdout


def test_kernels_in_dump_ir_and_inspect(tmp_path):
    """--dump-ir ends with each step's kernel and schedule; inspect BUNDLE counts the kernels."""
    model, _ = conv_model(tmp_path)
    target = SIMD[0] if SIMD else "generic"
    r = cli("build", model, "-t", target, "-o", tmp_path / "b", "--dump-ir")
    assert r.returncode == 0, r.stderr
    table = r.stdout.split("# kernels and schedules after lowering\n")[1].splitlines()
    man = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert len([ln for ln in table if ln.startswith("step ")]) == len(man["steps"])
    for s, ln in zip(man["steps"], table):
        assert f"{s['op']} {s['node']!r}: {s['kernel'] or 'inline C'}" in ln, (ln, s)
        for k, v in s["schedule"].items():
            assert f"{k}={v}" in ln, (ln, k, v)
    r = cli("inspect", tmp_path / "b")
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.strip().startswith("kernels:"))
    for s in man["steps"]:
        assert f"{s['op']} {s['kernel'] or 'inline C'} x" in line, (line, s)


def test_kernels_of_every_bucket(tmp_path):
    """A model with a dynamic dim: --dump-ir gives one kernel table per bucket, and
    manifest.json's plans carry the same per step."""
    from onnx import TensorProto, numpy_helper
    w = numpy_helper.from_array(np.random.default_rng(0).normal(size=(16, 8)).astype(np.float32),
                                "W")
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["m"], name="mm"),
         helper.make_node("Relu", ["m"], ["y"], name="act")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 8])], [w])
    model = tmp_path / "dyn.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), model)
    target = SIMD[0] if SIMD else "generic"
    r = cli("build", model, "-t", target, "-o", tmp_path / "b", "--buckets", "n=4,16",
            "--dump-ir")
    assert r.returncode == 0, r.stderr
    man = json.loads((tmp_path / "b" / "manifest.json").read_text())
    plans = man["dynamic"]["plans"]
    assert [p["dims"] for p in plans] == [{"n": 4}, {"n": 16}]
    for p in plans:
        table = r.stdout.split(f"# kernels and schedules after lowering, bucket n={p['dims']['n']}"
                               "\n")[1].split("#")[0].splitlines()
        steps = [ln for ln in table if ln.startswith("step ")]
        assert len(steps) == len(p["kernels"]) == 1      # the Relu is fused into the MatMul
        s = p["kernels"][0]
        assert s["op"] == "MatMul" and s["node"] == "mm" and s["kernel"]
        assert f"MatMul 'mm': {s['kernel']}" in steps[0]
        for k, v in s["schedule"].items():
            assert f"{k}={v}" in steps[0]
