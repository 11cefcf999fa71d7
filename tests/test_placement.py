"""Concat placement (producers write into their chunk of the output) and Split/Slice
sub-views (outputs are chunks of the input): no copy steps, same results as onnxruntime."""
from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import aicc

from .oracle import STRICT_CFLAGS, reference


def _model(nodes, inits, x_shape, outs):
    g = h.make_graph(nodes, "p", [h.make_tensor_value_info("x", T.FLOAT, x_shape)],
                     [h.make_tensor_value_info(o, T.FLOAT, None) for o in outs],
                     [nh.from_array(v, k) for k, v in inits.items()])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 9
    return onnx.shape_inference.infer_shapes(m, strict_mode=True)


def _run(tmp_path, m, x, mode="auto"):
    p = tmp_path / f"m_{mode}.onnx"
    onnx.save(m, p)
    out = aicc.build(p, out=tmp_path / f"b_{mode}", overrides={"memory": {"place_views": mode}})
    man = json.loads((out / "manifest.json").read_text())
    got = aicc.load(out, cflags=STRICT_CFLAGS).run({"x": x})
    want = reference(m, {"x": x})
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-4, atol=1e-5, err_msg=k)
    return man, got


def test_inception_block_concat_and_split(tmp_path):
    rng = np.random.default_rng(0)
    w = {f"w{i}": (rng.standard_normal((c, 8, k, k)) * 0.3).astype(np.float32)
         for i, (c, k) in enumerate([(4, 1), (6, 3), (2, 5)])}
    w["w3"] = (rng.standard_normal((5, 12, 1, 1)) * 0.3).astype(np.float32)
    nodes = [h.make_node("Conv", ["x", "w0"], ["a"]),
             h.make_node("Conv", ["x", "w1"], ["b"], pads=[1, 1, 1, 1]),
             h.make_node("Conv", ["x", "w2"], ["c"], pads=[2, 2, 2, 2]),
             h.make_node("Relu", ["c"], ["cr"]),
             h.make_node("Concat", ["a", "b", "cr"], ["cat"], axis=1),     # 12 channels
             h.make_node("Concat", ["cat", "a"], ["cat2"], axis=1),         # chained
             h.make_node("Split", ["cat2", "sp"], ["s0", "s1"], axis=1),
             h.make_node("Conv", ["s0", "w3"], ["y0"]),
             h.make_node("Slice", ["s1", "st", "en", "ax"], ["sl"]),
             h.make_node("Sigmoid", ["sl"], ["y1"])]
    w.update(sp=np.array([12, 4], np.int64), st=np.array([1], np.int64), en=np.array([3], np.int64), ax=np.array([1], np.int64))
    m = _model(nodes, w, [1, 8, 6, 7], ["y0", "y1"])
    x = rng.standard_normal((1, 8, 6, 7)).astype(np.float32)
    placed, got = _run(tmp_path, m, x, True)
    ops = [s["op"] for s in placed["steps"]]
    # a, b and cr (Relu fused into its Conv) are written straight into cat; cat2 reads `a`
    # a second time, and a tensor lives in one place only, so cat2 stays a copy; the Split
    # and the Slice read chunks of cat2
    assert ops.count("Concat") == 1 and not {"Split", "Slice"} & set(ops), ops
    assert placed["memory"]["placed_ops"] == 3
    offs = placed["memory"]["shared_offsets"]
    assert offs["b"] == 4 * 6 * 7 * 4 and offs["cr"] == 10 * 6 * 7 * 4
    plain, got2 = _run(tmp_path, m, x, False)
    assert {"Concat", "Split", "Slice"} <= {s["op"] for s in plain["steps"]}
    for k in got:
        np.testing.assert_array_equal(got[k], got2[k])      # bit-identical either way


def test_no_placement_when_not_contiguous(tmp_path):
    # batch 2: a Concat along channels interleaves the inputs, so it stays a copy
    rng = np.random.default_rng(1)
    nodes = [h.make_node("Relu", ["x"], ["a"]), h.make_node("Sigmoid", ["x"], ["b"]),
             h.make_node("Concat", ["a", "b"], ["c"], axis=1), h.make_node("Tanh", ["c"], ["y"])]
    m = _model(nodes, {}, [2, 3, 4], ["y"])
    man, _ = _run(tmp_path, m, rng.standard_normal((2, 3, 4)).astype(np.float32), True)
    assert "Concat" in [s["op"] for s in man["steps"]] and man["memory"]["placed_ops"] == 0


def test_inputs_and_outputs_inside_the_arena(tmp_path):
    from pathlib import Path
    golden = Path(__file__).parent / "golden" / "tiny_cnn"
    with np.load(golden / "inputs.npz") as z:
        feeds = {k: z[k] for k in z.files}
    model = onnx.load(str(golden / "model.onnx"))
    sep = aicc.build(golden / "model.onnx", out=tmp_path / "sep")
    one = aicc.build(golden / "model.onnx", out=tmp_path / "one",
                     overrides={"memory": {"io_in_arena": True}})
    ms, mo = (json.loads((b / "manifest.json").read_text()) for b in (sep, one))
    io = mo["memory"]["io_in_arena"]
    hdr = (one / "model.h").read_text()
    assert f"#define MODEL_INPUT0_OFFSET {io['inputs'][0]}u" in hdr
    assert f"#define MODEL_OUTPUT0_OFFSET {io['outputs'][0]}u" in hdr
    got = aicc.load(one, cflags=STRICT_CFLAGS).run(feeds)
    want = reference(model, feeds)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-4, atol=1e-5)
    # one region: never more than the arena plus separate input and output buffers (the
    # input's memory is reused once it is dead)
    io_bytes = sum(int(np.prod(t["shape"])) * 4 for t in ms["inputs"] + ms["outputs"])
    assert mo["arena_bytes"] <= ms["arena_bytes"] + io_bytes + 2 * 64
    assert mo["arena_bytes"] < ms["arena_bytes"] + io_bytes


def test_depth_to_space_mid_graph_is_a_real_step(tmp_path):
    # regression: DepthToSpace's helper method was named `view`, which the sharing code
    # took for the view flag: in the middle of a graph it produced no step (wrong values)
    rng = np.random.default_rng(2)
    for op in ("DepthToSpace", "SpaceToDepth"):
        nodes = [h.make_node("Relu", ["x"], ["a"]),
                 h.make_node(op, ["a"], ["b"], blocksize=2),
                 h.make_node("Sigmoid", ["b"], ["y"])]
        m = _model(nodes, {}, [1, 8, 4, 6], ["y"])
        man, _ = _run(tmp_path, m, rng.standard_normal((1, 8, 4, 6)).astype(np.float32), True)
        assert op in [s["op"] for s in man["steps"]]


def test_placed_chunks_are_not_also_written_in_place(tmp_path):
    # regression (Inception v2): Relu outputs placed inside a Concat were then also made
    # in-place aliases of their dying inputs, losing the Concat's buffer
    rng = np.random.default_rng(3)
    nodes = [h.make_node("Add", ["x", "x"], ["a"]), h.make_node("Relu", ["a"], ["r1"]),
             h.make_node("Mul", ["x", "x"], ["b"]), h.make_node("Relu", ["b"], ["r2"]),
             h.make_node("Concat", ["r1", "r2"], ["c"], axis=1),
             h.make_node("Sigmoid", ["c"], ["y"])]
    m = _model(nodes, {}, [1, 3, 4], ["y"])
    man, _ = _run(tmp_path, m, rng.standard_normal((1, 3, 4)).astype(np.float32), True)
    assert man["memory"]["placed_ops"] == 1
