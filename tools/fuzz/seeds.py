"""Seed models: small real models from the test suite, and small synthetic ones holding what
the real ones lack (If / Loop / Scan subgraphs, a model-local function, external data, a
sparse Constant), so the mutator has every structure to work on from the start."""
from __future__ import annotations

from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
FILES = ([ROOT / "tests" / "golden" / d / "model.onnx"
          for d in ("mlp", "tiny_cnn", "seg_head", "transformer_block")]
         + [ROOT / "tests" / "models" / f"dyn_{d}_ts.onnx" for d in ("cnn", "lstm", "fcn")])

# The file every case's model folder holds beside the model (external data points into it)
DATA_FILE = "w.bin"
DATA = np.arange(64, dtype=np.float32).tobytes()


def synthetic() -> dict:
    """{name: ModelProto} of the synthetic seeds."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
    vi = helper.make_tensor_value_info
    op = [helper.make_opsetid("", 17)]

    def model(nodes, inputs, outputs, inits=(), functions=(), opsets=op):
        g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
        return helper.make_model(g, opset_imports=list(opsets), functions=list(functions))

    def const(name, v, dt=np.float32):
        return numpy_helper.from_array(np.asarray(v, dt), name)

    out = {}
    branch = lambda k, c: helper.make_graph(  # noqa: E731
        [helper.make_node("Add", ["x", c], [f"r{k}"])], f"b{k}", [], [vi(f"r{k}", F, [2, 3])],
        [const(c, np.full((3,), k, np.float32))])
    out["if"] = model([helper.make_node("Greater", ["s", "z"], ["cond"]),
                       helper.make_node("If", ["cond"], ["y"], then_branch=branch(1, "c1"),
                                        else_branch=branch(2, "c2"))],
                      [vi("x", F, [2, 3])], [vi("y", F, [2, 3])],
                      [const("s", 1.0), const("z", 0.0)])
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("Mul", ["v_in", "two"], ["v_out"]),
         helper.make_node("Relu", ["v_out"], ["scan_out"])], "body",
        [vi("it", I64, []), vi("c_in", B, []), vi("v_in", F, [4])],
        [vi("c_out", B, []), vi("v_out", F, [4]), vi("scan_out", F, [4])],
        [const("two", np.full(4, 2.0, np.float32))])
    out["loop"] = model([helper.make_node("Loop", ["M", "C", "x"], ["y", "ys"], body=body)],
                        [vi("x", F, [4])], [vi("y", F, [4]), vi("ys", F, [3, 4])],
                        [const("M", 3, np.int64), const("C", True, np.bool_)])
    sbody = helper.make_graph(
        [helper.make_node("Add", ["acc", "row"], ["acc2"]),
         helper.make_node("Identity", ["acc2"], ["o"])], "sbody",
        [vi("acc", F, [4]), vi("row", F, [4])], [vi("acc2", F, [4]), vi("o", F, [4])])
    out["scan"] = model([helper.make_node("Scan", ["a0", "x"], ["y", "ys"], body=sbody,
                                          num_scan_inputs=1)],
                        [vi("a0", F, [4]), vi("x", F, [5, 4])],
                        [vi("y", F, [4]), vi("ys", F, [5, 4])])
    fn = helper.make_function("local", "Scale", ["a"], ["b"], [
        helper.make_node("Constant", [], ["c"], value=const("cv", [2.0, 3.0])),
        helper.make_node("Mul", ["a", "c"], ["m"]),
        helper.make_node("Tanh", ["m"], ["b"])], opset_imports=op, attributes=["alpha"])
    out["function"] = model([helper.make_node("Scale", ["x"], ["t"], domain="local"),
                             helper.make_node("Sigmoid", ["t"], ["y"])],
                            [vi("x", F, [2])], [vi("y", F, [2])], functions=[fn],
                            opsets=op + [helper.make_opsetid("local", 1)])
    w = const("W", np.zeros((4, 4), np.float32))
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for k, v in (("location", DATA_FILE), ("offset", "64"), ("length", "64")):
        e = w.external_data.add()
        e.key, e.value = k, v
    out["external"] = model([helper.make_node("MatMul", ["x", "W"], ["m"]),
                             helper.make_node("Softmax", ["m"], ["y"], axis=-1)],
                            [vi("x", F, ["n", 4])], [vi("y", F, ["n", 4])], [w])
    sp = helper.make_sparse_tensor(const("vals", [5.0, 7.0]), const("idx", [1, 3], np.int64), [4])
    out["sparse"] = model([helper.make_node("Constant", [], ["c"], sparse_value=sp),
                           helper.make_node("Add", ["x", "c"], ["a"]),
                           helper.make_node("ReduceMean", ["a"], ["y"], keepdims=1)],
                          [vi("x", F, [3, 4])], [vi("y", F, [1, 1])])
    out["int"] = model([helper.make_node("Cast", ["x"], ["xf"], to=F),
                        helper.make_node("Reshape", ["xf", "shape"], ["r"]),
                        helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0]),
                        helper.make_node("Gather", ["t", "ix"], ["y"], axis=0)],
                       [vi("x", TensorProto.INT32, [2, 6])], [vi("y", F, [2, 4])],
                       [const("shape", [4, 3], np.int64), const("ix", [0, 2], np.int64)])
    for name, m in out.items():
        if name != "external":          # the checker looks for w.bin
            onnx.checker.check_model(m)
    return out


def seed_models() -> list:
    """Serialized seed models: the files, then the synthetic ones."""
    return [p.read_bytes() for p in FILES] + [m.SerializeToString() for m in synthetic().values()]
