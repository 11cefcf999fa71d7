"""The portable float GEMMs on a scalar FPU with fused multiply-add (isa/fpv4's ``fpu``
entry: kernels/conv/tile_fpu.py, the planes kernel's scalar sums, kernels/gemm/portable.py's
scalar blocks) on cortex-m4 under qemu, against onnxruntime, and their error against float64
against the generic target's (mul then add) on the same model.

One model with the kernels' tails: convs on the im2col tile with output channels not a
multiple of 4, positions not a multiple of 8, K below 64, between 64 and 128 and above (the
blocks of 64 summed apart), groups, stride 2, pads, bias and a fused Relu; one input channel
per group (the planes kernel: depthwise 3x3 stride 1 and 2, a dilated depthwise, a first conv
of one input channel with a 10x4 kernel, stride 2); Gemm with one row (the 1 x 16 block) and
with 6 rows (a 4-row block and 2 single rows), N not a multiple of 4 or 16, K above 64,
transB, alpha and beta with a C; MatMul with 3 rows.
"""
import json

import numpy as np
import onnx
import pytest
from onnx import helper

import aicc
from aicc.runner import open_bundle
from aicc.targets import load_target
from tests.oracle import STRICT_CFLAGS, make_model, reference

M4 = "cortex-m4"
needs_m4 = pytest.mark.skipif(bool(load_target(M4).missing_tools()),
                              reason="make cross-toolchain")


def _model(r):
    f = lambda *s: r.normal(size=s).astype(np.float32)   # noqa: E731
    feeds = {"x": f(1, 6, 9, 11), "d": f(1, 8, 10, 7), "s": f(1, 1, 49, 10),
             "g1": f(1, 150), "g6": f(6, 70), "m3": f(3, 130)}
    inits, nodes, outs = {}, [], []

    def conv(name, x, cout, cin_g, k, **attrs):
        inits[f"{name}_w"] = f(cout, cin_g, *k) * 0.3
        inits[f"{name}_b"] = f(cout)
        nodes.append(helper.make_node("Conv", [x, f"{name}_w", f"{name}_b"], [f"{name}_c"],
                                      name=name, **attrs))
        nodes.append(helper.make_node("Relu", [f"{name}_c"], [name]))
        outs.append(name)

    conv("k54", "x", 7, 6, (3, 3), pads=[1, 1, 1, 1])                  # K 54, 99 positions
    conv("k96", "x", 5, 6, (4, 4), pads=[2, 1, 1, 2], strides=[2, 2])  # K 96: two blocks
    conv("k150", "x", 9, 6, (5, 5))                                    # K 150: three blocks
    conv("grp", "d", 6, 4, (3, 3), group=2, pads=[1, 1, 1, 1])
    conv("dw1", "d", 8, 1, (3, 3), group=8, pads=[1, 1, 1, 1])
    conv("dw2", "d", 8, 1, (3, 3), group=8, pads=[1, 1, 1, 1], strides=[2, 2])
    conv("dwd", "d", 8, 1, (3, 3), group=8, pads=[2, 2, 2, 2], dilations=[2, 2])
    conv("first", "s", 12, 1, (10, 4), pads=[4, 1, 5, 2], strides=[2, 2])
    inits["w1"], inits["c1"] = f(13, 150), f(1, 13)
    nodes.append(helper.make_node("Gemm", ["g1", "w1", "c1"], ["gemm1"], transB=1,
                                  alpha=0.5, beta=2.0, name="gemm1"))
    inits["w6"], inits["b6"] = f(70, 21), f(21)
    nodes.append(helper.make_node("Gemm", ["g6", "w6", "b6"], ["gemm6"], name="gemm6"))
    inits["w3"] = f(130, 18)
    nodes.append(helper.make_node("MatMul", ["m3", "w3"], ["mm3"], name="mm3"))
    outs += ["gemm1", "gemm6", "mm3"]
    return make_model(nodes, feeds, outs, inits), feeds


def _run(model, feeds, tmp_path, target):
    p = tmp_path / "m.onnx"
    onnx.save(model, p)
    out = aicc.build(p, target=target, out=tmp_path / target)
    steps = json.loads((out / "manifest.json").read_text())["steps"]
    return open_bundle(out, cflags=STRICT_CFLAGS).run(feeds), {s["node"]: s["kernel"]
                                                               for s in steps}


def _float64(model, feeds):
    """The model run by onnxruntime in float64 (weights and inputs widened)."""
    m = onnx.load_from_string(model.SerializeToString())
    for t in m.graph.initializer:
        if t.data_type == onnx.TensorProto.FLOAT:
            t.CopyFrom(onnx.numpy_helper.from_array(
                onnx.numpy_helper.to_array(t).astype(np.float64), t.name))
    for v in list(m.graph.input) + list(m.graph.output):
        v.type.tensor_type.elem_type = onnx.TensorProto.DOUBLE
    return reference(m, {k: v.astype(np.float64) for k, v in feeds.items()})


@needs_m4
def test_fpu_kernels_against_onnxruntime_and_float64(tmp_path):
    model, feeds = _model(np.random.default_rng(5))
    got, kern = _run(model, feeds, tmp_path, M4)
    assert {kern[n] for n in ("k54", "k96", "k150", "grp")} == {"fpv4 im2col"}, kern
    assert {kern[n] for n in ("dw1", "dw2", "dwd", "first")} == {"fpv4 planes"}, kern
    assert {kern[n] for n in ("gemm1", "gemm6", "mm3")} == {"fpv4"}, kern
    want = reference(model, feeds)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-4, atol=1e-5, err_msg=k)
    # one rounding per product: no further from float64 than mul-then-add (generic), taken
    # over the whole model (each output alone may go either way by a rounding)
    plain, _ = _run(model, feeds, tmp_path, "generic")
    exact = _float64(model, feeds)
    err = lambda o: sum(float(np.abs(o[k].astype(np.float64) - exact[k]).sum())  # noqa: E731
                        for k in exact)
    assert err(got) <= err(plain) * 1.05, (err(got), err(plain))
    assert err(got) < err({k: v.astype(np.float32) for k, v in want.items()}) * 1.5
