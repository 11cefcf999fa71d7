"""The grouped input-broadcast conv (kernels/conv/grouped.py) on the SIMD targets, against
onnxruntime on random values: groups of 8 / 12 / 16 / 20 / 24 / 64 output channels (one or
several vectors, a masked last vector, x86-avx512's 8-lane vectors for 8 / 20 / 24), stride 1
and 2, symmetric and asymmetric pads, no padding (the input read in place), dilation, 1-D,
1x1, 7x7 (taps past the unroll limit), batch 2, with and without bias, fused activations;
the choice auto makes; bit for bit against the im2col variant (the same FMA chain over
(c, ky, kx) when K is one K block), NaN/Inf inputs too."""
import numpy as np
import onnx
import pytest
from onnx import helper

import aicc
from tests.oracle import STRICT_CFLAGS, assert_close, make_model, reference, rng
from tests.ops.test_conv import ACTS
from tests.ops.test_conv_simd import TARGETS, run

pytestmark = pytest.mark.skipif(not TARGETS, reason="host runs no x86 SIMD target")

MARK = "grouped direct"

# (x shape, w shape, attrs); the name says the output channels per group
CASES = {
    "g16_s1": ((1, 48, 14, 14), (48, 16, 3, 3), {"group": 3, "pads": [1, 1, 1, 1]}),
    "g16_s2_odd": ((1, 64, 17, 19), (64, 16, 3, 3), {"group": 4, "strides": [2, 2],
                                                      "pads": [1, 1, 1, 1]}),
    "g8_batch2_asym": ((2, 24, 9, 11), (24, 8, 3, 3), {"group": 3, "pads": [1, 0, 1, 2]}),
    "g24_s2": ((1, 72, 12, 12), (72, 24, 3, 3), {"group": 3, "strides": [2, 2],
                                                  "pads": [1, 1, 1, 1]}),
    "g64_blocks": ((1, 128, 7, 7), (128, 64, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    "g12_tail": ((1, 36, 10, 9), (36, 12, 3, 3), {"group": 3, "pads": [1, 1, 1, 1]}),
    "g20_cin10_s2": ((1, 20, 9, 9), (40, 10, 3, 3), {"group": 2, "strides": [2, 2],
                                                      "pads": [1, 1, 1, 1]}),
    "g16_1d_s2": ((2, 32, 30), (32, 16, 5), {"group": 2, "strides": [2], "pads": [2, 1]}),
    "g16_dil2": ((1, 32, 15, 15), (32, 16, 3, 3), {"group": 2, "dilations": [2, 2],
                                                    "pads": [2, 2, 2, 2]}),
    "g16_nopad": ((1, 32, 9, 10), (32, 16, 3, 3), {"group": 2}),
    "g16_1x1": ((1, 64, 7, 7), (64, 16, 1, 1), {"group": 4}),
    "g16_7x7": ((1, 32, 12, 12), (32, 16, 7, 7), {"group": 2, "pads": [3, 3, 3, 3]}),
    "g16_wide_s2": ((1, 32, 9, 115), (32, 16, 3, 3), {"group": 2, "strides": [2, 2],
                                                      "pads": [1, 1, 1, 1]}),
}


def data(case, seed=0):
    xs, ws, attrs = CASES[case]
    r = rng(seed + len(case))
    x = r.normal(size=xs).astype(np.float32)
    w = (r.normal(size=ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
    return x, w, attrs


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_grouped_forced(case, target, tmp_path):
    x, w, attrs = data(case)
    run(tmp_path, target, x, w, attrs, sched={"algo": "grouped"}, marker=MARK)
    run(tmp_path, target, x, w, attrs, bias=False, sched={"algo": "grouped"}, marker=MARK)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("act,params,_", ACTS)
def test_grouped_activations(act, params, _, target, tmp_path):
    """Clamps in registers, the others as the scalar / vector pass per output row."""
    x, w, attrs = data("g12_tail", seed=3)
    run(tmp_path, target, x * 3, w * 2, attrs, act=act, params=params,
        sched={"algo": "grouped"}, marker=MARK)


@pytest.mark.parametrize("target", TARGETS)
def test_grouped_rejects(target, tmp_path):
    """Run-time weights, one group, one input channel per group: a build error naming it."""
    x, w, attrs = data("g16_s1")
    with pytest.raises(Exception, match="grouped"):
        run(tmp_path, target, x, w, attrs, runtime_w=True, sched={"algo": "grouped"})
    with pytest.raises(Exception, match="grouped"):
        run(tmp_path, target, x[:, :16], w, {"pads": [1, 1, 1, 1]}, sched={"algo": "grouped"})
    with pytest.raises(Exception, match="grouped"):
        run(tmp_path, target, x, w[:, :1], {"group": 48}, sched={"algo": "grouped"})


def _model(cases, special=False):
    """One Conv (conv{i}) -> Relu per case; x{i} holds NaN / Inf / -0 when special."""
    feeds, inits, nodes, outs = {}, {}, [], []
    for i, case in enumerate(cases):
        x, w, attrs = data(case, seed=i)
        if special:
            x.flat[[1, 7, 20, 33]] = [np.nan, np.inf, -np.inf, -0.0]
        feeds[f"x{i}"], inits[f"w{i}"] = x, w
        inits[f"b{i}"] = rng(i).normal(size=w.shape[0]).astype(np.float32)
        nodes.append(helper.make_node("Conv", [f"x{i}", f"w{i}", f"b{i}"], [f"c{i}"],
                                      name=f"conv{i}", **attrs))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"y{i}"]))
        outs.append(f"y{i}")
    return make_model(nodes, feeds, outs, inits), feeds


def test_grouped_auto_choice(tmp_path):
    """auto takes every case (8 - 64 output channels per group filling >= 75% of the lanes)
    except the 4 channels per group of the last; x86-avx512 runs 8 / 20 / 24 channels per
    group on 8-lane vectors."""
    cases = sorted(CASES) + ["g4"]
    CASES["g4"] = ((1, 16, 8, 8), (16, 4, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]})
    try:
        m, feeds = _model(cases)
    finally:
        del CASES["g4"]
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    for target in TARGETS:
        b = aicc.load(aicc.build(path, target=target, out=tmp_path / target),
                      cflags=STRICT_CFLAGS)
        kinds = {s["node"]: s["kernel"] for s in b.manifest["steps"] if s["op"] == "Conv"}
        got = [kinds[f"conv{i}"].endswith(" grouped") for i in range(len(cases))]
        assert got == [True] * (len(cases) - 1) + [False], kinds
        for c in ("g8_batch2_asym", "g20_cin10_s2", "g24_s2"):
            assert kinds[f"conv{cases.index(c)}"] == "avx2 grouped", kinds
        assert_close(b.run(feeds), reference(m, feeds), rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("target", TARGETS)
def test_grouped_equals_im2col_bitwise(target, tmp_path):
    """The same FMA chain over (c, ky, kx) from +0, + bias, clamp: the same bits as im2col with
    one K block (kc 1024 here: g64's K = 576), NaN/Inf inputs too (which reach the outputs)."""
    cases = sorted(CASES)
    m, feeds = _model(cases, special=True)
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    got = {}
    for algo in ("grouped", "im2col"):
        over = {"nodes": {f"conv{i}": {"schedule": {"algo": algo, "kc": 1024}}
                          for i in range(len(cases))}}
        out = aicc.build(path, target=target, out=tmp_path / algo, overrides=over)
        b = aicc.load(out, cflags=STRICT_CFLAGS)
        assert all(algo in s["kernel"] for s in b.manifest["steps"]), b.manifest["steps"]
        got[algo] = b.run(feeds)
    for k in got["im2col"]:
        assert got["grouped"][k].tobytes() == got["im2col"][k].tobytes(), k
    assert_close(got["grouped"], reference(m, feeds), rtol=1e-4, atol=2e-5)
    assert any(np.isnan(v).any() for v in got["grouped"].values())
