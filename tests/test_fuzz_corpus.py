"""Every input that once crashed the fuzzer (tests/fuzz_corpus/, written by `make fuzz`) now
gives a bundle that compiles or one typed error, and never a half-written output folder."""
from pathlib import Path

import pytest

from tools.fuzz import try_case

CORPUS = Path(__file__).resolve().parent / "fuzz_corpus"
CASES = sorted(CORPUS.glob("*.onnx")) if CORPUS.is_dir() else []


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_fuzz_regression(path, tmp_path):
    assert try_case(path.read_bytes(), tmp_path) is None


def test_bytes_that_are_not_a_model(tmp_path):
    for data in (b"", b"\x00", b"\xff" * 100, b"onnx", bytes(range(256))):
        assert try_case(data, tmp_path) is None
