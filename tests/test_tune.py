"""`aicc tune` and `aicc build --tuning`: the log, its choices, the build that uses them (its
outputs against onnxruntime), the errors that are one line and exit 2, an interrupted tune,
and the same log from a Ray cluster as from a serial run with the same measurements."""
import json
import random
import signal
import subprocess
import sys
import time

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from aicc.config import Options
from aicc.tune.log import TuningLog
from aicc.tune.model import CostModel
from aicc.tune.search import problems_of, tune
from aicc.tune.space import load_space, sched_id
from aicc.tune.trial import code_of
from tests.oracle import rng


def aicc(*args, **kw):
    return subprocess.run([sys.executable, "-m", "aicc", *map(str, args)],
                          capture_output=True, text=True, **kw)


def conv_model(path):
    r = rng(3)
    inits = [numpy_helper.from_array((r.normal(size=(16, 8, 3, 3)) * 0.2).astype(np.float32), "w1"),
             numpy_helper.from_array((r.normal(size=(16, 16, 1, 1)) * 0.2).astype(np.float32), "w2"),
             numpy_helper.from_array((r.normal(size=(4096, 10)) * 0.05).astype(np.float32), "w3"),
             numpy_helper.from_array(np.array([1, -1], np.int64), "sh")]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1], name="conv1"),
             helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("Conv", ["b", "w2"], ["c"], name="conv2"),
             helper.make_node("Reshape", ["c", "sh"], ["d"]),
             helper.make_node("MatMul", ["d", "w3"], ["y"], name="fc")]
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", 1, [1, 8, 16, 16])],
                          [helper.make_tensor_value_info("y", 1, [1, 10])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return conv_model(tmp_path_factory.mktemp("tune") / "m.onnx")


def keys_of(model, target):
    from aicc.compiler import pipeline_graph
    opts = Options.load(target)
    return problems_of(pipeline_graph(model, opts), opts.target)


def synthetic_log(path, target, key, sched, ratio=0.5, default_code=None):
    """A log in which SCHED ran at RATIO of the default's cost in two jobs, the default's
    code hash being default_code."""
    recs = [{"key": key, "schedule": s, "cost": c, "job": j, "features": {},
             "code": default_code if not s else "x"}
            for j in (0, 1) for s, c in (({}, 100.0), (sched, 100.0 * ratio))]
    TuningLog(target, recs, path).save()
    return path


def test_build_with_tuning_takes_the_logged_schedule(model, tmp_path):
    probs = keys_of(model, "generic")
    conv = next(p for p in probs.values() if p.label.startswith("Conv 8x16x16 k3x3"))
    code = code_of(conv.graph, {}, Options.load("generic"))
    log = synthetic_log(tmp_path / "t.json", "generic", conv.key, {"algo": "im2col"},
                        default_code=code)
    r = aicc("build", model, "-t", "generic", "-o", tmp_path / "plain")
    assert r.returncode == 0, r.stderr
    r = aicc("build", model, "-t", "generic", "-o", tmp_path / "tuned", "--tuning", log)
    assert r.returncode == 0, r.stderr
    kern = {s["node"]: s["kernel"] for s in
            json.loads((tmp_path / "plain" / "manifest.json").read_text())["steps"]}
    tuned = {s["node"]: (s["kernel"], s["schedule"]) for s in
             json.loads((tmp_path / "tuned" / "manifest.json").read_text())["steps"]}
    assert "winograd" in kern["conv1"]               # the heuristics' choice
    assert tuned["conv1"][1]["algo"] == "im2col" and "winograd" not in tuned["conv1"][0]
    assert tuned["conv2"][0] == kern["conv2"]         # a layer the log does not name
    r = aicc("validate", model, tmp_path / "tuned")  # against onnxruntime
    assert r.returncode == 0, r.stdout + r.stderr
    # a log measured against another default kernel for the layer: the choice is stale
    stale = synthetic_log(tmp_path / "s.json", "generic", conv.key, {"algo": "im2col"},
                          default_code="0" * 16)
    r = aicc("build", model, "-t", "generic", "-o", tmp_path / "stale", "--tuning", stale)
    assert r.returncode == 0 and "1 of 1 layers" in r.stderr and "tune again" in r.stderr
    steps = json.loads((tmp_path / "stale" / "manifest.json").read_text())["steps"]
    assert {s["node"]: s["kernel"] for s in steps}["conv1"] == kern["conv1"]


def test_choices_need_a_margin_and_ignore_record_order(tmp_path):
    recs = [{"key": "k", "schedule": s, "cost": c, "job": j, "features": {}}
            for j, rows in enumerate([[({}, 100), ({"mr": 4}, 80), ({"jb": 32}, 99)],
                                      [({}, 100), ({"mr": 4}, 82)]]) for s, c in rows]
    recs += [{"key": "q", "schedule": s, "cost": c, "job": 2, "features": {}}
             for s, c in (({}, 100), ({"mr": 4}, 95))]       # one job, 5%: not sure enough
    a = TuningLog("generic", recs).choices()
    random.Random(1).shuffle(recs)
    assert TuningLog("generic", recs).choices() == a == {"k": {"mr": 4}}


def test_cost_model_ranks_a_learned_winner_first():
    space = load_space()
    recs = []
    for j, (m, n) in enumerate([(16, 64), (32, 256), (64, 1024), (128, 4096), (8, 32),
                                (256, 512), (24, 96), (48, 768)]):
        f = {"op_conv": 1.0, "m": float(m), "n": float(n), "k": 72.0}
        for s, c in (({}, 100.0), ({"algo": "im2col"}, 60.0), ({"algo": "bcast"}, 140.0),
                     ({"mr": 4}, 101.0)):
            recs.append({"key": f"k{j}", "schedule": s, "cost": c, "job": j, "features": f})
    cm = CostModel(space).fit(TuningLog("x86-avx2", recs))
    cands = [{"algo": "bcast"}, {"mr": 4}, {"algo": "im2col"}]
    new = {"op_conv": 1.0, "m": 40.0, "n": 200.0, "k": 72.0}    # a problem never measured
    assert cm.rank(new, cands)[0] == {"algo": "im2col"}
    assert cm.rank(new, cands)[-1] == {"algo": "bcast"}


@pytest.mark.parametrize("content, msg", [
    ("{not json", "not an aicc tuning log"),
    ('{"format": "aicc-tuning", "version": 1, "target": "x86-avx512", "records": []}',
     "tuned for target 'x86-avx512', not 'generic'"),
    ('{"format": "aicc-tuning", "version": 1, "target": "generic", "records": [{"key": 1}]}',
     "record 0 is malformed"),
    ('{"format": "other"}', "not an aicc tuning log"),
])
def test_corrupt_or_foreign_log_is_one_line_exit_2(model, tmp_path, content, msg):
    log = tmp_path / "t.json"
    log.write_text(content)
    for args in (("build", model, "-t", "generic", "-o", tmp_path / "b", "--tuning", log),
                 ("tune", model, "-t", "generic", "-o", log, "--budget", "20s")):
        r = aicc(*args)
        assert r.returncode == 2, r.stderr
        assert msg in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("args, msg", [
    (("--budget", "3s"), "too short for one measurement"),
    (("--budget", "ten"), "expected a duration"),
    (("--ray", "127.0.0.1:9"), "no Ray cluster answers there"),
])
def test_bad_budget_or_ray_address_is_one_line_exit_2(model, tmp_path, args, msg):
    r = aicc("tune", model, "-t", "generic", "-o", tmp_path / "t.json", *args)
    assert r.returncode == 2 and msg in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert not (tmp_path / "t.json").exists()


def test_interrupted_tune_keeps_its_measurements(model, tmp_path):
    log = tmp_path / "t.json"
    # SIGINT as a terminal's Ctrl-C delivers it: a test run started in the background by a
    # shell without job control inherits SIGINT ignored, and so would the tune
    p = subprocess.Popen([sys.executable, "-m", "aicc", "tune", str(model), "-t", "generic",
                          "-o", str(log), "--budget", "5m"], stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    t_end = time.monotonic() + 120
    while time.monotonic() < t_end and p.poll() is None:
        if log.exists() and TuningLog.load(log).next_job() >= 2:
            break
        time.sleep(0.2)
    p.send_signal(signal.SIGINT)
    err = p.communicate(timeout=60)[1]
    assert p.returncode == 130, err
    kept = TuningLog.load(log, "generic")
    assert kept.next_job() >= 2 and all(r["cost"] > 0 for r in kept.records
                                        if r["cost"] is not None)
    assert "every finished measurement is in" in err


class Replay:
    """An executor giving each job the measurements a log holds for it (same job number,
    same candidates), so a serial search can be compared with the run that made the log."""

    def __init__(self, log):
        self.jobs = {}
        for r in log.records:
            self.jobs.setdefault(r["job"], []).append(r)

    def run(self, jobs, deadline, on_done):
        more = True
        for j in jobs:
            rs = self.jobs.get(j.job)
            if rs is None:
                more = False
                continue
            by = {sched_id(r["schedule"]): r for r in rs}
            assert sorted(by) == sorted(sched_id(c) for c in j.cands), j.job
            comp = {"errors": {s: r["error"] for s, r in by.items() if r["error"]},
                    "same_as": {s: r["same_as"] for s, r in by.items() if r["same_as"]},
                    "codes": {s: r["code"] for s, r in by.items()},
                    "steps": {s: 0 for s, r in by.items() if r["cost"] is not None}}
            first = next(r for r in rs if r["cost"] is not None)
            on_done(j, comp, {"costs": {s: r["cost"] for s, r in by.items()
                                        if r["cost"] is not None},
                              "unit": first["unit"], "machine": first["machine"]})
        return more

    def close(self):
        pass


def _same_log(a, b):
    strip = lambda rs: sorted(json.dumps(r, sort_keys=True) for r in rs)  # noqa: E731
    assert strip(a.records) == strip(b.records)
    assert a.choices() == b.choices()


def test_serial_tune_is_deterministic_given_its_measurements(model, tmp_path):
    res = tune(model, "generic", tmp_path / "a.json", budget="12s", per_job=3)
    a = TuningLog.load(tmp_path / "a.json", "generic")
    assert res["records"] == len(a.records) > 0
    assert any(r["cost"] is not None and r["schedule"] for r in a.records)
    tune(model, "generic", tmp_path / "b.json", budget="10m", per_job=3, executor=Replay(a))
    _same_log(a, TuningLog.load(tmp_path / "b.json", "generic"))


def test_ray_local_cluster_log_matches_a_serial_run(model, tmp_path):
    pytest.importorskip("ray")
    r = aicc("tune", model, "-t", "generic", "-o", tmp_path / "ray.json", "--budget", "25s",
             "--per-job", "3", "--ray", "local", "--json", timeout=300)
    assert r.returncode == 0, r.stderr
    a = TuningLog.load(tmp_path / "ray.json", "generic")
    assert len({rec["job"] for rec in a.records}) >= 2
    tune(model, "generic", tmp_path / "serial.json", budget="10m", per_job=3,
         executor=Replay(a))
    _same_log(a, TuningLog.load(tmp_path / "serial.json", "generic"))


def test_tune_for_an_emulated_target_counts_instructions(model, tmp_path):
    from aicc.targets import load_target
    if load_target("arm-neon").missing_tools():
        pytest.skip("make cross-toolchain")
    tune(model, "arm-neon", tmp_path / "n.json", budget="15s", per_job=2)
    log = TuningLog.load(tmp_path / "n.json", "arm-neon")
    timed = [r for r in log.records if r["cost"] is not None]
    assert timed and all(r["unit"] == "instructions" and r["cost"] == int(r["cost"]) > 1000
                         and "qemu-aarch64" in r["machine"] for r in timed)
    # the default's count in every job that timed it: within a few percent (exact counts of
    # the same step, in bundles whose arena offsets and code placement differ)
    by = {}
    for r in timed:
        if not r["schedule"]:
            by.setdefault(r["key"], set()).add(r["cost"])
    assert by and all(max(v) <= 1.05 * min(v) for v in by.values()), by


def test_ray_budget_end_cancels_compile_and_measure_jobs():
    """The budget ending while a measurement runs on an actor: every pending job cancelled
    (Ray refuses force=True for actor tasks), run() reports the budget spent, no error."""
    from types import SimpleNamespace

    from aicc.tune.ray_exec import RayExecutor

    class FakeRay:
        cancelled = []

        def wait(self, refs, num_returns, timeout):
            time.sleep(0.2)
            return [r for r in refs if r == "c0"][:1], []

        def get(self, ref):
            return {"steps": {}}, b"bundle"

        def cancel(self, ref, force=False):
            if ref.startswith("m") and force:
                raise ValueError("force=True is not supported for actor tasks.")
            self.cancelled.append(ref)

    ex = RayExecutor.__new__(RayExecutor)
    names = iter(["c0", "c1"])
    ex.ray, ex.opts, ex.runner = FakeRay(), None, None
    ex.compile = SimpleNamespace(remote=lambda *a: next(names))
    ex.measurers = [SimpleNamespace(measure=SimpleNamespace(remote=lambda *a: "m0"))]
    jobs = [SimpleNamespace(problem=SimpleNamespace(graph=None), cands=[], known={}, job=k)
            for k in ("a", "b")]
    assert ex.run(jobs, time.monotonic() + 0.1, lambda *a: None) is False
    assert sorted(FakeRay.cancelled) == ["c1", "m0"]
