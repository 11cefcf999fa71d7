"""Conv on the SIMD targets (x86-avx2, x86-avx512): every kernel variant of kernels/conv/simd.py /
kernels/conv/depthwise.py against onnxruntime, on awkward shapes.

Variants (forced per node with ``aicc_schedule: {algo: ...}``; ``auto`` picks one):
``direct`` (1x1 stride 1 unpadded: the input is the GEMM's B operand), ``im2col`` (padded copy,
panel packing, tiled GEMM), ``implicit`` (1-D/2-D: the padded input, phase planes for
stride > 1, read as B through an offset table, virtual grid), ``transposed`` (output channels vectorized: weights as packed B
panels, patches gathered as A), ``depthwise`` (phase-split plane, virtual-grid vectors),
``dwchan`` (channel-vectorized depthwise); ``winograd`` (3x3 stride 1: test_conv_winograd.py).
Also: every
row-kernel count 1..2*MR+1 with masked column tails, K and position tiles (small ``tile_kb``),
K blocks (small ``kc``), other ``mr``/``jb``, fused activations (clamped in registers or a
scalar pass), run-time weights and bias, batch > 1, NaN/Inf. Targets the host cannot run are
not generated."""
import zlib

import numpy as np
import onnx
import pytest
from onnx import helper

import aicc
from aicc.runner import open_bundle
from aicc.targets import runnable_targets
from tests.oracle import (STRICT_CFLAGS, assert_close, build_node_forced, make_model, reference,
                          rng)
from tests.ops.test_conv import ACTS, CONV_CASES
from tests.ops.test_conv_winograd import convs

TARGETS = [t for t in runnable_targets() if t in ("x86-avx2", "x86-avx512")]
MR = {"x86-avx2": 6, "x86-avx512": 12}
pytestmark = pytest.mark.skipif(not TARGETS, reason="host runs no x86 SIMD target")


def run(tmp_path, target, x, w, attrs, bias=True, sched=None, act=None, params=None,
        runtime_w=False, runtime_b=False, seed=0, marker=None, op="Conv"):
    """Compile one Conv (or ConvTranspose; aicc_schedule / aicc_act set on the node) for
    target, run it, and compare with onnxruntime on the equivalent node (-> activation)
    model."""
    r = rng(seed)
    params = dict(params or {})
    inputs = {"x": x}
    inits = {}
    (inputs if runtime_w else inits)["w"] = w
    names = ["x", "w"]
    if bias:
        m = w.shape[0] if op == "Conv" else w.shape[1] * attrs.get("group", 1)
        b = r.normal(size=(m,)).astype(np.float32)
        (inputs if runtime_b else inits)["b"] = b
        names.append("b")
    graph_in = {k: v for k, v in inputs.items()}
    base = make_model([helper.make_node(op, names, ["y"], **attrs)], graph_in, ["y"],
                      inits, opset=17)
    ref = with_activation(op, names, attrs, act, params, graph_in, inits) if act else base
    want = reference(ref, inputs)
    path = tmp_path / "m.onnx"
    onnx.save(base, str(path))
    prog, out = build_node_forced(path, target, tmp_path / "b", op, sched, act, params, inputs)
    body = "\n".join(s.body for s in prog.steps)
    if marker:
        marks = marker if isinstance(marker, tuple) else (marker,)
        assert any(m in body for m in marks), f"{marker!r} not in the generated step"
    got = open_bundle(out, cflags=STRICT_CFLAGS).run(inputs)     # cross targets: emulated
    assert_close(got, want)


def with_activation(op, names, attrs, act, params, graph_in, inits):
    """The model ``op(names) -> act -> y`` (Clip's bounds as constant inputs), onnxruntime's
    reference for a node with that activation fused."""
    extra, act_in = dict(inits), []
    if act == "Clip":
        extra.update(lo=np.array(params["min"], np.float32),
                     hi=np.array(params["max"], np.float32))
        act_in = ["lo", "hi"]
    act_attrs = {} if act == "Clip" else params
    return make_model([helper.make_node(op, names, ["t"], **attrs),
                       helper.make_node(act, ["t"] + act_in, ["y"], **act_attrs)],
                      graph_in, ["y"], extra, opset=17)


