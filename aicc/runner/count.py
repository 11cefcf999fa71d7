"""Executed instructions of a bundle under QEMU, counted by aicc's TCG plugin
(runtime_c/qemu/insn_count.c, built by `make qemu-plugin`): exact and independent of the
machine's load, but instructions, not time.

The harness marks the start and the end of every run (and, profiled, of every step) by calling
aicc_harness_mark; the plugin writes its counter at each call. A run's count is the difference
between its two marks; the last of ``reps`` runs is reported (the first also pays for the
emulator's translation, which is not counted, and the C library's lazy set-up, which is)."""
from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from ..targets import ROOT
from .harness import MARK, RunnerError, parse_output

PLUGIN = ROOT / "build" / "qemu-plugin" / "libaicc_insns.so"


def plugin_path() -> Path:
    if not PLUGIN.is_file():
        raise RunnerError(f"instruction counting needs aicc's QEMU plugin {PLUGIN} "
                          "(make qemu-plugin builds it)")
    return PLUGIN


def symbol_address(exe: Path, nm: str, symbol: str) -> int:
    """The address of ``symbol`` in program ``exe`` (the toolchain's nm); Thumb bit cleared."""
    try:
        r = subprocess.run([nm, str(exe)], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        raise RunnerError(f"{nm} cannot read {exe.name}: {e}") from None
    for ln in r.stdout.splitlines():
        parts = ln.split()
        if len(parts) == 3 and parts[2] == symbol:
            return int(parts[0], 16) & ~1
    raise RunnerError(f"{exe.name}: no symbol {symbol} ({nm})")


def emulator_name(target) -> str:
    """The emulator and the machine it models, e.g. "qemu-aarch64 -cpu cortex-a72"."""
    run, keep = list(target.run), []
    for i, a in enumerate(run[1:], 1):
        if a in ("-cpu", "-M") and i + 1 < len(run):
            keep += [a, run[i + 1]]
    return " ".join(run[:1] + keep)


def count_instructions(b, feeds: dict, *, profile: bool, reps: int) -> dict:
    """{"instructions": per run, "steps": [per step] (profile), "outputs": {...}} for
    RemoteBundle ``b`` on its target's emulator."""
    plugin = plugin_path()
    reps = max(1, int(reps))
    with tempfile.TemporaryDirectory(prefix="aicc-count-") as tmp:
        exe, dims = b._program(feeds, Path(tmp), reps=reps, profile=profile)
        addr = symbol_address(exe, b.target.tool("nm"), MARK)
        log = Path(tmp) / "counts.txt"
        text = b.transport.execute(exe, ("-plugin", f"{plugin},out={log},mark={addr:x}"))
        outs = parse_output(text, b, dims, f"the program on {b.where}")
        marks = [int(ln.split()[1]) for ln in log.read_text().splitlines()
                 if ln.startswith("m ")]
    per_run = len(marks) // reps
    if not marks or len(marks) % reps or per_run % 2 or (per_run > 2) != profile:
        raise RunnerError(f"the counting plugin saw {len(marks)} marks for {reps} run(s)"
                          f"{' with step marks' if profile else ''}: is {plugin.name} built for "
                          "this QEMU?")
    nsteps = per_run // 2 - 1
    last = marks[-per_run:]
    res = {"instructions": last[-1] - last[0], "outputs": outs, "reps": reps,
           "counter": "executed guest instructions (QEMU TCG plugin), not time",
           "emulator": emulator_name(b.target)}
    if profile:
        res["steps"] = [last[2 + 2 * i] - last[1 + 2 * i] for i in range(nsteps)]
    return res
