"""The direct input-broadcast conv (kernels/conv/bcast.py) on the SIMD targets: forced on every
1-D / 2-D group-1 geometry of test_conv.py and on shapes that hit its edges (output channels
not a multiple of the lanes, several channel blocks, output rows not a multiple of the
block, stride 3, dilation, asymmetric pads, no padding, taps past the unroll limit, batch 2),
with fused activations and NaN/Inf, against onnxruntime; bit for bit against the im2col
variant (the same FMA chain); and as ConvNHWC's kernel for few input channels
(layout-nhwc's channel-last chains; on x86-avx2 only up to 32 output channels, 64 from
one input channel)."""
import re

import numpy as np
import onnx
import pytest
from onnx import helper

import aicc
from tests.oracle import (STRICT_CFLAGS, assert_close, conv2d_f64, make_model, reference,
                          rng)
from tests.ops.test_conv import ACTS, CONV_CASES
from tests.ops.test_conv_simd import MARK, TARGETS, case_data, run

pytestmark = pytest.mark.skipif(not TARGETS, reason="host runs no x86 SIMD target")


def group1_planar(case):
    xs, ws, attrs = CONV_CASES[case]
    return len(ws) <= 4 and attrs.get("group", 1) == 1


# (x shape, w shape, attrs)
EDGE = {
    "cout5": ((1, 3, 9, 11), (5, 3, 3, 3), {"pads": [1, 1, 1, 1]}),
    "cout20_s2": ((2, 4, 13, 15), (20, 4, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    "cout70_blocks": ((1, 6, 7, 9), (70, 6, 3, 3), {"pads": [1, 0, 1, 2]}),
    "cout144_w37": ((1, 2, 3, 37), (144, 2, 1, 3), {"pads": [0, 1, 0, 1]}),
    "s3_d2": ((1, 5, 17, 19), (16, 5, 3, 3), {"strides": [3, 2], "dilations": [2, 3],
                                              "pads": [2, 0, 1, 3]}),
    "no_pad_rest": ((1, 3, 12, 13), (32, 3, 3, 3), {"strides": [2, 2]}),
    "7x7_s2": ((1, 3, 21, 23), (16, 3, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}),
    "10x4_cin1": ((2, 1, 49, 10), (64, 1, 10, 4), {"strides": [2, 2], "pads": [5, 1, 5, 1]}),
    "1x1_s2": ((1, 16, 15, 15), (32, 16, 1, 1), {"strides": [2, 2]}),
    "ow1": ((1, 4, 6, 3), (16, 4, 3, 3), {"pads": [1, 0, 1, 0], "strides": [1, 2]}),
    "1d_s2": ((2, 3, 40), (24, 3, 5), {"strides": [2], "pads": [2, 1]}),
    "wide_band": ((1, 2, 3, 130), (16, 2, 3, 3), {"pads": [1, 1, 1, 1]}),
    # 8 and 7 output channels: 8-lane vectors on x86-avx512 (conv_bcast.vector_isa)
    "cout8_s2_stem": ((1, 3, 20, 26), (8, 3, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    "cout7_1d": ((2, 3, 33), (7, 3, 5), {"strides": [2], "pads": [2, 2]}),
    # 3 input channels, 24 K outputs: past x86-avx512's few_out_max (and avx2's out_max)
    "few_cin_24k_out": ((1, 3, 64, 64), (24, 3, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    # stride 1, taps along the row: im2col's before x86-avx2's s1_taps rule (Inception-v3's)
    "1x7_s1": ((1, 16, 17, 17), (16, 16, 1, 7), {"pads": [0, 3, 0, 3]}),
}


def edge_data(case, seed=0):
    xs, ws, attrs = EDGE[case]
    r = rng(seed + len(case))
    x = r.normal(size=xs).astype(np.float32)
    w = (r.normal(size=ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
    return x, w, attrs


@pytest.mark.sweep
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", sorted(c for c in CONV_CASES if group1_planar(c)))
def test_bcast_forced(case, target, tmp_path):
    x, w, attrs = case_data(case)
    run(tmp_path, target, x, w, attrs, sched={"algo": "bcast"}, marker=MARK["bcast"])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", sorted(EDGE))
def test_bcast_edges(case, target, tmp_path):
    x, w, attrs = edge_data(case)
    run(tmp_path, target, x, w, attrs, sched={"algo": "bcast"}, marker=MARK["bcast"])
    run(tmp_path, target, x, w, attrs, bias=False, sched={"algo": "bcast"},
        marker=MARK["bcast"])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("act,params,_", ACTS)
def test_bcast_activations(act, params, _, target, tmp_path):
    """Clamps in registers, the others as the scalar / vector pass per output run."""
    x, w, attrs = edge_data("cout20_s2", seed=3)
    run(tmp_path, target, x * 3, w * 2, attrs, act=act, params=params,
        sched={"algo": "bcast"}, marker=MARK["bcast"])


@pytest.mark.parametrize("target", TARGETS)
def test_bcast_rejects(target, tmp_path):
    x, w, attrs = case_data("3x3_pad1")
    with pytest.raises(Exception, match="bcast"):
        run(tmp_path, target, x, w, attrs, runtime_w=True, sched={"algo": "bcast"})
    x, w, attrs = case_data("group3_odd")
    with pytest.raises(Exception, match="bcast"):
        run(tmp_path, target, x, w, attrs, sched={"algo": "bcast"})


def _model(cases, special=False):
    """One Conv (conv{i}) -> Relu per EDGE case; x{i} holds NaN / Inf / -0 when special."""
    feeds, inits, nodes, outs = {}, {}, [], []
    for i, case in enumerate(cases):
        x, w, attrs = edge_data(case, seed=i)
        if special:
            x.flat[[1, 7, 20, 33]] = [np.nan, np.inf, -np.inf, -0.0]
        feeds[f"x{i}"], inits[f"w{i}"] = x, w
        inits[f"b{i}"] = rng(i).normal(size=w.shape[0]).astype(np.float32)
        nodes.append(helper.make_node("Conv", [f"x{i}", f"w{i}", f"b{i}"], [f"c{i}"],
                                      name=f"conv{i}", **attrs))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"y{i}"]))
        outs.append(f"y{i}")
    return make_model(nodes, feeds, outs, inits), feeds


@pytest.mark.parametrize("target", TARGETS)
def test_bcast_equals_im2col_bitwise(target, tmp_path):
    """The same FMA chain over (c, ky, kx), + bias, clamp: the same bits as im2col with one K
    block (kc 256 here: 7x7_s2's K = 147 is longer than x86's kc), NaN/Inf inputs too
    (and those reach the outputs as in onnxruntime); also where the kernels broadcast each
    input value once for the kernel row's taps it serves (conv_bcast_k._row_shared: stride 1 or
    2 with 3 to 5 taps a row; its weight vectors w{kx}_{j} are in the code)."""
    cases = sorted(EDGE)
    m, feeds = _model(cases, special=True)
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    got = {}
    for algo in ("bcast", "im2col"):
        over = {"nodes": {f"conv{i}": {"schedule": {"algo": algo, "kc": 256}}
                          for i in range(len(cases))}}
        out = aicc.build(path, target=target, out=tmp_path / algo, overrides=over)
        b = aicc.load(out, cflags=STRICT_CFLAGS)
        assert all(algo in s["kernel"] for s in b.manifest["steps"]), b.manifest["steps"]
        got[algo] = b.run(feeds)
        if algo == "bcast":
            code = (out / "model.c").read_text()
            assert re.search(r"const __m\d+ w2_0 = ", code)
            # padded taps left out (conv_bcast_edges): row classes and edge column blocks
            assert re.search(r"if \(oy == 0u\) \{\n\s*\{ const size_t ox = 0u; aicc_cb_\w+_e", code)
    for k in got["im2col"]:
        assert got["bcast"][k].tobytes() == got["im2col"][k].tobytes(), k
    assert_close(got["bcast"], reference(m, feeds), rtol=1e-4, atol=2e-5)
    assert any(np.isnan(v).any() for v in got["bcast"].values())


def _ds_conv(tmp_path, w_special=None, seed=1):
    """DS-CNN's first conv (EDGE 10x4_cin1) as a one-node model "conv" saved in tmp_path:
    (model, path, x); w_special: {weight index: value} set before saving."""
    x, w, attrs = edge_data("10x4_cin1")
    for i, v in (w_special or {}).items():
        w[i] = v
    b = rng(seed).normal(size=w.shape[0]).astype(np.float32)
    m = make_model([helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv", **attrs)],
                   {"x": x}, ["y"], {"w": w, "b": b})
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    return m, path, x


@pytest.mark.parametrize("target", TARGETS)
def test_bcast_inf_weight_keeps_padded_taps(target, tmp_path):
    """An Inf weight: its products with the zero padding are NaN (as im2col's zero patches), so
    no padded tap is left out; the outputs equal im2col's bit for bit (im2col with K in one
    block, as bcast sums it in one chain)."""
    _m, path, x = _ds_conv(tmp_path, {(3, 0, 0, 0): np.inf, (9, 0, 9, 3): -np.inf})
    got = {}
    for algo in ("bcast", "im2col"):
        sched = {"algo": algo, **({"kc": 1024} if algo == "im2col" else {})}
        over = {"nodes": {"conv": {"schedule": sched}}}
        out = aicc.build(path, target=target, out=tmp_path / algo, overrides=over)
        got[algo] = aicc.load(out, cflags=STRICT_CFLAGS).run({"x": x})["y"]
        if algo == "bcast":
            assert not re.search(r"aicc_cb_\w+_e[0-9a-f]{6}\(", (out / "model.c").read_text())
    assert got["bcast"].tobytes() == got["im2col"].tobytes()
    # output (0, 0) of channel 3 reads its tap (0, 0) from the padding: 0 * Inf kept
    assert np.isnan(got["bcast"][:, 3, 0, 0]).all()


def test_bcast_auto_choice(tmp_path):
    """auto takes strided convs whose channels fill the lanes and whose outputs are small
    (x86-avx512 also first convs of few channels, stride 1): not 5 output channels (5 of 8
    lanes); 20 fill 20 of 24 lanes in 8-lane vectors (x86-avx512 too); not 3 input channels
    onto 24 K outputs; a stride-1 1 x 7 conv onto 17 x 17 (x86-avx2: im2col's before,
    x86-avx512: the transposed GEMM's)."""
    cases = ["s3_d2", "cout5", "cout20_s2", "no_pad_rest", "1x1_s2", "10x4_cin1", "wide_band",
             "few_cin_24k_out", "1x7_s1", "cout8_s2_stem"]
    want = {"x86-avx512": [True, False, True, True, True, True, True, False, True, True],
            "x86-avx2": [True, False, True, True, True, True, False, False, True, True]}
    m, feeds = _model(cases)
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    for target in TARGETS:
        b = aicc.load(aicc.build(path, target=target, out=tmp_path / target))
        kinds = [s["kernel"] for s in b.manifest["steps"] if s["op"] == "Conv"]
        assert ["bcast" in k for k in kinds] == want[target], kinds
        assert kinds[2] == kinds[-1] == "avx2 bcast", kinds     # 20 and 8 channels: 8 lanes
        assert_close(b.run(feeds), reference(m, feeds), rtol=1e-4, atol=2e-5)


@pytest.mark.skipif("x86-avx512" not in TARGETS, reason="host runs no x86-avx512")
def test_bcast_8_lanes_on_avx512(tmp_path):
    """x86-avx512 runs a conv of 8 or 7 output channels on 8-lane vectors (16 would leave
    half of every vector empty), with the 32 registers' larger blocks; a node's kernel
    override (avx512) keeps 16-lane vectors. Same bits either way (the same FMA chain)."""
    cases = ["cout8_s2_stem", "cout7_1d"]
    m, feeds = _model(cases)
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    got = {}
    for kern in ("auto", "avx512"):
        over = {"nodes": {f"conv{i}": {"schedule": {"algo": "bcast"},
                                       **({"kernel": kern} if kern != "auto" else {})}
                          for i in range(len(cases))}}
        out = aicc.build(path, target="x86-avx512", out=tmp_path / kern, overrides=over)
        b = aicc.load(out, cflags=STRICT_CFLAGS)
        kinds = [s["kernel"] for s in b.manifest["steps"] if s["op"] == "Conv"]
        isa = "avx2" if kern == "auto" else "avx512"
        assert kinds == [f"{isa} bcast"] * 2, kinds
        code = (out / "model.c").read_text()
        assert ("avx2 direct, input broadcast" in code) == (kern == "auto")
        got[kern] = b.run(feeds)
        assert_close(got[kern], reference(m, feeds), rtol=1e-4, atol=2e-5)
    for k in got["auto"]:
        assert got["auto"][k].tobytes() == got["avx512"][k].tobytes(), k


NHWC = [   # first convs of channel-last chains: (cin, cout, kernel, stride, pads, act)
    (1, 64, (10, 4), (2, 2), [5, 1, 5, 1], "Relu"),
    (3, 28, (3, 3), (2, 2), [1, 1, 1, 1], "Sigmoid"),     # the last vector masked
    (2, 32, (3, 3), (1, 1), [0, 0, 0, 0], None),
    (4, 48, (5, 3), (1, 2), [2, 0, 1, 2], "Clip"),
    (3, 24, (3, 3), (2, 2), [1, 1, 1, 1], "Relu"),        # 8-lane vectors on x86-avx512
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("i", range(len(NHWC)))
def test_bcast_conv_nhwc(i, target, tmp_path):
    """conv (few channels) -> depthwise -> pointwise: layout-nhwc runs the chain channel-last,
    the first conv as a ConvNHWC on the broadcast kernel (x86-avx2: only up to 4 vectors of
    output channels, 8 for one input channel; 48 from 4 channels takes the im2col GEMM)."""
    cin, cout, k, s, pads, act = NHWC[i]
    r = rng(50 + i)
    x = r.normal(size=(2, cin, 19, 13)).astype(np.float32)
    inits = {"w0": (r.normal(size=(cout, cin, *k)) / np.sqrt(cin * np.prod(k))).astype(np.float32),
             "b0": r.normal(size=cout).astype(np.float32),
             "w1": r.normal(size=(cout, 1, 3, 3)).astype(np.float32) / 3,
             "w2": (r.normal(size=(16, cout, 1, 1)) / np.sqrt(cout)).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], strides=list(s), pads=pads)]
    last = "c0"
    if act == "Clip":
        inits["lo"], inits["hi"] = np.array(-0.5, np.float32), np.array(1.0, np.float32)
        nodes.append(helper.make_node("Clip", ["c0", "lo", "hi"], ["a0"]))
        last = "a0"
    elif act:
        nodes.append(helper.make_node(act, ["c0"], ["a0"]))
        last = "a0"
    nodes += [helper.make_node("Conv", [last, "w1"], ["c1"], group=cout, pads=[1, 1, 1, 1]),
              helper.make_node("Conv", ["c1", "w2"], ["y"])]
    m = make_model(nodes, {"x": x}, ["y"], inits)
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    b = aicc.load(aicc.build(path, target=target, out=tmp_path / "b"), cflags=STRICT_CFLAGS)
    isa = target.split("-")[1]
    kinds = [(s["op"], s["kernel"]) for s in b.manifest["steps"] if s["op"] == "ConvNHWC"]
    vec = "avx2" if isa == "avx512" and 1 <= cout % 16 <= 8 else isa     # 8-lane vectors
    assert (kinds[0][1] == f"{vec} bcast") == (isa == "avx512" or cout <= 32 or
                                               (cin == 1 and cout <= 64)), kinds
    # the first conv reads the NCHW input itself (aicc_nchw_in): no Transpose before it
    assert b.manifest["steps"][0]["op"] == "ConvNHWC", b.manifest["steps"][0]
    assert_close(b.run({"x": x}), reference(m, {"x": x}), rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("target", TARGETS)
def test_bcast_conv_nhwc_channel_last_input(target, tmp_path):
    """A group-1 conv of 4 input channels inside a channel-last chain (after a depthwise
    conv) reads the NHWC tensor on the broadcast kernel; the chain's first conv reads the
    NCHW input."""
    r = rng(91)
    x = r.normal(size=(1, 4, 17, 14)).astype(np.float32)
    inits = {"wd": (r.normal(size=(4, 1, 3, 3)) / 3).astype(np.float32),
             "w0": (r.normal(size=(24, 4, 3, 3)) / 6).astype(np.float32),
             "b0": r.normal(size=24).astype(np.float32),
             "w1": (r.normal(size=(24, 1, 3, 3)) / 3).astype(np.float32),
             "w2": (r.normal(size=(16, 24, 1, 1)) / 5).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "wd"], ["d0"], group=4, pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["d0", "w0", "b0"], ["c0"], strides=[2, 1],
                              pads=[1, 0, 1, 2]),
             helper.make_node("Relu", ["c0"], ["r0"]),
             helper.make_node("Conv", ["r0", "w1"], ["c1"], group=24, pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["c1", "w2"], ["y"])]
    m = make_model(nodes, {"x": x}, ["y"], inits)
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    b = aicc.load(aicc.build(path, target=target, out=tmp_path / "b"), cflags=STRICT_CFLAGS)
    steps = [(s["op"], s["kernel"]) for s in b.manifest["steps"]]
    isa = target.split("-")[1]
    vec = "avx2" if isa == "avx512" else isa                  # 24 channels: 8-lane vectors
    assert steps[0][0] == "Transpose" and steps[2] == ("ConvNHWC", f"{vec} bcast"), steps
    assert_close(b.run({"x": x}), reference(m, {"x": x}), rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("target", TARGETS)
def test_bcast_same_shape_different_epilogues(target, tmp_path):
    """Two convs of one geometry on the broadcast kernel, one with bias and Relu, one with
    neither: their kernels differ and must not share a name (the build failed: "helper ...
    defined twice with different code")."""
    r = rng(77)
    x = r.normal(size=(1, 16, 16, 16)).astype(np.float32)
    inits = {k: (r.normal(size=(32, 16, 3, 3)) / 12).astype(np.float32) for k in ("w0", "w1")}
    inits["b0"] = r.normal(size=32).astype(np.float32)
    attrs = {"strides": [2, 2], "pads": [1, 1, 1, 1]}
    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], **attrs),
             helper.make_node("Relu", ["c0"], ["y0"]),
             helper.make_node("Conv", ["x", "w1"], ["y1"], **attrs)]
    m = make_model(nodes, {"x": x}, ["y0", "y1"], inits)
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    b = aicc.load(aicc.build(path, target=target, out=tmp_path / "b"), cflags=STRICT_CFLAGS)
    kinds = [s["kernel"] for s in b.manifest["steps"] if s["op"] == "Conv"]
    assert kinds == [f"{target.split('-')[1]} bcast"] * 2, kinds
    got = b.run({"x": x})
    assert_close(got, reference(m, {"x": x}), rtol=1e-4, atol=2e-5)
    assert (got["y1"] < 0).any()          # no Relu leaked into the second conv


def test_bcast_edge_plan():
    """conv_bcast_edges.plan: DS-CNN's first conv gets its three row classes that save >= 1%
    (oy 0, 1 and 24: 5, 3 and 4 of the 10 kernel rows on padding; oy 2 and 23 save less) and
    its one block with the padded (position, kx) pairs; ResNet-18's 7x7 stride 2 on 224 x 224
    saves too little for any; a non-finite weight or an unpadded input: none."""
    from types import SimpleNamespace
    from aicc.kernels.conv import bcast_edges as edges
    ds = SimpleNamespace(kh=10, kw=4, sy=2, sx=2, dy=1, dx=1, oh=25, ow=5, h=49, w=10, pt=5,
                         pl=1, padded=True)
    cols, classes = edges.plan(ds, [(0, 5, 5)], True, True)
    assert cols == [(0, 5, 5, frozenset({(0, 0), (4, 3)}))]
    assert classes == [(frozenset(range(5)), [0]), (frozenset(range(3)), [1]),
                       (frozenset(range(6, 10)), [24])]
    assert edges.plan(ds, [(0, 5, 5)], True, False) == ([(0, 5, 5, frozenset())], [])
    assert edges.plan(ds, [(0, 5, 5)], False, True)[1] == []     # taps in a loop: no rows
    assert edges.plan(ds, [(0, 5, 5)], True, True, 1) == ([(0, 5, 5, frozenset())], [])
    assert len(edges.plan(ds, [(0, 5, 5)], True, True, 3)[1]) == 2     # 3 kernels: 2 classes
    r18 = SimpleNamespace(kh=7, kw=7, sy=2, sx=2, dy=1, dx=1, oh=112, ow=112, h=224, w=224,
                          pt=3, pl=3, padded=True)
    assert edges.plan(r18, [(0, 112, 14)], True, True) == ([(0, 112, 14, frozenset())], [])


@pytest.mark.parametrize("target", TARGETS)
def test_bcast_edge_kernels_off(target, tmp_path):
    """The conv schedule's edge_kernels 0 (less code): no kernel leaves padded taps out, and
    the outputs are the same bits as with them."""
    m, path, x = _ds_conv(tmp_path, seed=2)
    got = {}
    for k in (0, 8):
        over = {"nodes": {"conv": {"schedule": {"algo": "bcast", "edge_kernels": k}}}}
        out = aicc.build(path, target=target, out=tmp_path / f"e{k}", overrides=over)
        code = (out / "model.c").read_text()
        assert bool(re.search(r"aicc_cb_\w+_e[0-9a-f]{6}\(", code)) == (k > 0)
        got[k] = aicc.load(out, cflags=STRICT_CFLAGS).run({"x": x})["y"]
    assert got[0].tobytes() == got[8].tobytes()
    assert_close({"y": got[0]}, reference(m, {"x": x}), rtol=1e-4, atol=2e-5)


KB = [   # x86-avx2 runs these in K blocks of input channels (bcast.k_block)
    # (x shape, w shape, attrs, act): 64 -> 64 onto 12 x 12, taken by auto at any output size
    ((1, 64, 24, 24), (64, 64, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}, "Relu"),
    # 33 channels (blocks of 2: a last block of 1), 12 outputs (a masked bias vector), 5 x 5
    # stride 2 with no padding on the right, batch 2, 13 positions a row (blocks of 4 and 3)
    ((2, 33, 13, 28), (12, 33, 5, 5), {"pads": [2, 2, 0, 0], "strides": [2, 2]}, None),
    # stride 1, 1 x 7, 64 -> 40 onto 17 x 17: K = 448 products in blocks of 4 channels (the
    # s1_chain rule; a last block of 4), 40 outputs (a masked vector)
    ((1, 64, 17, 17), (40, 64, 1, 7), {"pads": [0, 3, 0, 3], "strides": [1, 1]}, "Relu"),
]


@pytest.mark.parametrize("i,target", [(i, "x86-avx2") for i in range(len(KB))] +
                         [(len(KB) - 1, "x86-avx512")])
def test_bcast_k_blocks(i, target, tmp_path, monkeypatch):
    """Input channels in K blocks (a chain per block, the blocks' sums added in order; bias
    and the clamp after the last): against onnxruntime, closer to a float64 conv than one
    chain over all K (root-mean-square error), NaN / Inf where one chain has them; auto takes
    the first case (strided, 3x3, weights in L2, any output size). x86-avx512 has the
    stride-1 rule (s1_chain) only."""
    from aicc.kernels.isa.registry import ISAS
    if target not in TARGETS:
        pytest.skip(f"host runs no {target}")
    isa = target.split("-", 1)[1]
    xs, ws, attrs, act = KB[i]
    r = rng(70 + i)
    x = r.normal(size=xs).astype(np.float32)
    w = (r.normal(size=ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
    b = r.normal(size=ws[0]).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c" if act else "y"], name="conv",
                              **attrs)]
    if act:
        nodes.append(helper.make_node(act, ["c"], ["y"]))
    m = make_model(nodes, {"x": x}, ["y"], {"w": w, "b": b})
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    over = {"nodes": {"conv": {"schedule": {"algo": "bcast"}}}} if i else None
    bad = x.copy()
    bad.flat[r.integers(0, x.size, 6)] = [np.nan, np.inf, -np.inf, 1e30, -1e30, 0.0]
    got, nan = {}, {}
    for kb in (True, False):
        if not kb:
            monkeypatch.setitem(ISAS[isa].conv_kernels["bcast"], "kblock", 0)
            monkeypatch.setitem(ISAS[isa].conv_kernels["bcast"], "s1_chain", 0)
        out = aicc.build(path, target=target, out=tmp_path / f"kb{kb}", overrides=over)
        code = (out / "model.c").read_text()
        assert "input broadcast" in code
        assert bool(re.search(r"aicc_cb_avx(2|512)_\w+_kb\(", code)) == kb
        bundle = aicc.load(out, cflags=STRICT_CFLAGS)
        got[kb] = bundle.run({"x": x})["y"]
        nan[kb] = bundle.run({"x": bad})["y"]
    assert_close({"y": got[True]}, reference(m, {"x": x}), rtol=1e-4, atol=2e-5)
    want = conv2d_f64(x, w, b, attrs["pads"], attrs["strides"])
    if act:
        want = np.maximum(want, 0.0)
    rms = {kb: np.sqrt(np.mean((got[kb] - want) ** 2)) for kb in got}
    assert rms[True] < rms[False], rms
    assert np.isnan(nan[True]).any()
    assert (np.isnan(nan[True]) == np.isnan(nan[False])).all()
    fin = ~np.isnan(nan[True])
    assert (np.isinf(nan[True][fin]) == np.isinf(nan[False][fin])).all()
