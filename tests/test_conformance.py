"""Replays the ONNX backend node cases that pass (tests/conformance_passing.txt, written by
`make conformance`): any regression fails. Each case is compiled by aicc, run through the
bundle, and compared with the expected outputs shipped with the onnx package."""
import fcntl
import hashlib
import os
import pickle
import tempfile
from functools import lru_cache
from pathlib import Path

import pytest

from tests.pch import shared_build
from tools.conformance import _cases, run_case

ALLOW = Path(__file__).resolve().parent / "conformance_passing.txt"
NAMES = [n for n in ALLOW.read_text().split() if n] if ALLOW.is_file() else []


@lru_cache(maxsize=1)
def cases():
    """The onnx package's node cases. Collecting them runs every export function of onnx
    (7-12 s): the first process pickles them for the other pytest-xdist workers and later
    runs (keyed by the onnx package's version and place)."""
    import onnx
    key = hashlib.sha256(f"{onnx.__version__} {onnx.__file__}".encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / f"aicc-conf-cases-{key}.pkl"
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)          # the other workers wait for the first
        if path.is_file():
            return pickle.loads(path.read_bytes())
        res = _cases()
        tmp = path.with_suffix(f".{os.getpid()}")
        tmp.write_bytes(pickle.dumps(res, protocol=pickle.HIGHEST_PROTOCOL))
        os.replace(tmp, path)
        return res


def test_allowlist_present():
    assert len(NAMES) > 0


@pytest.mark.parametrize("name", NAMES)
def test_conformance_case(name, tmp_path, monkeypatch):
    shared_build(monkeypatch)            # the runtime object built once (tests/pch.py)
    status, reason = run_case(name, cases(), tmp_path)
    assert status == "pass", f"{name}: {status}: {reason}"
