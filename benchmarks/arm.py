"""The arm-neon table: executed instructions per inference of aicc's arm-neon bundles and of
onnxruntime's AArch64 build, both under qemu-aarch64 -cpu cortex-a72 (Armv8-A with NEON, no
SVE, no dot product) with aicc's counting plugin (runtime_c/qemu/insn_count.c).

    python -m benchmarks.arm [-k FILTER] [--write]

Per benchmark model (the first seven of benchmarks/models.py): the bundle is built for
arm-neon and counted by RemoteBundle.counts (aicc/runner/count.py); onnxruntime is counted by
a small C driver (arm_ort_driver.c) on the same seeded inputs: one session with one intra-op
and one inter-op thread and all graph optimizations, two Run calls, the second counted between
two calls of a noinline mark function (as the aicc harness counts the last of its two runs).
Both outputs are checked against the host's onnxruntime. MACs are the multiply-adds of Conv,
ConvTranspose, Gemm and MatMul (benchmarks.run.graph_flops / 2). --write replaces the
``<!-- bench:arm-neon -->`` block of docs/PERFORMANCE.md.

What it fetches (into build/arm-bench/, git-ignored): onnxruntime's own AArch64 wheel of the
host's onnxruntime version (``pip download --platform manylinux_2_28_aarch64``), of which it
uses libonnxruntime.so. That wheel has no C header; nor have the wheels of onnxruntime-genai
and onnxruntime-extensions (neither publishes an sdist), and Debian 12 packages no
onnxruntime. So arm_ort_driver.c declares the ten OrtApi entries it calls itself, by their
index in ``struct OrtApi`` (a struct of function pointers that onnxruntime only appends to,
so an index never changes), counted from the start of the struct in the header of
onnxruntime's repository (include/onnxruntime/core/session/onnxruntime_c_api.h:
CreateStatus 0, GetErrorCode 1, GetErrorMessage 2, CreateEnv 3, CreateEnvWithCustomLogger 4,
Enable/DisableTelemetryEvents 5-6, CreateSession 7, CreateSessionFromArray 8, Run 9,
CreateSessionOptions 10, ... SetSessionGraphOptimizationLevel 23, SetIntraOpNumThreads 24,
SetInterOpNumThreads 25, ... CreateTensorAsOrtValue 48, CreateTensorWithDataAsOrtValue 49,
..., CreateMemoryInfo 68, CreateCpuMemoryInfo 69). A wrong index would call another entry:
the run would fail or its outputs would not match the host's onnxruntime, which is checked.

qemu 7.2 gives an AArch64 guest the host's /proc/cpuinfo (x86 text), on which onnxruntime's
CPU detection crashes at start (the driver dies of SIGSEGV). qemu's -L prefix is tried first
for every path the guest opens, so the driver runs with -L build/arm-bench/sysroot: symlinks
to /usr/aarch64-linux-gnu's folders plus a proc/cpuinfo describing Cortex-A72 cores (the
plugin and -cpu as for aicc).
"""
from __future__ import annotations

import argparse
import datetime
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np

import aicc
from aicc.runner import open_bundle
from aicc.runner.count import plugin_path, symbol_address
from aicc.targets import load_target
from aicc.validate import compare, random_inputs, reference_outputs

from .models import all_models
from .run import graph_flops, write_section

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "build" / "arm-bench"
DRIVER_C = Path(__file__).resolve().parent / "arm_ort_driver.c"
TARGET = "arm-neon"
MODELS = 7                      # the first seven of all_models: the benchmark models
RTOL, ATOL = 1e-3, 1e-4         # both engines against the host's onnxruntime
WHEEL_PLATFORMS = ("manylinux_2_28_aarch64", "manylinux_2_27_aarch64", "manylinux2014_aarch64")
MARK = "ort_bench_mark"
TIMEOUT = 3600

# what the guest reads as /proc/cpuinfo: Cortex-A72 cores (implementer 0x41 Arm, part 0xd08)
# with the Armv8.0-A features qemu's cortex-a72 model has
CPUINFO = """processor\t: {n}
BogoMIPS\t: 100.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 cpuid
CPU implementer\t: 0x41
CPU architecture: 8
CPU variant\t: 0x0
CPU part\t: 0xd08
CPU revision\t: 3
"""


def _run(cmd, what, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"{what} failed ({r.returncode}):\n{(r.stderr or r.stdout)[-3000:]}")
    return r


