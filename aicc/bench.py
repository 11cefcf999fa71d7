"""Latency of a bundle, optionally side by side with onnxruntime (1 thread, all graph
optimizations) in the same process, interleaved run by run. Median and p90 in ms."""
from __future__ import annotations

import time

import numpy as np

from .bundle.loader import load
from .validate import random_inputs


def _stats(ts):
    a = np.array(ts) * 1e3
    return {"median_ms": float(np.median(a)), "p90_ms": float(np.percentile(a, 90)),
            "runs": int(a.size)}


def bench(bundle, model=None, *, seconds: float = 2.0, warmup: int = 5, min_runs: int = 10) -> dict:
    b = load(bundle)
    feeds = random_inputs(b.inputs, 0)
    fns = {"aicc": lambda: b.run(feeds)}
    if model is not None:
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        sess = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
        fns["onnxruntime"] = lambda: sess.run(None, feeds)
    for f in fns.values():
        for _ in range(warmup):
            f()
    times = {k: [] for k in fns}
    deadline = time.perf_counter() + seconds * len(fns)
    while time.perf_counter() < deadline or min(len(v) for v in times.values()) < min_runs:
        for k, f in fns.items():
            t0 = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t0)
    res = {k: _stats(v) for k, v in times.items()}
    if "onnxruntime" in res:
        res["ratio"] = res["aicc"]["median_ms"] / res["onnxruntime"]["median_ms"]
    res["bundle"] = str(bundle)
    return res
