"""aicc.isa_mask: onnxruntime restricted to an older ISA (CPUID faulting) for the benchmarks.
Each case runs in its own process: the restriction holds for the rest of a process."""
import json
import platform
import subprocess
import sys

import numpy as np
import pytest

from aicc.isa_mask import LEVELS, quads
from tests.test_bench_overrides import conv_model

ON_X86_LINUX = sys.platform == "linux" and platform.machine() == "x86_64"

CHILD = r"""
import json, sys
import numpy as np
from aicc.errors import AiccError
from aicc.isa_mask import cpuid, restrict, traps
level, model, xfile = sys.argv[1:4]
before = {f"{l}.{s}": cpuid(l, s) for l, s in ((1, 0), (7, 0), (7, 1), (0xD, 0))}
try:
    restrict(level)
except AiccError as e:
    print(json.dumps({"error": str(e)})); sys.exit(0)
after = {f"{l}.{s}": cpuid(l, s) for l, s in ((1, 0), (7, 0), (7, 1), (0xD, 0))}
t0 = traps()
import onnxruntime as ort
so = ort.SessionOptions(); so.intra_op_num_threads = 1
sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
y = sess.run(None, {"x": np.load(xfile)})[0]
np.save(xfile + ".y.npy", y)
try:
    restrict("avx512" if level != "avx512" else "avx2")
    late = None
except AiccError as e:
    late = str(e)
print(json.dumps({"before": before, "after": after, "late": late, "ort_traps": traps() - t0}))
"""


def child(level, model, xfile):
    out = subprocess.run([sys.executable, "-c", CHILD, level, str(model), str(xfile)],
                         capture_output=True, text=True, check=True)
    res = json.loads(out.stdout.strip().splitlines()[-1])
    if "error" in res and "CPUID faulting" in res["error"]:
        pytest.skip(res["error"])
    return res


@pytest.mark.skipif(not ON_X86_LINUX, reason="CPUID faulting is Linux x86-64 only")
@pytest.mark.parametrize("level", sorted(LEVELS))
def test_restricted_cpuid_and_onnxruntime(level, tmp_path):
    model, x = conv_model(tmp_path)
    xfile = tmp_path / "x.npy"
    np.save(xfile, x)
    res = child(level, model, xfile)
    assert "error" not in res, res
    masks = {(lf, sb, rg): m for lf, sb, rg, m in quads(level)}
    for key, regs in res["before"].items():
        lf, sb = (int(v) for v in key.split("."))
        for rg in range(4):
            m = masks.get((lf, sb, rg), 0)
            # exactly the level's bits are cleared; everything else reads as before
            assert res["after"][key][rg] == regs[rg] & ~m, (key, rg)
    b7, a7 = res["before"]["7.0"][1], res["after"]["7.0"][1]
    assert a7 & (1 << 5) == b7 & (1 << 5)          # AVX2 stays
    assert res["after"]["1.0"][2] == res["before"]["1.0"][2]   # FMA, AVX, SSE4 stay
    if level == "avx2":
        assert not a7 & (1 << 16)                   # no AVX512F
    else:
        assert a7 & (1 << 16) == b7 & (1 << 16)
        assert not res["after"]["7.0"][3] & (1 << 24)   # no AMX-TILE
    # onnxruntime read the CPU's features through the handler
    assert res["ort_traps"] > 0
    # onnxruntime on the older kernels gives the same results
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    want = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    np.testing.assert_allclose(np.load(str(xfile) + ".y.npy"), want, rtol=1e-5, atol=1e-6)
    # another level later in the same process is refused, with the reason
    assert res["late"] and "already restricted" in res["late"]


def test_refused_once_onnxruntime_is_loaded(tmp_path):
    code = ("import onnxruntime\nfrom aicc.isa_mask import restrict\n"
            "from aicc.errors import AiccError\n"
            "try:\n    restrict('avx2')\nexcept AiccError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "before onnxruntime is loaded" in out.stdout


@pytest.mark.skipif(not ON_X86_LINUX, reason="CPUID faulting is Linux x86-64 only")
def test_cli_bench_ort_isa(tmp_path):
    import aicc
    model, _ = conv_model(tmp_path)
    out = aicc.build(model, target="generic", out=tmp_path / "b")
    r = subprocess.run([sys.executable, "-m", "aicc.cli", "bench", str(out), "--model", str(model),
                        "--seconds", "0.05", "--ort-isa", "avx2", "--json"],
                       capture_output=True, text=True)
    if "CPUID faulting" in r.stderr + r.stdout:
        pytest.skip("no CPUID faulting here")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["ort_isa"] == "avx2" and res["onnxruntime"]["runs"] >= 10
