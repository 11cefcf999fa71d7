"""aicc validate --per-node: every intermediate tensor against onnxruntime, and the first one
beyond the tolerance named (aicc/pernode.py)."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.oracle import rng
from tests.test_cli import aicc as cli


def _chain(path):
    """m = x * c1; a = m + c2; r = relu(a); y = r * c3 (c2 a run of distinct values, so its
    bytes are found in weights.bin)."""
    c = {"c1": rng(1).normal(size=64), "c2": np.linspace(0.25, 3.0, 64),
         "c3": rng(3).normal(size=64)}
    inits = [numpy_helper.from_array(v.astype(np.float32), k) for k, v in c.items()]
    nodes = [helper.make_node("Mul", ["x", "c1"], ["m"], name="mul1"),
             helper.make_node("Add", ["m", "c2"], ["a"], name="add"),
             helper.make_node("Relu", ["a"], ["r"], name="relu"),
             helper.make_node("Mul", ["r", "c3"], ["y"], name="mul2")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return c["c2"].astype(np.float32)


def test_per_node_matches_then_names_the_first_wrong_tensor(tmp_path):
    model = tmp_path / "m.onnx"
    c2 = _chain(model)
    r = cli("build", model, "-o", tmp_path / "b", "--weights-file")
    assert r.returncode == 0, r.stderr
    r = cli("validate", model, tmp_path / "b", "--per-node")
    assert r.returncode == 0, (r.stdout, r.stderr)
    lines = [ln for ln in r.stdout.splitlines() if "step" in ln]
    assert any("-> m:" in ln for ln in lines) and any("-> y:" in ln for ln in lines)
    assert all(ln.strip().startswith("ok") for ln in lines), r.stdout
    assert "cosine" in lines[0]
    # a wrong constant for the Add: the Mul before it still matches, the Add (its Relu fused:
    # the step writes 'r') is named first
    w = (tmp_path / "b" / "weights.bin").read_bytes()
    at = w.find(c2.tobytes())
    assert at >= 0
    bad = c2.copy()
    bad[10] += 0.5
    (tmp_path / "b" / "weights.bin").write_bytes(w[:at] + bad.tobytes() + w[at + c2.nbytes:])
    r = cli("validate", model, tmp_path / "b", "--per-node")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "first tensor beyond" in r.stderr and "Add 'add' output 'r'" in r.stderr, r.stderr
    ok_m = [ln for ln in r.stdout.splitlines() if "-> m:" in ln]
    assert ok_m and ok_m[0].strip().startswith("ok")


def test_per_node_refuses_a_dynamic_bundle(tmp_path):
    model = tmp_path / "m.onnx"
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), model)
    r = cli("build", model, "-o", tmp_path / "b", "--buckets", "n=2,4")
    assert r.returncode == 0, r.stderr
    r = cli("validate", model, tmp_path / "b", "--per-node")
    assert r.returncode == 2 and "static bundle" in r.stderr, r.stderr
