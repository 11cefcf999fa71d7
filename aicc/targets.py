"""Targets are data: configs/targets/*.yaml."""
from __future__ import annotations

import functools
import platform
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ConfigError
from .yamlio import load_yaml

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
    # double-precision floating-point hardware; False (a single-precision FPU such as the
    # Cortex-M4's FPv4-SP, or none): every double operation is a libgcc call, so the int8
    # kernels requantize in 32-bit integer arithmetic (kernels/qgemm/fixed.py) and round
    # quantized values in float32, with no soft-double or libm call on the int8 run path
    double_fpu: bool = True
    # how the int8 kernels requantize their int32 sums: "integer" (kernels/qgemm/fixed.py, 32-bit
    # integer arithmetic) or "float" (float64, or float32 rows checked for ties: loops written
    # for SIMD hosts); the YAML's ``requant``, by default "integer" without double-precision
    # hardware, else "float". The values are the same.
    requant: str = "float"
    kernels: tuple = field(default_factory=tuple)   # allowed kernel variants, best first
    # schedule parameters per op family (e.g. {"gemm": {"kc": 256}}), read by the emitters
    schedule: dict = field(default_factory=dict, hash=False)
    cpu_flags: tuple = field(default_factory=tuple)  # /proc/cpuinfo flags the code needs
    base: str | None = None          # the target this one ``extends`` (None: a file of its own)
    # Cross targets (docs/EMBEDDED.md). machines: `uname -m` values that run the code natively
    # (None: any host; () : none, e.g. bare metal). cc/ar/size: the toolchain the bundle's
    # Makefile defaults to (None: the host's cc, ar, size). run: command prefix that runs a
    # program built for the target on this host (an emulator; "{exe}" marks where the program
    # goes, else it is appended). hosted: False for bare metal (no shared library, no -fPIC).
    # board: what a program for the target links with (aicc/runner): {"sources": files under
    # runtime_c/boards/, "ldflags": [...], "{boards}" standing for that folder}; hosted targets
    # default to boards/hosted.c. runner: the default runner of the target's bundles (aicc
    # run/validate/bench: "ssh://host", "cmd:..."; None: natively, else under `run`).
    machines: tuple = None
    cc: str = None
    ar: str = None
    size: str = None
    nm: str = None
    run: tuple = field(default_factory=tuple)
    hosted: bool = True
    board: dict = field(default_factory=dict, hash=False)
    runner: str = None
    # default options of pipeline passes on this target ({pass name: {option: value}}); a
    # pipeline entry's own options win (e.g. layout-nhwc's mode)
    pass_options: dict = field(default_factory=dict, hash=False)

    @property
    def native(self) -> bool:
        """Whether this host's architecture runs the target's code (CPU flags aside)."""
        return self.machines is None or platform.machine().lower() in self.machines

    def tool(self, which: str) -> str:
        """The toolchain program for ``which`` (cc, ar, size, nm): the target's own, else the
        host's."""
        return getattr(self, which) or which

    def run_command(self, exe) -> list:
        """argv that runs program ``exe`` built for this target on this host."""
        if self.native and self.hosted:
            return [str(exe)]
        if not self.run:
            raise ConfigError(f"target {self.name}: no 'run' command to execute its programs "
                              "on this host")
        if any("{exe}" in a for a in self.run):
            return [a.replace("{exe}", str(exe)) for a in self.run]
        return [*self.run, str(exe)]

    def missing_tools(self) -> list:
        """Programs the target's toolchain and emulator need that are not on PATH."""
        progs = [self.tool("cc"), self.tool("ar"), self.tool("size")]
        if not (self.native and self.hosted) and self.run:
            progs.append(self.run[0])
        return [p for p in progs if shutil.which(p) is None]


def list_targets() -> list:
    return sorted(p.stem for p in TARGETS_DIR.glob("*.yaml"))


