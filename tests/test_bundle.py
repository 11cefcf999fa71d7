"""The bundle contract: self-contained folder, strict C under gcc and clang, Makefile and
model.mk, separate weights, deterministic output, manifest facts, runtime status codes."""
import filecmp
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import aicc
from tests.oracle import STRICT_CFLAGS, make_model, reference, rng

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def model_file(tmp_path):
    r = rng(3)
    x = r.normal(size=(1, 16)).astype(np.float32)
    w = r.normal(size=(16,)).astype(np.float32)
    # three steps: `a` has two consumers, so fuse-binary-activation leaves Mul -> Tanh apart
    nodes = [helper.make_node("Mul", ["x", "w"], ["a"]), helper.make_node("Tanh", ["a"], ["b"]),
             helper.make_node("Add", ["b", "a"], ["y"])]
    p = tmp_path / "m.onnx"
    onnx.save(make_model(nodes, {"x": x}, ["y"], {"w": w}), p)
    return p, x


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_strict_build_gcc_clang(tmp_path, cc):
    if shutil.which(cc) is None:
        pytest.fail(f"{cc} not installed (make setup installs it)")
    p, _ = model_file(tmp_path)
    out = aicc.build(p, out=tmp_path / "b", target="x86-avx2")
    r = subprocess.run(["make", "-C", str(out), f"CC={cc}",
                        f"CFLAGS={STRICT_CFLAGS}"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert (out / "libmodel.a").is_file() and (out / "libmodel.so").is_file()
    subprocess.run(["make", "-C", str(out), "clean"], check=True, capture_output=True)
    assert not (out / "libmodel.a").exists()


@pytest.mark.parametrize("target", ["x86-avx2", "x86-avx512"])
@pytest.mark.parametrize("fixture", ["resnet8", "dscnn"])
def test_strict_clang_simd_kernels(tmp_path, fixture, target):
    """The SIMD kernels of whole models (Winograd, implicit / im2col convs, the fused residual,
    channel-last chains, vector pools, GEMMs) under clang's stricter warnings: an unused static
    helper (the NaN max of the vector pools registered for an AveragePool) failed -Werror.
    Compile only: no CPU feature needed."""
    if shutil.which("clang") is None:
        pytest.fail("clang not installed (make setup installs it)")
    from tests.models.fixtures import load_fixture
    out = aicc.build(load_fixture(fixture, "dynamo"), out=tmp_path / "b", target=target)
    r = subprocess.run(["make", "-C", str(out), "CC=clang", f"CFLAGS={STRICT_CFLAGS}",
                        "model.o"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_user_makefile_includes_model_mk(tmp_path):
    p, _ = model_file(tmp_path)
    out = aicc.build(p, out=tmp_path / "b")
    app = tmp_path / "app"
    shutil.copytree(os.path.join(ROOT, "examples", "c_app"), app)
    r = subprocess.run(["make", "-C", str(app), f"BUNDLE={out}", ],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([str(app / "app")], capture_output=True, text=True)
    assert r.returncode == 0 and "c_app: arena" in r.stdout, r.stdout + r.stderr


def test_weights_outside(tmp_path):
    p, x = model_file(tmp_path)
    out = aicc.build(p, out=tmp_path / "b", overrides={"weights": {"embed": False}})
    m = json.loads((out / "manifest.json").read_text())
    assert m["weights_embedded"] is False
    assert not (out / "model_weights.S").exists()
    assert "#define MODEL_WEIGHTS_EMBEDDED 0" in (out / "model.h").read_text()
    got = aicc.load(out, cflags=STRICT_CFLAGS).run({"x": x})
    want = reference(onnx.load(p), {"x": x})
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-5, atol=1e-6)


def test_deterministic_bundles(tmp_path):
    p, _ = model_file(tmp_path)
    code = ("import aicc, sys; aicc.build(sys.argv[1], out=sys.argv[2], target='x86-avx2')")
    for seed, d in (("1", "b1"), ("12345", "b2")):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        subprocess.run([sys.executable, "-c", code, str(p), str(tmp_path / d)], check=True, env=env)
    files = sorted(os.listdir(tmp_path / "b1"))
    assert files == sorted(os.listdir(tmp_path / "b2"))
    match, mismatch, errors = filecmp.cmpfiles(tmp_path / "b1", tmp_path / "b2", files, shallow=False)
    assert not mismatch and not errors
    text = (tmp_path / "b1" / "model.c").read_text()
    assert str(tmp_path) not in text


def test_manifest_and_header(tmp_path):
    p, _ = model_file(tmp_path)
    out = aicc.build(p, out=tmp_path / "b")
    m = json.loads((out / "manifest.json").read_text())
    for k in ("aicc_version", "model_sha256", "target", "pipeline", "inputs", "outputs",
              "arena_bytes", "weights_bytes", "steps", "memory"):
        assert k in m
    assert m["inputs"] == [{"name": "x", "dtype": "float32", "shape": [1, 16], "buckets": {}}]
    assert [s["op"] for s in m["steps"]] == ["Mul", "Tanh", "Add"]
    h = (out / "model.h").read_text()
    assert f"#define MODEL_ARENA_BYTES {m['arena_bytes']}u" in h
    assert 'extern "C"' in h
    for f in ("model.c", "model.h", "model_weights.S"):
        assert "do not edit" in (out / f).read_text().splitlines()[1]


def test_failed_build_leaves_nothing(tmp_path):
    p = tmp_path / "u.onnx"
    n = helper.make_node("Frob", ["x"], ["y"], domain="x.y")
    g = helper.make_graph([n], "g", [helper.make_tensor_value_info("x", 1, [2])],
                          [helper.make_tensor_value_info("y", 1, [2])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                                  helper.make_opsetid("x.y", 1)]), p)
    with pytest.raises(aicc.errors.UnsupportedError):
        aicc.build(p, out=tmp_path / "out")
    assert os.listdir(tmp_path) == ["u.onnx"]


def test_hook_sees_every_step(tmp_path):
    p, x = model_file(tmp_path)
    b = aicc.load(aicc.build(p, out=tmp_path / "b"))
    seen = []
    b.run({"x": x}, hook=lambda i, op, after: seen.append((i, op, after)))
    assert seen == [(0, "Mul", False), (0, "Mul", True), (1, "Tanh", False), (1, "Tanh", True),
                    (2, "Add", False), (2, "Add", True)]


def test_run_fast_path_and_fallbacks(tmp_path):
    # the common call (C-contiguous arrays of the right dtype and shape) skips most checks;
    # anything else takes the full path: converted or a clear error, same results
    path, x = model_file(tmp_path)
    b = aicc.load(aicc.build(path, out=tmp_path / "b"), cflags=STRICT_CFLAGS)
    spec = b.inputs[0]
    want = b.run({spec["name"]: x})
    first = next(iter(want.values()))
    again = b.run({spec["name"]: x})
    assert next(iter(again.values())) is not first          # fresh output arrays every call
    wide = np.zeros(spec["shape"][:-1] + [spec["shape"][-1] * 2], np.float32)
    wide[..., ::2] = x
    ro = x.copy()
    ro.setflags(write=False)
    for feed in (wide[..., ::2], ro):                         # strided view, read-only
        got = b.run({spec["name"]: feed})
        for k in want:
            np.testing.assert_array_equal(got[k], want[k])
    with pytest.raises(aicc.errors.InputError, match="dtype float64"):
        b.run({spec["name"]: x.astype(np.float64)})
    with pytest.raises(aicc.errors.InputError, match="unknown input"):
        b.run({"nope": x})


def test_run_fast_path_first_call_and_lifetime(tmp_path):
    """A wrong input name on the first call (nothing cached yet) is a clear error; after
    fast calls a hook still runs (the full path); the bound fast path keeps no cycle, so the
    bundle goes away with its last reference."""
    import gc
    import weakref
    path, x = model_file(tmp_path)
    b = aicc.load(aicc.build(path, out=tmp_path / "b"), cflags=STRICT_CFLAGS)
    with pytest.raises(aicc.errors.InputError, match="unknown input"):
        b.run({"nope": x})
    name = b.inputs[0]["name"]
    want = b.run({name: x})
    seen = []
    got = b.run({name: x}, hook=lambda i, op, after: seen.append(i))
    assert seen and all(np.array_equal(got[k], want[k]) for k in want)
    ref = weakref.ref(b)
    gc.disable()
    try:
        del b
        assert ref() is None
    finally:
        gc.enable()


def test_run_output_arrays_given_again_only_when_dropped(tmp_path):
    """The fast path gives an output array again when nothing else holds it (fastpath._FREE):
    arrays the caller keeps, directly, through a view or through a memoryview, keep their
    values through later calls; each result matches numpy's for its own input."""
    path, x = model_file(tmp_path)
    b = aicc.load(aicc.build(path, out=tmp_path / "b"), cflags=STRICT_CFLAGS)
    w = numpy_helper.to_array(onnx.load(path).graph.initializer[0])

    def ref(v):
        a = v * w
        return np.tanh(a) + a
    name = b.inputs[0]["name"]
    xs = [x * np.float32(s) for s in (1.0, -2.0, 0.5, 3.0, -0.25)]
    kept = b.run({name: xs[0]})["y"]                    # held directly
    view = b.run({name: xs[1]})["y"][:, ::2]            # only a view of it
    mv = memoryview(b.run({name: xs[2]})["y"])          # only a memoryview
    ids = set()
    for v in xs[3:] * 3:                                # dropped at once: given again
        got = b.run({name: v})["y"]
        np.testing.assert_allclose(got, ref(v), rtol=1e-5, atol=1e-6)
        ids.add(id(got))
        del got
    assert len(ids) == 1
    np.testing.assert_allclose(kept, ref(xs[0]), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(view, ref(xs[1])[:, ::2], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(mv), ref(xs[2]), rtol=1e-5, atol=1e-6)
    a, c = b.run({name: xs[3]}), b.run({name: xs[4]})   # both results held: two arrays
    assert a["y"] is not c["y"]
    np.testing.assert_allclose(a["y"], ref(xs[3]), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c["y"], ref(xs[4]), rtol=1e-5, atol=1e-6)


def test_run_same_input_array_again(tmp_path):
    """The fast path keeps the buffer of the last array given for each input: the same
    array object, written in place between calls, gives the new values' results (checked
    against a fresh copy), and one reshaped or retyped in place takes the checked path."""
    path, x = model_file(tmp_path)
    b = aicc.load(aicc.build(path, out=tmp_path / "b"), cflags=STRICT_CFLAGS)
    name = b.inputs[0]["name"]
    buf = x.copy()
    outs = []
    for scale in (1.0, -2.5, 0.25):
        buf[...] = x * np.float32(scale)
        got = b.run({name: buf})
        want = b.run({name: buf.copy()})
        for k in want:
            np.testing.assert_array_equal(got[k], want[k])
        outs.append(got)
    a, c = next(iter(outs[0].values())), next(iter(outs[1].values()))
    assert not np.array_equal(a, c)             # the results follow the new values
    flat = buf.reshape(-1)
    buf.shape = (flat.size,)                    # same object, other shape: a clear error
    with pytest.raises(aicc.errors.InputError, match="shape"):
        b.run({name: buf})
    buf.shape = x.shape
    buf.dtype = np.int32                        # same object, other dtype
    with pytest.raises(aicc.errors.InputError, match="dtype int32"):
        b.run({name: buf})
    buf.dtype = np.float32
    got = b.run({name: buf})
    for k in got:
        np.testing.assert_array_equal(got[k], outs[-1][k])
