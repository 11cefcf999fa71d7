"""Where the harness program runs: on this machine (natively or under the target's emulator),
on a Linux device over ssh, or through a user's command template. Each ``execute`` takes the
program's path and returns what it printed; each failure is a RunnerError of one line that
says what is missing or what went wrong."""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

from ..targets import Target, host_supports
from .harness import RunnerError

DEFAULT_TIMEOUT = 600.0


def _exec(argv, what: str, timeout: float, cwd=None, shell: bool = False,
          stdin: Path | None = None) -> str:
    try:
        with open(stdin or os.devnull, "rb") as inp:
            r = subprocess.run(argv, cwd=cwd, capture_output=True, timeout=timeout,
                               shell=shell, stdin=inp)
    except subprocess.TimeoutExpired:
        raise RunnerError(f"{what} timed out after {timeout:g} s (--runner-timeout)") from None
    except FileNotFoundError as e:
        raise RunnerError(f"{what}: {e.filename} is not installed") from None
    out = r.stdout.decode("utf-8", "replace")
    if r.returncode != 0 and "aicc-end" not in out:
        err = " ".join(r.stderr.decode("utf-8", "replace").split())[-300:]
        raise RunnerError(f"{what} exited with status {r.returncode}" + (f": {err}" if err else ""))
    return out


class Local:
    """This machine: the program itself when the host runs the target's code, else the
    target's emulator (its YAML ``run``). ``plugin``: extra emulator arguments (count.py)."""

    def __init__(self, target: Target, timeout: float = DEFAULT_TIMEOUT):
        self.target, self.timeout = target, timeout
        self.emulated = not (target.native and target.hosted)
        if not self.emulated and not host_supports(target):
            raise RunnerError(f"target {target.name}: this CPU lacks what its code needs "
                              f"({' '.join(target.cpu_flags)}); run it elsewhere with --runner")
        if self.emulated:
            if not target.run:
                raise RunnerError(f"target {target.name}: this machine cannot run its programs "
                                  "and its YAML names no emulator ('run'); use --runner")
            if shutil.which(target.run[0]) is None:
                raise RunnerError(f"target {target.name}: its emulator {target.run[0]} is not "
                                  "installed (make cross-toolchain installs it), or use --runner")
        self.name = (f"{target.run[0]} (emulated {target.name})" if self.emulated
                     else "this machine")

    def execute(self, exe: Path, plugin: tuple = ()) -> str:
        argv = self.target.run_command(exe)
        if plugin:
            argv = [argv[0], *plugin, *argv[1:]]
        return _exec(argv, f"running the program on {self.name}", self.timeout, cwd=exe.parent)


class Ssh:
    """A Linux device over ssh: ``ssh://[user@]host[:port][/folder]``. One ssh session sends the
    program on its standard input into the folder (default /tmp), runs it there and removes
    it (the device needs a POSIX shell and cat, no scp or sftp). ssh's own configuration
    applies; extra ssh options (an identity file, known-hosts settings) come from
    $AICC_SSH_OPTS."""

    def __init__(self, spec: str, timeout: float = DEFAULT_TIMEOUT):
        u = urlsplit(spec)
        if not u.hostname:
            raise RunnerError(f"runner {spec!r}: expected ssh://[user@]host[:port][/folder]")
        if shutil.which("ssh") is None:
            raise RunnerError(f"runner {spec}: ssh is not installed (Debian: openssh-client)")
        self.dest = f"{u.username}@{u.hostname}" if u.username else u.hostname
        self.port = u.port
        self.folder = u.path or "/tmp"
        self.name, self.timeout = spec, timeout
        self.opts = ["-o", "BatchMode=yes", "-o", "ConnectTimeout=10",
                     *shlex.split(os.environ.get("AICC_SSH_OPTS", ""))]

    def execute(self, exe: Path, plugin: tuple = ()) -> str:
        remote = shlex.quote(f"{self.folder.rstrip('/')}/aicc-{os.getpid()}-{exe.parent.name}")
        port = ["-p", str(self.port)] if self.port else []
        script = (f"cat > {remote} && chmod +x {remote} && {remote}; s=$?; rm -f {remote}; "
                  "exit $s")
        return _exec(["ssh", *port, *self.opts, self.dest, script],
                     f"running the program on {self.name}", self.timeout, stdin=exe)


class Command:
    """A user's command template, ``cmd:TEMPLATE``, run by the shell with {exe} replaced by
    the program's path (a flasher plus a serial reader, a remote lab's client...): whatever
    it prints on stdout is read as the program's output."""

    def __init__(self, template: str, timeout: float = DEFAULT_TIMEOUT):
        if "{exe}" not in template:
            raise RunnerError(f"runner 'cmd:{template}': the template must contain {{exe}}")
        self.template, self.timeout = template, timeout
        self.name = f"cmd:{template}"

    def execute(self, exe: Path, plugin: tuple = ()) -> str:
        cmd = self.template.replace("{exe}", shlex.quote(str(exe)))
        return _exec(cmd, f"runner {self.name}", self.timeout, cwd=exe.parent, shell=True)


def make_transport(spec, target: Target, timeout: float = DEFAULT_TIMEOUT):
    """The transport for a runner spec: None or "local" (this machine, emulated when needed),
    "ssh://...", "cmd:..."."""
    spec = spec or target.runner or "local"
    if spec == "local":
        return Local(target, timeout)
    if spec.startswith("ssh://"):
        return Ssh(spec, timeout)
    if spec.startswith("cmd:"):
        return Command(spec[4:], timeout)
    raise RunnerError(f"unknown runner {spec!r} (local, ssh://[user@]host[:port][/folder], "
                      "cmd:TEMPLATE with {exe})")
