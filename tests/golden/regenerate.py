"""Regenerate tests/golden/<case>/: model.onnx, inputs.npz, expected.npz (expected outputs
come from onnxruntime, never from aicc), model.c of the generic bundle, and model.<target>.c
of the SIMD targets that SIMD_TARGETS lists for the case (the generated code, reviewed as a
diff; building for an x86 target only generates C, so any machine can regenerate them).
Run: make golden   (or python -m tests.golden.regenerate [case ...])."""
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

# cases whose generated C is also committed for SIMD targets, as model.<target>.c
SIMD_TARGETS = {
    "tiny_cnn": ("x86-avx2", "x86-avx512"),
    "transformer_block": ("x86-avx2", "x86-avx512"),
}


def golden_c_name(target: str) -> str:
    """The committed file of ``target``'s generated C: model.c (generic), model.<target>.c."""
    return "model.c" if target == "generic" else f"model.{target}.c"


def regenerate(name: str) -> None:
    model, feeds = BUILDERS[name]()
    d = HERE / name
    d.mkdir(exist_ok=True)
    onnx.save(model, str(d / "model.onnx"))
    np.savez(d / "inputs.npz", **feeds)
    np.savez(d / "expected.npz", **reference(model, feeds))
    with tempfile.TemporaryDirectory() as tmp:
        for target in ("generic", *SIMD_TARGETS.get(name, ())):
            out = aicc.build(d / "model.onnx", target=target, out=Path(tmp) / target)
            shutil.copyfile(out / "model.c", d / golden_c_name(target))
    print(f"regenerated {d.relative_to(HERE.parent.parent)}")


if __name__ == "__main__":
    for n in sys.argv[1:] or sorted(BUILDERS):
        regenerate(n)
