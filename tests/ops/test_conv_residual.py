"""A Conv's fused residual Add (passes/fuse_residual.py, kernels/conv/residual.py) compiled on
every kernel path: Winograd F(2,3) / F(4,3) with tiles or output channels vectorized, direct,
im2col, implicit, transposed, depthwise, dwchan, bcast, the portable kernels, float64. Each conv
is forced to its path by a ``nodes:`` override; batch 2, odd planes, with and without bias,
Relu / Clip / Sigmoid / no activation, the Add's operands in both orders. Checked against
onnxruntime, and bit for bit against the same build without the fusion (residuals holding
NaN / Inf / -0 too)."""
import numpy as np
import onnx
import pytest
from onnx import helper

import aicc
from aicc.config import Options
from aicc.targets import runnable_targets
from tests.oracle import STRICT_CFLAGS, assert_close, make_model, reference, rng

SIMD = [t for t in runnable_targets() if t in ("x86-avx2", "x86-avx512")]
P1 = {"pads": [1, 1, 1, 1]}
# (x shape, w shape, attrs, schedule, act, kernel marker in the manifest)
CASES = [
    ((2, 16, 9, 37), (16, 16, 3, 3), P1, {"algo": "winograd", "wino_m": 2, "wino_chan": 0},
     "Relu", "winograd F(2x2"),
    ((2, 16, 9, 11), (16, 16, 3, 3), P1, {"algo": "winograd", "wino_chan": 0}, None,
     "winograd F(2x2"),                # wino_m 0 (auto): F(2,3) on every target
    ((2, 16, 7, 7), (24, 16, 3, 3), P1, {"algo": "winograd", "wino_m": 2, "wino_chan": 2},
     "Relu", "winograd F(2x2,3x3) channels"),
    ((1, 8, 10, 70), (8, 8, 3, 3), P1, {"algo": "winograd", "wino_m": 4, "wino_chan": 0},
     "Clip", "winograd F(4x4"),
    ((1, 8, 6, 5), (20, 8, 3, 3), P1, {"algo": "winograd", "wino_m": 4, "wino_chan": 2}, None,
     "channels"),
    ((1, 16, 8, 8), (16, 16, 3, 3), P1, {"algo": "winograd"}, "Sigmoid", "winograd"),
    ((2, 12, 5, 7), (20, 12, 1, 1), {}, {"algo": "direct"}, "Relu", "direct"),
    ((1, 6, 9, 9), (10, 6, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}, {"algo": "im2col"},
     "Clip", "im2col"),
    ((2, 5, 8, 9), (7, 5, 3, 3), P1, {"algo": "implicit"}, None, "implicit"),
    ((1, 32, 4, 4), (48, 32, 3, 3), P1, {"algo": "transposed"}, "Relu", "transposed"),
    ((2, 12, 7, 9), (12, 1, 3, 3), {"pads": [1, 1, 1, 1], "group": 12}, {"algo": "depthwise"},
     "Relu", "depthwise"),
    ((1, 16, 6, 6), (16, 1, 3, 3), {"pads": [1, 1, 1, 1], "group": 16}, {"algo": "dwchan"},
     None, "dwchan"),
    ((2, 3, 9, 11), (20, 3, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]},
     {"algo": "bcast"}, "Relu", "bcast"),
]
GENERIC = [c for c in CASES if c[3]["algo"] in ("winograd", "direct", "depthwise")][:4]
SPECIAL = np.array([np.nan, np.inf, -np.inf, -0.0, 1e30], np.float32)


