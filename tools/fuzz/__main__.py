"""`python -m tools.fuzz`: the supervisor, and (with --child) the atheris fuzzing process."""
from __future__ import annotations

import argparse
import hashlib
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .harness import COMPILE_TIMEOUT, MEMORY, TIMEOUT, Case, Finding
from .seeds import ROOT, seed_models

CORPUS = ROOT / "tests" / "fuzz_corpus"
WORK = ROOT / "build" / "fuzz"          # libFuzzer's working corpus (kept between runs)
MAX_LEN = 1 << 20


def corpus_cases() -> list:
    """(Case, signature) of every saved finding."""
    out = []
    for p in sorted(CORPUS.glob("*.onnx")):
        txt = p.with_suffix(".txt")
        meta = dict(re.findall(r"^(case|signature): (.*)$", txt.read_text(), re.M)) \
            if txt.exists() else {}
        out.append((Case.from_spec(p.read_bytes(), meta.get("case", "")),
                    meta.get("signature", "")))
    return out


def save_finding(case: Case, f: Finding) -> Path:
    CORPUS.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256(case.encode()).hexdigest()[:16]
    p = CORPUS / f"crash-{h}.onnx"
    p.write_bytes(case.model)
    p.with_suffix(".txt").write_text(f"{f.what}\ncase: {case.spec()}\nsignature: {f.signature}\n")
    return p


def child(a) -> None:
    """The atheris process: instrument aicc, fuzz until --seconds."""
    import atheris
    import importlib
    import pkgutil
    with atheris.instrument_imports(include=["aicc"]):
        import aicc
        for m in pkgutil.walk_packages(aicc.__path__, "aicc."):
            if m.name not in ("aicc.bench",):
                importlib.import_module(m.name)
    from .harness import run_case
    from . import mutate as mutate_mod
    from .mutate import mutate
    mutate_mod.BYTE_MUTATOR = lambda d, n: atheris.Mutate(d, n)   # bound by Setup()
    seeds = seed_models()
    known = {sig for _, sig in corpus_cases() if sig}
    state = Path(a.dir)
    tmp = Path(tempfile.mkdtemp(prefix="aicc-fuzz-", dir=a.dir))
    log = open(state / "findings.log", "a")

    def one(data: bytes) -> None:
        (state / "current.bin").write_bytes(data)
        case = Case.decode(data)
        f = run_case(case, tmp, timeout=a.timeout, memory=a.memory_mb << 20)
        if f is not None and f.signature not in known:
            known.add(f.signature)
            p = save_finding(case, f)
            log.write(f"{p.name}: {f.what}\n")
            log.flush()
            print(f"\nfuzz: finding {p.name}: {f.what}", file=sys.stderr, flush=True)

    def custom_mutator(data, max_size, seed):
        try:
            return mutate(data, max_size, seed, seeds)
        except Exception as e:  # noqa: BLE001 - a bug of the mutator must not stop the run
            print(f"fuzz: mutator: {type(e).__name__}: {e}", file=sys.stderr)
            return atheris.Mutate(data, max_size)

    corpus = WORK / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    for c in [Case(s) for s in seeds] + [c for c, _ in corpus_cases()]:
        data = c.encode()
        p = corpus / hashlib.sha1(data).hexdigest()
        if not p.exists():
            p.write_bytes(data)
    args = [sys.argv[0], str(corpus), f"-max_total_time={max(1, int(a.seconds))}",
            f"-max_len={MAX_LEN}", "-rss_limit_mb=0", "-malloc_limit_mb=0", "-timeout=0",
            f"-seed={a.seed}", f"-artifact_prefix={state}/", "-print_final_stats=1",
            "-len_control=0"]
    atheris.Setup(args, one, custom_mutator=custom_mutator)
    atheris.Fuzz()


