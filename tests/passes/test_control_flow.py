"""inline-control-flow: If (runtime condition: both branches + Where; constant: one
branch), for-style Loop with a constant trip count, Scan: compared with onnxruntime."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import aicc

from ..oracle import STRICT_CFLAGS, reference


def _vi(name, shape, t=T.FLOAT):
    return h.make_tensor_value_info(name, t, shape)


def _run(tmp_path, m, feeds):
    m.ir_version = 9
    m = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    out = aicc.build(p, out=tmp_path / "b")
    got = aicc.load(out, cflags=STRICT_CFLAGS).run(feeds)
    want = reference(m, feeds)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-6, err_msg=k)
    import json
    return json.loads((out / "manifest.json").read_text())


def _branches():
    then_g = h.make_graph([h.make_node("Mul", ["x", "x"], ["t"])], "then", [], [_vi("t", [2, 3])])
    else_g = h.make_graph([h.make_node("Neg", ["x"], ["e0"]), h.make_node("Exp", ["e0"], ["e"])],
                          "else", [], [_vi("e", [2, 3])])
    return then_g, else_g


@pytest.mark.parametrize("flag", [True, False])
def test_if_runtime_condition(tmp_path, flag):
    then_g, else_g = _branches()
    g = h.make_graph([h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
                     "if", [_vi("c", [], T.BOOL), _vi("x", [2, 3])], [_vi("y", [2, 3])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    man = _run(tmp_path, m, {"c": np.array(flag), "x": x})
    assert "If" not in {s["op"] for s in man["steps"]}


def test_if_constant_condition_takes_one_branch(tmp_path):
    then_g, else_g = _branches()
    g = h.make_graph([h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
                     "if", [_vi("x", [2, 3])], [_vi("y", [2, 3])],
                     [nh.from_array(np.array(False), "c")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    x = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    man = _run(tmp_path, m, {"x": x})
    assert "Mul" not in {s["op"] for s in man["steps"]}       # the then branch is gone


def test_loop_constant_trip_count_with_scan_output(tmp_path):
    # acc = acc * 0.5 + x * i, five times; every iteration's acc stacked; a nested If
    inner_then = h.make_graph([h.make_node("Relu", ["a1"], ["r"])], "t", [], [_vi("r", [3])])
    inner_else = h.make_graph([h.make_node("Neg", ["a1"], ["r2"])], "e", [], [_vi("r2", [3])])
    body = h.make_graph(
        [h.make_node("Cast", ["i"], ["fi"], to=T.FLOAT),
         h.make_node("Mul", ["acc", "half"], ["a0"]),
         h.make_node("Mul", ["x", "fi"], ["xi"]),
         h.make_node("Add", ["a0", "xi"], ["a1"]),
         h.make_node("If", ["flag"], ["a2"], then_branch=inner_then, else_branch=inner_else),
         h.make_node("Identity", ["cond_in"], ["cond_out"]),
         h.make_node("Identity", ["a2"], ["scan"])],
        "body", [_vi("i", [], T.INT64), _vi("cond_in", [], T.BOOL), _vi("acc", [3])],
        [_vi("cond_out", [], T.BOOL), _vi("a2", [3]), _vi("scan", [3])],
        [nh.from_array(np.array(0.5, np.float32), "half")])
    g = h.make_graph([h.make_node("Loop", ["M", "", "acc0"], ["acc", "stack"], body=body)],
                     "loop", [_vi("x", [3]), _vi("acc0", [3]), _vi("flag", [], T.BOOL)],
                     [_vi("acc", [3]), _vi("stack", [5, 3])],
                     [nh.from_array(np.array(5, np.int64), "M")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    r = np.random.default_rng(2)
    for flag in (True, False):
        man = _run(tmp_path, m, {"x": r.standard_normal(3).astype(np.float32),
                                 "acc0": r.standard_normal(3).astype(np.float32),
                                 "flag": np.array(flag)})
    assert not {"Loop", "If"} & {s["op"] for s in man["steps"]}


def test_scan_running_sum_both_directions(tmp_path):
    body = h.make_graph([h.make_node("Add", ["s", "xt"], ["s2"]),
                         h.make_node("Mul", ["s2", "xt"], ["o"])],
                        "body", [_vi("s", [4]), _vi("xt", [4])], [_vi("s2", [4]), _vi("o", [4])])
    g = h.make_graph([h.make_node("Scan", ["s0", "xs"], ["sN", "os"], body=body,
                                  num_scan_inputs=1, scan_input_directions=[1],
                                  scan_output_axes=[1], scan_output_directions=[1])],
                     "scan", [_vi("s0", [4]), _vi("xs", [6, 4])], [_vi("sN", [4]), _vi("os", [4, 6])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    r = np.random.default_rng(3)
    _run(tmp_path, m, {"s0": r.standard_normal(4).astype(np.float32),
                       "xs": r.standard_normal((6, 4)).astype(np.float32)})


def test_runtime_trip_count_is_refused_by_name(tmp_path):
    body = h.make_graph([h.make_node("Identity", ["c"], ["c2"]), h.make_node("Neg", ["a"], ["b"])],
                        "body", [_vi("i", [], T.INT64), _vi("c", [], T.BOOL), _vi("a", [3])],
                        [_vi("c2", [], T.BOOL), _vi("b", [3])])
    g = h.make_graph([h.make_node("Loop", ["M", "", "a0"], ["aN"], body=body, name="my_loop")],
                     "loop", [_vi("M", [], T.INT64), _vi("a0", [3])], [_vi("aN", [3])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 9
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    with pytest.raises(aicc.errors.UnsupportedError, match="Loop.*'my_loop'"):
        aicc.build(p, out=tmp_path / "b")
