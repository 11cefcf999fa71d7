"""Replays the ONNX backend node cases that pass (tests/conformance_passing.txt, written by
`make conformance`): any regression fails. Each case is compiled by aicc, run through the
bundle, and compared with the expected outputs shipped with the onnx package."""
from functools import lru_cache
from pathlib import Path

import pytest

from tests.pch import shared_build
from tools.conformance import _cases, run_case

ALLOW = Path(__file__).resolve().parent / "conformance_passing.txt"
NAMES = [n for n in ALLOW.read_text().split() if n] if ALLOW.is_file() else []


@lru_cache(maxsize=1)
def cases():
    return _cases()


def test_allowlist_present():
    assert len(NAMES) > 0


@pytest.mark.parametrize("name", NAMES)
def test_conformance_case(name, tmp_path, monkeypatch):
    shared_build(monkeypatch)            # the runtime object built once (tests/pch.py)
    status, reason = run_case(name, cases(), tmp_path)
    assert status == "pass", f"{name}: {status}: {reason}"
