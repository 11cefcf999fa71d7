"""Golden regression: committed models, inputs and onnxruntime outputs (tests/golden/, made
by `make golden`). Each compiles for every target and must match; the generated C must equal
every committed model.c (generic) and model.<target>.c (the SIMD targets that
tests/golden/regenerate.py's SIMD_TARGETS lists), so a codegen change shows up as a diff."""
from pathlib import Path

import numpy as np
import pytest

import aicc
from aicc.targets import runnable_targets
from tests.golden.regenerate import SIMD_TARGETS, golden_c_name
from tests.oracle import STRICT_CFLAGS, assert_close

GOLDEN = Path(__file__).resolve().parent / "golden"
CASES = sorted(p.name for p in GOLDEN.iterdir() if (p / "model.onnx").is_file())
# (case, target) of every committed generated C: model.c is generic, model.<target>.c a target
GENERATED_C = [(case, f.name[len("model."):-len(".c")] or "generic")
               for case in CASES for f in sorted((GOLDEN / case).glob("model*.c"))]


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


def test_simd_golden_c_committed():
    assert {(c, t) for c, t in GENERATED_C if t != "generic"} == {
        (c, t) for c, ts in SIMD_TARGETS.items() for t in ts}


@pytest.mark.parametrize("case,target", GENERATED_C)
def test_golden_generated_c(case, target, tmp_path):
    d = GOLDEN / case
    out = aicc.build(d / "model.onnx", target=target, out=tmp_path / "b")
    assert (out / "model.c").read_bytes() == (d / golden_c_name(target)).read_bytes(), (
        f"generated C for {case} on {target} changed; review and run `make golden` to accept")
