"""Checked mode (memory: {checked: true}): redzones after every arena buffer and sums of the
bytes each step must not touch; a stray write fails the run and names the step."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import aicc
from aicc.errors import AiccError
from aicc.targets import runnable_targets

from .oracle import STRICT_CFLAGS, reference

GOLDEN = Path(__file__).parent / "golden" / "tiny_cnn"


def _bundle(tmp_path, name="b"):
    out = aicc.build(GOLDEN / "model.onnx", out=tmp_path / name,
                     overrides={"memory": {"checked": True}})
    return out, json.loads((out / "manifest.json").read_text())


def _feeds():
    with np.load(GOLDEN / "inputs.npz") as z:
        return {k: z[k] for k in z.files}


def test_checked_bundle_runs_clean_and_matches(tmp_path):
    out, m = _bundle(tmp_path)
    assert m["memory"]["checked"] and m["memory"]["redzone"] == 64
    assert "-DAICC_CHECKED" in (out / "model.mk").read_text()
    import onnx
    want = reference(onnx.load(str(GOLDEN / "model.onnx")), _feeds())
    got = aicc.load(out, cflags=STRICT_CFLAGS).run(_feeds())
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-4, atol=1e-5)
    # the plain bundle: no check tables, no redzones
    plain = aicc.build(GOLDEN / "model.onnx", out=tmp_path / "plain")
    assert "check_bufs" not in (plain / "model.c").read_text()


def _inject(out: Path, step: int, code: str) -> None:
    """Add a line at the end of step `step`'s kernel function in model.c (the first of its
    two functions: the one with the pointer parameters)."""
    src = (out / "model.c").read_text()
    m = re.search(rf"static void step{step}_\w+\(const aicc_frame \*f[,)][^{{]*\{{\n", src)
    end = src.index("\n}\n", m.end())
    (out / "model.c").write_text(src[:end] + "\n    " + code + src[end:])


@pytest.mark.parametrize("kind", ["overflow", "clobber"])
def test_stray_write_names_the_step(tmp_path, kind):
    out, m = _bundle(tmp_path)
    step = 2
    st = m["steps"][step]
    buf = next(b for b in m["memory"]["buffers"] if b["tensor"] == st["outputs"][0])
    if kind == "overflow":        # one element past its output: into the redzone
        _inject(out, step, f"out0[{buf['size'] // 4}] = 1.0f;")
        msg = f"step {step} ({st['op']}, node {st['node']!r}) wrote outside its buffers"
    else:                         # into its input, a live buffer it does not own
        _inject(out, step, "((float *)in0)[3] += 1.0f;")
        msg = f"step {step} ({st['op']}, node {st['node']!r}) changed a live buffer"
    with pytest.raises(AiccError, match=re.escape(msg)):
        aicc.load(out, cflags=STRICT_CFLAGS).run(_feeds())


def test_unchecked_bundle_does_not_notice(tmp_path):
    # the same injected write in a plain (unchecked) bundle goes unnoticed: checked mode is
    # what catches it
    out = aicc.build(GOLDEN / "model.onnx", out=tmp_path / "plain")
    _inject(out, 2, "((float *)in0)[3] += 1.0f;")
    aicc.load(out, cflags=STRICT_CFLAGS).run(_feeds())


# A small op suite in checked mode inside `make test` (`make checked` runs all of tests/ops):
# each op sits between two elementwise steps so its inputs and outputs are arena buffers
# with redzones, on generic and on the host's SIMD target.
def _w(r, *shape):
    return (r.standard_normal(shape) * 0.5).astype(np.float32)


def _cases():
    r = np.random.default_rng(5)
    return {
        "Conv3x3s2": ([1, 5, 9, 11], dict(op="Conv", extra={"w": _w(r, 7, 5, 3, 3)},
                                           attrs=dict(pads=[1, 1, 1, 1], strides=[2, 2]))),
        "ConvDW": ([1, 6, 8, 7], dict(op="Conv", extra={"w": _w(r, 6, 1, 3, 3)},
                                      attrs=dict(pads=[1, 1, 1, 1], group=6))),
        "Conv1x1": ([1, 9, 5, 5], dict(op="Conv", extra={"w": _w(r, 13, 9, 1, 1)}, attrs={})),
        "ConvTranspose": ([1, 4, 5, 6], dict(op="ConvTranspose", extra={"w": _w(r, 4, 3, 3, 3)},
                                             attrs=dict(strides=[2, 2]))),
        "MatMul": ([3, 17, 19], dict(op="MatMul", extra={"w": _w(r, 19, 23)}, attrs={})),
        "Gemm": ([7, 33], dict(op="Gemm", extra={"w": _w(r, 33, 21)}, attrs={})),
        "Softmax": ([4, 37], dict(op="Softmax", extra={}, attrs=dict(axis=-1))),
        "MaxPool": ([1, 3, 9, 9], dict(op="MaxPool", extra={},
                                       attrs=dict(kernel_shape=[3, 3], strides=[2, 2]))),
        "ReduceMean": ([2, 5, 6], dict(op="ReduceMean", extra={}, attrs=dict(axes=[1]))),
        "Transpose": ([2, 3, 5, 7], dict(op="Transpose", extra={}, attrs=dict(perm=[0, 3, 1, 2]))),
        "LayerNorm": ([3, 6, 10], dict(op="LayerNormalization", extra={"ls": _w(r, 10), "lb": _w(r, 10)},
                                       attrs=dict(axis=-1))),
        "Resize": ([1, 2, 4, 5], dict(op="Resize", extra={"roi": np.zeros(0, np.float32),
                                                          "sc": np.array([1, 1, 2, 2], np.float32)},
                                      attrs=dict(mode="linear"))),
        "Concat": ([1, 4, 3], dict(op="Concat", extra={"c": _w(r, 1, 2, 3)}, attrs=dict(axis=1))),
    }


CASES = _cases()


@pytest.mark.parametrize("target", ["generic"] + [t for t in ("x86-avx2",) if t in runnable_targets()])
@pytest.mark.parametrize("case", sorted(CASES))
def test_op_suite_in_checked_mode(tmp_path, case, target):
    import onnx
    from onnx import helper as oh, numpy_helper as nh
    shape, spec = CASES[case]
    x = np.random.default_rng(6).standard_normal(shape).astype(np.float32)
    names = ["a"] + list(spec["extra"])
    nodes = [oh.make_node("Relu", ["x"], ["a"]), oh.make_node(spec["op"], names, ["b"], **spec["attrs"]),
             oh.make_node("Sigmoid", ["b"], ["y"])]
    g = oh.make_graph(nodes, "c", [oh.make_tensor_value_info("x", 1, shape)],
                      [oh.make_tensor_value_info("y", 1, None)],
                      [nh.from_array(v, k) for k, v in spec["extra"].items()])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])
    m.ir_version = 9
    m = onnx.shape_inference.infer_shapes(m)
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    out = aicc.build(p, target=target, out=tmp_path / "b", overrides={"memory": {"checked": True}})
    got = aicc.load(out, cflags=STRICT_CFLAGS).run({"x": x})
    want = reference(m, {"x": x})
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-4, atol=1e-5)
