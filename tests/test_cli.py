"""The CLI contract: exit codes, one-line errors, no half-written output."""
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import helper

from tests.oracle import make_model, rng


def aicc(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "aicc", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd)


def small_model(tmp_path, op="Add", name="m.onnx"):
    x = rng(0).normal(size=(2, 5)).astype(np.float32)
    b = rng(1).normal(size=(5,)).astype(np.float32)
    nodes = [helper.make_node(op, ["x", "b"], ["t"]), helper.make_node("Relu", ["t"], ["y"])]
    p = tmp_path / name
    onnx.save(make_model(nodes, {"x": x}, ["y"], {"b": b}), p)
    return p, x


def test_build_run_validate(tmp_path):
    m, x = small_model(tmp_path)
    r = aicc("build", m, "-t", "generic", "-o", tmp_path / "b")
    assert r.returncode == 0, r.stderr
    assert "built" in r.stdout
    np.savez(tmp_path / "in.npz", x=x)
    r = aicc("run", tmp_path / "b", "-i", tmp_path / "in.npz", "-o", tmp_path / "out.npz")
    assert r.returncode == 0, r.stderr
    with np.load(tmp_path / "out.npz") as z:
        assert list(z.files) == ["y"]
        b = onnx.numpy_helper.to_array(onnx.load(m).graph.initializer[0])
        np.testing.assert_allclose(z["y"], np.maximum(x + b, 0), rtol=1e-6)
    r = aicc("validate", m, tmp_path / "b")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "match" in r.stdout


def test_validate_mismatch_exit_1(tmp_path):
    m_add, _ = small_model(tmp_path, "Add", "add.onnx")
    m_sub, _ = small_model(tmp_path, "Sub", "sub.onnx")
    assert aicc("build", m_sub, "-o", tmp_path / "b").returncode == 0
    r = aicc("validate", m_add, tmp_path / "b")
    assert r.returncode == 1
    assert "FAIL" in r.stdout and "differ" in r.stderr


def test_not_onnx_exit_2_no_traceback_no_output(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00\x01 definitely not protobuf \xff" * 10)
    r = aicc("build", bad, "-o", tmp_path / "out")
    assert r.returncode == 2
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert "not an ONNX model" in r.stderr
    assert not (tmp_path / "out").exists()


def test_missing_file_exit_2(tmp_path):
    r = aicc("build", tmp_path / "nope.onnx")
    assert r.returncode == 2 and "no such file" in r.stderr


def test_checker_failure_exit_2(tmp_path):
    node = helper.make_node("Relu", ["x"], ["y"])
    g = helper.make_graph([node], "g", [], [helper.make_tensor_value_info("y", 1, [2])])
    p = tmp_path / "bad.onnx"
    onnx.save(helper.make_model(g), p)   # 'x' is never defined
    r = aicc("build", p, "-o", tmp_path / "out")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert not (tmp_path / "out").exists()


def _save_example_domain(tmp_path, nodes, inputs, outputs, inits=()):
    """Save a graph that uses the com.example domain (ops aicc does not know) as u.onnx."""
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("com.example", 1)])
    p = tmp_path / "u.onnx"
    onnx.save(m, p)
    return p


def test_every_unsupported_op_listed_at_once(tmp_path):
    x = np.zeros((4, 4), np.float32)
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="ok_node"),
             helper.make_node("Frobnicate", ["a"], ["b"], name="frob1", domain="com.example"),
             helper.make_node("Frobnicate", ["b"], ["c"], name="frob2", domain="com.example"),
             helper.make_node("Zorch", ["c"], ["y"], name="zorch1", domain="com.example")]
    p = _save_example_domain(tmp_path, nodes, [helper.make_tensor_value_info("x", 1, x.shape)],
                             [helper.make_tensor_value_info("y", 1, x.shape)])
    r = aicc("build", p, "-o", tmp_path / "out")
    assert r.returncode == 2, r.stderr
    for s in ("Frobnicate", "Zorch", "frob1", "frob2", "zorch1"):
        assert s in r.stderr
    assert not (tmp_path / "out").exists()
    r = aicc("inspect", p)
    assert r.returncode == 2 and "UNSUPPORTED" in r.stdout and "zorch1" in r.stdout


