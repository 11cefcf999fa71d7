"""The model zoo: public architectures (benchmarks/zoo_archs.py; random seeded weights, both
PyTorch exporters, a few with a dynamic batch or sequence) built with aicc and compared with
onnxruntime, for speed and for accuracy against a float64 run of the same PyTorch module.

    make zoo [ZOO_TARGET=x86-avx2] [ZOO_ARGS="-k resnet"]   # installs the zoo extra first
    python -m benchmarks.zoo [-t x86-avx2] [-k name] [--seconds 1] [--redo] [--write]

Per model and exporter, in its own process (a crash or a timeout is that row's result):
export (cached in build/zoo/models/), build, run aicc and onnxruntime (one thread, all graph
optimizations) on the same seeded inputs, then

* accuracy: the largest absolute error of each engine's first output against the module run
  in float64 by PyTorch; ``err ratio`` = aicc's / onnxruntime's (<= 1.25: as accurate);
* ``validate``: what ``aicc validate`` with its defaults says (rtol 1e-4, atol scaled to the
  output, and to onnxruntime's own spread when that fails), on the zoo's input;
* speed: ``aicc bench``'s interleaved runs, median thread CPU time per run, one thread,
  ``ratio`` = aicc / onnxruntime.

onnxruntime runs on the target's ISA level (``--ort-isa same``: an x86-avx2 bundle against
onnxruntime's AVX2 kernels, newer CPU features hidden by CPUID faulting; ``native``: all the
CPU has). Results go to build/zoo/results-TARGET.jsonl as each row finishes, so an interrupted run
resumes where it stopped (``--redo`` measures again). ``--write`` puts the table and its
summary in docs/PERFORMANCE.md (the ``zoo-TARGET`` section); ``--table`` writes it from the
rows measured so far without measuring more.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import tempfile
from pathlib import Path

import numpy as np

from .zoo_archs import ARCHS

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "build" / "zoo"


def rows_of(k: str | None = None) -> list:
    """(key, arch, exporter) for every row, filtered by substring k."""
    out = []
    for a in ARCHS:
        for e in a.exporters:
            key = f"{a.name}.{e}"
            if k is None or k in key:
                out.append((key, a, e))
    return out


def export(a, exporter: str, path: Path) -> None:
    import torch
    m, args, names = a.make()
    m.eval()
    kw = dict(input_names=names, output_names=["out"])
    if a.dynamic:
        kw["dynamic_axes"] = a.dynamic
    tmp = path.with_suffix(".tmp.onnx")
    with torch.no_grad():
        if exporter == "dynamo":
            torch.onnx.export(m, args, str(tmp), dynamo=True, opset_version=18,
                              external_data=False, **kw)
        else:
            torch.onnx.export(m, args, str(tmp), dynamo=False, opset_version=17, **kw)
    tmp.replace(path)


def truth(a, path: Path) -> None:
    """The inputs and the module's first output in float64 (an .npz)."""
    import copy

    import torch
    m, args, names = a.make()
    m.eval()
    m64 = copy.deepcopy(m).double()
    a64 = [x.double() if x.is_floating_point() else x for x in args]
    with torch.no_grad():
        y = m64(*a64)
    y = y[0] if isinstance(y, (tuple, list)) else y
    np.savez(path, **{f"in_{n}": x.numpy() for n, x in zip(names, args)},
             out=y.numpy().astype(np.float64))


def measure(key: str, target: str, seconds: float, ort_isa: str = "native") -> dict:
    """One row (run in a child process); ort_isa: the ISA level onnxruntime's kernels are
    held to (aicc.isa_mask), set before onnxruntime is loaded."""
    from aicc.isa_mask import restrict
    restrict(ort_isa)
    import onnx

    import aicc
    from aicc.bench import bench
    from aicc.errors import AiccError
    from aicc.runner import open_bundle
    from aicc.validate import DEFAULT_ATOL, DEFAULT_RTOL, compare_reference, ort_session
    (_, a, exporter), = [r for r in rows_of() if r[0] == key]
    mdir = WORK / "models"
    mdir.mkdir(parents=True, exist_ok=True)
    path, tpath = mdir / f"{key}.onnx", mdir / f"{a.name}.npz"
    res = {"key": key, "name": a.name, "family": a.family, "exporter": exporter,
           "ort_isa": ort_isa}
    try:
        if not path.exists():
            export(a, exporter, path)
        if not tpath.exists():
            truth(a, tpath)
    except Exception as e:  # noqa: BLE001 - an export the exporter refuses is a row
        res["error"] = f"export: {type(e).__name__}: {' '.join(str(e).split())[:200]}"
        return res
    data = np.load(tpath)
    graph_inputs = [i.name for i in onnx.load(str(path), load_external_data=False).graph.input]
    feeds = {}
    for n, k in zip(graph_inputs, [k for k in data.files if k.startswith("in_")]):
        x = data[k]
        feeds[n] = x.astype(np.float32) if x.dtype.kind == "f" else x
    want = data["out"]
    out = WORK / "bundles" / target / key
    t0 = time.perf_counter()
    try:
        aicc.build(path, target=target, out=out, buckets=a.buckets or None)
    except AiccError as e:
        res["error"] = f"build: {' '.join(str(e).split())[:200]}"
        return res
    res["build_s"] = round(time.perf_counter() - t0, 1)
    b = open_bundle(out)
    got = b.run(feeds)
    name0 = b.outputs[0]["name"]
    sess = ort_session(str(path))
    ref = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    res["validate"] = all(c.ok for c in compare_reference(
        path, feeds, got, ref, "onnxruntime", DEFAULT_RTOL, DEFAULT_ATOL, True)[0])
    ea = float(np.max(np.abs(np.asarray(got[name0], np.float64) - want)))
    eo = float(np.max(np.abs(np.asarray(ref[name0], np.float64) - want)))
    res.update(err_aicc=ea, err_ort=eo, err_ratio=ea / eo if eo > 0 else float(ea > 0))
    npz = out.parent / (out.name + ".inputs.npz")
    np.savez(npz, **feeds)
    r = bench(out, path, seconds=seconds, inputs=npz)
    res.update(aicc_ms=r["aicc"]["median_ms"], ort_ms=r["onnxruntime"]["median_ms"],
               ratio=r["ratio"])
    res.update(at_peak(path, target, res["ort_ms"]))
    return res


