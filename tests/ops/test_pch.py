"""The precompiled intrinsics header the op tests build x86 and arm-neon bundles with
(tests/pch.py) gives the same object code as the bundle's own Makefile, and gcc really uses it
(else the op tests only lose the time it saves); so does the runtime object they share."""
import json
import subprocess

import numpy as np
import pytest
from onnx import helper

import aicc
from aicc.runner import open_bundle
from aicc.targets import load_target
from tests.oracle import PLAIN_CFLAGS, assert_close, make_model, reference, rng
from tests.ops.test_conv_simd import TARGETS
from tests.pch import prebuilt_rt, with_pch

# the SIMD targets with a precompiled header: x86 on this host, arm-neon under its emulator
PCH_TARGETS = TARGETS + [t for t in ("arm-neon",) if not load_target(t).missing_tools()]


def _compile(b, extra, out, tc):
    cmd = [tc["cc"], *tc["cflags"], *extra.split(), "-fPIC", f"-I{b}", "-H", "-c",
           str(b / "model.c"), "-o", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return out.read_bytes(), r.stderr


@pytest.mark.parametrize("target", PCH_TARGETS)
def test_pch_same_objects(target, tmp_path):
    r = rng(3)
    x = r.normal(size=(1, 8, 9, 11)).astype(np.float32)
    w = r.normal(size=(16, 8, 3, 3)).astype(np.float32)
    m = make_model([helper.make_node("Conv", ["x", "w"], ["t"], pads=[1, 1, 1, 1]),
                    helper.make_node("Relu", ["t"], ["y"])], {"x": x}, ["y"], {"w": w})
    path = tmp_path / "m.onnx"
    path.write_bytes(m.SerializeToString())
    b = aicc.build(path, target=target, out=tmp_path / "b")
    tc = json.loads((b / "manifest.json").read_text())["toolchain"]
    fast = with_pch(b, PLAIN_CFLAGS)         # the op tests' flags (make test)
    assert fast != PLAIN_CFLAGS and "-include" in fast
    plain, _ = _compile(b, PLAIN_CFLAGS, tmp_path / "plain.o", tc)
    pre, log = _compile(b, fast, tmp_path / "pch.o", tc)
    assert any(ln.startswith("!") and ln.endswith(".gch") for ln in log.splitlines()), log[:2000]
    assert plain == pre
    # and the bundle built through the op tests' loader runs correctly
    assert_close(open_bundle(b, cflags=PLAIN_CFLAGS).run({"x": x}), reference(m, {"x": x}))



@pytest.mark.parametrize("target", ["generic"] + PCH_TARGETS)
def test_prebuilt_rt_is_the_bundles_own(target, tmp_path):
    """A later bundle gets the first one's aicc_rt.o, make takes it as up to date, and it is
    byte for byte what the bundle's own Makefile builds."""
    r = rng(4)
    x = r.normal(size=(2, 5)).astype(np.float32)
    m = make_model([helper.make_node("Sigmoid", ["x"], ["y"])], {"x": x}, ["y"])
    path = tmp_path / "m.onnx"
    path.write_bytes(m.SerializeToString())
    # a flag of this test's own: the cache starts empty for it
    flags = f"{PLAIN_CFLAGS} -DAICC_TEST_RT_{target.replace('-', '_')}_{tmp_path.name}"
    first, second, fresh = (aicc.build(path, target=target, out=tmp_path / d) for d in "abc")
    for b in (first, second):
        prebuilt_rt(b, with_pch(b, flags))
    make = ["make", "--no-print-directory", "libmodel.so", f"CFLAGS={with_pch(second, flags)}"]
    plan = subprocess.run([*make, "-n", "-C", str(second)], capture_output=True, text=True)
    assert plan.returncode == 0 and "model.c" in plan.stdout, plan.stderr
    assert "aicc_rt.c" not in plan.stdout                 # not rebuilt
    assert (second / "aicc_rt.o").read_bytes() == (first / "aicc_rt.o").read_bytes()
    built = subprocess.run([*make, "-C", str(fresh)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    assert (fresh / "aicc_rt.o").read_bytes() == (second / "aicc_rt.o").read_bytes()
    got = open_bundle(second, cflags=flags).run({"x": x})   # through the op tests' loader
    assert_close(got, reference(m, {"x": x}))