def model(cases, dtype=np.float32, special=False):
    """One Conv (named conv{i}) -> Add(residual input) [-> act] per case; the residual
    r{i} is a graph input of the conv's output shape, the first operand for odd i."""
    feeds, inits, nodes, outs = {}, {}, [], []
    for i, (xs, ws, attrs, _, act, _) in enumerate(cases):
        r = rng(100 + i)
        feeds[f"x{i}"] = r.normal(size=xs).astype(dtype)
        inits[f"w{i}"] = (r.normal(size=ws) / np.sqrt(np.prod(ws[1:]))).astype(dtype)
        ins = [f"x{i}", f"w{i}"]
        if i % 3 != 2:
            inits[f"b{i}"] = r.normal(size=ws[0]).astype(dtype)
            ins.append(f"b{i}")
        oshape = onnx.shape_inference.infer_shapes(make_model(
            [helper.make_node("Conv", ins, ["o"], **attrs)], {ins[0]: feeds[ins[0]]}, ["o"],
            {k: inits[k] for k in ins[1:]})).graph.output[0].type.tensor_type.shape
        res = r.normal(size=[d.dim_value for d in oshape.dim]).astype(dtype)
        if special:
            res.flat[:SPECIAL.size] = SPECIAL
        feeds[f"r{i}"] = res
        nodes.append(helper.make_node("Conv", ins, [f"c{i}"], name=f"conv{i}", **attrs))
        add = [f"r{i}", f"c{i}"] if i % 2 else [f"c{i}", f"r{i}"]
        nodes.append(helper.make_node("Add", add, [f"s{i}" if act else f"y{i}"]))
        if act == "Clip":
            inits[f"lo{i}"], inits[f"hi{i}"] = np.array(-0.5, dtype), np.array(1.0, dtype)
            nodes.append(helper.make_node("Clip", [f"s{i}", f"lo{i}", f"hi{i}"], [f"y{i}"]))
        elif act:
            nodes.append(helper.make_node(act, [f"s{i}"], [f"y{i}"]))
        outs.append(f"y{i}")
    return make_model(nodes, feeds, outs, inits), feeds


def build(tmp_path, target, cases, dtype=np.float32, fuse=True, special=False):
    m, feeds = model(cases, dtype, special)
    path = tmp_path / f"m{int(fuse)}.onnx"
    onnx.save(m, str(path))
    over = {"nodes": {f"conv{i}": {"schedule": c[3]} for i, c in enumerate(cases)}}
    if not fuse:
        over["pipeline"] = [n for n, _ in Options.load(target).pipeline if n != "fuse-residual"]
    out = aicc.build(path, target=target, out=tmp_path / f"b{int(fuse)}", overrides=over)
    return aicc.load(out, cflags=STRICT_CFLAGS), m, feeds


@pytest.mark.parametrize("target", SIMD)
def test_every_simd_path(target, tmp_path):
    b, m, feeds = build(tmp_path, target, CASES)
    steps = b.manifest["steps"]
    assert [s["op"] for s in steps] == ["Conv"] * len(CASES)
    bodies = (b.path / "model.c").read_text().split("/* step ")[1:]
    for s, case, body in zip(steps, CASES, bodies):
        assert s["fused"]["residual"] == 1 and s["fused"].get("act") == case[4], s
        assert case[5] in s["kernel"], (s["kernel"], case)
        assert "fused residual Add" in body, (case, s["kernel"])
    assert_close(b.run(feeds), reference(m, feeds), rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("target", ["generic"] + SIMD)
def test_fused_equals_unfused_bitwise(target, tmp_path):
    """Every activation: the fused step runs the separate Add's loops."""
    cases = CASES if target != "generic" else GENERIC
    fused, _, feeds = build(tmp_path, target, cases, special=True)
    plain, _, _ = build(tmp_path, target, cases, fuse=False, special=True)
    assert len(plain.manifest["steps"]) == 2 * len(cases)
    got, want = fused.run(feeds), plain.run(feeds)
    for k in want:
        assert got[k].tobytes() == want[k].tobytes(), k
        assert np.isnan(got[k]).any(), k                # the residual's NaN reached y


def test_generic_float64(tmp_path):
    b, m, feeds = build(tmp_path, "generic", GENERIC, dtype=np.float64)
    assert all(s["fused"].get("residual") == 1 for s in b.manifest["steps"])
    assert_close(b.run(feeds), reference(m, feeds), rtol=1e-10, atol=1e-12)
