"""Latency of a bundle, optionally side by side with onnxruntime (1 thread, all graph
optimizations) in the same process, interleaved run by run. Median and p90 of the thread
CPU time per run, in ms."""
from __future__ import annotations

import functools
import time

import numpy as np

from .bundle.loader import load
from .errors import InputError
from .validate import index_bounds, load_npz, ort_session, random_inputs


def _ort_runner(model, feeds):
    """A function running the model once in onnxruntime on one thread; onnxruntime's own
    errors (a model it cannot load, inputs it refuses) become one InputError line."""
    try:
        sess = ort_session(model)
        sess.run(None, feeds)
    except Exception as e:  # noqa: BLE001 - onnxruntime raises many kinds
        msg = " ".join(str(e).split())
        raise InputError(f"onnxruntime cannot run {model}: {msg[:300]}") from None
    return lambda: sess.run(None, feeds)


def _stats(ts):
    a = np.array(ts) * 1e3
    return {"median_ms": float(np.median(a)), "p90_ms": float(np.percentile(a, 90)),
            "runs": int(a.size)}


def bench(bundle, model=None, *, seconds: float = 2.0, warmup: int = 5, min_runs: int = 10,
          ort_isa: str = "native", inputs=None) -> dict:
    """Times are the calling thread's CPU time per run (both engines run on it: onnxruntime
    with one intra-op thread), so a busy machine does not inflate them. ``ort_isa``: a level
    of isa_mask.LEVELS (e.g. "avx2") hides newer CPU features from onnxruntime, which must
    not be loaded in this process yet; "native": what the CPU has. ``inputs``: an .npz of
    the inputs (default: random, seeded)."""
    if model is not None:
        from .isa_mask import restrict
        restrict(ort_isa)
    b = load(bundle)
    feeds = (load_npz(inputs) if inputs is not None else
             random_inputs(b.inputs, 0, bounds=index_bounds(model) if model else None))
    fns = {"aicc": lambda: b.run(feeds)}
    if model is not None:
        fns["onnxruntime"] = _ort_runner(model, feeds)
    for f in fns.values():
        for _ in range(warmup):
            f()
    times = {k: [] for k in fns}
    deadline = time.perf_counter() + seconds * len(fns)
    while time.perf_counter() < deadline or min(len(v) for v in times.values()) < min_runs:
        for k, f in fns.items():
            t0 = time.thread_time()
            f()
            times[k].append(time.thread_time() - t0)
    res = {k: _stats(v) for k, v in times.items()}
    if "onnxruntime" in res:
        res["ratio"] = res["aicc"]["median_ms"] / res["onnxruntime"]["median_ms"]
    res["bundle"] = str(bundle)
    if model is not None:
        res["ort_isa"] = ort_isa
    return res


HOOK_C = r"""
#include <stdint.h>
#include <time.h>
/* user: int64_t[n + 1]; [0] the start of the current step, [1 + i] step i's time (ns) */
void aicc_prof_hook(void *user, uint32_t step, const char *op, int after)
{
    struct timespec t;
    int64_t *a = (int64_t *)user, ns;
    (void)op;
    clock_gettime(CLOCK, &t);
    ns = (int64_t)t.tv_sec * 1000000000 + (int64_t)t.tv_nsec;
    if (after) a[1 + step] = ns - a[0]; else a[0] = ns;
}
"""


@functools.lru_cache(maxsize=None)
def c_hook(clock: str = "CLOCK_MONOTONIC"):
    """(ffi, lib) of HOOK_C reading CLOCK (CLOCK_THREAD_CPUTIME_ID: the thread's CPU time, as
    aicc tune measures), compiled once per process with the host's C compiler ($CC, else cc)."""
    from .hostc import host_lib
    return host_lib(HOOK_C.replace("CLOCK,", f"{clock},"),
                    "void aicc_prof_hook(void *user, uint32_t step, const char *op, "
                    "int after);", "aicchook")


