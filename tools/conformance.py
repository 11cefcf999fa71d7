"""ONNX backend conformance: every node case of the installed onnx package (and the light
models), compiled by aicc to C, run through the bundle, compared with the expected outputs.

    python -m tools.conformance                 # all cases; writes docs/CONFORMANCE.md and
                                                # tests/conformance_passing.txt
    python -m tools.conformance -k conv         # a subset (substring of the case name)
    python -m tools.conformance --cases a,b     # exact names

Floating point: |got - want| <= atol + rtol * |want| with rtol 1e-3, atol 1e-5 (NaN must match
NaN), or, for float16/bfloat16 outputs, at most 2 ulp of the output type (HALF_ULPS); integers and bools
exact. Cases run in worker processes (one per core) that are
restarted after a crash, so a crashing case is recorded, not fatal.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RTOL, ATOL = 1e-3, 1e-5
CFLAGS = "-O1 -std=c99 -Wall -Wextra -pedantic -Wshadow -Werror"   # small cases: compile time
# the light models run whole networks (VGG-19: 20 GFLOP): -O2 halves their time
CFLAGS_LIGHT = CFLAGS.replace("-O1", "-O2")
LIGHT = ["light_bvlc_alexnet", "light_densenet121", "light_inception_v1", "light_inception_v2",
         "light_resnet50", "light_shufflenet", "light_squeezenet", "light_vgg19", "light_zfnet512"]


HALF_ULPS = 2        # documented bound for float16/bfloat16 outputs (see _compare)


def _collect():
    import warnings
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    return {c.name: c for c in cases}


def _cases():
    """{name: case} of the onnx package's node cases. Collecting them runs every export
    function of onnx (7-12 s): the first process pickles them for the others (the worker
    processes here, pytest-xdist's) and later runs, keyed by the onnx package's version and
    place and the versions of numpy and ml_dtypes, which compute the expected outputs."""
    import fcntl
    import hashlib
    import pickle

    import ml_dtypes
    import numpy as np
    import onnx
    key = hashlib.sha256(f"{onnx.__version__} {onnx.__file__} {np.__version__} "
                         f"{ml_dtypes.__version__}".encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / f"aicc-conf-cases-{key}.pkl"
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)          # the other processes wait for the first
        if path.is_file():
            return pickle.loads(path.read_bytes())
        res = _collect()
        tmp = path.with_suffix(f".{os.getpid()}")
        tmp.write_bytes(pickle.dumps(res, protocol=pickle.HIGHEST_PROTOCOL))
        os.replace(tmp, path)
        return res


def _light_case(name):
    """(model path, inputs, outputs) of a light model from onnx's test data."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    d = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    model = d / f"{name}.onnx"
    out = onnx.TensorProto()
    out.ParseFromString((d / f"{name}_output_0.pb").read_bytes())
    m = onnx.load(str(model), load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    inp = [i for i in m.graph.input if i.name not in inits][0]
    shape = [dd.dim_value for dd in inp.type.tensor_type.shape.dim]
    # the light models' expected output is for an input of ones (onnx's light test data)
    x = np.ones(shape, dtype=np.float32)
    return model, {inp.name: x}, [numpy_helper.to_array(out)]


def _tensor(v):
    """TensorProto -> ndarray (float16, bfloat16, 8-bit floats, 4-bit ints); others as they are."""
    import onnx
    from onnx import numpy_helper
    if isinstance(v, onnx.TensorProto):
        return numpy_helper.to_array(v)
    return v


def _compare(got, want):
    import numpy as np
    got, want = np.asarray(got), np.asarray(want)
    if want.dtype == object or got.dtype == object:
        return "non-tensor output"
    if got.shape != want.shape:
        return f"shape {list(got.shape)} != {list(want.shape)}"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype} != {want.dtype}"
    mbits = {"float16": 10, "bfloat16": 7}.get(want.dtype.name)
    if "float" in want.dtype.name and want.dtype.kind not in "fc":   # ml_dtypes (bfloat16, ...)
        got, want = got.astype(np.float32), want.astype(np.float32)
    if want.dtype.kind in "fc":
        if got.dtype != want.dtype:
            return f"dtype {got.dtype} != {want.dtype}"
        g, w = got.astype(np.float64), want.astype(np.float64)
        if not np.array_equal(np.isnan(g), np.isnan(w)):
            return "NaN positions differ"
        ok = np.isclose(g, w, rtol=RTOL, atol=ATOL, equal_nan=True) | (g == w)
        if mbits is not None:
            # half-precision outputs: also accept HALF_ULPS ulp of the output type. The
            # expected values round after every intermediate op, and the reference's numpy
            # sums and matmuls in bfloat16/float16 also round partial sums; aicc accumulates
            # in float32 and rounds once per ONNX op (a fused kernel such as Attention once
            # in all). Near a power of two, one ulp of the upper binade is two of the lower.
            with np.errstate(divide="ignore"):
                e = np.floor(np.log2(np.maximum(np.abs(w), 2.0 ** -24)))
            ok |= np.abs(g - w) <= HALF_ULPS * 2.0 ** (e - mbits)
        if not ok.all():
            return f"mismatch: {int((~ok).sum())}/{ok.size} off, max abs err " \
                   f"{float(np.nanmax(np.abs(g - w)[~ok])):.3g}"
        return None
    if got.dtype != want.dtype:
        return f"dtype {got.dtype} != {want.dtype}"
    return None if np.array_equal(got, want) else "mismatch (exact)"


def run_case(name, cases, tmp) -> tuple:
    """(status, reason): status is pass, fail, unsupported, error."""
    import onnx
    import aicc
    from aicc.errors import AiccError, UnsupportedError
    try:
        if name.startswith("light_"):
            path, feeds, expected = _light_case(name)
            datasets = [(feeds, expected)]
        else:
            c = cases[name]
            if c.model is None:
                return "error", "no model"
            path = Path(tmp) / f"{name}.onnx"
            onnx.save(c.model, str(path))
            inits = {i.name for i in c.model.graph.initializer}
            in_names = [i.name for i in c.model.graph.input if i.name not in inits]
            datasets = []
            for ins, outs in c.data_sets:
                ins = [_tensor(v) for v in ins]
                outs = [_tensor(v) for v in outs]
                if any(not hasattr(v, "dtype") for v in list(ins) + list(outs)):
                    return "unsupported", "sequence/optional/map values"
                datasets.append((dict(zip(in_names, ins)), list(outs)))
        out = aicc.build(path, target="generic", out=Path(tmp) / f"b_{name}")
        b = aicc.load(out, cflags=CFLAGS_LIGHT if name.startswith("light_") else CFLAGS)
        for feeds, expected in datasets:
            got = b.run(feeds)
            names = [o["name"] for o in b.outputs]
            for n, w in zip(names, expected):
                err = _compare(got[n], w)
                if err:
                    return "fail", f"{n}: {err}"
        return "pass", ""
    except UnsupportedError as e:
        return "unsupported", " ".join(str(e).split())[:300]
    except AiccError as e:
        return "error", f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
    except Exception as e:  # noqa: BLE001 - a crash of aicc is a finding, not the end of the run
        return "error", f"internal {type(e).__name__}: {' '.join(str(e).split())[:300]}"


def worker(names, out_file):
    cases = _cases()
    with tempfile.TemporaryDirectory(prefix="aicc-conf-") as tmp, open(out_file, "a") as f:
        for n in names:
            t0 = time.time()
            status, reason = run_case(n, cases, tmp)
            f.write(json.dumps({"name": n, "status": status, "reason": reason,
                                "seconds": round(time.time() - t0, 3)}) + "\n")
            f.flush()


def run_all(names, jobs) -> dict:
    """Run names across ``jobs`` worker processes; a worker that dies marks its current case
    as a crash and is restarted on the rest of its shard."""
    shards = [names[i::jobs] for i in range(jobs)]
    results = {}
    with tempfile.TemporaryDirectory(prefix="aicc-conf-res-") as d:
        procs = {}

        def spawn(k, todo):
            f = Path(d) / f"shard{k}.jsonl"
            p = subprocess.Popen([sys.executable, "-m", "tools.conformance", "--worker",
                                  "--out", str(f), "--cases", ",".join(todo)], cwd=ROOT,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            procs[k] = (p, todo, f)

        for k, s in enumerate(shards):
            if s:
                spawn(k, s)
        while procs:
            time.sleep(0.2)
            for k, (p, todo, f) in list(procs.items()):
                if p.poll() is None:
                    continue
                del procs[k]
                done = {}
                if f.exists():
                    for line in f.read_text().splitlines():
                        r = json.loads(line)
                        done[r["name"]] = r
                results.update(done)
                rest = [n for n in todo if n not in done]
                if rest:
                    results[rest[0]] = {"name": rest[0], "status": "error",
                                        "reason": f"crash (exit {p.returncode})", "seconds": 0}
                    if rest[1:]:
                        f.unlink(missing_ok=True)
                        spawn(k, rest[1:])
    return results


def op_of(name, cases) -> str:
    if name.startswith("light_"):
        return "(model) " + name[6:]
    c = cases.get(name)
    if c is not None and c.model is not None:
        ops = sorted({n.op_type for n in c.model.graph.node})
        if len(ops) == 1:
            return ops[0]
        base = name[5:].split("_")[0].lower()
        for o in ops:
            if o.lower() == base:
                return o
        return ops[0] if ops else "?"
    return "?"


def write_report(results, cases, seconds, path):
    by_op = defaultdict(list)
    for n, r in results.items():
        by_op[op_of(n, cases)].append(r)
    total = len(results)
    passed = sum(r["status"] == "pass" for r in results.values())
    node = [r for n, r in results.items() if not n.startswith("light_")]
    light = [r for n, r in results.items() if n.startswith("light_")]
    lines = ["# ONNX backend conformance", "",
             "Generated by `make conformance` (`python -m tools.conformance`); do not edit.", "",
             f"Cases from the installed onnx package, compiled by aicc for target `generic`, "
             f"run through the bundle. Tolerance: rtol {RTOL:g}, atol {ATOL:g} for floats "
             "(or 2 ulp of float16/bfloat16 outputs: the reference rounds partial sums in those types, aicc accumulates in float32); "
             "exact for integers and bools.", "",
             f"- node cases: **{sum(r['status'] == 'pass' for r in node)} / {len(node)}** pass",
             f"- light models: **{sum(r['status'] == 'pass' for r in light)} / {len(light)}** pass",
             f"- total: {passed} / {total}; wall time {seconds:.0f} s", "",
             "| op | cases | passed | why the rest fail (first reasons) |", "|---|---|---|---|"]
    for op in sorted(by_op):
        rs = by_op[op]
        p = sum(r["status"] == "pass" for r in rs)
        reasons = sorted({r["reason"][:90].replace("|", "/") for r in rs if r["status"] != "pass"})
        lines.append(f"| {op} | {len(rs)} | {p} | {'; '.join(reasons[:2])} |")
    lines += ["", "## Failing cases", ""]
    for n in sorted(results):
        r = results[n]
        if r["status"] != "pass":
            lines.append(f"- `{n}`: {r['status']}: {r['reason'][:200]}")
    Path(path).write_text("\n".join(lines) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-k", default=None, help="only cases whose name contains this")
    ap.add_argument("--cases", default=None, help="comma-separated exact case names")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--report", default=str(ROOT / "docs" / "CONFORMANCE.md"))
    ap.add_argument("--allowlist", default=str(ROOT / "tests" / "conformance_passing.txt"))
    a = ap.parse_args(argv)
    if a.worker:
        worker(a.cases.split(","), a.out)
        return 0
    cases = _cases()
    names = sorted(cases) + LIGHT
    if a.cases:
        names = a.cases.split(",")
    elif a.k:
        names = [n for n in names if a.k in n]
    t0 = time.time()
    results = run_all(names, a.jobs)
    dt = time.time() - t0
    passed = sorted(n for n, r in results.items() if r["status"] == "pass")
    print(f"{len(passed)} passed, {len(results) - len(passed)} failed ({dt:.0f} s)")
    if not a.cases and not a.k:
        write_report(results, cases, dt, a.report)
        Path(a.allowlist).write_text("\n".join(passed) + "\n")
        print(f"wrote {a.report} and {a.allowlist}")
    else:
        for n in sorted(results):
            r = results[n]
            if r["status"] != "pass":
                print(f"  {n}: {r['status']}: {r['reason'][:160]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
