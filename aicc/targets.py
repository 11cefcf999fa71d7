"""Targets are data: configs/targets/*.yaml."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
TARGETS_DIR = ROOT / "configs" / "targets"


@dataclass(frozen=True)
class Target:
    name: str
    description: str
    cflags: tuple                 # flags the bundle always compiles with (ISA selection)
    opt_cflags: tuple             # default optimisation flags (the CFLAGS a user may override)
    vector_bytes: int
    alignment: int
    kernels: tuple = field(default_factory=tuple)   # allowed kernel variants, best first
    # schedule parameters per op family (e.g. {"gemm": {"kc": 256}}), read by the emitters
    schedule: dict = field(default_factory=dict, hash=False)
    cpu_flags: tuple = field(default_factory=tuple)  # /proc/cpuinfo flags the code needs


def list_targets() -> list:
    return sorted(p.stem for p in TARGETS_DIR.glob("*.yaml"))


def host_supports(target: Target) -> bool:
    """Whether this machine can run code built for ``target`` (Linux /proc/cpuinfo flags;
    True when they cannot be read)."""
    if not target.cpu_flags:
        return True
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return True
    flags = set()
    for line in text.splitlines():
        if line.startswith("flags"):
            flags.update(line.split(":", 1)[1].split())
    return not flags or set(target.cpu_flags) <= flags


def load_target(name: str) -> Target:
    path = TARGETS_DIR / f"{name}.yaml"
    if not path.is_file():
        raise ConfigError(f"unknown target '{name}' (known: {', '.join(list_targets())})")
    d = yaml.safe_load(path.read_text())
    try:
        return Target(name=d["name"], description=d.get("description", ""),
                      cflags=tuple(d.get("cflags", [])),
                      opt_cflags=tuple(d.get("opt_cflags", ["-O2"])),
                      vector_bytes=int(d.get("vector_bytes", 16)),
                      alignment=int(d.get("alignment", 64)),
                      kernels=tuple(d.get("kernels", ["generic"])),
                      schedule=dict(d.get("schedule") or {}),
                      cpu_flags=tuple(d.get("cpu_flags") or ()))
    except (KeyError, TypeError, ValueError) as e:
        raise ConfigError(f"target file {path.name}: {e}") from None


def runnable_targets() -> list:
    """Targets whose code this machine can execute (for tests and benchmarks)."""
    return [t for t in list_targets() if host_supports(load_target(t))]
