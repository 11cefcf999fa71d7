"""One fuzz case, run the way a user's build runs, with everything that counts as a finding.

A case is a model (bytes) and how it is built: the output path (-o, one of OUT_MODES,
relative to the build's current folder) and whether weights go to weights.bin. It runs
through the CLI's own entry (``aicc.cli.main`` with argv, in this process) with the YAML
defaults, inside a sandbox folder::

    case/secret.bin           outside the model's folder: reading it is a finding
    case/model/model.onnx     the model; w.bin (external data a case may point into),
                              link.bin -> ../secret.bin, sub/
    case/work/                the build's current folder; -o is relative to it
    case/tmp/                 TMPDIR

under a per-case time limit (SIGALRM; a native hang is caught by faulthandler's watchdog,
which ends the process: the fuzzer's supervisor reports it) and an address-space limit
(RLIMIT_AS: the process's size when the case starts plus ``memory`` bytes).

Acceptable outcomes: a bundle that compiles with the host's cc (-Werror), or an AiccError (a
click usage error: exit 2), with the file system unchanged. Everything else is a finding:
another exception (MemoryError and RecursionError included), a timeout, generated C that
does not compile, a write outside the sandbox, a read of secret.bin, a failed build that
changed a file, a successful build that wrote outside its output folder or into a path
aicc must refuse.
"""
from __future__ import annotations

import contextlib
import faulthandler
import hashlib
import io
import os
import re
import resource
import shutil
import signal
import sys
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path

from .seeds import DATA, DATA_FILE

TIMEOUT = 20.0               # seconds per build
COMPILE_TIMEOUT = 120.0      # seconds for cc on the bundle
MEMORY = 2 << 30             # bytes of address space a build may add
CFLAGS = "-O0 -std=c99 -Wall -Wextra -pedantic -Werror"

# -o for each mode, relative to case/work/ (prepared by _prepare_out); REFUSED: a build
# that succeeds there is a finding
OUT_MODES = ("new", "dot", "dotdot", "symlink", "dangling", "file", "nonempty", "empty",
             "nested", "earlier", "modeldir", "parent")
REFUSED = {"dot", "dotdot", "symlink", "dangling", "file", "nonempty", "modeldir", "parent"}


@dataclass
class Case:
    model: bytes
    out: str = "new"
    weights_file: bool = False

    def encode(self) -> bytes:
        """The fuzzer's input: one header byte (output mode, weights flag), then the model."""
        return bytes([OUT_MODES.index(self.out) | (0x80 if self.weights_file else 0)]) + \
            self.model

    @staticmethod
    def decode(data: bytes) -> "Case":
        if not data:
            return Case(b"")
        h = data[0]
        return Case(data[1:], OUT_MODES[(h & 0x7F) % len(OUT_MODES)], bool(h & 0x80))

    def spec(self) -> str:
        return f"out={self.out}" + (" weights-file" if self.weights_file else "")

    @staticmethod
    def from_spec(model: bytes, spec: str) -> "Case":
        words = spec.split()
        out = next((w[4:] for w in words if w.startswith("out=")), "new")
        return Case(model, out if out in OUT_MODES else "new", "weights-file" in words)


@dataclass
class Finding:
    what: str          # one line: what happened
    signature: str     # the same bug gives the same signature (dedup)
    trace: str = ""    # the traceback, when there is one


class CaseTimeout(BaseException):
    """Raised by SIGALRM in the build (a BaseException: no ``except Exception`` eats it)."""


# ---- file access guard (an audit hook; active only while a case runs) ----

_GUARD: dict = {}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_PATH_EVENTS = {"os.mkdir": (0,), "os.remove": (0,), "os.rmdir": (0,), "os.rename": (0, 1),
                "os.replace": (0, 1), "os.symlink": (1,), "os.link": (0, 1), "os.chmod": (0,),
                "os.chown": (0,), "os.truncate": (0,), "os.utime": (0,),
                "shutil.rmtree": (0,), "shutil.copyfile": (1,), "shutil.move": (0, 1)}


def _inside(path, root: str) -> bool:
    try:
        p = os.path.realpath(os.fsdecode(path))
    except (TypeError, ValueError):
        return True             # an fd or something that is not a path
    return p == root or p.startswith(root + os.sep) or "__pycache__" in p


