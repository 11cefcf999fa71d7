"""The ``stem`` conv (kernels/conv/stem.py): a network's first conv, each input channel's sum
and the running total in registers. Auto takes it for the convs the channel-blocks rule splits
(one group, 2-4 input channels, channels x taps within one K block) where the broadcast
kernels' small-output rule does not take them first; forced, its outputs equal the
im2col path's (the tile GEMM, one K block per channel) bit for bit and are close to
onnxruntime's, on x86-avx2, x86-avx512 and arm-neon (under qemu): strides 1 and 2 (a 3x3
stride-1 conv is Winograd's), masked column tails, rows of output channels left over by the
tiles, clamps on one or both sides, an activation run over the rows (HardSwish), no bias,
1-D, batch 2, dilation."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

from aicc.compiler import compile_graph
from aicc.config import Options
from aicc.errors import ConfigError
from aicc.frontend import import_model
from aicc.runner import open_bundle
from aicc.targets import load_target, runnable_targets
from tests.oracle import (STRICT_CFLAGS, assert_close, build_node_forced, make_model, reference,
                          rng)
from tests.ops.test_conv_simd import with_activation

TARGETS = ([t for t in runnable_targets() if t in ("x86-avx2", "x86-avx512")]
           + ([] if load_target("arm-neon").missing_tools() else ["arm-neon"]))
pytestmark = pytest.mark.skipif(not TARGETS, reason="no SIMD target runs here")

# name: (input shape, output channels, kernel, conv attributes, bias, activation, params)
CASES = {
    "rgb_3x3_s2_tail": ((1, 3, 37, 45), 32, (3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]},
                        True, "Relu", {}),
    "rgb_2x2_s1_clip": ((1, 3, 20, 21), 13, (2, 2), {"pads": [1, 1, 0, 0]}, False, "Clip",
                        {"min": 0.0, "max": 0.5}),
    "two_4x4_s2": ((2, 2, 30, 26), 7, (4, 4), {"strides": [2, 2], "pads": [1, 2, 2, 1]}, True,
                   None, {}),
    "four_2x3_hardswish": ((1, 4, 19, 40), 5, (2, 3), {"strides": [2, 1], "pads": [0, 1, 1, 1]},
                           True, "HardSwish", {}),
    "rgb_3x3_dilated": ((1, 3, 24, 33), 10, (3, 3), {"dilations": [2, 2], "pads": [2, 2, 2, 2]},
                        True, "Relu", {}),
    "rgb_1d_k5_s2": ((1, 3, 50), 8, (5,), {"strides": [2], "pads": [2, 2]}, True, None, {}),
}


def _build(tmp_path, name, model_path, target, algo, act, params):
    prog, out = build_node_forced(model_path, target, tmp_path / name,
                                  sched={"algo": algo} if algo else None, act=act, params=params)
    body = "\n".join(s.body for s in prog.steps)
    return body, [s.ctx.kernel for s in prog.steps], open_bundle(out, cflags=STRICT_CFLAGS)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_stem_equals_channel_blocks_and_onnxruntime(case, target, tmp_path):
    xs, cout, k, attrs, has_bias, act, params = CASES[case]
    r = rng(7)
    x = r.normal(size=xs).astype(np.float32)
    w = (r.normal(size=(cout, xs[1], *k)) / np.sqrt(xs[1] * np.prod(k))).astype(np.float32)
    inits = {"w": w}
    names = ["x", "w"]
    if has_bias:
        inits["b"] = (r.normal(size=cout) * 0.5).astype(np.float32)
        names.append("b")
    conv = helper.make_node("Conv", names, ["y"], kernel_shape=list(k), **attrs)
    model = make_model([conv], {"x": x}, ["y"], inits)
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    body, kernels, stem = _build(tmp_path, "stem", path, target, "stem", act, params)
    assert "channel sum(s) in registers" in body and any("stem" in k for k in kernels), kernels
    _, _, blocks = _build(tmp_path, "im2col", path, target, "im2col", act, params)
    got, want_bits = stem.run({"x": x}), blocks.run({"x": x})
    assert np.array_equal(got["y"].view(np.uint32), want_bits["y"].view(np.uint32))
    if act:
        model = with_activation("Conv", names, {"kernel_shape": list(k), **attrs}, act, params,
                                {"x": x}, inits)
    assert_close(got, reference(model, {"x": x}))


@pytest.mark.parametrize("target", TARGETS)
def test_auto_takes_stem_for_a_first_conv(target, tmp_path):
    """Auto on x86: 3 -> 16 channels, 3x3 stride 2 onto 48 x 48 (outputs past the broadcast
    kernels' small-output rule), and not for 5 input channels (one chain over 45 products).
    Not on arm-neon (its description: more instructions than its GEMMs)."""
    r = rng(3)
    x = r.normal(size=(1, 3, 96, 96)).astype(np.float32)
    x5 = r.normal(size=(1, 5, 96, 96)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["x5", "w5"], ["y5"], strides=[2, 2], pads=[1, 1, 1, 1])]
    inits = {"w": r.normal(size=(16, 3, 3, 3)).astype(np.float32),
             "w5": r.normal(size=(16, 5, 3, 3)).astype(np.float32)}
    model = make_model(nodes, {"x": x, "x5": x5}, ["y", "y5"], inits)
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    g = import_model(path)
    _, prog = compile_graph(g, Options.load(target))
    kinds = {s.node.inputs[0]: s.ctx.kernel for s in prog.steps}
    assert kinds["x"].endswith(" stem") == (target != "arm-neon"), kinds
    assert not kinds["x5"].endswith(" stem"), kinds


@pytest.mark.parametrize("target", TARGETS[:1])
def test_stem_refused_where_the_sums_do_not_fit(target, tmp_path):
    """Forced on a conv it does not take (16 input channels): one error naming why."""
    x = rng(0).normal(size=(1, 16, 8, 8)).astype(np.float32)
    w = rng(1).normal(size=(4, 16, 3, 3)).astype(np.float32)
    model = make_model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
                       {"x": x}, ["y"], {"w": w})
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    with pytest.raises(ConfigError, match="conv algo 'stem' needs"):
        _build(tmp_path, "b", path, target, "stem", None, {})
