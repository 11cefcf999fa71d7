"""Golden regression: committed models, inputs and onnxruntime outputs (tests/golden/, made
by `make golden`). Each compiles for every target and must match; the generated C of the
generic target must equal the committed model.c (a codegen change shows up as a diff)."""
from pathlib import Path

import numpy as np
import pytest

import aicc
from aicc.targets import runnable_targets
from tests.oracle import STRICT_CFLAGS, assert_close

GOLDEN = Path(__file__).resolve().parent / "golden"
CASES = sorted(p.name for p in GOLDEN.iterdir() if (p / "model.onnx").is_file())


def _npz(p):
    with np.load(p) as z:
        return {k: z[k] for k in z.files}


def test_cases_exist():
    assert len(CASES) >= 3


@pytest.mark.parametrize("target", runnable_targets())
@pytest.mark.parametrize("case", CASES)
def test_golden_outputs(case, target, tmp_path):
    d = GOLDEN / case
    out = aicc.build(d / "model.onnx", target=target, out=tmp_path / "b")
    got = aicc.load(out, cflags=STRICT_CFLAGS).run(_npz(d / "inputs.npz"))
    assert_close(got, _npz(d / "expected.npz"), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("case", CASES)
def test_golden_generated_c(case, tmp_path):
    d = GOLDEN / case
    out = aicc.build(d / "model.onnx", target="generic", out=tmp_path / "b")
    assert (out / "model.c").read_text() == (d / "model.c").read_text(), (
        f"generated C for {case} changed; review and run `make golden` to accept")
