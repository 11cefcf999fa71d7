"""Per-op timing of the pooling kernels and of Add -> Relu (issue 4): one small model per case,
built for each target, timed per step (aicc.bench.profile: median over many runs of the
step's hook-to-hook time, about 1 us of callback cost included) next to onnxruntime (1
thread, median of sess.run, Python call overhead included).

    .venv/bin/python -m benchmarks.pool_ops [-t x86-avx2 -t x86-avx512] [-k maxpool] [-n 400]
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

import aicc
from aicc.bench import profile
from aicc.targets import runnable_targets
from tests.oracle import make_model

CASES = {
    "maxpool_r18": ("MaxPool", (1, 64, 112, 112), dict(kernel_shape=[3, 3], strides=[2, 2],
                                                       pads=[1, 1, 1, 1])),
    "avgpool_3x3s1": ("AveragePool", (1, 64, 56, 56), dict(kernel_shape=[3, 3],
                                                           pads=[1, 1, 1, 1])),
    "gap_512x7x7": ("GlobalAveragePool", (1, 512, 7, 7), {}),
    "gap_1280x7x7": ("GlobalAveragePool", (1, 1280, 7, 7), {}),
    "gmp_1280x7x7": ("GlobalMaxPool", (1, 1280, 7, 7), {}),
    "add_relu_64x56x56": ("AddRelu", (1, 64, 56, 56), {}),
}


def model(op, shape, attrs):
    x = np.zeros(shape, np.float32)
    if op == "AddRelu":
        nodes = [helper.make_node("Add", ["x", "z"], ["t"]), helper.make_node("Relu", ["t"], ["y"])]
        return make_model(nodes, {"x": x, "z": x}, ["y"])
    return make_model([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x}, ["y"])


def ort_ms(m, shape, runs):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    feeds = {i.name: np.random.default_rng(0).normal(size=shape).astype(np.float32)
             for i in sess.get_inputs()}
    for _ in range(10):
        sess.run(None, feeds)
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts)) * 1e3


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("-t", "--target", action="append")
    ap.add_argument("-k", "--keyword", default="")
    ap.add_argument("-n", "--runs", type=int, default=400)
    a = ap.parse_args(argv)
    targets = a.target or [t for t in runnable_targets() if t.startswith("x86")]
    with tempfile.TemporaryDirectory() as tmp:
        for name, (op, shape, attrs) in CASES.items():
            if a.keyword not in name:
                continue
            m = model(op, shape, attrs)
            path = Path(tmp) / f"{name}.onnx"
            onnx.save(m, str(path))
            ort = ort_ms(m, shape, a.runs)
            for t in targets:
                out = aicc.build(path, target=t, out=Path(tmp) / f"{name}_{t}")
                p = profile(out, runs=a.runs)
                steps = " + ".join(f"{s['op']} {s['ms'] * 1e3:.1f}" for s in p["steps"])
                print(f"{name:20s} {t:11s} aicc steps {p['sum_ms'] * 1e3:8.1f} us ({steps}); "
                      f"run {p['plain_ms'] * 1e3:8.1f} us; onnxruntime run {ort * 1e3:8.1f} us",
                      flush=True)


if __name__ == "__main__":
    main()
