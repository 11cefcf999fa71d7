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


def list_targets() -> list:
    return sorted(p.stem for p in TARGETS_DIR.glob("*.yaml"))


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
                      kernels=tuple(d.get("kernels", ["generic"])))
    except (KeyError, TypeError, ValueError) as e:
        raise ConfigError(f"target file {path.name}: {e}") from None
