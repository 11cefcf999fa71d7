"""Hostile models (issue: negative dims, ranks above the runtime's): each is refused at build
time with exit 2 and one line naming the cause, and nothing is written to -o."""
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.test_cli import aicc as cli

F = TensorProto.FLOAT


def _vi(name, rank, t=F):
    return helper.make_tensor_value_info(name, t, [f"{name}{i}" for i in range(rank)])


def _model(path, nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _const(name, values, dtype):
    return numpy_helper.from_array(np.array(values, dtype), name)


CASES = {
    # graph input dims below zero: the product is negative, or positive for two of them
    "input_negative": (lambda p: _model(p, [helper.make_node("Relu", ["x"], ["y"])],
                                        [helper.make_tensor_value_info("x", F, [-5, 3])],
                                        [_vi("y", 2)]),
                       "graph input 'x' has a negative dim"),
    "input_two_negative": (lambda p: _model(p, [helper.make_node("Relu", ["x"], ["y"])],
                                            [helper.make_tensor_value_info("x", F, [-2, -3])],
                                            [_vi("y", 2)]),
                           "graph input 'x' has a negative dim"),
    "split_negative": (lambda p: _model(
        p, [helper.make_node("Split", ["x", "s"], ["a", "b"], axis=0)],
        [helper.make_tensor_value_info("x", F, [4, 3])], [_vi("a", 2), _vi("b", 2)],
        [_const("s", [6, -2], np.int64)]), "output 'b' would have the negative shape [-2, 3]"),
    "topk_negative_k": (lambda p: _model(
        p, [helper.make_node("TopK", ["x", "k"], ["v", "i"])],
        [helper.make_tensor_value_info("x", F, [4, 3])],
        [_vi("v", 2), _vi("i", 2, TensorProto.INT64)], [_const("k", [-1], np.int64)]),
        "output 'v' would have the negative shape [4, -1]"),
    "resize_negative_scales": (lambda p: _model(
        p, [helper.make_node("Resize", ["x", "", "sc"], ["y"])],
        [helper.make_tensor_value_info("x", F, [1, 1, 4, 4])], [_vi("y", 4)],
        [_const("sc", [1, 1, -2, -2], np.float32)]), "output 'y' would have the negative shape"),
    "resize_nan_scale": (lambda p: _model(
        p, [helper.make_node("Resize", ["x", "", "sc"], ["y"])],
        [helper.make_tensor_value_info("x", F, [1, 1, 4, 4])], [_vi("y", 4)],
        [_const("sc", [1, 1, np.nan, 2], np.float32)]), "output 'y' would have the negative shape"),
    "pad_negative": (lambda p: _model(
        p, [helper.make_node("Pad", ["x", "p"], ["y"])],
        [helper.make_tensor_value_info("x", F, [2, 3])], [_vi("y", 2)],
        [_const("p", [0, -5, 0, 0], np.int64)]),
        "output 'y' would have the negative shape [2, -2]"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_refused(tmp_path, case):
    make, message = CASES[case]
    model = make(tmp_path / f"{case}.onnx")
    r = cli("build", model, "-o", tmp_path / "out")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert message in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "out").exists()


def test_negative_pinned_shape(tmp_path):
    model = _model(tmp_path / "m.onnx", [helper.make_node("Relu", ["x"], ["y"])],
                   [helper.make_tensor_value_info("x", F, ["n", 3])], [_vi("y", 2)])
    r = cli("build", model, "-o", tmp_path / "out", "--input-shape", "x=-1,3")
    assert r.returncode == 2 and "dims must be >= 0" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_rank_above_runtime_maximum_with_dynamic_dims(tmp_path):
    """The dispatcher's shape arrays hold AICC_MAX_RANK dims: a rank-9 dynamic input would
    write past them at run time."""
    header = Path(__file__).parent.parent / "runtime_c" / "aicc_rt.h"
    assert "#define AICC_MAX_RANK 8" in header.read_text()
    model = _model(tmp_path / "m.onnx", [helper.make_node("Relu", ["x"], ["y"])],
                   [helper.make_tensor_value_info("x", F, ["a"] + [1] * 8)], [_vi("y", 9)])
    r = cli("build", model, "-o", tmp_path / "out", "--buckets", "a=2,4")
    assert r.returncode == 2, r.stderr
    assert "input 'x' has rank 9" in r.stderr and "rank 8 at most" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()
    ok = _model(tmp_path / "m8.onnx", [helper.make_node("Relu", ["x"], ["y"])],
                [helper.make_tensor_value_info("x", F, ["a"] + [1] * 7)], [_vi("y", 8)])
    r = cli("build", ok, "-o", tmp_path / "out8", "--buckets", "a=2,4")
    assert r.returncode == 0, r.stderr


def test_dynamic_bundle_without_its_weights_writes_nothing(tmp_path):
    """A dynamic bundle built with --weights-file and run without weights returns
    AICC_ERR_WEIGHTS before it stages any input into the arena."""
    from aicc.bundle.loader import load
    from aicc.errors import AiccError
    w = numpy_helper.from_array(np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32),
                                "W")
    model = _model(tmp_path / "m.onnx", [helper.make_node("MatMul", ["x", "W"], ["y"])],
                   [helper.make_tensor_value_info("x", F, ["n", 4])],
                   [helper.make_tensor_value_info("y", F, ["n", 3])], [w])
    r = cli("build", model, "-o", tmp_path / "b", "--buckets", "n=2,4", "--weights-file")
    assert r.returncode == 0, r.stderr
    b = load(tmp_path / "b")
    x = np.random.default_rng(1).normal(size=(3, 4)).astype(np.float32)
    y = b.run({"x": x})["y"]
    np.testing.assert_allclose(y, x @ numpy_helper.to_array(w), rtol=1e-5, atol=1e-6)
    bare = load(tmp_path / "b")
    bare.weights = None                 # the caller forgot to load weights.bin
    bare.arena[:] = 0xAB
    with pytest.raises(AiccError, match="weights"):
        bare.run({"x": x})
    assert (bare.arena == 0xAB).all()


@pytest.mark.parametrize("elem, name", [(TensorProto.STRING, "string"),
                                        (TensorProto.COMPLEX64, "complex64")])
def test_non_numeric_graph_input(tmp_path, elem, name):
    model = _model(tmp_path / "m.onnx", [helper.make_node("Identity", ["x"], ["y"])],
                   [helper.make_tensor_value_info("x", elem, [2])],
                   [helper.make_tensor_value_info("y", elem, [2])])
    r = cli("build", model, "-o", tmp_path / "out")
    assert r.returncode == 2, r.stderr
    assert f"graph input 'x' has dtype {name}" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_names_that_are_not_utf8(tmp_path):
    """b'\\xff' and b'\\xfe' would decode to one replacement character: one tensor."""
    vi = helper.make_tensor_value_info
    m = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["x"], ["b"]),
         helper.make_node("Add", ["a", "b"], ["y"])], "g",
        [vi("x", F, [4])], [vi("y", F, [4])]), opset_imports=[helper.make_opsetid("", 17)])
    raw = m.SerializeToString()
    for old, new in ((b"\x0a\x01a", b"\x0a\x01\xff"), (b"\x12\x01a", b"\x12\x01\xff"),
                     (b"\x0a\x01b", b"\x0a\x01\xfe"), (b"\x12\x01b", b"\x12\x01\xfe")):
        assert old in raw
        raw = raw.replace(old, new)
    (tmp_path / "m.onnx").write_bytes(raw)
    r = cli("build", tmp_path / "m.onnx", "-o", tmp_path / "out")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "is not valid UTF-8" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("spec", ["seq=100000000000000000000000000000",
                                  "seq=max:100000000000000000000000000000", "seq=0", "seq=1e30"])