def step_hook(nsteps: int, clock: str = "CLOCK_MONOTONIC"):
    """(hook, read) for Bundle.run(..., hook=hook): read() gives the last run's time of each
    of the nsteps steps (ns, a new int64 array), by c_hook(clock)."""
    ffi, lib = c_hook(clock)
    buf = ffi.new("int64_t[]", nsteps + 1)
    hook = (int(ffi.cast("uintptr_t", ffi.addressof(lib, "aicc_prof_hook"))),
            int(ffi.cast("uintptr_t", buf)))
    return hook, lambda: np.frombuffer(ffi.buffer(buf), dtype=np.int64)[1:].copy()


def profile(bundle, *, runs: int = 50, warmup: int = 5) -> dict:
    """Per-step time of BUNDLE: for each step the median over ``runs`` runs of the time
    between its before and after hook calls (a C hook reading CLOCK_MONOTONIC: tens of ns
    per step). ``sum_ms`` is the sum of the step medians, ``hooked_ms`` / ``plain_ms`` the
    median totals of runs with and without the hook; ``share`` is a step's part of sum_ms."""
    b = load(bundle)
    feeds = random_inputs(b.inputs, 0)
    steps = b.manifest["steps"]
    hook, read = step_hook(len(steps))
    for _ in range(warmup):
        b.run(feeds)
        b.run(feeds, hook=hook)
    per = np.zeros((max(1, runs), len(steps)))
    hooked, plain = [], []
    for r in range(per.shape[0]):
        t0 = time.perf_counter()
        b.run(feeds, hook=hook)
        hooked.append(time.perf_counter() - t0)
        per[r] = read()
        t0 = time.perf_counter()
        b.run(feeds)
        plain.append(time.perf_counter() - t0)
    med = np.median(per, axis=0) * 1e-6 if len(steps) else np.zeros(0)
    total = float(med.sum()) or 1.0
    rows = [{"index": s["index"], "op": s["op"], "node": s["node"], "ms": float(m),
             "share": float(m) / total, "kernel": s.get("kernel", "")}
            for s, m in zip(steps, med)]
    return {"bundle": str(bundle), "steps": rows, "sum_ms": float(med.sum()),
            "hooked_ms": float(np.median(hooked)) * 1e3, "plain_ms": float(np.median(plain)) * 1e3,
            "runs": per.shape[0]}


def bench_remote(b, *, inputs=None, warmup: int = 5, min_runs: int = 10, model=None) -> dict:
    """bench() for a bundle that runs as a program (runner.RemoteBundle): under an emulator,
    executed instructions per inference (exact, not time); on a device, the thread CPU time
    per run that the program reads there."""
    feeds = (load_npz(inputs) if inputs is not None else
             random_inputs(b.inputs, 0, bounds=index_bounds(model) if model else None))
    res = {"bundle": str(b.path), "where": b.where}
    if b.emulated:
        c = b.counts(feeds)
        res["aicc"] = {"instructions": c["instructions"]}
        res.update(counter=c["counter"], emulator=c["emulator"])
    else:
        runs = b.times(feeds, warmup + min_runs)[warmup:]
        res["aicc"] = _stats([cpu for cpu, _ in runs])
        res["aicc"]["wall_median_ms"] = float(np.median([w for _, w in runs])) * 1e3
    return res


def profile_remote(b, *, inputs=None) -> dict:
    """Per-step executed instructions of a bundle under its emulator (runner.RemoteBundle)."""
    feeds = load_npz(inputs) if inputs is not None else random_inputs(b.inputs, 0)
    c = b.counts(feeds, profile=True)
    steps = b.manifest["steps"] if len(b.manifest["steps"]) == len(c["steps"]) else [
        {"index": i, "op": "?", "node": "?"} for i in range(len(c["steps"]))]
    total = sum(c["steps"]) or 1
    rows = [{"index": s["index"], "op": s["op"], "node": s["node"], "instructions": n,
             "share": n / total, "kernel": s.get("kernel", "")} for s, n in zip(steps, c["steps"])]
    return {"bundle": str(b.path), "steps": rows, "sum_instructions": sum(c["steps"]),
            "instructions": c["instructions"], "counter": c["counter"],
            "emulator": c["emulator"]}
