"""`aicc tune` against the default build: per model, tune with a budget, build with and
without the log, and time both bundles side by side in one process (interleaved runs,
median thread CPU time per run, one thread).

    python -m benchmarks.tune [-t x86-avx2] [--budget 5m] [--write] [MODEL.onnx ...]

Inputs: NAME.npz beside NAME.EXPORTER.onnx when there (the zoo's), else random. Models
default to four zoo exports (build/zoo/models: `make zoo` makes them). The logs go
to build/tune/<model>.json and are resumed by a later run (delete one to start over).
``--write`` puts the table in docs/PERFORMANCE.md (the ``tune-TARGET`` section).
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ZOO = ROOT / "build" / "zoo" / "models"
DEFAULT_MODELS = ["resnet18.torchscript", "efficientnet_b0.dynamo", "regnet_x_400mf.dynamo",
                  "mobilenet_v3_large.torchscript"]


def side_by_side(bundles: dict, feeds: dict, seconds: float = 6.0, min_runs: int = 20) -> dict:
    """{name: median thread CPU ms} of the bundles run in turn on the same inputs."""
    from aicc.bundle.loader import load
    bs = {k: load(p) for k, p in bundles.items()}
    for b in bs.values():
        for _ in range(5):
            b.run(feeds)
    times = {k: [] for k in bs}
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end or min(map(len, times.values())) < min_runs:
        for k, b in bs.items():
            t0 = time.thread_time()
            b.run(feeds)
            times[k].append(time.thread_time() - t0)
    return {k: statistics.median(v) * 1e3 for k, v in times.items()}


def zoo_feeds(path, names: list) -> dict:
    """The zoo's inputs (``in_*`` arrays, in the graph inputs' order) as {input: array}."""
    import numpy as np
    with np.load(path) as z:
        return dict(zip(names, [z[k] for k in z.files if k.startswith("in_")]))


def one(model: Path, inputs, target: str, budget: str, out: Path, tune_it=True) -> dict:
    from aicc.compiler import build
    from aicc.tune.log import TuningLog
    from aicc.tune.search import tune
    from aicc.validate import random_inputs
    name = model.name.removesuffix(".onnx")
    log = out / f"{name}.{target}.json"
    t0 = time.perf_counter()
    jobs = 0
    if tune_it:
        jobs = tune(model, target, log, budget=budget,
                    progress=lambda m: print(f"  {m}", flush=True))["jobs"]
    t_tune = time.perf_counter() - t0
    plain = build(model, target, out / f"{name}.default")
    tuned = build(model, target, out / f"{name}.tuned", tuning=log)
    from aicc.bundle.loader import load
    names = [i["name"] for i in load(plain).inputs]
    feeds = zoo_feeds(inputs, names) if inputs else random_inputs(load(plain).inputs, 0)
    ms = side_by_side({"default": plain, "tuned": tuned}, feeds)
    tl = TuningLog.load(log)
    layers = {r["key"] for r in tl.records}
    steps = [{(s["node"]): (s.get("kernel"), json.dumps(s.get("schedule"), sort_keys=True))
              for s in json.loads((b / "manifest.json").read_text())["steps"]}
             for b in (Path(plain), Path(tuned))]
    changed = sum(steps[0][k] != v for k, v in steps[1].items() if k in steps[0])
    return {"model": name, "default_ms": ms["default"], "tuned_ms": ms["tuned"],
            "ratio": ms["tuned"] / ms["default"], "layers": len(layers),
            "choices": changed, "jobs": jobs or tl.next_job(), "tune_s": t_tune}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="*")
    ap.add_argument("-t", "--target", default="x86-avx2")
    ap.add_argument("--budget", default="5m")
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--measure-only", action="store_true",
                    help="Time the builds from the logs there are, without tuning more.")
    a = ap.parse_args(argv)
    out = ROOT / "build" / "tune"
    out.mkdir(parents=True, exist_ok=True)
    models = [Path(m) for m in a.models] or [ZOO / f"{m}.onnx" for m in DEFAULT_MODELS]
    pairs = []
    for p in models:                # inputs: NAME.npz beside NAME.EXPORTER.onnx, if there
        z = p.with_name(f"{p.name.split('.')[0]}.npz")
        pairs.append((p, z if z.is_file() else None))
    rows = []
    for model, inputs in pairs:
        print(f"{model.name}: tuning for {a.budget}", flush=True)
        r = one(model, inputs, a.target, a.budget, out, tune_it=not a.measure_only)
        print(f"{r['model']}: default {r['default_ms']:.3f} ms, tuned {r['tuned_ms']:.3f} ms, "
              f"tuned / default {r['ratio']:.3f} ({r['choices']} steps tuned, {r['layers']} "
              f"distinct layers, {r['jobs']} jobs)", flush=True)
        rows.append(r)
    text = [f"`aicc tune --budget {a.budget}` on {a.target}, {platform.processor() or platform.machine()}"
            f" ({_cpu()}): the tuned bundle against the default build, median thread CPU "
            "time per run, one thread, interleaved in one process "
            f"(`python -m benchmarks.tune -t {a.target} --budget {a.budget}`).", "",
            "| model | default ms | tuned ms | tuned / default | steps the log changed "
            "| layers measured | jobs |",
            "|---|---|---|---|---|---|---|"]
    for r in rows:
        text.append(f"| {r['model']} | {r['default_ms']:.3f} | {r['tuned_ms']:.3f} | "
                    f"{r['ratio']:.3f} | {r['choices']} | {r['layers']} | {r['jobs']} |")
    section = "\n".join(text)
    print(section)
    if a.write:
        from .run import write_section
        write_section(ROOT / "docs" / "PERFORMANCE.md", f"tune-{a.target}", section)


def _cpu() -> str:
    from aicc.tune.machine import cpu_model
    return cpu_model()


if __name__ == "__main__":
    main()
