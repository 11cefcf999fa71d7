"""Run a bundle of any target: through cffi when this machine runs the target's code, else as
a harness program (harness.py) under the target's emulator, on a device over ssh, or through
a command template (transport.py); instruction counts under QEMU (count.py).

    b = open_bundle("bundle/")                     # host, or emulated for a cross target
    b = open_bundle("bundle/", runner="ssh://pi@board")
    outs = b.run({"input": x})
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from ..bundle.loader import Bundle, BundleInfo
from ..errors import InputError
from ..targets import host_supports, list_targets, load_target
from .harness import RunnerError, build_program, parse_output, parse_times
from .transport import DEFAULT_TIMEOUT, Local, make_transport

__all__ = ["open_bundle", "remote_runner", "RemoteBundle", "RunnerError"]


class RemoteBundle(BundleInfo):
    """A bundle run as a program on its target: ``run(feeds)`` as Bundle.run (same checks of
    the feeds, same outputs), one program per call. ``counts`` under an emulator with the
    instruction-counting plugin."""

    local = False

    def __init__(self, path, runner: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                 cflags: str | None = None):
        super().__init__(path)
        self.cflags = cflags            # CFLAGS of the bundle's own files (None: its Makefile's)
        tname = self.manifest.get("target", "generic")
        if tname not in list_targets():
            raise InputError(f"{self.path}: built for target {tname!r}, which this aicc does "
                             "not know")
        self.target = load_target(tname)
        for which in ("cc", "ar"):
            tool = self.target.tool(which)
            if shutil.which(tool) is None:
                raise RunnerError(f"target {tname}: its compiler {tool} is not installed "
                                  "(make cross-toolchain installs the ARM toolchains)")
        self.transport = make_transport(runner, self.target, timeout)

    @property
    def where(self) -> str:
        return self.transport.name

    @property
    def emulated(self) -> bool:
        """Whether the program runs under the target's emulator on this machine."""
        return isinstance(self.transport, Local) and self.transport.emulated

    def _program(self, feeds, tmp: Path, **kw):
        return build_program(self, self.target, feeds, tmp, cflags=self.cflags, **kw)

    def run(self, feeds: dict, hook=None) -> dict:
        if hook is not None:
            raise InputError(f"{self.path}: step hooks (--per-node, --profile in time) need a "
                             "bundle this machine runs; this one runs on " + self.where)
        with tempfile.TemporaryDirectory(prefix="aicc-run-") as tmp:
            exe, dims = self._program(feeds, Path(tmp))
            text = self.transport.execute(exe)
            return parse_output(text, self, dims, f"the program on {self.where}")

    def times(self, feeds: dict, reps: int) -> list:
        """[(thread CPU s, wall s)] of ``reps`` runs in one program (hosted targets: the
        program reads the POSIX clocks of the machine it runs on)."""
        if not self.target.hosted:
            raise RunnerError(f"target {self.target.name}: timing on a bare-metal board needs "
                              "a cycle counter the harness does not read yet; bench counts "
                              "instructions under its emulator instead")
        with tempfile.TemporaryDirectory(prefix="aicc-time-") as tmp:
            exe, dims = self._program(feeds, Path(tmp), reps=reps, timed=True)
            text = self.transport.execute(exe)
            parse_output(text, self, dims, f"the program on {self.where}")
            return parse_times(text)

    def counts(self, feeds: dict, *, profile: bool = False, reps: int = 2) -> dict:
        """Executed instructions (count.py), the outputs checked as by run()."""
        from .count import count_instructions
        if not self.emulated:
            raise RunnerError(f"instruction counts need the target's emulator; {self.where} "
                              "is not one (bench through a device runner reports time)")
        return count_instructions(self, feeds, profile=profile, reps=reps)


def remote_runner(path, runner: str | None = None):
    """The runner spec a bundle at ``path`` runs with as a program, or None when it runs in
    this process (no runner asked for, none in its target's YAML, and this machine runs the
    target's code)."""
    tname = BundleInfo(path).manifest.get("target", "generic")
    known = tname in list_targets()
    spec = runner if runner is not None else (load_target(tname).runner if known else None)
    if spec in (None, "local") and (not known or host_supports(load_target(tname))):
        return None
    return spec or "local"


def open_bundle(path, runner: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                cflags: str | None = None):
    """The bundle at ``path``, ready to run: a Bundle (cffi, this process) when it runs here
    (remote_runner), else a RemoteBundle."""
    spec = remote_runner(path, runner)
    if spec is None:
        return Bundle(path, cflags)
    return RemoteBundle(path, spec, timeout, cflags)