@functools.lru_cache(maxsize=None)
def host_flags() -> frozenset:
    """This machine's CPU flags (the ``flags`` lines of Linux's /proc/cpuinfo; empty when
    they cannot be read)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    return frozenset(f for line in text.splitlines() if line.startswith("flags")
                     for f in line.split(":", 1)[1].split())


def host_supports(target: Target) -> bool:
    """Whether this machine can run code built for ``target`` (host_flags; True when they
    cannot be read)."""
    if not target.native or not target.hosted:
        return False
    if not target.cpu_flags:
        return True
    flags = host_flags()
    return not flags or set(target.cpu_flags) <= flags


def _target_dict(name: str, seen=()) -> dict:
    """The target file's keys over those of the target it ``extends``: top-level keys replace
    the parent's whole value, except ``schedule`` and ``pass_options``, merged per op family /
    pass (a family's keys over the parent's); ``cflags_add`` / ``cpu_flags_add`` append."""
    path = TARGETS_DIR / f"{name}.yaml"
    if not path.is_file():
        raise ConfigError(f"unknown target '{name}' (known: {', '.join(list_targets())})")
    d = load_yaml(path.read_text()) or {}
    base = d.pop("extends", None)
    if base is None:
        return d
    if base in seen:
        raise ConfigError(f"target file {path.name}: 'extends' loops through {base}")
    merged = _target_dict(str(base), seen + (name,))
    for key in ("cflags", "cpu_flags"):
        merged[key] = list(merged.get(key) or []) + list(d.pop(f"{key}_add", None) or [])
    for key in ("schedule", "pass_options"):
        mine = d.pop(key, None) or {}
        if not isinstance(mine, dict):
            raise ConfigError(f"target file {path.name}: '{key}' must be a mapping")
        into = {k: dict(v or {}) for k, v in (merged.get(key) or {}).items()}
        for family, opts in mine.items():
            into[family] = {**into.get(family, {}), **(opts or {})}
        merged[key] = into
    merged.update(d)
    merged["_base"] = str(base)
    return merged


def load_target(name: str) -> Target:
    d = _target_dict(name)
    double_fpu = bool(d.get("double_fpu", True))
    requant = str(d.get("requant") or ("float" if double_fpu else "integer"))
    if requant not in ("integer", "float"):
        raise ConfigError(f"target file {name}.yaml: requant '{requant}' (integer, float)")
    try:
        return Target(base=d.get("_base"), name=d["name"], description=d.get("description", ""),
                      cflags=tuple(d.get("cflags", [])),
                      opt_cflags=tuple(d.get("opt_cflags", ["-O2"])),
                      vector_bytes=int(d.get("vector_bytes", 16)),
                      alignment=int(d.get("alignment", 64)),
                      double_fpu=double_fpu, requant=requant,
                      kernels=tuple(d.get("kernels", ["generic"])),
                      schedule=dict(d.get("schedule") or {}),
                      cpu_flags=tuple(d.get("cpu_flags") or ()),
                      machines=(None if d.get("machines") is None
                                else tuple(str(m).lower() for m in d["machines"])),
                      cc=d.get("cc"), ar=d.get("ar"), size=d.get("size"), nm=d.get("nm"),
                      run=tuple(str(a) for a in d.get("run") or ()),
                      hosted=bool(d.get("hosted", True)),
                      board=dict(d.get("board") or {}),
                      runner=None if d.get("runner") is None else str(d["runner"]),
                      pass_options={str(k): dict(v or {}) for k, v in
                                    (d.get("pass_options") or {}).items()})
    except (KeyError, TypeError, ValueError) as e:
        raise ConfigError(f"target file {name}.yaml: {e}") from None


def runnable_targets(derived: bool = True) -> list:
    """Targets whose code this machine can execute directly (for tests and benchmarks); cross
    targets run under an emulator are not listed (see Target.run_command). derived=False
    leaves out targets that ``extends`` another (x86-avx512-vnni: the parent's float kernels,
    so the float kernel tests run on the parent only)."""
    loaded = {name: load_target(name) for name in list_targets()}
    return [name for name, t in loaded.items() if host_supports(t) and (derived or t.base is None)]