def test_bucket_sizes_out_of_range(tmp_path, spec):
    model = _model(tmp_path / "m.onnx", [helper.make_node("Relu", ["x"], ["y"])],
                   [helper.make_tensor_value_info("x", F, ["seq", 4])],
                   [helper.make_tensor_value_info("y", F, ["seq", 4])])
    r = cli("build", model, "-o", tmp_path / "out", "--buckets", spec)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("aicc: error: --buckets") and len(r.stderr.splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_einsum_equation_with_two_ellipses(tmp_path):
    """"i...j...->" sends onnx's shape inference into an endless loop: refused before it."""
    model = _model(tmp_path / "m.onnx",
                   [helper.make_node("Einsum", ["x"], ["y"], equation="i...j...->")],
                   [helper.make_tensor_value_info("x", F, [2, 3, 4])],
                   [helper.make_tensor_value_info("y", F, [])])
    r = cli("build", model, "-o", tmp_path / "out")
    assert r.returncode == 2, r.stderr
    assert "equation 'i...j...->' has a malformed ellipsis" in r.stderr, r.stderr


def _nested_loops(path, depth, trips):
    """Loops nested ``depth`` deep, each of ``trips`` iterations adding 1 (trip count and
    condition from the outer graph): trips^depth Adds once unrolled."""
    def body(d):
        nodes = [helper.make_node("Identity", [f"c_in{d}"], [f"c_out{d}"])]
        if d == 0:
            nodes.append(helper.make_node("Add", [f"x_in{d}", "one"], [f"x_out{d}"]))
        else:
            nodes.append(helper.make_node("Loop", ["M", "C", f"x_in{d}"], [f"x_out{d}"],
                                          body=body(d - 1)))
        vi = helper.make_tensor_value_info
        return helper.make_graph(
            nodes, f"b{d}", [vi(f"it{d}", TensorProto.INT64, []),
                             vi(f"c_in{d}", TensorProto.BOOL, []), vi(f"x_in{d}", F, [2])],
            [vi(f"c_out{d}", TensorProto.BOOL, []), vi(f"x_out{d}", F, [2])])
    return _model(path, [helper.make_node("Loop", ["M", "C", "x"], ["y"], body=body(depth - 1))],
                  [helper.make_tensor_value_info("x", F, [2])],
                  [helper.make_tensor_value_info("y", F, [2])],
                  [_const("M", trips, np.int64), _const("C", True, np.bool_),
                   _const("one", [1, 1], np.float32)])


def test_nested_loops_unroll_within_a_node_budget(tmp_path):
    """Two nested loops of 8 unroll (and compute x + 64); five nested loops of 64 (a
    1 KB model, 64^5 steps) are refused once the graph would pass the node budget."""
    from aicc.bundle.loader import load
    ok = _nested_loops(tmp_path / "two.onnx", 2, 8)
    r = cli("build", ok, "-o", tmp_path / "two")
    assert r.returncode == 0, r.stderr
    x = np.array([0.5, -3.0], np.float32)
    np.testing.assert_array_equal(load(tmp_path / "two").run({"x": x})["y"], x + 64)
    bomb = _nested_loops(tmp_path / "five.onnx", 5, 64)
    assert bomb.stat().st_size < 1200
    r = cli("build", bomb, "-o", tmp_path / "five")
    assert r.returncode == 2, r.stderr
    assert "would take the graph past 200000 nodes" in r.stderr, r.stderr
    assert not (tmp_path / "five").exists()


def _external(name, location, values):
    """A float32 tensor whose data is declared external at ``location``."""
    t = numpy_helper.from_array(np.asarray(values, np.float32), name)
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", "0"), ("length", str(4 * len(values)))):
        e = t.external_data.add()
        e.key, e.value = k, v
    return t


def _function_model(path, const_tensor):
    """y = x + C, with C a Constant inside a model-local function's body."""
    fn = helper.make_function("local", "AddC", ["a"], ["b"], [
        helper.make_node("Constant", [], ["c"], value=const_tensor),
        helper.make_node("Add", ["a", "c"], ["b"])],
        opset_imports=[helper.make_opsetid("", 17)])
    g = helper.make_graph([helper.make_node("AddC", ["x"], ["y"], domain="local")], "g",
                          [helper.make_tensor_value_info("x", F, [2])],
                          [helper.make_tensor_value_info("y", F, [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("local", 1)], functions=[fn])
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(m, path)
    return path


def _sparse_model(path, values_tensor):
    """y = x + C, with C a Constant of sparse_value (two of four elements set)."""
    idx = numpy_helper.from_array(np.array([1, 3], np.int64), "idx")
    sp = helper.make_sparse_tensor(values_tensor, idx, [4])
    g = helper.make_graph([helper.make_node("Constant", [], ["c"], sparse_value=sp),
                           helper.make_node("Add", ["x", "c"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", F, [4])],
                          [helper.make_tensor_value_info("y", F, [4])])
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.mark.parametrize("kind", ["function", "sparse"])
def test_external_data_stays_in_the_model_folder(tmp_path, kind, monkeypatch):
    """A file beside the user (the current folder) named by a function body's or a sparse
    Constant's external data is refused; the same data inside the model's folder is read
    from there."""
    from aicc.bundle.loader import load
    make = _function_model if kind == "function" else _sparse_model
    secret = np.array([7.0, 9.0], np.float32)
    (tmp_path / "secret.bin").write_bytes(secret.tobytes())
    monkeypatch.chdir(tmp_path)                 # where a cwd-relative read would find it
    bad = make(tmp_path / "models" / "m.onnx", _external("c", "secret.bin", secret))
    r = cli("build", bad, "-o", tmp_path / "out", cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "is missing or outside the model's folder" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()
    up = make(tmp_path / "models2" / "m.onnx", _external("c", "../secret.bin", secret))
    r = cli("build", up, "-o", tmp_path / "out", cwd=tmp_path)
    assert r.returncode == 2 and "not a relative path inside" in r.stderr, r.stderr
    nul = make(tmp_path / "models3" / "m.onnx", _external("c", "sec\x00ret.bin", secret))
    r = cli("build", nul, "-o", tmp_path / "out", cwd=tmp_path)
    assert r.returncode == 2 and "not a relative path inside" in r.stderr, r.stderr
    (tmp_path / "models" / "secret.bin").write_bytes(secret.tobytes())
    r = cli("build", bad, "-o", tmp_path / "good", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    n = 2 if kind == "function" else 4
    x = np.arange(n, dtype=np.float32)
    want = x + (secret if kind == "function" else np.array([0, 7, 0, 9], np.float32))
    np.testing.assert_array_equal(load(tmp_path / "good").run({"x": x})["y"], want)


def test_external_data_larger_than_a_tensor_can_be(tmp_path):
    t = _external("W", "w.bin", [1.0, 2.0])
    for e in t.external_data:
        if e.key == "length":
            e.value = str(1 << 31)
    with open(tmp_path / "w.bin", "wb") as f:           # a sparse file: no disk space used
        f.truncate((1 << 31) + 8)
    model = _model(tmp_path / "m.onnx", [helper.make_node("Add", ["x", "W"], ["y"])],
                   [helper.make_tensor_value_info("x", F, [2])],
                   [helper.make_tensor_value_info("y", F, [2])], [t])
    r = cli("build", model, "-o", tmp_path / "out")
    assert r.returncode == 2, r.stderr
    assert "one tensor holds at most" in r.stderr, r.stderr


def test_folding_never_evaluates_an_output_above_its_limit(tmp_path, monkeypatch):
    """Range(0, 3e9, 1) has constant inputs; folding would build its 24 GB output before
    comparing it with max_bytes. It is not evaluated (the Range stays a node), and the
    build stops at the tensor limit with one line."""
    from aicc.frontend import import_model
    from aicc.passes import fold_constants as fc
    calls = []
    real = fc.lookup

    def spy(node, opset):
        op = real(node, opset)
        if node.op_type == "Range":
            calls.append(node.name)
        return op
    monkeypatch.setattr(fc, "lookup", spy)
    c = {"a": 0, "b": 3_000_000_000, "d": 1}
    model = _model(tmp_path / "m.onnx",
                   [helper.make_node("Range", ["a", "b", "d"], ["r"]),
                    helper.make_node("ReduceSum", ["r"], ["s"], keepdims=1),
                    helper.make_node("Cast", ["s"], ["sf"], to=F),
                    helper.make_node("Add", ["x", "sf"], ["y"])],
                   [helper.make_tensor_value_info("x", F, [1])],
                   [helper.make_tensor_value_info("y", F, [1])],
                   [_const(k, v, np.int64) for k, v in c.items()])
    g = fc.fold_constants(import_model(model))
    assert calls == [] and "r" not in g.constants
    assert [n.op_type for n in g.nodes][0] == "Range"
    r = cli("build", model, "-o", tmp_path / "out")
    assert r.returncode == 2 and "limits.max_tensor_bytes" in r.stderr, r.stderr


def test_validate_keeps_random_indices_inside_their_table(tmp_path):
    """Token types index a 2-row embedding through a Cast: validate's random int64 inputs
    stay below 2 (values up to 9 made every reference fail: exit 2)."""
    from aicc.validate import index_bounds
    table = _const("emb", np.random.default_rng(0).normal(size=(2, 4)), np.float32)
    words = _const("words", np.random.default_rng(1).normal(size=(30, 4)), np.float32)
    vi = helper.make_tensor_value_info
    model = _model(tmp_path / "m.onnx",
                   [helper.make_node("Cast", ["types"], ["t32"], to=TensorProto.INT32),
                    helper.make_node("Gather", ["emb", "t32"], ["e"]),
                    helper.make_node("Gather", ["words", "ids"], ["w"]),
                    helper.make_node("Add", ["e", "w"], ["y"])],
                   [vi("types", TensorProto.INT64, [1, 5]), vi("ids", TensorProto.INT64, [1, 5])],
                   [vi("y", F, [1, 5, 4])], [table, words])
    assert index_bounds(model) == {"types": 2, "ids": 30}
    r = cli("build", model, "-o", tmp_path / "b")
    assert r.returncode == 0, r.stderr
    r = cli("validate", model, tmp_path / "b")
    assert r.returncode == 0, (r.stdout, r.stderr)


def test_matmul_batch_dims_with_named_dims():
    """aicc inspect checks a model before its dims are pinned: a named batch dim against a
    size or a 1 broadcasts (it raised TypeError comparing a name with a number: exit 3)."""
    from aicc.kernels.gemm.call import batch_dims
    assert batch_dims(("b", "s", 16), (16, 8)) == (("b",), (1,), ("b",), "s", 16, 8)
    assert batch_dims((2, "s", 16), ("b", 16, 8))[2] == (2,)
    assert batch_dims(("b", 12, "s", 64), ("b", 12, 64, "s"))[2] == ("b", 12)
    assert batch_dims((3, 4, 5), (1, 5, 6))[2] == (3,)          # sizes as before
    assert batch_dims((0, 4, 5), (3, 5, 6))[2] == (0,)


@pytest.mark.parametrize("how", ["pinned", "buckets"])
def test_torchscript_bert_with_its_shape_chains(tmp_path, how):
    """A TorchScript BERT (tests/models/dyn_bert_tiny_ts.onnx) at batch 1: its attention-mask
    chain (Shape -> Range -> Gather -> Reshape -> Expand) only gets static shapes after
    several rounds of folding and shape inference (settle-shapes); it was refused with
    inputs pinned. Validated against onnxruntime, pinned and with sequence buckets."""
    model = Path(__file__).parent / "models" / "dyn_bert_tiny_ts.onnx"
    if how == "pinned":
        args = [a for n in ("input_ids", "attention_mask", "token_type_ids")
                for a in ("--input-shape", f"{n}=1,8")]
    else:
        args = ["--buckets", "batch=1", "--buckets", "seq=4,8"]
    r = cli("build", model, "-o", tmp_path / "b", *args)
    assert r.returncode == 0, r.stderr
    r = cli("validate", model, tmp_path / "b")
    assert r.returncode == 0, (r.stdout, r.stderr)


def _local_function_model(path, body, fn_inputs=("a",), call_inputs=("x",)):
    """y = local.F(x) with F's body given as nodes."""
    fn = helper.make_function("local", "F", list(fn_inputs), ["b"], body,
                              opset_imports=[helper.make_opsetid("", 17)])
    g = helper.make_graph([helper.make_node("F", list(call_inputs), ["y"], domain="local")], "g",
                          [helper.make_tensor_value_info("x", F, [2])],
                          [helper.make_tensor_value_info("y", F, [2])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                                  helper.make_opsetid("local", 1)],
                                functions=[fn]), path)
    return path


@pytest.mark.parametrize("how, message", [
    ("recursive", "Model-local functions must not be recursive"),
    ("extra_input", "Number of actual parameters cannot exceed number of formal parameters"),
    ("no_output", "Graph output 'y' is not an output of any node"),
])
def test_functions_that_cannot_be_inlined(tmp_path, how, message):
    """A function calling itself, called with more inputs than it declares, or whose body
    never computes its output: onnx's inliner raised (ValidationError, RuntimeError) or left
    a graph output without a producer (KeyError in lowering): exit 3."""
    body = {"recursive": [helper.make_node("F", ["a"], ["b"], domain="local")],
            "extra_input": [helper.make_node("Relu", ["a"], ["b"])],
            "no_output": []}[how]
    model = _local_function_model(tmp_path / "m.onnx", body,
                                  call_inputs=("x", "x") if how == "extra_input" else ("x",))
    r = cli("build", model, "-o", tmp_path / "out")
    assert r.returncode == 2, r.stderr
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "out").exists()


def test_attribute_values_that_cannot_be_read(tmp_path):
    """A Constant tensor whose data does not match its dims, and an attribute that refers to
    a function's attribute outside any function (numpy's and onnx's ValueError: exit 3)."""
    short = _const("v", [1.0, 2.0, 3.0, 4.0], np.float32)     # raw_data: the checker
    short.dims[0] = 2                                          # looks at float_data only
    ref = helper.make_attribute("value", helper.make_tensor("v", F, [2], [1.0, 2.0]))
    ref.ref_attr_name = "alpha"
    for attr, message in ((helper.make_attribute("value", short), "cannot reshape array"),
                          (ref, "refers to a function's attribute 'alpha' outside a function")):
        node = helper.make_node("Constant", [], ["c"])
        node.attribute.append(attr)
        model = _model(tmp_path / "m.onnx", [node, helper.make_node("Add", ["x", "c"], ["y"])],
                       [helper.make_tensor_value_info("x", F, [2])], [_vi("y", 1)])
        r = cli("build", model, "-o", tmp_path / "out")
        assert r.returncode == 2, r.stderr
        assert "attribute 'value'" in r.stderr and message in r.stderr, r.stderr
        assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("how, message", [
    ("huge", "would take 4398046511104 bytes dense, above fold-constants' max_bytes"),
    ("data", "cannot reshape array of size 4 into shape (2,)"),
])
def test_sparse_constants_out_of_range(tmp_path, how, message):
    """Sparse Constant values: a few bytes of indices named a dense tensor of 4 TB (built
    before the folding size check), or values whose raw data does not match their dims
    (the checker looks at float_data only; ValueError: exit 3)."""
    vals = _const("vals", [5.0, 7.0] * (2 if how == "data" else 1), np.float32)
    vals.dims[0] = 2
    sp = helper.make_sparse_tensor(vals, _const("idx", [1, 3], np.int64),
                                   [1 << 40] if how == "huge" else [4])
    model = _model(tmp_path / "m.onnx",
                   [helper.make_node("Constant", [], ["c"], sparse_value=sp),
                    helper.make_node("ReduceSum", ["c"], ["s"], keepdims=1),
                    helper.make_node("Add", ["x", "s"], ["y"])],
                   [helper.make_tensor_value_info("x", F, [4])], [_vi("y", 1)])
    r = cli("build", model, "-o", tmp_path / "out")
    assert r.returncode == 2, r.stderr
    assert "sparse value" in r.stderr and message in r.stderr, r.stderr


def test_external_data_location_not_utf8(tmp_path):
    """protobuf hands over a location of invalid UTF-8 as bytes (TypeError: exit 3)."""
    t = _external("W", "w@bin", [1.0, 2.0])
    model = _model(tmp_path / "m.onnx", [helper.make_node("Add", ["x", "W"], ["y"])],
                   [helper.make_tensor_value_info("x", F, [2])],
                   [helper.make_tensor_value_info("y", F, [2])], [t])
    raw = model.read_bytes()
    assert raw.count(b"w@bin") == 1
    model.write_bytes(raw.replace(b"w@bin", b"w\xffbin"))
    r = cli("build", model, "-o", tmp_path / "out")
    assert r.returncode == 2, r.stderr
    assert "external data path b'w\\xffbin' is not a relative path" in r.stderr, r.stderr


def test_output_dim_that_no_bucket_fixes(tmp_path):
    """The FCN fixture with its first Conv and its Resize inside If nodes, and its output
    declared [0, 2, Convmask_dim_2, Convmask_dim_3] (a fuzzer finding): shape inference
    cannot see through the Ifs, and after inlining them each bucket's graph keeps the output
    dims symbolic, which padding read as numbers (ValueError: exit 3)."""
    model = Path(__file__).parent / "fuzz_corpus" / "crash-65ff08fe7a91473b.onnx"
    r = cli("build", model, "-o", tmp_path / "out", "--buckets", "h=8,16", "--buckets", "w=8")
    assert r.returncode == 2, r.stderr
    assert "tensor 'mask' has a non-static shape" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_lstm_with_batch_zero_and_a_dynamic_time_axis(tmp_path):
    """The LSTM fixture with its batch dim set to 0: the sequence lengths of the padded time
    axis are an empty tensor, whose fill loop `i < 0u` failed -Werror=type-limits."""
    from aicc.bundle.loader import build_bundle
    from tests.oracle import PLAIN_CFLAGS
    m = onnx.load(Path(__file__).parent / "models" / "dyn_lstm_ts.onnx")
    for v in (m.graph.input[0], m.graph.output[0]):
        v.type.tensor_type.shape.dim[0].dim_value = 0
    onnx.save(m, tmp_path / "m.onnx")
    r = cli("build", tmp_path / "m.onnx", "-o", tmp_path / "b", "--buckets", "frames=4,8")
    assert r.returncode == 0, r.stderr
    build_bundle(tmp_path / "b", PLAIN_CFLAGS)


def _relu_model(path):
    _model(path, [helper.make_node("Relu", ["x"], ["y"])],
           [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
           [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="fork: Linux")
def test_shape_inference_that_never_returns_is_stopped(tmp_path, monkeypatch):
    """onnx's C++ inference cannot be interrupted: it runs in a child killed at the limit
    (here an inference that sleeps stands for one that loops), and the build fails with one
    line instead of hanging; the next build gets a new child."""
    import time

    import aicc
    from aicc.errors import ModelError
    from aicc.frontend import infer
    _relu_model(tmp_path / "m.onnx")
    monkeypatch.setattr(infer, "SHAPE_INFERENCE_SECONDS", 1.0)
    monkeypatch.setattr(infer.shape_inference, "infer_shapes",
                        lambda *a, **k: time.sleep(60))
    infer._SERVER.stop()            # the next inference child is forked with the patch
    t = time.monotonic()
    with pytest.raises(ModelError, match="did not finish in 1 s"):
        aicc.build(tmp_path / "m.onnx", out=tmp_path / "b")
    assert time.monotonic() - t < 20 and not (tmp_path / "b").exists()
    monkeypatch.undo()
    assert aicc.build(tmp_path / "m.onnx", out=tmp_path / "b").exists()


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="fork: Linux")
def test_shape_inference_that_dies_is_an_error(tmp_path, monkeypatch):
    import os

    import aicc
    from aicc.errors import ModelError
    from aicc.frontend import infer
    _relu_model(tmp_path / "m.onnx")
    monkeypatch.setattr(infer.shape_inference, "infer_shapes", lambda *a, **k: os._exit(9))
    infer._SERVER.stop()
    with pytest.raises(ModelError, match="its process died"):
        aicc.build(tmp_path / "m.onnx", out=tmp_path / "b")
    monkeypatch.undo()
    assert aicc.build(tmp_path / "m.onnx", out=tmp_path / "b").exists()     # and normally
