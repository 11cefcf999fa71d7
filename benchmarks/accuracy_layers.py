"""Accuracy of single conv layers against float64: aicc and onnxruntime side by side.

    python -m benchmarks.accuracy_layers [-t x86-avx2 ...] [-c build.yaml]

Per layer (ResNet-style shapes; inputs ReLU'd N(0, 1), He-scaled weights, bias N(0, 0.1),
seeded) the largest and the root-mean-square absolute error of the output against the same
conv computed in float64 by numpy, for the aicc bundle (this target, its default kernels or
the build YAML's) and for onnxruntime on this machine; ``ratio`` = aicc / onnxruntime. The
table is docs/ACCURACY.md's.
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import aicc
from aicc.runner import open_bundle
from aicc.validate import ort_session

# (input channels, output channels, plane side, kernel side, stride)
LAYERS = [(64, 64, 56, 3, 1), (128, 128, 28, 3, 1), (256, 256, 14, 3, 1), (512, 512, 7, 3, 1),
          (256, 64, 56, 1, 1), (1024, 256, 14, 1, 1), (2048, 512, 7, 1, 1),
          (512, 2048, 7, 1, 1), (3, 64, 224, 7, 2)]


def conv_f64(x, w, b, pad, stride):
    """Direct convolution in float64 (NCHW, one group)."""
    n, _, h, wd = x.shape
    k, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    y = np.zeros((n, k, oh, ow))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
            y += np.einsum("nchw,kc->nkhw", patch, w[:, :, i, j])
    return y + b[None, :, None, None]


def layer(c, k, hw, ks, s, seed=0):
    """(model, x, float64 truth) of one conv layer."""
    r = np.random.default_rng(seed)
    x = np.maximum(r.normal(size=(1, c, hw, hw)), 0).astype(np.float32)
    w = (r.normal(size=(k, c, ks, ks)) * np.sqrt(2 / (c * ks * ks))).astype(np.float32)
    b = (r.normal(size=(k,)) * 0.1).astype(np.float32)
    pad = ks // 2
    oh = (hw + 2 * pad - ks) // s + 1
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[pad] * 4, strides=[s, s])
    g = helper.make_graph([node], "layer",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, k, oh, oh])],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    t = conv_f64(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), pad, s)
    return m, x, t


def errors(model, x, truth, target, work: Path, config=None) -> tuple:
    """(aicc max, aicc rms, onnxruntime max, onnxruntime rms) absolute errors."""
    p = work / "m.onnx"
    onnx.save(model, p)
    b = open_bundle(aicc.build(p, target=target, out=work / "b", config=config))
    ea = np.abs(b.run({"x": x})["y"] - truth)
    eo = np.abs(ort_session(str(p)).run(None, {"x": x})[0] - truth)
    return (float(ea.max()), float(np.sqrt((ea ** 2).mean())), float(eo.max()),
            float(np.sqrt((eo ** 2).mean())))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-t", "--target", action="append")
    ap.add_argument("-c", "--config", default=None)
    a = ap.parse_args(argv)
    print("| target | layer | aicc max | aicc rms | onnxruntime max | onnxruntime rms "
          "| ratio max | ratio rms |")
    print("|---|---|---|---|---|---|---|---|")
    for target in a.target or ["x86-avx2"]:
        for c, k, hw, ks, s in LAYERS:
            with tempfile.TemporaryDirectory() as d:
                am, ar, om, orr = errors(*layer(c, k, hw, ks, s), target, Path(d), a.config)
            print(f"| {target} | {c} -> {k}, {ks}x{ks}{' s2' if s == 2 else ''} at {hw} | "
                  f"{am:.3g} | {ar:.3g} | {om:.3g} | {orr:.3g} | {am / om:.2f} | "
                  f"{ar / orr:.2f} |", flush=True)


if __name__ == "__main__":
    main()