def at_peak(path: Path, target: str, ort_ms: float) -> dict:
    """The model's Conv / MatMul / Gemm multiply-adds (benchmarks.run.graph_flops, strict;
    where shape inference leaves some unknown, the other exporter's file of the same
    architecture; None when neither has them all), this core's FMA peak measured now, and the
    ratio to onnxruntime a bundle would reach running all of them at that peak."""
    from .run import graph_flops, peak_isa, peak_meter
    with tempfile.TemporaryDirectory() as d:
        peak = peak_meter(peak_isa(target), Path(d))()[0]
    name, exporter = path.stem.rsplit(".", 1)
    other = "torchscript" if exporter == "dynamo" else "dynamo"
    gflop = 0.0
    for p in (path, path.with_name(f"{name}.{other}.onnx")):
        try:
            gflop = graph_flops(p, strict=True) / 1e9 if p.exists() else 0.0
        except Exception:  # noqa: BLE001 - shape inference that fails leaves the column empty
            gflop = 0.0
        if gflop:
            break
    if not gflop or not peak:
        return {"gflop": None, "peak_gflops": peak, "at_peak": None}
    return {"gflop": gflop, "peak_gflops": peak, "at_peak": gflop / peak / (ort_ms / 1e3)}


def results_file(target: str) -> Path:
    return WORK / f"results-{target}.jsonl"


def load_results(target: str, ort_isa: str = "native") -> dict:
    """The last result of each row measured with onnxruntime on ``ort_isa``."""
    f = results_file(target)
    out = {}
    if f.exists():
        for line in f.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                if r.get("ort_isa", "native") == ort_isa:
                    out[r["key"]] = r
    return out


def run(a) -> None:
    done = {} if a.redo else load_results(a.target, a.ort_level)
    todo = [r for r in rows_of(a.k) if r[0] not in done]
    WORK.mkdir(parents=True, exist_ok=True)
    print(f"zoo: {len(todo)} rows to measure on {a.target} ({len(done)} done before)",
          flush=True)
    for i, (key, _, _) in enumerate(todo, 1):
        t0 = time.time()
        cmd = [sys.executable, "-m", "benchmarks.zoo", "--one", key, "-t", a.target,
               "--seconds", str(a.seconds), "--ort-isa", a.ort_level]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout,
                               cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"})
            lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
            res = json.loads(lines[-1]) if lines else {
                "key": key, "error": f"exit {p.returncode}: "
                + " ".join((p.stderr.strip().splitlines() or ["?"])[-1].split())[:200]}
        except subprocess.TimeoutExpired:
            res = {"key": key, "error": f"timeout after {a.timeout:g} s"}
        res.setdefault("name", key.rsplit(".", 1)[0])
        res.setdefault("ort_isa", a.ort_level)
        res.setdefault("exporter", key.rsplit(".", 1)[1])
        with results_file(a.target).open("a") as f:
            f.write(json.dumps(res) + "\n")
        print(f"[{i}/{len(todo)}] {key:45s} " + summary_line(res)
              + f"  ({time.time() - t0:.0f} s)", flush=True)


def summary_line(r: dict) -> str:
    if "error" in r:
        return "ERROR " + r["error"]
    return (f"ratio {r['ratio']:.2f}  err {r['err_aicc']:.2g} vs ort {r['err_ort']:.2g} "
            f"({r['err_ratio']:.2f}x)  validate {'ok' if r['validate'] else 'FAIL'}")


