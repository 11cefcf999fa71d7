"""An ISA is its description: a copy of the avx2 description registered under another name
(isa/registry.ISAS) and a target listing it generate the same C as x86-avx2, up to helper
names (they carry the ISA's name or a hash of it) and one repeated #include line (the AVX
helpers shared by every x86 ISA keep their own key). Any branch on an ISA's name left in a
kernel family would make the two differ."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MODELS = ["tiny_cnn", "transformer_block", "seg_head", "mlp"]

SCRIPT = r"""
import dataclasses, re, shutil, sys
from pathlib import Path
import aicc.kernels.isa.registry as reg
from aicc.kernels.isa import avx2
reg.ISAS["avx2x"] = dataclasses.replace(avx2.ISA, name="avx2x")
import aicc.targets as targets
tdir = Path(sys.argv[2]) / "targets"
tdir.mkdir()
for f in targets.TARGETS_DIR.glob("*.yaml"):
    shutil.copy(f, tdir / f.name)
y = (tdir / "x86-avx2.yaml").read_text()
assert "kernels: [avx2, generic]" in y
(tdir / "x86-avx2x.yaml").write_text(y.replace("name: x86-avx2", "name: x86-avx2x")
                                      .replace("kernels: [avx2, generic]", "kernels: [avx2x, generic]"))
targets.TARGETS_DIR = tdir
import aicc
out = Path(sys.argv[2])
for t in ("x86-avx2", "x86-avx2x"):
    aicc.build(sys.argv[1], target=t, out=out / t)
"""


def _blocks(text: str) -> list:
    text = re.sub(r"\baicc_[A-Za-z0-9_]+", "H", text.replace("avx2x", "avx2")
                  .replace("AVX2X", "AVX2"))
    text = re.sub(r"\{([-0-9, \n]+)\}", lambda m: "{" + " ".join(m.group(1).split()) + "}", text)
    return sorted(set(b for b in text.split("\n\n")))


@pytest.mark.parametrize("model", MODELS)
def test_renamed_avx2_description_generates_the_same_kernels(tmp_path, model):
    onnx_path = ROOT / "tests" / "golden" / model / "model.onnx"
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(onnx_path), str(tmp_path)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    a = (tmp_path / "x86-avx2" / "model.c").read_text()
    b = (tmp_path / "x86-avx2x" / "model.c").read_text()
    assert "avx2x" in b and "avx2x" not in a
    assert (tmp_path / "x86-avx2" / "weights.bin").read_bytes() == \
        (tmp_path / "x86-avx2x" / "weights.bin").read_bytes()
    assert _blocks(a) == _blocks(b)
    extra = [ln for ln in b.splitlines() if ln.startswith("#include")]
    assert len(extra) - len([ln for ln in a.splitlines() if ln.startswith("#include")]) <= 1
