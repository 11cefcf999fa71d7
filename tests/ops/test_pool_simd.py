"""Pooling on the SIMD targets (x86-avx2, x86-avx512, arm-neon under its emulator;
aicc/kernels/pool/simd.py) against
onnxruntime / numpy: MaxPool (no Indices), AveragePool (count_include_pad both ways),
GlobalAveragePool, GlobalMaxPool on awkward shapes (widths around the vector widths, 1-wide,
kernels larger than the input with padding, ceil_mode, dilation, strides 1/2/3, 1-D and 3-D),
NaN/Inf windows. Many nodes share one model per test (one build per target). x86 targets the
host cannot run, and arm-neon without its cross compiler or emulator, are not generated."""
import numpy as np
import pytest
from onnx import helper

from aicc.targets import load_target, runnable_targets
from tests.oracle import assert_close, check, compile_and_run, make_model, rng
from tests.ops.test_pool import CASES

TARGETS = ([t for t in runnable_targets() if t in ("x86-avx2", "x86-avx512")]
           + ([] if load_target("arm-neon").missing_tools() else ["arm-neon"]))
pytestmark = pytest.mark.skipif(not TARGETS, reason="no SIMD target runs here")

# (input shape, attributes) beyond test_pool.CASES: widths 1, 7/8/9, 15/16/17, 31/33 around
# the vector widths; kernels larger than the input (with padding); ceil_mode; dilations;
# strides 1, 2, 3 and 4 along W (plain loads, de-interleave, gathers)
EXTRA = {
    "w1": ((1, 3, 5, 1), {"kernel_shape": [3, 1], "pads": [1, 0, 1, 0]}),
    "w1_k3_pad": ((1, 2, 4, 1), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    "k_gt_input": ((1, 2, 2, 3), {"kernel_shape": [3, 4], "pads": [1, 2, 1, 2]}),
    "k_gt_input_s2_ceil": ((1, 2, 3, 2), {"kernel_shape": [4, 3], "strides": [2, 2],
                                          "pads": [2, 1, 1, 2], "ceil_mode": 1}),
    "s1_w9": ((2, 3, 6, 9), {"kernel_shape": [2, 3], "pads": [0, 1, 1, 1]}),
    "s1_w17": ((1, 2, 5, 17), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    "s1_w33_k5": ((1, 2, 6, 33), {"kernel_shape": [3, 5], "pads": [1, 2, 1, 2]}),
    "s2_w15": ((1, 2, 7, 15), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "s2_w16": ((1, 3, 8, 16), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    "s2_w31_ceil": ((1, 2, 9, 31), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    "s2_w34_k4_d2": ((1, 2, 9, 34), {"kernel_shape": [2, 4], "strides": [2, 2],
                                     "dilations": [1, 2], "pads": [1, 3, 0, 3]}),
    "s2_w64_resnet": ((1, 4, 12, 64), {"kernel_shape": [3, 3], "strides": [2, 2],
                                       "pads": [1, 1, 1, 1]}),
    "s3_w40": ((1, 2, 8, 40), {"kernel_shape": [3, 3], "strides": [3, 3], "pads": [1, 1, 1, 1]}),
    "s4_w51_ceil": ((1, 2, 9, 51), {"kernel_shape": [3, 5], "strides": [2, 4], "ceil_mode": 1,
                                    "pads": [0, 2, 1, 1]}),
    "s3_d3_w47": ((1, 2, 10, 47), {"kernel_shape": [2, 3], "strides": [1, 3],
                                   "dilations": [2, 3], "pads": [1, 2, 1, 1]}),
    "s1_d2_w23": ((2, 2, 7, 23), {"kernel_shape": [3, 3], "dilations": [2, 2],
                                  "pads": [2, 2, 2, 2]}),
    "1d_w100_s2": ((2, 3, 100), {"kernel_shape": [5], "strides": [2], "pads": [2, 2]}),
    "3d_w19": ((1, 2, 4, 5, 19), {"kernel_shape": [2, 3, 3], "strides": [1, 2, 2],
                                  "pads": [1, 1, 1, 0, 1, 1]}),
    # more output rows than one batch of short rows holds (pool/simd.py row_batch), the
    # last batch shorter: avx2 45 rows in batches of 18 (strided: 31 in 25 and 6)
    "s1_h45_batches": ((1, 2, 45, 40), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    "s2_h61_batches": ((1, 2, 61, 30), {"kernel_shape": [3, 3], "strides": [2, 2],
                                        "pads": [1, 1, 1, 1]}),
}
ALL = {**CASES, **EXTRA}
# onnxruntime rejects these with dilations for AveragePool before opset 19
DILATED = {k for k, (_, a) in ALL.items() if "dilations" in a}


def _model(op, cases, seed, **extra):
    nodes, feeds, outs = [], {}, []
    for i, name in enumerate(sorted(cases)):
        shape, attrs = ALL[name]
        x = rng(seed + i).normal(size=shape).astype(np.float32)
        feeds[f"x{i}"] = x
        nodes.append(helper.make_node(op, [f"x{i}"], [f"y_{name}"], **attrs, **extra))
        outs.append(f"y_{name}")
    return nodes, feeds, outs


@pytest.mark.parametrize("target", TARGETS)
def test_maxpool(target, tmp_path):
    nodes, feeds, outs = _model("MaxPool", ALL, 10)
    check(make_model(nodes, feeds, outs, opset=19), feeds, tmp_path, target=target)


@pytest.mark.parametrize("include_pad", [0, 1])
@pytest.mark.parametrize("target", TARGETS)
def test_averagepool(target, include_pad, tmp_path):
    nodes, feeds, outs = _model("AveragePool", ALL, 20, count_include_pad=include_pad)
    check(make_model(nodes, feeds, outs, opset=19), feeds, tmp_path, target=target)


@pytest.mark.parametrize("target", TARGETS)
def test_simd_kernel_used_and_portable_indices(target, tmp_path):
    """The SIMD helpers are in the bundle; MaxPool with Indices keeps the portable kernel;
    aicc_kernel: generic on a node forces the portable kernel (same values)."""
    import onnx

    from aicc.compiler import compile_graph
    from aicc.config import Options
    from aicc.frontend import import_model
    shape, attrs = ALL["s2_w31_ceil"]
    x = rng(3).normal(size=shape).astype(np.float32)
    nodes = [helper.make_node("MaxPool", ["x"], ["a"], **attrs),
             helper.make_node("MaxPool", ["x"], ["b", "bi"], **attrs),
             helper.make_node("AveragePool", ["x"], ["c"], **attrs),
             helper.make_node("GlobalAveragePool", ["x"], ["d"]),
             helper.make_node("GlobalMaxPool", ["x"], ["e"])]
    model = make_model(nodes, {"x": x}, ["a", "b", "bi", "c", "d", "e"])
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    g = import_model(path)
    _, prog = compile_graph(g, Options.load(target))
    isa = load_target(target).kernels[0]
    bodies = {s.node.outputs[0]: s.body for s in prog.steps}
    for o in "acde":
        assert "aicc_ps_" in bodies[o] and isa in bodies[o], o
    assert "aicc_maxpool_idx" in bodies["b"]
    check(model, {"x": x}, tmp_path, target=target)
    for n in g.nodes:
        n.attrs["aicc_kernel"] = "generic"
    _, prog = compile_graph(g, Options.load(target))
    assert not any("aicc_ps_" in s.body for s in prog.steps)


GLOBAL_SHAPES = [(1, 3, 1, 1), (2, 5, 7, 7), (1, 3, 37, 41), (2, 3, 13), (1, 2, 3, 4, 5),
                 (1, 16, 8, 8), (1, 4, 1, 16), (1, 4, 1, 17), (1, 5, 1, 31), (1, 3, 1, 32),
                 (1, 3, 1, 33), (1, 2, 1, 15), (3, 1, 2, 3), (1, 9, 8, 1)]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pool(op, target, tmp_path):
    nodes, feeds, outs = [], {}, []
    for i, s in enumerate(GLOBAL_SHAPES):
        x = (rng(30 + i).normal(size=s) - (2 if op == "GlobalMaxPool" else -0.5)).astype(np.float32)
        feeds[f"x{i}"] = x
        nodes.append(helper.make_node(op, [f"x{i}"], [f"y{i}"]))
        outs.append(f"y{i}")
    check(make_model(nodes, feeds, outs), feeds, tmp_path, target=target)


# one window covering the whole plane (run as a global pool), and near misses that are not
WHOLE = {
    "resnet8": ((1, 16, 8, 8), {"kernel_shape": [8, 8], "strides": [8, 8]}, True),
    "odd_s1": ((2, 3, 5, 7), {"kernel_shape": [5, 7]}, True),
    "ceil": ((1, 3, 9, 17), {"kernel_shape": [9, 17], "strides": [2, 2], "ceil_mode": 1}, True),
    "1d": ((1, 3, 13), {"kernel_shape": [13], "strides": [4]}, True),
    "3d": ((1, 2, 3, 4, 5), {"kernel_shape": [3, 4, 5]}, True),
    "padded": ((1, 3, 8, 8), {"kernel_shape": [8, 8], "pads": [1, 0, 0, 0]}, False),
    "k_lt_plane": ((1, 3, 8, 8), {"kernel_shape": [8, 7]}, False),
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op", ["AveragePool", "MaxPool"])
def test_whole_plane_window_as_global(op, target, tmp_path):
    """A window pool whose one window covers each whole plane runs on the global helper
    (same values as onnxruntime, a NaN in the plane gives NaN for MaxPool); padded windows
    and smaller kernels keep the window helper."""
    import onnx

    from aicc.compiler import compile_graph
    from aicc.config import Options
    from aicc.frontend import import_model
    nodes, feeds, outs = [], {}, []
    for i, (name, (shape, attrs, _w)) in enumerate(WHOLE.items()):
        feeds[f"x{i}"] = rng(60 + i).normal(size=shape).astype(np.float32)
        nodes.append(helper.make_node(op, [f"x{i}"], [f"y_{name}"], **attrs))
        outs.append(f"y_{name}")
    model = make_model(nodes, feeds, outs)
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    _, prog = compile_graph(import_model(path), Options.load(target))
    bodies = {s.node.outputs[0]: s.body for s in prog.steps}
    for name, (_s, _a, whole) in WHOLE.items():
        assert ("aicc_ps_global_" in bodies[f"y_{name}"]) == whole, name
    got, _ = check(model, feeds, tmp_path, target=target)
    feeds["x1"][1, 2, 4, 6] = np.nan                     # odd_s1: the last value of a plane
    (tmp_path / "nan").mkdir()
    nan = compile_and_run(model, feeds, tmp_path / "nan", target=target)["y_odd_s1"]
    assert np.isnan(nan[1, 2]).all()
    nan[1, 2] = got["y_odd_s1"][1, 2]
    np.testing.assert_array_equal(nan, got["y_odd_s1"])


# -- NaN / Inf ---------------------------------------------------------------------------

def _np_maxpool2d(x, k, s, p, d=(1, 1), ceil=0):
    """numpy MaxPool (NaN propagates, padding is -inf), 2-D, NCHW."""
    n, c, h, w = x.shape
    pe = (p[2], p[3])
    xp = np.full((n, c, h + p[0] + pe[0] + 2 * k[0] * d[0], w + p[1] + pe[1] + 2 * k[1] * d[1]),
                 -np.inf, np.float32)
    xp[:, :, p[0]:p[0] + h, p[1]:p[1] + w] = x
    outs = []
    for ax, (i, pb, pa) in enumerate(((h, p[0], pe[0]), (w, p[1], pe[1]))):
        num = i + pb + pa - d[ax] * (k[ax] - 1) - 1
        o = (-(-num // s[ax]) if ceil else num // s[ax]) + 1
        if ceil and (o - 1) * s[ax] >= i + pb:
            o -= 1
        outs.append(o)
    y = np.empty((n, c, *outs), np.float32)
    for r in range(outs[0]):
        for q in range(outs[1]):
            win = xp[:, :, r * s[0]:r * s[0] + d[0] * (k[0] - 1) + 1:d[0],
                     q * s[1]:q * s[1] + d[1] * (k[1] - 1) + 1:d[1]]
            y[:, :, r, q] = win.reshape(n, c, -1).max(axis=-1)     # np.max propagates NaN
    return y


NAN_CASES = [  # (shape, kernel, strides, pads, dilations, ceil)
    ((1, 2, 9, 37), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 0),
    ((1, 2, 8, 35), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 0),
    ((1, 2, 9, 42), (2, 3), (2, 3), (0, 1, 1, 1), (1, 1), 1),
    ((1, 2, 7, 20), (3, 2), (1, 2), (2, 1, 2, 1), (2, 3), 0),
    ((1, 1, 3, 1), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 0),
]


@pytest.mark.parametrize("target", TARGETS)
def test_maxpool_nan_anywhere_in_window(target, tmp_path):
    """A NaN at any window position (first, middle, last tap; vertical and horizontal
    neighbours; vector lane 0 and the last lane; the masked tail) gives NaN; +Inf wins
    elsewhere, -Inf and padding never hide a real value."""
    nodes, feeds, want = [], {}, {}
    for i, (shape, k, s, p, d, ceil) in enumerate(NAN_CASES):
        x = rng(40 + i).normal(size=shape).astype(np.float32)
        flat = x.reshape(-1)
        pos = rng(50 + i).choice(flat.size, size=max(3, flat.size // 25), replace=False)
        flat[pos[::3]] = np.nan
        flat[pos[1::3]] = np.inf
        flat[pos[2::3]] = -np.inf
        x[0, 0, 0, 0] = np.nan                   # first element: lane 0, first tap
        x[0, -1, -1, -1] = np.nan                # last element: tail lanes, last tap
        feeds[f"x{i}"] = x
        nodes.append(helper.make_node("MaxPool", [f"x{i}"], [f"y{i}"], kernel_shape=list(k),
                                      strides=list(s), pads=list(p), dilations=list(d),
                                      ceil_mode=ceil))
        want[f"y{i}"] = _np_maxpool2d(x, k, s, p, d, ceil)
        assert np.isnan(want[f"y{i}"]).any()
    assert all(np.isfinite(v).any() for v in list(want.values())[:-1])
    got = compile_and_run(make_model(nodes, feeds, list(want), opset=19), feeds, tmp_path,
                          target=target)
    assert_close(got, want, rtol=0, atol=0)


@pytest.mark.parametrize("target", TARGETS)
def test_nan_only_in_one_operand_position(target, tmp_path):
    """One NaN per plane, swept over every position of a 3x19 plane (so it is, in turn, the
    accumulator and the new operand of every max): each output window containing it is NaN."""
    h, w = 3, 19
    x = np.tile(rng(60).normal(size=(1, 1, h, w)).astype(np.float32), (1, h * w, 1, 1))
    for q in range(h * w):
        x[0, q, q // w, q % w] = np.nan
    feeds = {"x": x}
    nodes = [helper.make_node("MaxPool", ["x"], ["m1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("MaxPool", ["x"], ["m2"], kernel_shape=[2, 3], strides=[1, 2],
                              pads=[1, 1, 0, 1]),
             helper.make_node("GlobalMaxPool", ["x"], ["g"])]
    got = compile_and_run(make_model(nodes, feeds, ["m1", "m2", "g"], opset=19), feeds, tmp_path,
                          target=target)
    want = {"m1": _np_maxpool2d(x, (3, 3), (1, 1), (1, 1, 1, 1)),
            "m2": _np_maxpool2d(x, (2, 3), (1, 2), (1, 1, 0, 1)),
            "g": np.full((1, h * w, 1, 1), np.nan, np.float32)}
    assert_close(got, want, rtol=0, atol=0)


@pytest.mark.parametrize("target", TARGETS)
def test_global_and_average_nan_inf(target, tmp_path):
    nodes, feeds, want = [], {}, {}
    for i, s in enumerate([(1, 4, 7, 7), (1, 3, 1, 17), (1, 3, 5, 13)]):
        x = rng(70 + i).normal(size=s).astype(np.float32)
        x[0, 0].flat[-1] = np.nan                # in the masked tail
        x[0, 1].flat[0] = np.inf
        x[0, 2].flat[x[0, 2].size // 2] = -np.inf
        feeds[f"x{i}"] = x
        nodes += [helper.make_node("GlobalMaxPool", [f"x{i}"], [f"gm{i}"]),
                  helper.make_node("GlobalAveragePool", [f"x{i}"], [f"ga{i}"]),
                  helper.make_node("AveragePool", [f"x{i}"], [f"ap{i}"], kernel_shape=[1, 3],
                                   pads=[0, 1, 0, 1])]
        want[f"gm{i}"] = x.max(axis=(2, 3), keepdims=True)
        want[f"ga{i}"] = x.mean(axis=(2, 3), keepdims=True, dtype=np.float64).astype(np.float32)
        xp = np.pad(x, ((0, 0), (0, 0), (0, 0), (1, 1)))
        cnt = np.full(s[3], 3.0)
        cnt[0] = cnt[-1] = 2.0
        with np.errstate(invalid="ignore"):
            want[f"ap{i}"] = ((xp[..., :-2] + xp[..., 1:-1] + xp[..., 2:]) / cnt).astype(np.float32)
    got = compile_and_run(make_model(nodes, feeds, list(want)), feeds, tmp_path, target=target)
    assert_close(got, want)
