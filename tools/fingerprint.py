"""Fingerprints of the generated bundles: the benchmark models (benchmarks/models.py) built on
every target, one line per model, target and file with its sha256. A refactoring that must not
change behaviour keeps every line; diff two runs to see which bundles moved.

    python -m tools.fingerprint -o before.txt           # all models x all targets
    python -m tools.fingerprint -o after.txt -t x86-avx2 -k ResNet
    diff before.txt after.txt

model.c lines also get a second hash with the generated helper names masked (helper names are
the one difference a rename may bring), so a diff says "names only" where that is all.
Builds run in worker processes (two by default), without compiling the C.
"""
from __future__ import annotations

import argparse
import hashlib
import re
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS = ("generic", "x86-avx2", "x86-avx512", "x86-avx512-vnni", "x86-avx512-amx",
           "arm-neon", "arm-neon-dot", "cortex-m4")
FILES = ("model.c", "model.h", "weights.bin", "manifest.json")
HELPER = re.compile(r"\baicc_[A-Za-z0-9_]+")


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()[:16]


def _one(job):
    label, path, target, work = job
    sys.path.insert(0, str(ROOT))
    import json

    import aicc
    out = Path(work) / f"{abs(hash((label, target)))}"
    try:
        aicc.build(path, out=out, target=target)
    except Exception as e:  # noqa: BLE001
        return [f"{label} | {target} | error | {type(e).__name__}: {str(e)[:120]}"]
    lines = []
    for f in FILES:
        data = (out / f).read_bytes()
        if f == "manifest.json":           # the aicc version and absolute paths aside
            m = json.loads(data)
            m.pop("aicc_version", None)
            data = json.dumps(m, sort_keys=True).encode()
        extra = ""
        if f == "model.c":
            masked = HELPER.sub("aicc_H", data.decode())
            extra = f" | names masked {_sha(masked.encode())}"
        lines.append(f"{label} | {target} | {f} | {_sha(data)}{extra}")
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("-t", "--target", action="append", help="only these targets")
    ap.add_argument("-k", help="only models whose label contains this")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from benchmarks.models import all_models
    with tempfile.TemporaryDirectory(prefix="aicc-fp-") as work:
        models = [(lbl, str(p)) for lbl, p in all_models(Path(work) / "models")
                  if not a.k or a.k in lbl]
        jobs = [(lbl, p, t, work) for lbl, p in models for t in (a.target or TARGETS)]
        with ProcessPoolExecutor(a.jobs) as ex:
            results = list(ex.map(_one, jobs))
    lines = [ln for r in results for ln in r]
    Path(a.out).write_text("\n".join(lines) + "\n")
    print(f"{len(jobs)} builds, {len(lines)} lines -> {a.out}")


if __name__ == "__main__":
    main()
