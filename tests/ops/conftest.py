"""The op tests compile their x86 bundles with a precompiled <immintrin.h> (tests/pch.py):
same object code, ~0.17 s less per bundle."""
import pytest

from aicc.bundle import loader
from tests.pch import with_pch

_build = loader.build_bundle


def _build_with_pch(path, cflags=None, quiet=True):
    return _build(path, with_pch(path, cflags), quiet)


@pytest.fixture(autouse=True)
def _precompiled_immintrin(monkeypatch):
    monkeypatch.setattr(loader, "build_bundle", _build_with_pch)