def table(target: str, ort_isa: str = "native") -> str:
    import onnxruntime as ort

    from .run import cpu_name
    res = sorted(load_results(target, ort_isa).values(), key=lambda r: r["key"])
    ok = [r for r in res if "error" not in r]
    ratios = sorted(r["ratio"] for r in ok)
    q = statistics.quantiles(ratios, n=4) if len(ratios) >= 4 else [float("nan")] * 3
    slow = [r for r in ok if r["ratio"] > 1.0]
    inacc = [r for r in ok if r["err_ratio"] > 1.25]
    peaks = [r["peak_gflops"] for r in ok if r.get("peak_gflops")]
    bound = [r for r in ok if (r.get("at_peak") or 0) > 0.8]
    text = [f"## Zoo on {target}", "",
            f"Generated by `python -m benchmarks.zoo -t {target} --write` (benchmarks/zoo.py; "
            f"models: benchmarks/zoo_archs.py, random seeded weights). Speed: median thread CPU "
            f"time per run, interleaved, one thread, onnxruntime {ort.__version__} with all "
            "graph optimizations" + ("" if ort_isa == "native" else
                                     f", on its {ort_isa} kernels (newer CPU features hidden by "
                                     f"CPUID faulting: aicc bench --ort-isa {ort_isa})")
            + ". Accuracy: largest absolute error of the first output against "
            "the PyTorch module run in float64; err ratio = aicc's / onnxruntime's. validate: "
            "`aicc validate` with its defaults against onnxruntime. At peak: the ratio a "
            "bundle would reach if it ran every multiply-add of the model's Conv, MatMul and "
            "Gemm nodes (benchmarks.run.graph_flops, from the other exporter's file where "
            "shape inference leaves some unknown; n/a: in neither) at this "
            "core's FMA peak, measured after each row"
            + ("" if not peaks else f" ({min(peaks):.0f} GFLOP/s)" if round(min(peaks)) ==
               round(max(peaks)) else f" ({min(peaks):.0f}-{max(peaks):.0f} GFLOP/s)")
            + ": the floor for code that does all of them; Winograd (3x3 convs) does fewer "
            "multiplications, and convs whose dilated taps fall in the padding skip them.", "",
            f"Machine: {cpu_name()}, {platform.machine()}, {os.cpu_count()} cores (shared).", "",
            f"{len(res)} of the zoo's {len(rows_of())} rows, {len(ok)} built and measured; "
            f"ratio median {q[1]:.2f} "
            f"(quartiles {q[0]:.2f}, {q[2]:.2f}); slower than onnxruntime on {len(slow)}; "
            f"err ratio above 1.25 on {len(inacc)}; validate fails on "
            f"{sum(not r['validate'] for r in ok)}; at peak above 0.8 on {len(bound)}.", "",
            "| model | exporter | aicc ms | onnxruntime ms | ratio | at peak | aicc err | ort err "
            "| err ratio | validate |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for r in res:
        if "error" in r:
            text.append(f"| {r['name']} | {r['exporter']} | {r['error'].replace('|', '/')} "
                        "| | | | | | | |")
            continue
        ap = f"{r['at_peak']:.2f}" if r.get("at_peak") else "n/a"
        text.append(f"| {r['name']} | {r['exporter']} | {r['aicc_ms']:.3f} | "
                    f"{r['ort_ms']:.3f} | {r['ratio']:.2f} | {ap} | {r['err_aicc']:.2g} | "
                    f"{r['err_ort']:.2g} | {r['err_ratio']:.2f} | "
                    f"{'ok' if r['validate'] else 'fails'} |")
    return "\n".join(text)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-t", "--target", default="x86-avx2")
    ap.add_argument("-k", default=None, help="only rows whose key contains this")
    ap.add_argument("--seconds", type=float, default=1.0, help="bench time per engine")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per row")
    ap.add_argument("--redo", action="store_true", help="measure rows already in the results")
    ap.add_argument("--write", action="store_true", help="write the table to PERFORMANCE.md")
    ap.add_argument("--table", action="store_true",
                    help="only write the table of the rows measured so far (no measuring)")
    ap.add_argument("--ort-isa", default="same",
                    help="onnxruntime's ISA level: same (the target's: x86-avx2 -> avx2), "
                         "native, or a level of aicc.isa_mask.LEVELS")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    from aicc.isa_mask import level_of
    a.ort_level = level_of(a.target) if a.ort_isa == "same" else a.ort_isa
    if a.one:
        print(json.dumps(measure(a.one, a.target, a.seconds, a.ort_level)))
        return
    if not a.table:
        run(a)
    if a.write or a.table:
        from .run import write_section
        write_section(ROOT / "docs" / "PERFORMANCE.md", f"zoo-{a.target}",
                      table(a.target, a.ort_level))
        print(table(a.target, a.ort_level))


if __name__ == "__main__":
    main()
