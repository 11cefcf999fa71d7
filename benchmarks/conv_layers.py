"""Per-layer conv timings: one Conv (+ bias, fused Relu) per shape, compiled with several
forced conv variants (``aicc_schedule``) and run side by side with onnxruntime (1 thread) in
one process, interleaved; median ms per variant.

    python -m benchmarks.conv_layers [-t x86-avx512] [--seconds 1] [-k 64@56]
        [--algos auto,implicit,im2col,winograd2,winograd4] [--sched wino_kb=512]
        [--shapes 64@56,3x16@32] [--cflags "-O3 -fno-inline-functions-called-once"]

Shapes: the 3x3 stride-1 layers of ResNet-18 224x224 (C@HxW: 64@56, 128@28, 256@14, 512@7)
and ResNet-8 32x32 (16@32, 32@16, 64@8); ``--shapes`` takes others (CxK@HW: C in, K out;
CxK@HW/S: stride S).
``winogradM`` is ``algo: winograd, wino_m: M``.
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
from aicc.bundle.writer import write_bundle
from aicc.compiler import compile_graph
from aicc.config import Options
from aicc.frontend import import_model

SHAPES = ["64@56", "128@28", "256@14", "512@7", "16@32", "32@16", "64@8"]


def parse(shape: str) -> tuple:
    """"C@HW" (C in and out), "CxK@HW" or "CxK@HW/S" (stride S) -> (C, K, HW, S)."""
    ch, hw = shape.split("@")
    c, k = (ch.split("x") + [ch])[:2]
    hw, s = (hw.split("/") + ["1"])[:2]
    return int(c), int(k), int(hw), int(s)


def model(c: int, k: int, hw: int, path: Path, stride: int = 1) -> Path:
    r = np.random.default_rng(c + k + hw)
    w = (r.standard_normal((k, c, 3, 3)) * np.sqrt(2 / (9 * c))).astype(np.float32)
    b = (r.standard_normal(k) * 0.1).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["t"], pads=[1, 1, 1, 1],
                         strides=[stride, stride]),
         helper.make_node("Relu", ["t"], ["y"])], "conv",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, c, hw, hw])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT,
                                       [1, k, (hw - 1) // stride + 1, (hw - 1) // stride + 1])],
        initializer=[onnx.numpy_helper.from_array(w, "w"), onnx.numpy_helper.from_array(b, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return path


def build(path: Path, target: str, sched: dict, out: Path, cflags: str | None = None):
    g = import_model(path)
    opts = Options.load(target)
    for n in g.nodes:
        if n.op_type == "Conv" and sched:
            n.attrs["aicc_schedule"] = dict(sched)
    _, prog = compile_graph(g, opts)
    body = "\n".join(s.body for s in prog.steps)
    d = write_bundle(prog, out, name=opts.name, target=opts.target, opts=opts, model_sha="0" * 64,
                     original_inputs=[{"name": "x", "shape": list(g.types["x"].shape)}])
    return aicc.load(d, cflags=cflags), body


def algo_sched(name: str, extra: dict) -> dict:
    if name.startswith("winograd"):
        return {"algo": "winograd", "wino_m": int(name[8:] or 2), **extra}
    return {"algo": name, **extra} if name != "auto" else dict(extra)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-t", "--target", default="x86-avx512")
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("-k", default=None, help="only this shape (C@HW)")
    ap.add_argument("--shapes", default=",".join(SHAPES), help="C@HW or CxK@HW, comma-separated")
    ap.add_argument("--algos", default="auto,implicit,im2col,winograd2,winograd4")
    ap.add_argument("--sched", default="", help="extra schedule keys k=v,k=v")
    ap.add_argument("--cflags", default=None, help="CFLAGS for the bundles (default: the "
                    "target's)")
    a = ap.parse_args(argv)
    import onnxruntime as ort
    extra = {k: int(v) for k, v in (kv.split("=") for kv in a.sched.split(",") if kv)}
    algos = a.algos.split(",")
    print(f"{a.target}: median ms per layer (Conv 3x3 pad 1 + bias + Relu, batch 1; stride 1 "
          "unless /S)")
    print(f"{'layer':10s} " + " ".join(f"{x:>10s}" for x in algos + ["ort"]) + "  auto picks")
    with tempfile.TemporaryDirectory() as d:
        for label in a.shapes.split(","):
            if a.k and a.k != label:
                continue
            c, k, hw, st = parse(label)
            path = model(c, k, hw, Path(d) / f"c{c}_{k}_{hw}_{st}.onnx", st)
            feeds = {"x": np.random.default_rng(0).standard_normal((1, c, hw, hw))
                     .astype(np.float32)}
            fns, picks = {}, ""
            for al in algos:
                b, body = build(path, a.target, algo_sched(al, extra),
                                Path(d) / f"b{c}_{k}_{hw}_{st}_{al}", a.cflags)
                fns[al] = (lambda bb: lambda: bb.run(feeds))(b)
                if al == "auto":
                    kinds = [("winograd", "Winograd"), ("implicit", "implicit"),
                             ("im2col", "im2col"), ("bcast", "input broadcast"),
                             ("transposed", "transposed")]
                    picks = next((k for k, m in kinds if m in body), "?")
            so = ort.SessionOptions()
            so.intra_op_num_threads = so.inter_op_num_threads = 1
            sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
            fns["ort"] = lambda: sess.run(None, feeds)
            for f in fns.values():
                for _ in range(3):
                    f()
            times = {k: [] for k in fns}
            # each variant runs right after onnxruntime (the same cache state for all: in a
            # plain cycle the first variant alone followed onnxruntime, and identical bundles
            # differed by ~4%)
            order = [k for al in algos for k in (al, "ort")]
            deadline = time.perf_counter() + a.seconds * len(order)
            while time.perf_counter() < deadline or min(map(len, times.values())) < 10:
                for k in order:
                    t0 = time.perf_counter()
                    fns[k]()
                    times[k].append(time.perf_counter() - t0)
            med = {k: 1e3 * float(np.median(v)) for k, v in times.items()}
            print(f"{label:10s} " + " ".join(f"{med[k]:10.3f}" for k in fns) + f"  {picks}",
                  flush=True)


if __name__ == "__main__":
    main()
