"""SiLU (Sigmoid(x) * x, as PyTorch exports it) fused into the Conv / Gemm / MatMul before it:
fuse-silu makes it one Swish, fuse-activation puts that into the producer's epilogue. The
fused bundle gives the unfused one's bits (the epilogues run the Swish op's expression, with
the same exp: vectors, or the lane-0 form), and onnxruntime's values within the tolerance.

One model per target with the conv kernels' epilogues (3x3: Winograd / im2col, 1x1 direct, a
strided conv, depthwise, many channels on a small plane: transposed; channel-last chains on
x86 where layout-nhwc takes them) and Gemm / MatMul, on the x86 targets this machine runs,
generic and arm-neon (under qemu).
"""
import json

import numpy as np
import onnx
import pytest
import yaml
from onnx import helper

import aicc
from aicc.config import Options
from aicc.runner import open_bundle
from aicc.targets import load_target, runnable_targets
from tests.oracle import STRICT_CFLAGS, make_model, reference

TARGETS = ["generic"] + [t for t in runnable_targets() if t == "x86-avx2"] + \
    ([] if load_target("arm-neon").missing_tools() else ["arm-neon"])


def _model(r):
    f = lambda *s: (r.normal(size=s) * 0.5).astype(np.float32)   # noqa: E731
    feeds = {"x": f(1, 16, 12, 12) * 4, "s": f(1, 64, 7, 7) * 4, "g": f(3, 40) * 4}
    inits, nodes, outs = {}, [], []

    def silu(name, prod):
        nodes.append(prod)
        nodes.append(helper.make_node("Sigmoid", [f"{name}_p"], [f"{name}_s"]))
        nodes.append(helper.make_node("Mul", [f"{name}_p", f"{name}_s"], [name]))
        outs.append(name)

    def conv(name, x, cout, cin_g, k, **attrs):
        inits[f"{name}_w"], inits[f"{name}_b"] = f(cout, cin_g, *k), f(cout)
        silu(name, helper.make_node("Conv", [x, f"{name}_w", f"{name}_b"], [f"{name}_p"],
                                    name=name, **attrs))

    conv("c3", "x", 24, 16, (3, 3), pads=[1, 1, 1, 1])
    conv("c1", "x", 20, 16, (1, 1))
    conv("cs2", "x", 12, 16, (3, 3), pads=[1, 1, 1, 1], strides=[2, 2])
    conv("dw", "x", 16, 1, (3, 3), pads=[1, 1, 1, 1], group=16)
    conv("pw", "dw", 32, 16, (1, 1))                      # a depthwise -> pointwise chain
    conv("t7", "s", 96, 64, (1, 1))                       # many channels, 7x7
    inits["gw"], inits["gc"] = f(33, 40), f(33)
    silu("gemm", helper.make_node("Gemm", ["g", "gw", "gc"], ["gemm_p"], transB=1))
    inits["mw"] = f(40, 21)
    silu("mm", helper.make_node("MatMul", ["g", "mw"], ["mm_p"]))
    return make_model(nodes, feeds, outs, inits, opset=17), feeds


def _build(path, target, out, fuse: bool):
    config = None
    if not fuse:
        pipe = [{n: o} if o else n for n, o in Options.load(target).pipeline
                if n != "fuse-activation"]
        config = out.with_suffix(".yaml")
        config.write_text(yaml.safe_dump({"pipeline": pipe}))
    b = aicc.build(path, target=target, out=out, config=config)
    ops = [s["op"] for s in json.loads((b / "manifest.json").read_text())["steps"]]
    return open_bundle(b, cflags=STRICT_CFLAGS), ops


@pytest.mark.parametrize("target", TARGETS)
def test_silu_fused_same_bits_as_unfused(target, tmp_path):
    model, feeds = _model(np.random.default_rng(24))
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    fused, ops = _build(path, target, tmp_path / "fused", True)
    plain, plain_ops = _build(path, target, tmp_path / "plain", False)
    assert "Swish" not in ops and plain_ops.count("Swish") == 8, (ops, plain_ops)
    got, want = fused.run(feeds), plain.run(feeds)
    ref = reference(model, feeds)
    for k in ref:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-4, atol=1e-5, err_msg=k)
    assert any(np.any(got[k] < -0.2) for k in ref)     # the negative side of SiLU reached