def _audit(event, args):
    g = _GUARD
    if not g or g.get("busy"):
        return
    if event == "open":
        path, mode, flags = args
        if path is None or isinstance(path, int):
            return
        g["busy"] = True
        try:
            if os.path.realpath(os.fsdecode(path)) == g["secret"]:
                g["violations"].append(f"read {path!s} (outside the model's folder)")
            writing = (any(c in mode for c in "wax+") if isinstance(mode, str)
                       else bool((flags or 0) & _WRITE_FLAGS))
            if writing and not _inside(path, g["root"]):
                g["violations"].append(f"opened {path!s} for writing (outside the sandbox)")
        except (TypeError, ValueError):
            pass
        finally:
            g["busy"] = False
    elif event in _PATH_EVENTS:
        g["busy"] = True
        try:
            for i in _PATH_EVENTS[event]:
                if i < len(args) and args[i] is not None and not _inside(args[i], g["root"]):
                    g["violations"].append(f"{event} {args[i]!s} (outside the sandbox)")
        finally:
            g["busy"] = False


_HOOKED = False


def _install_audit_hook():
    global _HOOKED
    if not _HOOKED:
        sys.addaudithook(_audit)
        _HOOKED = True


# ---- the sandbox ----

def _prepare(case_dir: Path, case: Case) -> str:
    """Lay out the sandbox; returns -o for the case's output mode."""
    if case_dir.exists():
        shutil.rmtree(case_dir)
    model_dir, work = case_dir / "model", case_dir / "work"
    for d in (model_dir / "sub", work, case_dir / "tmp"):
        d.mkdir(parents=True)
    (case_dir / "secret.bin").write_bytes(DATA)
    (model_dir / "model.onnx").write_bytes(case.model)
    (model_dir / DATA_FILE).write_bytes(DATA)
    (model_dir / "link.bin").symlink_to("../secret.bin")
    m = case.out
    if m == "symlink":
        (work / "real").mkdir()
        (work / "out").symlink_to("real", target_is_directory=True)
    elif m == "dangling":
        (work / "out").symlink_to("nowhere")
    elif m == "file":
        (work / "out").write_text("a user's file\n")
    elif m == "nonempty":
        (work / "out").mkdir()
        (work / "out" / "notes.txt").write_text("a user's file\n")
    elif m == "empty":
        (work / "out").mkdir()
    elif m == "earlier":            # an earlier bundle: replaced whole
        (work / "out").mkdir()
        (work / "out" / "manifest.json").write_text('{"aicc_version": "0.0.1", "name": "model"}')
        (work / "out" / "model.c").write_text("/* an earlier bundle */\n")
    return {"dot": ".", "dotdot": "..", "nested": "a/b/out", "modeldir": "../model",
            "parent": "out/.."}.get(m, "out")


def _tree(root: Path) -> dict:
    """{relative path: what is there} for everything under ROOT but tmp/."""
    out = {}
    for d, dirs, files in os.walk(root):
        rel = os.path.relpath(d, root)
        if rel == "tmp" or rel.startswith("tmp" + os.sep):
            dirs[:] = []
            continue
        for n in dirs + files:
            p = os.path.join(d, n)
            r = os.path.normpath(os.path.join(rel, n))
            if os.path.islink(p):
                out[r] = ("link", os.readlink(p))
            elif os.path.isdir(p):
                out[r] = ("dir",)
            else:
                with open(p, "rb") as f:
                    out[r] = ("file", hashlib.sha1(f.read()).hexdigest())
    return out


def _changes(before: dict, after: dict) -> list:
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))


def _buckets(model: bytes) -> list:
    """--buckets for the symbolic input dims a model has (so dynamic models compile)."""
    import onnx
    try:
        m = onnx.load_from_string(model)
    except Exception:  # noqa: BLE001 - not a model: aicc reports it
        return []
    names = {d.dim_param for i in m.graph.input for d in i.type.tensor_type.shape.dim
             if d.dim_param}
    return [a for n in sorted(x for x in names if isinstance(x, str) and "=" not in x)
            for a in ("--buckets", f"{n}=2,5")]


# ---- limits ----

def _vm_size() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


@contextlib.contextmanager
def limits(timeout: float, memory: int | None):
    """SIGALRM after TIMEOUT s (CaseTimeout), faulthandler's hard stop after 2x TIMEOUT + 30 s
    (a hang in native code), and RLIMIT_AS at the current size + MEMORY bytes."""
    def alarm(signum, frame):
        raise CaseTimeout
    old_handler = signal.signal(signal.SIGALRM, alarm)
    old_as = resource.getrlimit(resource.RLIMIT_AS)
    if memory:
        cap = _vm_size() + memory
        hard = old_as[1]
        resource.setrlimit(resource.RLIMIT_AS,
                           (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))
    faulthandler.dump_traceback_later(2 * timeout + 30, exit=True, file=sys.__stderr__)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        faulthandler.cancel_dump_traceback_later()
        resource.setrlimit(resource.RLIMIT_AS, old_as)
        signal.signal(signal.SIGALRM, old_handler)


# ---- one case ----

