"""Hostile names: tensor, node, graph names, doc strings and producer fields never reach C,
Makefiles or paths; only manifest.json (JSON-escaped) carries them. The bundle still builds
strict and runs, with outputs keyed by the original names."""
import json

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import aicc
from tests.oracle import STRICT_CFLAGS, reference

# every hostile string carries the marker ZQX, so a leak anywhere is found by one search
RAW = ["*/", "/*", "trail\\", "new\nline", "??/", "$(shell touch pwned)", '"dq"', "'sq'",
       "ünï¢ødé", "x" * 5000, " a b", "_a_b", "%s%n%x", "\t\r", "#define X", "`cmd`",
       "..\\..\\evil", "/../../etc/passwd", "a;b", "{}"]
HOSTILE = [f"ZQX{r}" for r in RAW] + ["int", "main", "model_run", "aicc_run", "f", "in0"]


def hostile_model():
    names = iter(HOSTILE * 3)

    def nm():
        return next(names)

    x_name, y_name, z_name = "ZQX*/ in", "ZQXout \n /*", "int"
    w = np.random.default_rng(0).normal(size=(4, 4)).astype(np.float32)
    t = [nm() for _ in range(6)]
    nodes = [helper.make_node("MatMul", [x_name, t[0]], [t[1]], name=nm(), doc_string=nm()),
             helper.make_node("Relu", [t[1]], [t[2]], name=nm()),
             helper.make_node("Reshape", [t[2], t[3]], [t[4]], name=nm()),
             helper.make_node("Tanh", [t[4]], [y_name], name=nm()),
             helper.make_node("Sigmoid", [t[2]], [z_name], name=nm())]
    inits = [numpy_helper.from_array(w, t[0]),
             numpy_helper.from_array(np.array([2, 8], np.int64), t[3])]
    g = helper.make_graph(nodes, nm(), [helper.make_tensor_value_info(x_name, 1, [4, 4])],
                          [helper.make_tensor_value_info(y_name, 1, [2, 8]),
                           helper.make_tensor_value_info(z_name, 1, [4, 4])],
                          initializer=inits, doc_string="*/ doc $(shell x)")
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name="evil */ producer\n", producer_version="$(x)")
    m.ir_version = 8
    m.doc_string = "/* model doc */"
    onnx.checker.check_model(m)
    return m, x_name


def test_hostile_names_stay_out_of_c(tmp_path):
    m, x_name = hostile_model()
    p = tmp_path / "m.onnx"
    onnx.save(m, str(p))
    out = aicc.build(p, out=tmp_path / "bundle", target="x86-avx2")
    for f in sorted(out.iterdir()):
        if f.name in ("manifest.json", "weights.bin"):
            continue
        text = f.read_text(errors="replace")
        assert "ZQX" not in text, f"a model string leaked into {f.name}"
        for marker in ("evil", "producer", "model doc", "pwned", "doc $(shell"):
            assert marker not in text, f"{marker!r} leaked into {f.name}"
    # identifiers are index based: the hostile names 'int', 'main', 'model_run' are not
    # declared as symbols (model_run is our own entry point, defined exactly once)
    src = (out / "model.c").read_text()
    assert src.count("int model_run(") == 1
    manifest = json.loads((out / "manifest.json").read_text())
    assert [i["name"] for i in manifest["inputs"]] == [x_name]
    assert [o["name"] for o in manifest["outputs"]] == ["ZQXout \n /*", "int"]
    x = np.random.default_rng(1).normal(size=(4, 4)).astype(np.float32)
    got = aicc.load(out, cflags=STRICT_CFLAGS).run({x_name: x})
    want = reference(m, {x_name: x})
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-6)


def test_hostile_name_in_error_is_one_line(tmp_path):
    import subprocess
    import sys
    n = helper.make_node("Frob", ["x"], ["y"], name="bad\nname */", domain="evil.domain")
    g = helper.make_graph([n], "g", [helper.make_tensor_value_info("x", 1, [2])],
                          [helper.make_tensor_value_info("y", 1, [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("evil.domain", 1)])
    p = tmp_path / "m.onnx"
    onnx.save(m, str(p))
    r = subprocess.run([sys.executable, "-m", "aicc.cli", "build", str(p), "-o",
                        str(tmp_path / "o")], capture_output=True, text=True)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "Frob" in r.stderr
    assert "bad\\nname" in r.stderr


@pytest.mark.parametrize("name", ["../escape", "/abs/path", "a/b"])
def test_output_folder_is_the_users_choice_only(tmp_path, name):
    """Model strings never pick paths: the bundle lands exactly in -o, files have fixed names."""
    m, x_name = hostile_model()
    m.graph.name = name
    p = tmp_path / "m.onnx"
    onnx.save(m, str(p))
    out = aicc.build(p, out=tmp_path / "b")
    assert sorted(f.name for f in out.iterdir()) == sorted(
        ["Makefile", "aicc_rt.c", "aicc_rt.h", "manifest.json", "model.c", "model.h",
         "model.mk", "model_weights.S", "weights.bin"])
    assert sorted(f.name for f in tmp_path.iterdir()) == ["b", "m.onnx"]
