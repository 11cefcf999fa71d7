"""What buckets cost: a dynamic-shape bundle at sizes inside its buckets, side by side with
onnxruntime (1 thread) on the same inputs and with a bundle compiled for exactly that size.

    python -m benchmarks.dynamic [-t x86-avx2]       # prints a markdown table

Model: tests/dynamic_models.transformer (2 layers, width 32, 2 heads, FFN 64), buckets
seq = 16, 32, 64 (its position table has 64 rows). Median of interleaved runs (aicc.bench's method).
"""
from __future__ import annotations

import argparse
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx

import aicc


def _median_ms(fns, seconds=0.6):
    for f in fns.values():
        for _ in range(5):
            f()
    ts = {k: [] for k in fns}
    end = time.perf_counter() + seconds * len(fns)
    while time.perf_counter() < end or min(len(v) for v in ts.values()) < 20:
        for k, f in fns.items():
            t0 = time.perf_counter()
            f()
            ts[k].append(time.perf_counter() - t0)
    return {k: float(np.median(v)) * 1e3 for k, v in ts.items()}


def main(argv=None):
    import onnxruntime as ort
    from tests import dynamic_models as dm
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-t", "--target", default="x86-avx2")
    a = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as t:
        t = Path(t)
        onnx.save(dm.transformer(), t / "m.onnx")
        dyn = aicc.load(aicc.build(t / "m.onnx", target=a.target, out=t / "dyn",
                                   buckets={"seq": [16, 32, 64]}))
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        sess = ort.InferenceSession(str(t / "m.onnx"), so, providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(0)
        for n in (8, 16, 17, 33, 48, 64):
            feeds = {"ids": rng.integers(0, 50, (1, n)).astype(np.int64),
                     "mask": np.ones((1, n), np.int64)}
            exact = aicc.load(aicc.build(t / "m.onnx", target=a.target, out=t / f"s{n}",
                                         input_shapes={"ids": [1, n], "mask": [1, n]}))
            ms = _median_ms({"dyn": lambda: dyn.run(feeds), "exact": lambda: exact.run(feeds),
                             "ort": lambda: sess.run(None, feeds)})
            bucket = next(b for b in (16, 32, 64) if b >= n)
            rows.append(f"| {n} | {bucket} | {ms['dyn']:.3f} | {ms['exact']:.3f} | {ms['ort']:.3f} "
                        f"| {ms['dyn'] / ms['exact']:.2f} | {ms['dyn'] / ms['ort']:.2f} |")
    print(f"Target {a.target}; {platform.processor() or platform.machine()}, 1 thread.\n")
    print("| seq | bucket | dynamic bundle ms | exact-size bundle ms | onnxruntime ms | "
          "dynamic / exact | dynamic / ort |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
