"""Checked mode (memory: {checked: true}): redzones after every arena buffer and sums of the
bytes each step must not touch; a stray write fails the run and names the step."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import aicc
from aicc.errors import AiccError

from .oracle import STRICT_CFLAGS, reference

GOLDEN = Path(__file__).parent / "golden" / "tiny_cnn"


def _bundle(tmp_path, name="b"):
    out = aicc.build(GOLDEN / "model.onnx", out=tmp_path / name,
                     overrides={"memory": {"checked": True}})
    return out, json.loads((out / "manifest.json").read_text())


def _feeds():
    with np.load(GOLDEN / "inputs.npz") as z:
        return {k: z[k] for k in z.files}


def test_checked_bundle_runs_clean_and_matches(tmp_path):
    out, m = _bundle(tmp_path)
    assert m["memory"]["checked"] and m["memory"]["redzone"] == 64
    assert "-DAICC_CHECKED" in (out / "model.mk").read_text()
    import onnx
    want = reference(onnx.load(str(GOLDEN / "model.onnx")), _feeds())
    got = aicc.load(out, cflags=STRICT_CFLAGS).run(_feeds())
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-4, atol=1e-5)
    # the plain bundle: no check tables, no redzones
    plain = aicc.build(GOLDEN / "model.onnx", out=tmp_path / "plain")
    assert "check_bufs" not in (plain / "model.c").read_text()


def _inject(out: Path, step: int, code: str) -> None:
    """Add a line at the end of step `step`'s function in model.c."""
    src = (out / "model.c").read_text()
    m = re.search(rf"static void step{step}_\w+\(const aicc_frame \*f\)\n\{{\n", src)
    end = src.index("\n}\n", m.end())
    (out / "model.c").write_text(src[:end] + "\n    " + code + src[end:])


@pytest.mark.parametrize("kind", ["overflow", "clobber"])
def test_stray_write_names_the_step(tmp_path, kind):
    out, m = _bundle(tmp_path)
    step = 2
    st = m["steps"][step]
    buf = next(b for b in m["memory"]["buffers"] if b["tensor"] == st["outputs"][0])
    if kind == "overflow":        # one element past its output: into the redzone
        _inject(out, step, f"out0[{buf['size'] // 4}] = 1.0f;")
        msg = f"step {step} ({st['op']}, node {st['node']!r}) wrote outside its buffers"
    else:                         # into its input, a live buffer it does not own
        _inject(out, step, "((float *)in0)[3] += 1.0f;")
        msg = f"step {step} ({st['op']}, node {st['node']!r}) changed a live buffer"
    with pytest.raises(AiccError, match=re.escape(msg)):
        aicc.load(out, cflags=STRICT_CFLAGS).run(_feeds())


def test_unchecked_bundle_does_not_notice(tmp_path):
    # the same injected write in a plain (unchecked) bundle goes unnoticed: checked mode is
    # what catches it
    out = aicc.build(GOLDEN / "model.onnx", out=tmp_path / "plain")
    _inject(out, 2, "((float *)in0)[3] += 1.0f;")
    aicc.load(out, cflags=STRICT_CFLAGS).run(_feeds())