def ort_library(version: str) -> Path:
    """The folder holding libonnxruntime.so of onnxruntime ``version`` for AArch64 (from its
    PyPI wheel, downloaded once into the cache)."""
    lib = CACHE / f"onnxruntime-{version}-aarch64"
    if (lib / "libonnxruntime.so").exists():
        return lib
    dl = CACHE / "wheels"
    dl.mkdir(parents=True, exist_ok=True)
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    wheel = None
    for plat in WHEEL_PLATFORMS:
        r = subprocess.run([sys.executable, "-m", "pip", "download", f"onnxruntime=={version}",
                            "--platform", plat, "--python-version", py, "--only-binary=:all:",
                            "--no-deps", "-d", str(dl)], capture_output=True, text=True)
        found = sorted(dl.glob(f"onnxruntime-{version}-*aarch64*.whl"))
        if r.returncode == 0 and found:
            wheel = found[0]
            break
    if wheel is None:
        sys.exit(f"no AArch64 wheel of onnxruntime {version} on the package index "
                 f"(tried {', '.join(WHEEL_PLATFORMS)})")
    lib.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as z:
        names = [n for n in z.namelist() if Path(n).name.startswith("libonnxruntime.so")]
        if not names:
            sys.exit(f"{wheel.name} has no libonnxruntime.so")
        for n in names:
            (lib / Path(n).name).write_bytes(z.read(n))
    full = next(p for p in lib.iterdir() if p.name.startswith(f"libonnxruntime.so.{version}"))
    for alias in ("libonnxruntime.so.1", "libonnxruntime.so"):
        if not (lib / alias).exists():
            (lib / alias).symlink_to(full.name)
    return lib


def sysroot() -> Path:
    """build/arm-bench/sysroot: /usr/aarch64-linux-gnu (symlinks) plus proc/cpuinfo."""
    src = Path("/usr/aarch64-linux-gnu")
    if not src.is_dir():
        sys.exit(f"{src} is missing (Debian: libc6-dev-arm64-cross; make cross-toolchain)")
    root = CACHE / "sysroot"
    (root / "proc").mkdir(parents=True, exist_ok=True)
    for p in src.iterdir():
        link = root / p.name
        if not link.exists() and not link.is_symlink():
            link.symlink_to(p)
    ncpu = os.cpu_count() or 1
    (root / "proc" / "cpuinfo").write_text("\n".join(CPUINFO.format(n=i) for i in range(ncpu)))
    return root


def driver(libdir: Path) -> Path:
    """arm_ort_driver.c for AArch64, not position-independent (the mark's address is the
    one nm gives), linked to libonnxruntime.so in ``libdir`` (an rpath to it)."""
    exe = libdir / "arm_ort_driver"
    if exe.exists() and exe.stat().st_mtime >= DRIVER_C.stat().st_mtime:
        return exe
    cc = load_target(TARGET).tool("cc")
    _run([cc, "-O2", "-std=gnu99", "-no-pie", "-Wall", str(DRIVER_C), f"-L{libdir}",
          "-lonnxruntime", f"-Wl,-rpath,{libdir}", "-o", str(exe)], "compiling the driver")
    return exe


def emulator(root: Path) -> list:
    """arm-neon's emulator command (configs/targets/arm-neon.yaml) with -L ``root``."""
    cmd = list(load_target(TARGET).run)
    i = cmd.index("-L")
    cmd[i + 1] = str(root)
    return cmd


