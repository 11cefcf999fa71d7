"""Benchmarks: aicc bundles side by side with onnxruntime (1 thread, all graph
optimizations), in one process, interleaved; median latency. Writes docs/PERFORMANCE.md.

    python -m benchmarks.run [-t x86-avx2] [--seconds 2] [-k substring]

Each target has its own section in docs/PERFORMANCE.md (between ``<!-- bench:TARGET -->``
markers), replaced by a full run (no -k) for that target; the rest of the file (the notes) is
kept. The 1-minute load average before and after the run is recorded (the machine is shared).

FLOPs are counted from the final graph (2 per multiply-add of Conv/ConvTranspose/Gemm/
MatMul); the peak is measured by a C loop of independent FMAs on this core (peak.c), after
each row (the machine's speed drifts), and that row's percentages use it.
"""
from __future__ import annotations

import argparse
import os
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
/* FMA peak of one core: 12 independent FMA chains (enough to cover latency x throughput on
 * current cores), timed in short bursts; the best burst is the peak (a long single run
 * also measures the time the shared machine gives to other processes). */
#include <immintrin.h>
#include <stdio.h>
#include <time.h>
#if defined(W512)
#define VT __m512
#define FMA _mm512_fmadd_ps
#define SET _mm512_set1_ps
#define ADD _mm512_add_ps
#define LANES 16
#elif defined(W128)
/* SSE2 (the generic target: -O2, no FMA): a multiply and an add per multiply-add, unfused
 * (no -ffast-math, no FMA instructions: the compiler keeps them two) */