def replay(a) -> int:
    from .harness import run_case
    bad = 0
    with tempfile.TemporaryDirectory(prefix="aicc-fuzz-") as d:
        for name in a.replay:
            p = Path(name)
            txt = p.with_suffix(".txt")
            spec = dict(re.findall(r"^(case): (.*)$", txt.read_text(), re.M)).get("case", "") \
                if txt.exists() else ""
            case = Case.from_spec(p.read_bytes(), spec)
            f = run_case(case, Path(d), timeout=a.timeout, memory=a.memory_mb << 20)
            print(f"{p.name} ({case.spec()}): {'ok' if f is None else f.what}")
            if f is not None:
                bad += 1
                if f.trace:
                    print(f.trace)
    return 1 if bad else 0


def _runs(log: str) -> int:
    n = [int(x) for x in re.findall(r"^(?:#|Done )(\d+)", log, re.M)]
    return max(n, default=0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.fuzz",
                                 description="Coverage-guided fuzzing of aicc build.")
    ap.add_argument("--seconds", type=float, default=60, help="total time [60]")
    ap.add_argument("--seed", type=int, default=0, help="libFuzzer's seed (0: random)")
    ap.add_argument("--timeout", type=float, default=TIMEOUT,
                    help=f"seconds per build [{TIMEOUT:g}]")
    ap.add_argument("--memory-mb", type=int, default=MEMORY >> 20,
                    help=f"address space a build may add, MB [{MEMORY >> 20}]")
    ap.add_argument("--replay", nargs="+", metavar="CASE.onnx",
                    help="run saved cases again, with tracebacks (no atheris needed)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--dir", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.replay:
        return replay(a)
    try:
        import atheris  # noqa: F401
    except ImportError:
        print("fuzz: atheris is not installed: .venv/bin/pip install -e '.[fuzz]' "
              "(make fuzz installs it)", file=sys.stderr)
        return 2
    if a.child:
        child(a)
        return 0
    t_end = time.time() + a.seconds
    runs = died = 0
    before = {p.name for p in CORPUS.glob("*.onnx")}
    WORK.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="aicc-fuzzrun-") as d:
        state = Path(d)
        stuck = 2 * max(a.timeout, COMPILE_TIMEOUT) + 60
        while time.time() < t_end - 1:
            cmd = [sys.executable, "-m", "tools.fuzz", "--child", "--dir", d,
                   "--seconds", str(t_end - time.time()), "--seed", str(a.seed),
                   "--timeout", str(a.timeout), "--memory-mb", str(a.memory_mb)]
            with open(state / "child.log", "w+") as out:
                p = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
                hung = False
                while p.poll() is None:
                    time.sleep(0.5)
                    cur = state / "current.bin"
                    if cur.exists() and time.time() - cur.stat().st_mtime > stuck:
                        p.kill()
                        p.wait()
                        hung = True
                    elif time.time() > t_end + stuck:
                        p.kill()
                        p.wait()
                out.seek(0)
                log = out.read()
            runs += _runs(log)
            sys.stderr.write("".join(ln + "\n" for ln in log.splitlines()
                                     if ln.startswith("fuzz: finding")))
            if (p.returncode != 0 or hung) and (state / "current.bin").exists():
                case = Case.decode((state / "current.bin").read_bytes())
                tail = " ".join(" ".join(log.strip().splitlines()[-3:]).split())[-300:]
                what = ("hang in native code (killed)" if hung else
                        "build timed out in native code" if "Timeout (" in log else
                        f"the fuzzing process died (exit {p.returncode})")
                f = Finding(f"{what}: {tail}", what.split(" (")[0])
                path = save_finding(case, f)
                print(f"fuzz: finding {path.name}: {f.what}", file=sys.stderr)
                died += 1
            if a.seed:
                a.seed += 1
            (state / "current.bin").unlink(missing_ok=True)
    new = sorted({p.name for p in CORPUS.glob("*.onnx")} - before)
    print(f"fuzz: {runs} cases in {a.seconds:.0f} s, {len(new)} new finding(s)"
          + (f" in {CORPUS.relative_to(ROOT)}: {', '.join(new)}" if new else ""))
    return 1 if new else 0


if __name__ == "__main__":
    sys.exit(main())