def count_ort(model: Path, feeds: dict, want: dict, exe: Path, root: Path, tmp: Path):
    """(instructions of the second Run, outputs) of onnxruntime in the driver under QEMU."""
    from onnx.helper import np_dtype_to_tensor_dtype
    lines = [f"model {model.resolve()}"]

    def tensor(kind, k, name, a):
        f = tmp / f"{kind}{k}.bin"
        if kind == "in":
            f.write_bytes(np.ascontiguousarray(a).tobytes())
        dims = " ".join(str(d) for d in a.shape)
        return f"{kind} {name} {np_dtype_to_tensor_dtype(a.dtype)} {a.ndim} {dims} {f}"
    lines += [tensor("in", k, n, a) for k, (n, a) in enumerate(feeds.items())]
    lines += [tensor("out", k, n, a) for k, (n, a) in enumerate(want.items())]
    spec = tmp / "spec.txt"
    spec.write_text("\n".join(lines) + "\n")
    log = tmp / "ort_counts.txt"
    addr = symbol_address(exe, load_target(TARGET).tool("nm"), MARK)
    cmd = emulator(root)
    cmd = [cmd[0], "-plugin", f"{plugin_path()},out={log},mark={addr:x}", *cmd[1:],
           str(exe), str(spec)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    if r.returncode != 0 or "ort-ok" not in r.stdout:
        sys.exit(f"onnxruntime under QEMU failed ({r.returncode}): "
                 f"{(r.stdout + r.stderr).strip()[-2000:]}")
    marks = [int(ln.split()[1]) for ln in log.read_text().splitlines() if ln.startswith("m ")]
    if len(marks) != 4:
        sys.exit(f"the counting plugin saw {len(marks)} marks in the driver, expected 4")
    outs = {n: np.fromfile(tmp / f"out{k}.bin", dtype=a.dtype).reshape(a.shape)
            for k, (n, a) in enumerate(want.items())}
    return marks[3] - marks[2], outs


def _check(who: str, label: str, got: dict, want: dict) -> str:
    res = compare(got, want, rtol=RTOL, atol=ATOL)
    worst = max((c.max_abs for c in res), default=0.0)
    if not all(c.ok for c in res):
        bad = "; ".join(f"{c.name}: {c.detail}, {c.metrics()}" for c in res if not c.ok)
        print(f"  MISMATCH {who} on {label}: {bad}", flush=True)
        return f"{worst:.1e} (mismatch)"
    return f"{worst:.1e}"


def _git(*args) -> str:
    r = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else "unknown"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-k", default=None, help="only the models whose label contains this")
    ap.add_argument("--write", action="store_true",
                    help="replace the arm-neon block of docs/PERFORMANCE.md (all seven models "
                         "only, not with -k)")
    ap.add_argument("--out", default=str(ROOT / "docs" / "PERFORMANCE.md"))
    a = ap.parse_args(argv)
    if a.write and a.k:
        sys.exit("--write needs all seven models (no -k)")
    import onnxruntime as ort
    for tool in ("qemu-aarch64", load_target(TARGET).tool("cc")):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is not installed (make cross-toolchain)")
    libdir = ort_library(ort.__version__)
    root = sysroot()
    exe = driver(libdir)
    qemu_ver = _run(["qemu-aarch64", "--version"], "qemu-aarch64 --version").stdout.split()[2]
    rows = []
    with tempfile.TemporaryDirectory(prefix="aicc-arm-") as d:
        d = Path(d)
        logging.getLogger().setLevel(logging.ERROR)   # the quantizer's advice (int8 models)
        models = all_models(d / "models")[:MODELS]
        for label, path in models:
            if a.k and a.k.lower() not in label.lower():
                continue
            out = aicc.build(path, target=TARGET, out=d / f"b_{path.stem}")
            b = open_bundle(out)
            feeds = random_inputs(b.inputs, 0)
            want, _ = reference_outputs(path, feeds)
            c = b.counts(feeds)
            with tempfile.TemporaryDirectory(prefix="ort-", dir=d) as t:
                n_ort, ort_outs = count_ort(path, feeds, want, exe, root, Path(t))
            macs = graph_flops(path) / 2
            row = (label, macs, c["instructions"], n_ort, _check("aicc", label, c["outputs"], want),
                   _check("onnxruntime", label, ort_outs, want))
            rows.append(row)
            print(f"{label:40s} {macs / 1e6:9.2f} MMAC  aicc {row[2] / 1e6:9.3f} M  "
                  f"ort {n_ort / 1e6:9.3f} M  ratio {row[2] / n_ort:5.2f}  "
                  f"per MAC {row[2] / macs:6.3f} / {n_ort / macs:6.3f}  "
                  f"max abs err {row[4]} / {row[5]}", flush=True)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    commit = _git("rev-parse", "--short", "HEAD")
    text = ["## arm-neon (instructions under QEMU)", "",
            f"Generated by `python -m benchmarks.arm --write` at commit {commit}, {date}. "
            "Executed guest instructions per inference, counted by "
            f"runtime_c/qemu/insn_count.c under qemu-aarch64 {qemu_ver} -cpu cortex-a72 "
            "(Armv8-A with NEON; no SVE, no dot product): instructions, not time. aicc: the "
            "arm-neon bundle in the runner's harness, the last of two runs. onnxruntime: its "
            f"AArch64 wheel ({ort.__version__}, libonnxruntime.so through the C API, one intra-op "
            "and one inter-op thread, all graph optimizations, outputs into pre-allocated "
            "tensors), the second of two Run calls. Same seeded inputs; both engines' outputs are "
            f"checked against the host's onnxruntime (rtol {RTOL:g}, atol {ATOL:g}; the last "
            "column gives each one's largest absolute difference, marked where out of "
            "tolerance). MACs: multiply-adds of Conv, Gemm and MatMul (benchmarks.run.graph_flops "
            "/ 2).", "",
            "| model | MMACs | aicc instructions (M) | onnxruntime instructions (M) | aicc/ORT "
            "| instructions per MAC, aicc | instructions per MAC, ORT | max abs diff aicc / ORT |",
            "|---|---|---|---|---|---|---|---|"]
    for label, macs, na, no, ea, eo in rows:
        text.append(f"| {label} | {macs / 1e6:.2f} | {na / 1e6:.3f} | {no / 1e6:.3f} | "
                    f"{na / no:.2f} | {na / macs:.3f} | {no / macs:.3f} | {ea} / {eo} |")
    section = "\n".join(text)
    if a.write:
        write_section(Path(a.out), TARGET, section)
    print(section)


if __name__ == "__main__":
    main()
