"""Benchmarks: aicc bundles side by side with onnxruntime (1 thread, all graph
optimizations), in one process, interleaved; median latency. Writes docs/PERFORMANCE.md.

    python -m benchmarks.run [-t x86-avx2] [--seconds 2] [-k substring]

FLOPs are counted from the final graph (2 per multiply-add of Conv/ConvTranspose/Gemm/
MatMul); the peak is measured by a C loop of independent FMAs on this core (peak.c).
"""
from __future__ import annotations

import argparse
import json
import platform
import subprocess
import tempfile
from pathlib import Path

import numpy as np

import aicc
from aicc.bench import bench

from .models import all_models

ROOT = Path(__file__).resolve().parent.parent

PEAK_C = r"""
#include <immintrin.h>
#include <stdio.h>
#include <time.h>
#define F(a) a = _mm256_fmadd_ps(a, m, c)
int main(void) {
    __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    __m256 a0 = _mm256_set1_ps(0.f), a1 = _mm256_set1_ps(1.f), a2 = _mm256_set1_ps(2.f),
           a3 = _mm256_set1_ps(3.f), a4 = _mm256_set1_ps(4.f), a5 = _mm256_set1_ps(5.f),
           a6 = _mm256_set1_ps(6.f), a7 = _mm256_set1_ps(7.f), a8 = _mm256_set1_ps(8.f),
           a9 = _mm256_set1_ps(9.f), a10 = _mm256_set1_ps(10.f), a11 = _mm256_set1_ps(11.f);
    struct timespec t0, t1; long it, n = 100000000L / 12; float o[8];
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (it = 0; it < n; ++it) {
        F(a0); F(a1); F(a2); F(a3); F(a4); F(a5); F(a6); F(a7); F(a8); F(a9); F(a10); F(a11);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    a0 = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
         _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
    a0 = _mm256_add_ps(a0, _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
    _mm256_storeu_ps(o, a0);
    { double dt = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
      printf("%f %f\n", (double)n * 12 * 8 * 2 / dt / 1e9, (double)o[0]); }
    return 0;
}
"""


def fma_peak_gflops() -> float:
    with tempfile.TemporaryDirectory() as d:
        src, exe = Path(d) / "peak.c", Path(d) / "peak"
        src.write_text(PEAK_C)
        subprocess.run(["cc", "-O2", "-mavx2", "-mfma", str(src), "-o", str(exe)], check=True)
        return max(float(subprocess.run([str(exe)], capture_output=True, text=True,
                                        check=True).stdout.split()[0]) for _ in range(3))


def graph_flops(model_path) -> float:
    import onnx
    from onnx import shape_inference
    m = shape_inference.infer_shapes(onnx.load(str(model_path)))
    shapes = {}
    for vi in list(m.graph.input) + list(m.graph.value_info) + list(m.graph.output):
        shapes[vi.name] = [d.dim_value for d in vi.type.tensor_type.shape.dim]
    for t in m.graph.initializer:
        shapes[t.name] = list(t.dims)
    total = 0.0
    for n in m.graph.node:
        if n.op_type in ("Conv", "ConvTranspose") and n.output[0] in shapes:
            # Conv: each output element is a dot product over w[1:] (Cin/g * kernel);
            # ConvTranspose: each input element scatters over w[1:] (Cout/g * kernel)
            w = shapes.get(n.input[1])
            base = shapes[n.output[0]] if n.op_type == "Conv" else shapes.get(n.input[0])
            if w and base:
                total += 2.0 * np.prod(base, dtype=np.float64) * np.prod(w[1:], dtype=np.float64)
        elif n.op_type in ("MatMul", "Gemm") and n.output[0] in shapes and n.input[0] in shapes:
            a, y = shapes[n.input[0]], shapes[n.output[0]]
            k = a[-1] if not (n.op_type == "Gemm" and any(
                at.name == "transA" and at.i for at in n.attribute)) else a[0]
            total += 2.0 * np.prod(y, dtype=np.float64) * k
    return total


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-t", "--target", default="x86-avx2")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("-k", default=None)
    ap.add_argument("--out", default=str(ROOT / "docs" / "PERFORMANCE.md"))
    a = ap.parse_args(argv)
    import onnxruntime as ort
    peak = fma_peak_gflops()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for label, path in all_models(Path(d) / "models"):
            if a.k and a.k.lower() not in label.lower():
                continue
            out = aicc.build(path, target=a.target, out=Path(d) / f"b_{path.stem}")
            r = bench(out, path, seconds=a.seconds)
            fl = graph_flops(path)
            gf = fl / (r["aicc"]["median_ms"] * 1e-3) / 1e9 if fl else 0.0
            rows.append((label, r["aicc"]["median_ms"], r["onnxruntime"]["median_ms"], r["ratio"],
                         gf, 100 * gf / peak))
            print(f"{label:40s} aicc {rows[-1][1]:9.3f} ms  ort {rows[-1][2]:9.3f} ms  "
                  f"ratio {rows[-1][3]:6.2f}  {gf:7.1f} GFLOP/s ({rows[-1][5]:.0f}% of peak)",
                  flush=True)
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    text = ["# Performance", "",
            f"Generated by `python -m benchmarks.run -t {a.target}` (median of interleaved runs "
            f"over {a.seconds:g} s per engine after warm-up; single thread; onnxruntime "
            f"{ort.__version__} CPU provider with all graph optimizations, intra_op_num_threads=1).",
            "", f"Machine: {cpu}, {platform.machine()}, Python {platform.python_version()}; "
            f"measured FMA peak of one core: {peak:.1f} GFLOP/s (AVX2 FMA loop).", "",
            "| model | aicc ms | onnxruntime ms | ratio (aicc/ort) | GFLOP/s | % of FMA peak |",
            "|---|---|---|---|---|---|"]
    for lab, am, om, ratio, gf, pct in rows:
        text.append(f"| {lab} | {am:.3f} | {om:.3f} | {ratio:.2f} | {gf:.1f} | {pct:.0f}% |")
    text.append("")
    if not a.k:
        Path(a.out).write_text("\n".join(text))
    print("\n".join(text))


if __name__ == "__main__":
    main()