def test_op_after_unsupported_op_says_why(tmp_path):
    """A supported op whose input comes from an unknown op has no shape: the error says so
    (it was "check failed: 'c'"), next to the unknown op."""
    nodes = [helper.make_node("Frobnicate", ["x"], ["b"], name="frob", domain="com.example"),
             helper.make_node("QuantizeLinear", ["b", "s", "z"], ["y"], name="q")]
    p = _save_example_domain(tmp_path, nodes, [helper.make_tensor_value_info("x", 1, [4])],
                             [helper.make_tensor_value_info("y", onnx.TensorProto.UINT8, [4])],
                             [helper.make_tensor("s", 1, [], [0.5]),
                              helper.make_tensor("z", onnx.TensorProto.UINT8, [], [3])])
    r = aicc("build", p, "-o", tmp_path / "out")
    assert r.returncode == 2, r.stderr
    assert "com.example.Frobnicate (no implementation" in r.stderr
    assert "QuantizeLinear (no type / shape for 'b'" in r.stderr, r.stderr


def test_run_wrong_shape_and_missing_input(tmp_path):
    m, x = small_model(tmp_path)
    assert aicc("build", m, "-o", tmp_path / "b").returncode == 0
    np.savez(tmp_path / "bad.npz", x=np.zeros((3, 5), np.float32))
    r = aicc("run", tmp_path / "b", "-i", tmp_path / "bad.npz", "-o", tmp_path / "o.npz")
    assert r.returncode == 2 and "input 'x': shape [3, 5], expected [2, 5]" in r.stderr
    np.savez(tmp_path / "none.npz", z=x)
    r = aicc("run", tmp_path / "b", "-i", tmp_path / "none.npz", "-o", tmp_path / "o.npz")
    assert r.returncode == 2 and "missing input(s) 'x'" in r.stderr
    np.savez(tmp_path / "dt.npz", x=x.astype(np.float64))
    r = aicc("run", tmp_path / "b", "-i", tmp_path / "dt.npz", "-o", tmp_path / "o.npz")
    assert r.returncode == 2 and "dtype float64, expected float32" in r.stderr


@pytest.mark.parametrize("args,msg", [
    (["-t", "no-such-target"], "unknown target"),
    (["--input-shape", "x=a,b"], "integers"),
    (["--input-shape", "nope=2,5"], "unknown input"),
    (["--buckets", "seq=1,2"], "unknown dynamic dim"),
])
def test_bad_options_exit_2(tmp_path, args, msg):
    m, _ = small_model(tmp_path)
    r = aicc("build", m, "-o", tmp_path / "out", *args)
    assert r.returncode == 2 and msg in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_bad_config(tmp_path):
    m, _ = small_model(tmp_path)
    cfg = tmp_path / "c.yaml"
    cfg.write_text("pipeline: [fold-constants, no-such-pass]\n")
    r = aicc("build", m, "-o", tmp_path / "out", "-c", cfg)
    assert r.returncode == 2 and "unknown pass 'no-such-pass'" in r.stderr


def test_golden_record_and_check(tmp_path):
    m, _ = small_model(tmp_path)
    assert aicc("build", m, "-o", tmp_path / "b").returncode == 0
    r = aicc("golden", "record", m, tmp_path / "b", tmp_path / "g")
    assert r.returncode == 0, r.stderr
    assert aicc("golden", "check", tmp_path / "b", tmp_path / "g").returncode == 0
    # a changed result (here: a different model compiled into the bundle) is caught
    m2, _ = small_model(tmp_path, "Sub", "sub.onnx")
    assert aicc("build", m2, "-o", tmp_path / "b").returncode == 0
    r = aicc("golden", "check", tmp_path / "b", tmp_path / "g")
    assert r.returncode == 1 and "FAIL" in r.stdout


def test_targets_and_debug(tmp_path):
    r = aicc("targets")
    assert r.returncode == 0 and "generic" in r.stdout and "x86-avx2" in r.stdout
    r = aicc("--debug", "build", tmp_path / "nope.onnx")
    assert r.returncode != 0 and "Traceback" in r.stderr


@pytest.mark.parametrize("limit,msg", [("max_arena_bytes: 10", "arena needs"),
                                       ("max_weights_bytes: 10", "weights need"),
                                       ("max_tensor_bytes: 16", "needs 40 bytes")])
def test_limits_refuse_with_a_clear_message(tmp_path, limit, msg):
    m, _ = small_model(tmp_path)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"limits: {{{limit}}}\n")
    r = aicc("build", m, "-o", tmp_path / "out", "-c", cfg)
    assert r.returncode == 2 and msg in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_absurd_input_shape_is_refused(tmp_path):
    m, _ = small_model(tmp_path)
    r = aicc("build", m, "-o", tmp_path / "out", "--input-shape", "x=1099511627776,5")
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
