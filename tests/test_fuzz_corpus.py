"""Every input that once was a fuzzer finding (tests/fuzz_corpus/, written by `make fuzz`)
is now built the way the fuzzer builds it (tools/fuzz/harness.py: the CLI in-process, the
output path the case names, a time and an address-space limit) and gives a bundle that
compiles or one AiccError, with nothing written outside the output folder."""
import re
from pathlib import Path

import pytest

from tools.fuzz import try_case

CORPUS = Path(__file__).resolve().parent / "fuzz_corpus"
CASES = sorted(CORPUS.glob("*.onnx")) if CORPUS.is_dir() else []


def _spec(path: Path) -> str:
    txt = path.with_suffix(".txt")
    m = re.search(r"^case: (.*)$", txt.read_text(), re.M) if txt.exists() else None
    return m.group(1) if m else ""


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_fuzz_regression(path, tmp_path):
    assert try_case(path.read_bytes(), tmp_path, _spec(path)) is None


def test_bytes_that_are_not_a_model(tmp_path):
    for data in (b"", b"\x00", b"\xff" * 100, b"onnx", bytes(range(256))):
        assert try_case(data, tmp_path) is None


@pytest.mark.parametrize("out", ["dot", "dotdot", "symlink", "dangling", "file", "nonempty",
                                 "modeldir", "parent", "empty", "nested", "earlier"])
def test_output_paths(tmp_path, out):
    """A valid model into each output path of the harness: refused or built, and the
    harness's checks hold (nothing written outside the output folder)."""
    model = (Path(__file__).parent / "golden" / "mlp" / "model.onnx").read_bytes()
    assert try_case(model, tmp_path, f"out={out}") is None
    assert try_case(model, tmp_path, f"out={out} weights-file") is None


def test_the_harness_reports_what_it_must(tmp_path, monkeypatch):
    """A build that raises something other than AiccError, runs past the time limit, takes
    more memory than the limit, or writes outside its sandbox is a finding."""
    import time

    import numpy as np

    import aicc.compiler
    model = (Path(__file__).parent / "golden" / "mlp" / "model.onnx").read_bytes()
    monkeypatch.setattr(aicc.compiler, "import_model", lambda *a, **k: {}["x"])
    assert re.match(r"KeyError: 'x' \(at compiler\.py:\d+\)", try_case(model, tmp_path))
    monkeypatch.setattr(aicc.compiler, "import_model", lambda *a, **k: time.sleep(5))
    assert try_case(model, tmp_path, timeout=0.5).startswith("timeout")
    monkeypatch.setattr(aicc.compiler, "import_model",
                        lambda *a, **k: open(tmp_path / "outside.txt", "w").close())
    assert try_case(model, tmp_path).startswith("file access outside the sandbox: opened")
    monkeypatch.setattr(aicc.compiler, "import_model", lambda *a, **k: np.ones(1 << 30))
    assert try_case(model, tmp_path, memory=1 << 30).startswith("MemoryError: Unable to allocate")