def _where(tb) -> str:
    """file:line of the innermost aicc frame of a traceback (else the innermost frame)."""
    frames = traceback.extract_tb(tb)
    own = [f for f in frames if f"{os.sep}aicc{os.sep}" in f.filename]
    f = (own or frames or [None])[-1]
    if f is None:
        return "?"
    return f"{f.filename.rsplit(os.sep + 'aicc' + os.sep, 1)[-1]}:{f.lineno}"


def _exc_finding(e: BaseException, prefix: str = "") -> Finding:
    msg = " ".join(str(e).split())[:300]
    where = _where(e.__traceback__)
    return Finding(f"{prefix}{type(e).__name__}: {msg} (at {where})", f"{type(e).__name__}@{where}",
                   "".join(traceback.format_exception(e)))


def run_case(case: Case, tmp: Path, *, timeout: float = TIMEOUT, memory: int | None = MEMORY,
             compile_c: bool = True) -> Finding | None:
    """None when the outcome is acceptable, else what went wrong."""
    from aicc.bundle.loader import build_bundle
    from aicc.cli import main as cli_main
    from aicc.errors import AiccError
    _install_audit_hook()
    case_dir = Path(tmp).resolve() / "case"
    out = _prepare(case_dir, case)
    work = case_dir / "work"
    argv = ["--debug", "build", "../model/model.onnx", "-o", out, *_buckets(case.model)]
    if case.weights_file:
        argv.append("--weights-file")
    before = _tree(case_dir)
    cwd, env_tmp, tf_tmp = os.getcwd(), os.environ.get("TMPDIR"), tempfile.tempdir
    err = io.StringIO()
    status, exc = None, None
    violations: list = []
    try:
        os.chdir(work)
        os.environ["TMPDIR"] = tempfile.tempdir = str(case_dir / "tmp")
        _GUARD.update(root=str(case_dir), secret=str(case_dir / "secret.bin"),
                      violations=violations, busy=False)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            with limits(timeout, memory):
                try:
                    cli_main(argv)
                except SystemExit as e:
                    status = e.code
    except CaseTimeout as e:
        exc = e
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 - this is what we are looking for
        exc = e
    finally:
        _GUARD.clear()
        os.chdir(cwd)
        tempfile.tempdir = tf_tmp
        if env_tmp is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = env_tmp
    if violations:
        return Finding(f"file access outside the sandbox: {violations[0]}",
                       "access:" + re.sub(r"\d+", "N", violations[0].split(" (")[0][-60:]))
    if isinstance(exc, CaseTimeout):
        where = _where(exc.__traceback__)
        return Finding(f"timeout: the build took more than {timeout:g} s (in {where})",
                       f"timeout@{where}", "".join(traceback.format_exception(exc)))
    changed = _changes(before, _tree(case_dir))
    if exc is not None and not isinstance(exc, AiccError):
        return _exc_finding(exc)
    if exc is not None or status not in (0, None):
        if exc is not None and not str(exc).strip():
            return Finding(f"{type(exc).__name__} with an empty message",
                           f"empty@{_where(exc.__traceback__)}")
        if changed:
            return Finding(f"a failed build changed {', '.join(changed[:3])}", "changed-on-error")
        return None
    if case.out in REFUSED:
        return Finding(f"built into -o {out} (out={case.out}), which aicc must refuse",
                       f"refused-out:{case.out}")
    bundle = os.path.normpath(os.path.join("work", out))
    stray = [c for c in changed if c != bundle and not c.startswith(bundle + os.sep)
             and not (bundle.startswith(c + os.sep) and _is_folder(case_dir / c))]
    if stray:
        return Finding(f"the build changed {', '.join(stray[:3])} outside its output folder",
                       "stray-write")
    try:
        with limits(COMPILE_TIMEOUT, memory):
            build_bundle(case_dir / bundle, CFLAGS)
    except AiccError as e:      # BuildError: the generated C does not compile
        first = str(e).split("(a bug in aicc): ", 1)[-1]
        return Finding(f"generated C does not compile: {first[:300]}",
                       "cc:" + re.sub(r"\d+|'[^']*'|‘[^’]*’", "N", first)[:120])
    except CaseTimeout:
        return Finding(f"cc took more than {COMPILE_TIMEOUT:g} s on the bundle", "cc-timeout")
    return None


def _is_folder(p: Path) -> bool:
    """A parent folder the build created for its output (-o a/b/out) is not a stray write."""
    return p.is_dir() and not p.is_symlink()


def try_case(model: bytes, tmp: Path, spec: str = "", **kw) -> str | None:
    """run_case on a model and a case spec ("out=symlink weights-file"); the finding's text."""
    f = run_case(Case.from_spec(model, spec), tmp, **kw)
    return None if f is None else f.what