def case_data(case, seed=None):
    xs, ws, attrs = CONV_CASES[case]
    r = rng(zlib.crc32(case.encode()) % 1000 if seed is None else seed)
    x = r.normal(size=xs).astype(np.float32)
    w = (r.normal(size=ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
    return x, w, attrs


def isa(target):
    return target.split("-")[1]


def algo_of(case):
    """The variant family a geometry can take besides im2col / transposed (which take all)."""
    xs, ws, attrs = CONV_CASES[case]
    g = attrs.get("group", 1)
    if xs[1] // g == 1 and len(ws) <= 4:
        return "depthwise"
    one = all(k == 1 for k in ws[2:])
    if one and not any(attrs.get("pads", [])) and set(attrs.get("strides", [1])) == {1} \
            and attrs.get("auto_pad", "NOTSET") in ("NOTSET", "VALID"):
        return "direct"
    return "im2col"


MARK = {"direct": "the input is the B operand", "im2col": "im2col tiles",
        "grouped": "grouped direct",
        "dwchan": "channel-vectorized kernel",
        "depthwise": "phase-split padded plane", "transposed": "transposed GEMM",
        "implicit": "implicit GEMM", "winograd": "Winograd F(", "bcast": "input broadcast",
        "stem": "channel sum(s) in registers",
        # auto: the layout-nhwc pass (on by default on these targets) runs some depthwise
        # convs channel-last (kernels/conv/nhwc_dw.py)
        "nhwc": "register-blocked channel-last kernel"}


@pytest.mark.sweep
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", sorted(CONV_CASES))
def test_conv_simd_auto(case, target, tmp_path):
    """Every geometry of test_conv.py with the variant the emitter picks."""
    x, w, attrs = case_data(case)
    run(tmp_path, target, x, w, attrs, marker=tuple(MARK.values()))


def planar(case):
    """1-D / 2-D: the geometries the implicit GEMM takes."""
    return len(CONV_CASES[case][1]) <= 4


def forced(target, tmp_path, shapes, algos, sched=None):
    """One Conv per GEMM path in algos on the geometry shapes (x, w, attrs), in one model (one
    compile and one run; the data seeded by the geometry): each step must be its path's."""
    xs, ws, attrs = shapes
    convs(tmp_path, target, [(xs, ws, attrs, {"sched": {**(sched or {}), "algo": a},
                                              "marker": MARK[a]}) for a in algos])


@pytest.mark.sweep
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", sorted(CONV_CASES))
def test_conv_simd_gemm_paths_forced(case, target, tmp_path):
    """Every GEMM path on every geometry it takes: im2col and transposed on all of them
    (groups, depthwise, 1-D/3-D included), the implicit GEMM on the 1-D/2-D ones (strides:
    phase planes; dilation, groups, SAME pads), direct on 1x1 stride-1 ones."""
    forced(target, tmp_path, CONV_CASES[case], ["im2col", "transposed"]
           + ["implicit"] * planar(case) + ["direct"] * (algo_of(case) == "direct"))


DW_CASES = {   # depthwise-capable (one input channel per group), incl. multipliers >= 4
    "mult4_s2": ((1, 3, 11, 13), (12, 1, 3, 3), {"group": 3, "strides": [2, 2],
                                                 "pads": [1, 1, 1, 1]}),
    "mult5_single_channel": ((2, 1, 9, 10), (5, 1, 4, 3), {"pads": [2, 1, 1, 0]}),
    "s2_wide": ((1, 5, 9, 70), (5, 1, 3, 3), {"group": 5, "strides": [2, 2],
                                              "pads": [1, 1, 1, 1]}),
    "s3_d2": ((1, 4, 17, 19), (4, 1, 3, 3), {"group": 4, "strides": [3, 2],
                                             "dilations": [2, 3], "pads": [2, 0, 1, 3]}),
    "k1": ((1, 6, 5, 9), (6, 1, 1, 1), {"group": 6}),
    "k1_pad": ((1, 6, 5, 9), (6, 1, 1, 1), {"group": 6, "pads": [1, 2, 0, 1]}),
    "wide_row": ((1, 3, 4, 67), (3, 1, 3, 3), {"group": 3, "pads": [1, 1, 1, 1]}),
    "tall_1col": ((1, 3, 40, 1), (3, 1, 3, 1), {"group": 3, "pads": [1, 0, 1, 0]}),
    "1d_s2": ((2, 5, 33), (10, 1, 5), {"group": 5, "strides": [2], "pads": [2, 1]}),
    "many_vectors": ((1, 2, 30, 30), (2, 1, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    "c70_b2": ((2, 70, 6, 5), (70, 1, 3, 3), {"group": 70, "strides": [2, 1],
                                              "pads": [1, 1, 1, 1]}),
    "c200_3x3": ((1, 200, 3, 3), (200, 1, 3, 3), {"group": 200, "pads": [1, 1, 1, 1]}),
}


@pytest.mark.sweep
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", sorted(DW_CASES) + sorted(c for c in CONV_CASES
                                                          if algo_of(c) == "depthwise"))
def test_conv_simd_depthwise_forced(case, target, tmp_path):
    xs, ws, attrs = DW_CASES.get(case) or CONV_CASES[case]
    r = rng(zlib.crc32(case.encode()) % 1000)
    x = r.normal(size=xs).astype(np.float32)
    w = (r.normal(size=ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
    run(tmp_path, target, x, w, attrs, sched={"algo": "depthwise"}, marker=MARK["depthwise"])
    if ws[0] == xs[1] == attrs.get("group", 1):         # multiplier 1: channel-vectorized
        run(tmp_path, target, x, w, attrs, sched={"algo": "dwchan"}, marker=MARK["dwchan"])
    if case in DW_CASES:       # and the GEMM paths on the same geometry
        for algo in ("im2col", "transposed"):
            run(tmp_path, target, x, w, attrs, sched={"algo": algo}, marker=MARK[algo])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("k", [1, 3])
def test_conv_simd_every_row_kernel(k, target, tmp_path):
    """Cout = 1 .. 2*MR+1: every row-tile size alone and after full tiles; 150 positions give
    the 1-/2-row kernels' panel groups, single panels and a masked tail."""
    r = rng(k)
    x = r.normal(size=(1, 5, 10, 15)).astype(np.float32)
    pads = {"pads": [1, 1, 1, 1]} if k == 3 else {}
    for m in range(1, 2 * MR[target] + 2):
        w = (r.normal(size=(m, 5, k, k)) / np.sqrt(5 * k * k)).astype(np.float32)
        run(tmp_path, target, x, w, pads, seed=m, sched={"algo": "im2col"},
            marker=MARK["im2col"])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("algo", ["direct", "im2col"])
def test_conv_simd_column_tails(algo, target, tmp_path):
    """The micro-kernels' last columns: a tail of at most one vector's lanes runs on one
    vector per row, a longer one on the masked panel; positions 16 k + 1, 4, 8, 9, 15 (and
    one and a half panels of AVX-512), 7 output channels (a full and a partial row tile)."""
    r = rng(13)
    k = 1 if algo == "direct" else 3
    w = (r.normal(size=(7, 5, k, k)) / np.sqrt(5 * k * k)).astype(np.float32)
    pads = {} if k == 1 else {"pads": [1, 1, 1, 1]}
    for p in (17, 20, 24, 25, 31, 40, 196):
        x = r.normal(size=(1, 5, 1, p)).astype(np.float32)
        run(tmp_path, target, x, w, pads, seed=p, sched={"algo": algo}, marker=MARK[algo])


@pytest.mark.parametrize("target", TARGETS)
def test_conv_simd_transposed_every_row_kernel(target, tmp_path):
    """Transposed path: the positions are the rows; P = 1 .. 2*MR+1 (and Cout = 37: panels
    plus a masked tail)."""
    r = rng(11)
    w = (r.normal(size=(37, 4, 3, 3)) / 6).astype(np.float32)
    for p in range(1, 2 * MR[target] + 2):
        x = r.normal(size=(1, 4, 1, p)).astype(np.float32)
        run(tmp_path, target, x, w, {"pads": [1, 1, 1, 1]}, seed=p,
            sched={"algo": "transposed"}, marker=MARK["transposed"])


SCHEDS = [{"tile_kb": 1}, {"tile_kb": 3, "kc": 7}, {"kc": 1}, {"mr": 3, "jb": 32},
          {"mr": 1}, {"jb": 200, "kc": 50, "tile_kb": 9}]


@pytest.mark.sweep
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("sched", SCHEDS, ids=lambda s: "_".join(f"{k}{v}" for k, v in s.items()))
@pytest.mark.parametrize("case", ["big_k_tiles", "many_tiles", "stride2_odd", "pointwise_wide",
                                  "batch2_group", "3d_strided"])
def test_conv_simd_schedules(case, sched, target, tmp_path):
    """Position and K tiles (tile_kb), K blocks (kc), row tiles (mr), column blocks (jb):
    results do not depend on the schedule beyond rounding (im2col and transposed paths)."""
    forced(target, tmp_path, CONV_CASES[case],
           ["im2col", "transposed"] + ["implicit"] * planar(case), sched)


STRIDE2_ROWS = {   # stride-2 panels inside one output row (the vector de-interleave)
    "s2_row": ((1, 3, 9, 70), (8, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "s2_row_nopad": ((2, 4, 7, 130), (5, 4, 1, 1), {"strides": [2, 2]}),
    "s2_7x7_stem": ((1, 3, 21, 80), (16, 3, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}),
    "s3_row": ((1, 2, 8, 100), (4, 2, 3, 3), {"strides": [1, 3]}),
    # implicit: taps reaching past the row by more than the 2 * NR slack, stride 2 with
    # dilation 3 (taps in both phases), stride 3 by 2 with asymmetric pads
    "dil_wide": ((1, 2, 5, 50), (3, 2, 3, 3), {"dilations": [1, 40], "pads": [1, 40, 1, 40]}),
    "s2_dil3": ((1, 3, 17, 23), (5, 3, 3, 3), {"strides": [2, 2], "dilations": [3, 3],
                                                "pads": [2, 3, 3, 2]}),
    "s3x2_asym": ((2, 4, 19, 21), (6, 4, 4, 3), {"strides": [3, 2], "pads": [0, 2, 3, 1]}),
    # phase rows of exactly 16 columns (one full masked AVX-512 de-interleave), ResNet-8's
    "s2_32wide": ((1, 16, 32, 32), (8, 16, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", sorted(STRIDE2_ROWS))
def test_conv_simd_strided_rows(case, target, tmp_path):
    xs, ws, attrs = STRIDE2_ROWS[case]
    r = rng(zlib.crc32(case.encode()) % 1000)
    x = r.normal(size=xs).astype(np.float32)
    w = (r.normal(size=ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
    run(tmp_path, target, x, w, attrs, sched={"algo": "im2col"}, marker=MARK["im2col"])
    run(tmp_path, target, x, w, attrs, sched={"algo": "implicit"}, marker=MARK["implicit"])


def random_geometry(seed):
    """A seeded random 1-D/2-D conv: strides 1-4, dilations 1-3, pads 0-3, groups 1-2."""
    r = rng(seed)
    g = int(r.choice([1, 1, 2]))
    cin, cout = g * int(r.integers(1, 6)), g * int(r.integers(1, 8))
    one_d = seed % 5 == 0
    k = [int(r.integers(1, 6)) for _ in range(1 if one_d else 2)]
    s = [int(r.integers(1, 5)) for _ in k]
    d = [int(r.integers(1, 4)) for _ in k]
    p = [int(r.integers(0, 4)) for _ in range(2 * len(k))]
    size = [int(r.integers(max(1, (kk - 1) * dd + 1 - p[i] - p[i + len(k)]), 21 + 20 * i))
            for i, (kk, dd) in enumerate(zip(k, d))]
    x = r.normal(size=(int(r.integers(1, 3)), cin, *size)).astype(np.float32)
    w = (r.normal(size=(cout, cin // g, *k)) / 3).astype(np.float32)
    return x, w, {"strides": s, "dilations": d, "pads": p, "group": g}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("seed", range(12))
def test_conv_simd_implicit_random(seed, target, tmp_path):
    """The implicit GEMM (phase planes for strides > 1) on seeded random geometries."""
    x, w, attrs = random_geometry(seed)
    run(tmp_path, target, x, w, attrs, sched={"algo": "implicit"}, marker=MARK["implicit"])


@pytest.mark.sweep
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("act,params,_", ACTS)
@pytest.mark.parametrize("case", ["3x3_pad1", "pointwise", "depthwise", "depthwise_s2"])
def test_conv_simd_fused_activation(case, act, params, _, target, tmp_path):
    x, w, attrs = case_data(case, seed=5)
    run(tmp_path, target, x * 3, w * 2, attrs, act=act, params=params)
    if case in ("depthwise", "depthwise_s2"):
        run(tmp_path, target, x * 3, w * 2, attrs, act=act, params=params,
            sched={"algo": "dwchan"}, marker=MARK["dwchan"])
    if case in ("3x3_pad1", "pointwise"):
        for algo in ("transposed", "implicit"):
            run(tmp_path, target, x * 3, w * 2, attrs, act=act, params=params,
                sched={"algo": algo}, marker=MARK[algo])


@pytest.mark.parametrize("target", TARGETS)
def test_conv_simd_clip_one_sided(target, tmp_path):
    x, w, attrs = case_data("3x3_pad1", seed=6)
    run(tmp_path, target, x, w, attrs, act="Clip", params={"min": 0.25, "max": 1e30})


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", ["3x3_pad1", "group3_odd", "pointwise", "depthwise",
                                  "depthwise_mult2", "big_k_tiles", "1d", "3d_strided"])
def test_conv_simd_runtime_weights(case, target, tmp_path):
    """Weights (and bias) fed at run time: packed into scratch by the step."""
    x, w, attrs = case_data(case, seed=7)
    run(tmp_path, target, x, w, attrs, runtime_w=True, runtime_b=case != "1d")
    run(tmp_path, target, x, w, attrs, bias=False, runtime_w=True, sched={"algo": "im2col"})
    run(tmp_path, target, x, w, attrs, runtime_w=True, runtime_b=True,
        sched={"algo": "transposed"}, marker=MARK["transposed"])
    if planar(case):
        run(tmp_path, target, x, w, attrs, runtime_w=True, sched={"algo": "implicit"},
            marker=MARK["implicit"])
    if case == "depthwise":
        run(tmp_path, target, x, w, attrs, runtime_w=True, runtime_b=True,
            sched={"algo": "dwchan"}, marker=MARK["dwchan"])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", ["3x3_pad1", "depthwise", "pointwise"])
def test_conv_simd_no_bias(case, target, tmp_path):
    x, w, attrs = case_data(case)
    run(tmp_path, target, x, w, attrs, bias=False)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("algo", ["im2col", "depthwise", "dwchan", "direct", "transposed",
                                  "implicit", "bcast"])
def test_conv_simd_nan_inf(algo, target, tmp_path):
    r = rng(4)
    x = r.normal(size=(1, 3, 6, 6)).astype(np.float32)
    x[0, 0, 1, 1], x[0, 1, 4, 2], x[0, 2, 5, 5] = np.nan, np.inf, -np.inf
    if algo in ("depthwise", "dwchan"):
        w, attrs = r.normal(size=(3, 1, 3, 3)).astype(np.float32), {"pads": [1, 1, 1, 1],
                                                                      "group": 3}
    elif algo == "direct":
        w, attrs = r.normal(size=(4, 3, 1, 1)).astype(np.float32), {}
    else:
        w, attrs = r.normal(size=(4, 3, 3, 3)).astype(np.float32), {"pads": [1, 1, 1, 1]}
    w[0] = 0.0          # 0 * Inf = NaN, as in onnxruntime
    run(tmp_path, target, x, w, attrs, sched={"algo": algo}, act="Relu", marker=MARK[algo])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("act,params", [("Clip", {"min": -0.5, "max": 0.75}),
                                        ("Sigmoid", {}), (None, None)])
def test_conv_simd_transposed_copy_out(act, params, target, tmp_path):
    """The transposed path's copy of Y^T to the NCHW rows (8 x 8 register blocks, + bias, the
    clamp; scalar edges): 7 x 7 positions (6 blocks and an edge row) x 21 channels (2 blocks
    and 5 edge channels), NaN / Inf inputs reaching block and edge outputs, a register clamp
    (Clip), a scalar activation after the copy (Sigmoid), and no activation."""
    r = rng(12)
    x = r.normal(size=(1, 9, 7, 7)).astype(np.float32)
    x[0, 0, 0, 3], x[0, 4, 6, 6], x[0, 8, 2, 0] = np.nan, np.inf, -np.inf
    w = (r.normal(size=(21, 9, 1, 1)) / 3).astype(np.float32)
    w[17] = 0.0         # an edge channel: 0 * Inf = NaN, as in onnxruntime
    run(tmp_path, target, x, w, {}, sched={"algo": "transposed"}, act=act, params=params,
        marker=MARK["transposed"])


@pytest.mark.parametrize("target", TARGETS)
def test_conv_simd_bad_algo(target, tmp_path):
    x, w, attrs = case_data("3x3_pad1")
    with pytest.raises(Exception, match="direct"):
        run(tmp_path, target, x, w, attrs, sched={"algo": "direct"})
    with pytest.raises(Exception, match="algo"):
        run(tmp_path, target, x, w, attrs, sched={"algo": "winograd9"})
    x, w, attrs = case_data("3d_strided")
    with pytest.raises(Exception, match="implicit"):
        run(tmp_path, target, x, w, attrs, sched={"algo": "implicit"})


@pytest.mark.parametrize("target", TARGETS)
def test_conv_simd_float64_is_portable(target, tmp_path):
    """float64 convs keep the portable kernels on the SIMD targets."""
    xs, ws, attrs = CONV_CASES["stride2_odd"]
    r = rng(9)
    x, w = r.normal(size=xs), r.normal(size=ws)
    model = make_model([helper.make_node("Conv", ["x", "w"], ["y"], **attrs)], {"x": x}, ["y"],
                       {"w": w})
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    out = aicc.build(path, target=target, out=tmp_path / "b")
    assert "aicc_cv_" not in (out / "model.c").read_text()
    assert_close(aicc.load(out, cflags=STRICT_CFLAGS).run({"x": x}), reference(model, {"x": x}))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("hw,cout,marker", [((32, 32), 24, "im2col"), ((16, 16), 24, "direct"),
                                            ((16, 16), 256, "im2col"), ((28, 28), 24, "direct")])
def test_conv_simd_pointwise_aliasing(hw, cout, marker, target, tmp_path):
    """A 1x1 conv whose input channels lie a multiple of 1 KiB apart (32 x 32: 4 KiB, every
    row of a K block in one L1 set) takes the packed im2col path under auto; at 16 x 16 (8
    rows a set) only with at least im2col.PACK_MIN_M output channels; a 28 x 28 map the direct
    one; all equal to onnxruntime."""
    r = rng(7)
    x = r.normal(size=(1, 40, *hw)).astype(np.float32)
    w = (r.normal(size=(cout, 40, 1, 1)) / np.sqrt(40)).astype(np.float32)
    run(tmp_path, target, x, w, {}, marker=MARK[marker])
