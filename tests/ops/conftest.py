"""The op tests compile their bundles with a precompiled <immintrin.h> (x86) and a runtime
object built once per run (tests/pch.py): same object code, less time per bundle."""
import pytest

from tests.pch import shared_build


@pytest.fixture(autouse=True)
def _shared_build(monkeypatch):
    shared_build(monkeypatch)
