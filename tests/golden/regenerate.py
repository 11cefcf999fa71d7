"""Regenerate tests/golden/<case>/: model.onnx, inputs.npz, expected.npz (expected outputs
come from onnxruntime, never from aicc), and model.c of the generic bundle (the generated
code, reviewed as a diff). Run: make golden   (or python -m tests.golden.regenerate)."""
from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx

import aicc
from tests.golden.builders import BUILDERS
from tests.oracle import reference

HERE = Path(__file__).resolve().parent


def regenerate(name: str) -> None:
    model, feeds = BUILDERS[name]()
    d = HERE / name
    d.mkdir(exist_ok=True)
    onnx.save(model, str(d / "model.onnx"))
    np.savez(d / "inputs.npz", **feeds)
    np.savez(d / "expected.npz", **reference(model, feeds))
    with tempfile.TemporaryDirectory() as tmp:
        out = aicc.build(d / "model.onnx", target="generic", out=Path(tmp) / "b")
        shutil.copyfile(out / "model.c", d / "model.c")
    print(f"regenerated {d.relative_to(HERE.parent.parent)}")


if __name__ == "__main__":
    for n in sys.argv[1:] or sorted(BUILDERS):
        regenerate(n)
