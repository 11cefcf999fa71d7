"""GEMM kernels in C, without the Python call or onnxruntime between runs: each M x 512 x 512
bundle (M = 1, 2, 4, 8, 16: the skinny shapes; and 512) is linked into a small C program that
times back-to-back model_run calls (median of 3000 after warm-up, 300 for M = 512: the 1 MB of
packed weights stays in L2), for the kernels' efficiency against the core's FMA peak
(measured after each row). The side-by-side table (benchmarks.run) measures the
same shapes through Bundle.run interleaved with onnxruntime, which evicts the weights between
calls. Also measured: the core's read bandwidth over a 1 MB buffer, the bound of M = 1 (each
weight is used once: 2 FLOP per 4 bytes).

    python -m benchmarks.gemm_kernels [-t TARGET ...]   (prints a markdown table)
"""
from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path

import aicc
from benchmarks.models import gemm
from benchmarks.run import peak_isa, peak_meter

HARNESS = r"""
#define _POSIX_C_SOURCE 199309L
#include "model.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
                          return t.tv_sec + t.tv_nsec * 1e-9; }
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b;
                                               return (x > y) - (x < y); }
#ifndef RUNS
#define RUNS 3000
#endif
static unsigned char arena[MODEL_ARENA_BYTES + 64] __attribute__((aligned(64)));
static float in[MODEL_INPUT0_ELEMS], out[MODEL_OUTPUT0_ELEMS];
static double ts[RUNS];
int main(void) {
    const void *ins[1] = { in }; void *outs[1] = { out };
    for (unsigned i = 0; i < MODEL_INPUT0_ELEMS; ++i) in[i] = (float)(i % 17) / 17.0f;
    for (int r = 0; r < RUNS / 10; ++r) model_run(NULL, arena, MODEL_ARENA_BYTES, ins, outs);
    for (int r = 0; r < RUNS; ++r) {
        double t = now(); model_run(NULL, arena, MODEL_ARENA_BYTES, ins, outs); ts[r] = now() - t;
    }
    qsort(ts, RUNS, sizeof ts[0], cmp);
    printf("%.4f\n", ts[RUNS / 2] * 1e6);
    return 0;
}
"""

BANDWIDTH = r"""
#define _POSIX_C_SOURCE 200112L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
                          return t.tv_sec + t.tv_nsec * 1e-9; }
int main(void) {          /* sum a 1 MiB float buffer with 16 independent chains */
    enum { N = 1 << 18 };
    float *a; double best = 1e9; float s[16] = {0};
    if (posix_memalign((void **)&a, 64, N * sizeof *a)) return 1;
    for (int i = 0; i < N; ++i) a[i] = (float)(i % 7);
    for (int r = 0; r < 2000; ++r) {
        double t = now();
        for (int i = 0; i < N; i += 16)
            for (int j = 0; j < 16; ++j) s[j] += a[i + j];
        t = now() - t;
        if (t < best) best = t;
    }
    printf("%.2f %g\n", N * 4.0 / best / 1e9, (double)s[3]);
    return 0;
}
"""


def cc(src: Path, exe: Path, *extra) -> None:
    subprocess.run(["cc", "-O3", "-std=c99", *extra, str(src), "-o", str(exe), "-lm"], check=True,
                   capture_output=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-t", "--target", action="append", default=None)
    a = ap.parse_args(argv)
    targets = a.target or ["x86-avx2", "x86-avx512"]
    rows = []
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        (d / "bw.c").write_text(BANDWIDTH)
        cc(d / "bw.c", d / "bw", "-mavx2")
        bw = float(subprocess.run([str(d / "bw")], capture_output=True, text=True,
                                  check=True).stdout.split()[0])
        meters = {}                     # per peak-loop ISA (run.peak_isa), compiled once
        for t in targets:
            for m in (1, 2, 4, 8, 16, 512):
                model = gemm(d / f"g{m}.onnx", m, 512, 512)
                out = aicc.build(model, target=t, out=d / f"b_{t}_{m}")
                subprocess.run(["make", "-s", "-C", str(out)], check=True, capture_output=True)
                (out / "h.c").write_text(HARNESS)
                subprocess.run(["cc", "-O3", "-std=c99", f"-DRUNS={300 if m > 16 else 3000}",
                                "-I", str(out), str(out / "h.c"),
                                str(out / "libmodel.a"), "-o", str(out / "h"), "-lm"],
                               check=True, capture_output=True)
                us = float(subprocess.run([str(out / "h")], capture_output=True, text=True,
                                          check=True).stdout)
                gf = 2 * m * 512 * 512 / (us * 1e-6) / 1e9
                isa = peak_isa(t)
                if isa not in meters:
                    meters[isa] = peak_meter(isa, d)
                peak = meters[isa]()[0]
                rows.append((t, m, us, gf, 100 * gf / peak))
                print(f"{t} M={m}: {us:.2f} us {gf:.1f} GFLOP/s {100 * gf / peak:.0f}% of peak",
                      flush=True)
    print(f"\nRead bandwidth over 1 MiB: {bw:.0f} GB/s (M = 1 bound: {bw / 2:.0f} GFLOP/s)\n")
    print("| target | GEMM | us (median, C loop) | GFLOP/s | % of FMA peak |")
    print("|---|---|---|---|---|")
    for t, m, us, gf, pct in rows:
        print(f"| {t} | {m}x512x512 | {us:.2f} | {gf:.1f} | {pct:.0f}% |")


if __name__ == "__main__":
    main()