#define VT __m128
#define FMA(a, b, c) _mm_add_ps(_mm_mul_ps(a, b), c)
#define SET _mm_set1_ps
#define ADD _mm_add_ps
#define LANES 4
#else
#define VT __m256
#define FMA _mm256_fmadd_ps
#define SET _mm256_set1_ps
#define ADD _mm256_add_ps
#define LANES 8
#endif
#define F(a) a = FMA(a, m, c)
static double now(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static double l1_loop(void);
int main(void) {
    VT m = SET(0.999999f), c = SET(1e-7f);
    VT a0 = SET(0.f), a1 = SET(1.f), a2 = SET(2.f), a3 = SET(3.f), a4 = SET(4.f), a5 = SET(5.f),
       a6 = SET(6.f), a7 = SET(7.f), a8 = SET(8.f), a9 = SET(9.f), a10 = SET(10.f), a11 = SET(11.f);
    long it, n = 100000; double best = 1e9; int rep; float o[LANES];
    for (rep = 0; rep < 500; ++rep) {
        double t0 = now(), dt;
        for (it = 0; it < n; ++it) {
            F(a0); F(a1); F(a2); F(a3); F(a4); F(a5); F(a6); F(a7); F(a8); F(a9); F(a10); F(a11);
        }
        dt = now() - t0;
        if (dt < best) best = dt;
    }
    a0 = ADD(ADD(ADD(ADD(a0, a1), ADD(a2, a3)), ADD(ADD(a4, a5), ADD(a6, a7))),
             ADD(ADD(a8, a9), ADD(a10, a11)));
    __builtin_memcpy(o, &a0, sizeof o);
    printf("%f %f %f\n", (double)n * 12 * LANES * 2 / best / 1e9, (double)o[0], l1_loop());
    return 0;
}
"""
# The GEMM micro-kernel's inner loop with everything in L1: MR rows x 2 vectors of
# accumulators (12 x 32 on AVX-512, 6 x 16 on AVX2, as the targets' GEMM tiles), per k one
# broadcast from each of MR rows of A and two vector loads of a packed B panel, K = 256. The
# rate this core gives such a loop now: on the shared machine it falls below the FMA peak by
# up to ~40% while the register-only loop does not (another tenant's loads, presumably).
L1_LOOP_C = r"""
#ifdef W512
#define MR 12
#else
#define MR 6
#endif
#define KC 256
static float l1a[MR * KC], l1b[KC * 2 * LANES], l1y[MR * 2 * LANES];
#define ROW(r) { const VT x = SET(a[(r) * KC + k]); c##r##0 = FMA(x, b0, c##r##0); \
                 c##r##1 = FMA(x, b1, c##r##1); }
#define ZERO(r) VT c##r##0 = SET(0.f), c##r##1 = SET(0.f);
#define STORE(r) __builtin_memcpy(l1y + (r) * 2 * LANES, &c##r##0, sizeof(VT)); \
                 __builtin_memcpy(l1y + (r) * 2 * LANES + LANES, &c##r##1, sizeof(VT));
#ifdef W512
#define ROWS(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) M(11)
#else
#define ROWS(M) M(0) M(1) M(2) M(3) M(4) M(5)
#endif
__attribute__((noinline)) static void tile(const float *a, const float *b)
{
    size_t k;
    ROWS(ZERO)
    for (k = 0; k < KC; ++k, b += 2 * LANES) {
        VT b0, b1;
        __builtin_memcpy(&b0, b, sizeof b0);
        __builtin_memcpy(&b1, b + LANES, sizeof b1);
        ROWS(ROW)
    }
    ROWS(STORE)
}
static double l1_loop(void)
{
    long it, n = 200; double best = 1e9; int rep, i;
    for (i = 0; i < MR * KC; ++i) l1a[i] = (float)(i % 7) * 0.1f;
    for (i = 0; i < KC * 2 * LANES; ++i) l1b[i] = (float)(i % 5) * 0.01f;
    for (rep = 0; rep < 200; ++rep) {
        double t0 = now(), dt;
        for (it = 0; it < n; ++it) tile(l1a, l1b);
        dt = now() - t0;
        if (dt < best) best = dt;
    }
    return (double)n * MR * 2 * LANES * KC * 2 / best / 1e9 + 0.0 * l1y[1];
}
"""


def cpu_name() -> str:
    """The CPU's model name with its family / model numbers and its L1d / L2 sizes per core
    (Linux: /proc/cpuinfo, sysfs), e.g. "Intel(R) Xeon(R) Processor (family 6 model 167;
    L1d 48K, L2 2048K)": the same model name has covered different machines."""
    info = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if not line.strip():
                break                              # the first processor only
            k, _, v = line.partition(":")
            info[k.strip()] = v.strip()
    except OSError:
        pass
    caches = []
    for d in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            level, kind, size = ((d / f).read_text().strip() for f in ("level", "type", "size"))
        except OSError:
            continue
        if (level, kind) in (("1", "Data"), ("2", "Unified")):
            caches.append(f"L{level}{'d' if level == '1' else ''} {size}")
    extra = []
    if "cpu family" in info and "model" in info:
        extra.append(f"family {info['cpu family']} model {info['model']}")
    if caches:
        extra.append(", ".join(caches))
    name = info.get("model name", "unknown")
    return f"{name} ({'; '.join(extra)})" if extra else name


# the peak loop's ISA per vector width of a target (configs/targets: vector_bytes)
ISA_OF_BYTES = {16: "sse2", 32: "avx2", 64: "avx512"}
ISA_FLAGS = {"sse2": ["-msse2", "-DW128"], "avx2": ["-mavx2", "-mfma"],
             "avx512": ["-mavx512f", "-DW512"]}
ISA_LOOP = {"sse2": "SSE2 multiply + add loop", "avx2": "AVX2 FMA loop",
            "avx512": "AVX-512 FMA loop"}


def peak_isa(target: str) -> str:
    """The peak loop's ISA for a target: its vector width (generic: SSE2, 16 bytes)."""
    from aicc.targets import load_target
    return ISA_OF_BYTES.get(int(load_target(target).vector_bytes), "avx2")


def peak_meter(isa: str, tmp: Path):
    """A function measuring one core now with isa's vectors ("sse2", "avx2", "avx512"):
    (best-burst multiply-add throughput, the L1 GEMM loop's best rate) in GFLOP/s, the
    program compiled once into tmp, best of 3 runs per call."""
    flags = ISA_FLAGS[isa]
    src, exe = tmp / "peak.c", tmp / f"peak_{isa}"
    src.write_text(PEAK_C + L1_LOOP_C)
    subprocess.run(["cc", "-O2", *flags, str(src), "-o", str(exe)], check=True)

    def meter():
        runs = [subprocess.run([str(exe)], capture_output=True, text=True,
                               check=True).stdout.split() for _ in range(3)]
        return max(float(r[0]) for r in runs), max(float(r[2]) for r in runs)
    return meter


def fma_peak_gflops(avx512: bool = False) -> float:
    """Best-burst FMA throughput of one core in GFLOP/s (AVX2 by default, AVX-512 if asked)."""
    with tempfile.TemporaryDirectory() as d:
        return peak_meter("avx512" if avx512 else "avx2", Path(d))()[0]


def graph_flops(model_path, strict: bool = False) -> float:
    """2 x the multiply-adds of the model's Conv / ConvTranspose / MatMul / Gemm nodes, from
    ONNX shape inference; strict: 0 when any of them has a shape inference left unknown (a
    partial count would understate them)."""
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
        if strict and n.op_type in ("Conv", "ConvTranspose", "MatMul", "Gemm") and not all(
                shapes.get(n.output[0]) or [0]):
            return 0.0
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
    ap.add_argument("--ort-isa", default="native",
                    help="native, same (the target's own ISA level: x86-avx2 -> avx2, ...) or a "
                         "level of aicc.isa_mask.LEVELS: onnxruntime then runs the kernels of a "
                         "CPU with only that ISA (a separate section of the output)")
    a = ap.parse_args(argv)
    from aicc.isa_mask import level_of, restrict
    level = level_of(a.target) if a.ort_isa == "same" else a.ort_isa
    restrict(level)          # before onnxruntime is loaded: it reads the CPU features then
    import onnxruntime as ort
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    isa = peak_isa(a.target)
    tile = {"avx512": "12 x 32", "avx2": "6 x 16", "sse2": "6 x 8"}[isa]
    rows, peaks, l1s = [], [], []
    with tempfile.TemporaryDirectory() as d:
        meter = peak_meter(isa, Path(d))
        for label, path in all_models(Path(d) / "models"):
            if a.k and a.k.lower() not in label.lower():
                continue
            out = aicc.build(path, target=a.target, out=Path(d) / f"b_{path.stem}")
            r = bench(out, path, seconds=a.seconds, ort_isa=level)
            # the peak right after the row, in the same machine state (the shared machine's
            # speed drifts by 10-40% over minutes: one peak for the table skewed its %)
            peak, l1 = meter()
            peaks.append(peak)
            l1s.append(l1)
            fl = graph_flops(path)
            gf = fl / (r["aicc"]["median_ms"] * 1e-3) / 1e9 if fl else 0.0
            # the ratio aicc would reach running every FLOP at this target's FMA peak
            floor = (fl / (peak * 1e9)) / (r["onnxruntime"]["median_ms"] * 1e-3) if fl else 0.0
            if "int8" in label:     # integer products: the float FMA peak does not bound them
                floor = None
            rows.append((label, r["aicc"]["median_ms"], r["onnxruntime"]["median_ms"], r["ratio"],
                         gf, None if floor is None else 100 * gf / peak, floor,
                         None if floor is None else 100 * gf / l1))
            print(f"{label:40s} aicc {rows[-1][1]:9.3f} ms  ort {rows[-1][2]:9.3f} ms  "
                  f"ratio {rows[-1][3]:6.2f}  {gf:7.1f} GFLOP/s", flush=True)
    cpu = cpu_name()
    load_after = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    key, title, cmd, ort_note = a.target, a.target, f"python -m benchmarks.run -t {a.target}", ""
    if level != "native":
        key, title = f"{a.target}/ort-{level}", f"{a.target}, onnxruntime on {level}"
        cmd += f" --ort-isa {a.ort_isa}"
        ort_note = (f", restricted to the kernels of a CPU with {level} only (CPUID features "
                    "newer than that hidden from it: aicc/isa_mask.py)")
    text = [f"## {title}", "",
            f"Generated by `{cmd}` (median of interleaved runs "
            f"over {a.seconds:g} s per engine after warm-up; single thread; onnxruntime "
            f"{ort.__version__} CPU provider with all graph optimizations, intra_op_num_threads=1"
            f"{ort_note}).",
            "", f"Machine: {cpu}, {platform.machine()}, Python {platform.python_version()}; "
            f"measured {'multiply-add' if isa == 'sse2' else 'FMA'} peak of one core: "
            f"{min(peaks, default=0):.1f}-"
            f"{max(peaks, default=0):.1f} GFLOP/s ({ISA_LOOP[isa]}, best of short bursts, "
            "measured after each row; a row's % of peak and ratio at peak use its own). "
            f"L1 GEMM loop: {min(l1s, default=0):.1f}-{max(l1s, default=0):.1f} GFLOP/s, the "
            f"GEMM micro-kernel's inner loop ({tile} accumulators, "
            "broadcasts from A, packed B) on data in L1, measured with the peak: what this "
            "core gives loads + FMAs at that moment; it falls to 60% of the FMA peak when "
            "the shared machine is busy. "
            f"1-minute load average {load_before:.2f} before, {load_after:.2f} "
            f"after the run ({os.cpu_count()} cores shared with other jobs).", "",
            "Ratio at peak: the ratio a bundle would reach if it ran every multiply-add of the "
            "model at this target's FMA peak (the floor for code that does all of them). int8 "
            "rows count their integer multiply-adds as 2 ops each; the float FMA peak does not "
            "bound them (n/a).", "",
            "| model | aicc ms | onnxruntime ms | ratio (aicc/ort) | GFLOP/s | % of FMA peak "
            "| ratio at peak | % of L1 GEMM loop |",
            "|---|---|---|---|---|---|---|---|"]
    for lab, am, om, ratio, gf, pct, floor, pl1 in rows:
        text.append(f"| {lab} | {am:.3f} | {om:.3f} | {ratio:.2f} | {gf:.1f} | "
                    + ("n/a | n/a | n/a |" if floor is None
                       else f"{pct:.0f}% | {floor:.2f} | {pl1:.0f}% |"))
    section = "\n".join(text)
    if not a.k:
        write_section(Path(a.out), key, section)
    print(section)


def write_section(path: Path, target: str, section: str) -> None:
    """Replace this target's section of PERFORMANCE.md (between its markers), or insert it
    before the notes (``## Notes``) / at the end; the rest of the file is kept."""
    begin, end = f"<!-- bench:{target} -->", f"<!-- /bench:{target} -->"
    block = f"{begin}\n{section}\n{end}"
    old = path.read_text() if path.is_file() else "# Performance\n"
    if begin in old and end in old:
        new = old[:old.index(begin)] + block + old[old.index(end) + len(end):]
    elif "\n## Notes" in old:
        i = old.index("\n## Notes") + 1
        new = old[:i] + block + "\n\n" + old[i:]
    else:
        new = old.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(new)


if __name__ == "__main__":
    main()
