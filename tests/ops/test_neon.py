"""The NEON kernels (arm-neon: kernels/isa/neon/) against onnxruntime, run under qemu-aarch64
(aicc/runner): the GEMM micro-kernels (broadcast and FMLA-by-element forms, every row count,
masked column tails, K % 4 rests, K blocks, transposed A), the conv GEMM paths (im2col,
direct, implicit with its stride-2 de-interleave, transposed with its patch runs; every row
count 1 .. 2 * MR + 1, tiles and schedules), ConvTranspose on the conv GEMM, fused activations
and NaN / Inf, the channel-vectorized depthwise (dwchan); and that the conv variant the NEON
description leaves out (bcast) runs the portable kernels (the phase-split depthwise:
test_neon_depthwise.py; Winograd: test_neon_winograd.py). Bundles compile with the strict
warning flags. Skipped only when the cross toolchain or qemu is missing (`make test` installs
them)."""
import itertools
import json
import zlib

import numpy as np
import pytest
from onnx import helper

from aicc.kernels.isa.registry import ISAS
from aicc.targets import load_target
from tests.oracle import assert_close, check_node, compile_and_run, make_model, reference, rng
from tests.ops.test_conv import ACTS, CONV_CASES, CONVT_CASES
from tests.ops.test_conv_simd import (MARK, STRIDE2_ROWS, algo_of, case_data, forced, planar,
                                     run)
from tests.ops.test_conv_winograd import convs

T = "arm-neon"
MR = ISAS["neon"].conv["mr"]        # the NEON conv schedule's row tile
GEMM_MR = ISAS["neon"].gemm["mr"]   # and the GEMM's
pytestmark = pytest.mark.skipif(bool(load_target(T).missing_tools()),
                                reason="arm-neon toolchain or qemu-aarch64 missing "
                                       "(make cross-toolchain)")
NEON_PATHS = (MARK["im2col"], MARK["direct"], MARK["implicit"], MARK["transposed"],
              MARK["winograd"])


def _data(shape, ws, seed):
    r = rng(seed)
    x = r.normal(size=shape).astype(np.float32)
    w = (r.normal(size=ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
    return x, w


# -- conv ---------------------------------------------------------------------------------

@pytest.mark.parametrize("case", sorted(CONV_CASES))
def test_neon_conv_auto(case, tmp_path):
    """Every geometry of test_conv.py with the variant auto picks: a NEON GEMM path or
    Winograd, or for depthwise convs the NEON depthwise kernel (test_neon_depthwise.py) or a
    GEMM path."""
    x, w, attrs = case_data(case)
    run(tmp_path, T, x, w, attrs,
        marker=None if algo_of(case) == "depthwise" else NEON_PATHS)


# the transposed path on geometries that reach each of its branches (stride 1 runs, strided
# gathers, groups, padding, 1-D / 3-D)
TRANSPOSED_CASES = {"3x3_pad1", "stride2_odd", "stride3", "dilation_stride", "asym_pads",
                    "group3_odd", "pointwise", "pointwise_s2", "k5_s2", "3d_strided", "1d"}


@pytest.mark.parametrize("case", sorted(c for c in CONV_CASES if algo_of(c) != "depthwise"))
def test_neon_conv_im2col_and_implicit(case, tmp_path):
    """Each GEMM path that takes the geometry (im2col always; transposed, implicit and direct
    where they apply), as Convs of one model: one compile and one emulator run."""
    forced(T, tmp_path, CONV_CASES[case], ["im2col"] + ["transposed"] * (case in TRANSPOSED_CASES)
           + ["implicit"] * planar(case) + ["direct"] * (algo_of(case) == "direct"))


@pytest.mark.parametrize("k", [1, 3])
def test_neon_conv_every_row_kernel(k, tmp_path):
    """Cout = 1 .. 2 * MR + 1: row tiles below one vector of A rows (broadcast), of whole
    vectors (FMLA by element) and of both; 150 positions: panel groups and a masked tail.
    One model holds a conv per Cout (one compile)."""
    pads = {"pads": [1, 1, 1, 1]} if k == 3 else {}
    cases = [((1, 5, 10, 15), (m, 5, k, k), pads, {"sched": {"algo": "im2col"}})
             for m in range(1, 2 * MR + 2)]
    convs(tmp_path, T, cases, marker=MARK["im2col"])


def test_neon_conv_transposed_every_row_kernel(tmp_path):
    """Transposed path: the positions are the rows (patch runs of 1 .. MR floats, 4-lane
    copies); P = 1 .. 2 * MR + 1 and Cout = 37 (panels plus a masked tail); one model."""
    cases = [((1, 4, 1, p), (37, 4, 3, 3), {"pads": [1, 1, 1, 1]},
              {"sched": {"algo": "transposed"}}) for p in range(1, 2 * MR + 2)]
    convs(tmp_path, T, cases, marker=MARK["transposed"])


@pytest.mark.parametrize("sched", [{"tile_kb": 3, "kc": 7}, {"kc": 1}, {"mr": 5, "jb": 32}],
                         ids=lambda s: "_".join(f"{k}{v}" for k, v in s.items()))
@pytest.mark.parametrize("case", ["big_k_tiles", "stride2_odd", "pointwise_wide"])
def test_neon_conv_schedules(case, sched, tmp_path):
    forced(T, tmp_path, CONV_CASES[case], ["im2col", "implicit", "transposed"], sched)


@pytest.mark.parametrize("case", sorted(STRIDE2_ROWS))
def test_neon_conv_strided_rows(case, tmp_path):
    """Stride-2 panels inside one output row: LD2's de-interleave (im2col and implicit)."""
    xs, ws, attrs = STRIDE2_ROWS[case]
    x, w = _data(xs, ws, zlib.crc32(case.encode()) % 1000)
    run(tmp_path, T, x, w, attrs, sched={"algo": "im2col"}, marker=MARK["im2col"])
    run(tmp_path, T, x, w, attrs, sched={"algo": "implicit"}, marker=MARK["implicit"])


@pytest.mark.parametrize("act,params,_", ACTS)
def test_neon_conv_fused_activation(act, params, _, tmp_path):
    x, w, attrs = case_data("3x3_pad1", seed=5)
    run(tmp_path, T, x * 3, w * 2, attrs, act=act, params=params, marker=NEON_PATHS)
    x, w, attrs = case_data("pointwise", seed=5)
    run(tmp_path, T, x * 3, w * 2, attrs, act=act, params=params, marker=NEON_PATHS)


def test_neon_conv_runtime_weights_and_no_bias(tmp_path):
    for case in ("3x3_pad1", "pointwise", "group3_odd"):
        x, w, attrs = case_data(case, seed=7)
        d = tmp_path / case
        d.mkdir()
        run(d, T, x, w, attrs, runtime_w=True, runtime_b=True)
        run(d, T, x, w, attrs, bias=False, sched={"algo": "im2col"}, marker=MARK["im2col"])


@pytest.mark.parametrize("algo", ["im2col", "direct", "implicit", "transposed"])
def test_neon_conv_nan_inf(algo, tmp_path):
    r = rng(4)
    x = r.normal(size=(1, 3, 6, 6)).astype(np.float32)
    x[0, 0, 1, 1], x[0, 1, 4, 2], x[0, 2, 5, 5] = np.nan, np.inf, -np.inf
    if algo == "direct":
        w, attrs = r.normal(size=(9, 3, 1, 1)).astype(np.float32), {}
    else:
        w, attrs = r.normal(size=(9, 3, 3, 3)).astype(np.float32), {"pads": [1, 1, 1, 1]}
    w[0] = 0.0          # 0 * Inf = NaN, as in onnxruntime
    run(tmp_path, T, x, w, attrs, sched={"algo": algo}, act="Relu", marker=MARK[algo])


def test_neon_conv_variants_not_described_run_portable(tmp_path):
    """A variant the NEON description has no entries for (bcast), forced on a node, falls
    back to the portable kernels (correct results; no NEON kernel in the step)."""
    x, w, attrs = case_data("3x3_pad1")
    run(tmp_path, T, x, w, attrs, sched={"algo": "bcast"})
    b = next(tmp_path.glob("b*"))
    (step,) = json.loads((b / "manifest.json").read_text())["steps"]
    assert not step["kernel"].startswith("neon"), step["kernel"]


@pytest.mark.parametrize("case", ["depthwise", "depthwise_s2", "depthwise_wide_s2",
                                  "depthwise_5x5_d2"])
def test_neon_conv_dwchan(case, tmp_path):
    """The channel-vectorized depthwise (dwchan: the vector vocabulary and the scalar clamp
    of the NEON description), forced; with a fused Clip and with NaN / Inf."""
    x, w, attrs = case_data(case)
    run(tmp_path, T, x, w, attrs, sched={"algo": "dwchan"}, marker=MARK["dwchan"])
    x = x * 3
    x.flat[::17] = np.nan
    x.flat[5::23] = np.inf
    run(tmp_path, T, x, w, attrs, sched={"algo": "dwchan"}, act="Clip",
        params={"min": -0.5, "max": 2.0}, marker=MARK["dwchan"])


@pytest.mark.parametrize("case", ["s2_k2_unet", "s2_k4_pads", "group2", "1d"])
def test_neon_conv_transpose(case, tmp_path):
    if case not in CONVT_CASES:
        pytest.fail(f"no ConvTranspose case {case}")
    xs, ws, attrs = CONVT_CASES[case]
    x, w = _data(xs, ws, zlib.crc32(case.encode()) % 1000)
    run(tmp_path, T, x, w, attrs, op="ConvTranspose")


# -- GEMM ---------------------------------------------------------------------------------

GEMM_SIZES = [(m, n, k) for m, n, k in itertools.product(
    [1, 2, 3, 5, 8, 9, 13, 17, 25], [1, 3, 4, 5, 8, 9, 13, 33], [1, 2, 3, 4, 5, 7, 64, 257])
    ][::17]


@pytest.mark.parametrize("m,n,k", GEMM_SIZES)
def test_neon_matmul_sizes(m, n, k, tmp_path):
    """Row counts (1-row panel groups up to MR), N tails (masked stores of 1-3 lanes), K % 4
    rests after the FMLA-by-element steps."""
    r = rng(m * 1000 + n * 10 + k)
    a = r.normal(size=(m, k)).astype(np.float32)
    b = (r.normal(size=(k, n)) / np.sqrt(k)).astype(np.float32)
    check_node("MatMul", {"a": a}, tmp_path, initializers={"b": b}, target=T)


@pytest.mark.parametrize("m", range(1, 2 * GEMM_MR + 2))
def test_neon_matmul_every_row_kernel(m, tmp_path):
    """M = 1 .. 2 * MR + 1: every row kernel alone and after full tiles."""
    r = rng(m)
    a = r.normal(size=(m, 23)).astype(np.float32)
    b = (r.normal(size=(23, 37)) / 5).astype(np.float32)
    check_node("MatMul", {"a": a}, tmp_path, initializers={"b": b}, target=T)


@pytest.mark.parametrize("ta,tb", [(0, 0), (0, 1), (1, 0), (1, 1)])
@pytest.mark.parametrize("bconst", [True, False])
def test_neon_gemm_transpose_alpha_beta(ta, tb, bconst, tmp_path):
    """transA: A transposed into scratch by the portable 4 x 4 transposition (the NEON
    description has no vector moves); alpha, beta and C through the epilogue."""
    m, n, k = 13, 21, 70
    r = rng(ta * 2 + tb)
    a = r.normal(size=(k, m) if ta else (m, k)).astype(np.float32) / np.float32(8)
    b = r.normal(size=(n, k) if tb else (k, n)).astype(np.float32)
    c = r.normal(size=(m, n)).astype(np.float32)
    attrs = {"transA": ta, "transB": tb, "alpha": 0.75, "beta": -1.5}
    if bconst:
        check_node("Gemm", {"a": a}, tmp_path, attrs=attrs, initializers={"b": b, "c": c},
                   target=T)
    else:
        check_node("Gemm", {"a": a, "b": b, "c": c}, tmp_path, attrs=attrs, target=T)


@pytest.mark.parametrize("act", ["Relu", "Clip", "Sigmoid"])
@pytest.mark.parametrize("sched", [None, {"kc": 5, "mc": 4, "jb": 1}, {"mr": 1, "kc": 3}])
def test_neon_matmul_bias_activation_and_blocks(act, sched, tmp_path):
    """MatMul + bias + activation fused into the tile (bias and clamp in registers, or the
    epilogue function), through K blocks whose partial sums go back to Y."""
    r = rng(19)
    feeds = {"a": r.normal(size=(2, 23, 37)).astype(np.float32)}
    inits = {"b": r.normal(size=(37, 70)).astype(np.float32) / 6,
             "bias": r.normal(size=(70,)).astype(np.float32),
             "lo": np.array(-0.5, np.float32), "hi": np.array(0.75, np.float32)}
    nodes = [helper.make_node("MatMul", ["a", "b"], ["mm"]),
             helper.make_node("Add", ["mm", "bias"], ["z"]),
             helper.make_node(act, ["z"] + (["lo", "hi"] if act == "Clip" else []), ["y"])]
    model = make_model(nodes, feeds, ["y"], inits)
    over = {"nodes": {}} if sched is None else None
    cfg = None
    if sched is not None:
        cfg = tmp_path / "s.yaml"
        cfg.write_text("schedule:\n  gemm: {" + ", ".join(f"{k}: {v}" for k, v in
                                                          sched.items()) + "}\n")
    got = compile_and_run(model, feeds, tmp_path, target=T, config=cfg)
    del over
    assert_close(got, reference(model, feeds))


# packed A (isa/neon gemm pack_a rows, pack_n columns and more): row tails 1-11 after 12-row
# tiles and their 4-row multiples, 8 x 12 tiles (N = 60, 84: 3-vector panels), K rests of
# the 4 x 4 packing, K blocks (257, 513), balanced M (100, 150), M blocks with N blocks
# (300 x 264: the block repacked per column block)
PACKED = [(12, 40, 1), (13, 41, 2), (14, 47, 3), (15, 48, 4), (16, 60, 5), (19, 64, 7),
          (23, 70, 9), (25, 84, 33), (100, 45, 64), (150, 40, 257), (300, 264, 20),
          (24, 50, 513)]


def test_neon_matmul_packed_a(tmp_path):
    """The packed-A GEMM path (A packed per block, 12 x 8 / 8 x 12 tiles with one multi-vector
    load per operand and k) on PACKED, one model; and a transposed A with alpha / beta / C
    and run-time B (Gemm), and a batched MatMul of two run-time operands."""
    d = ISAS["neon"].gemm
    assert all(m >= d["pack_a"] and n >= d["pack_n"] for m, n, _ in PACKED)
    r = rng(41)
    feeds, inits, nodes, outs = {}, {}, [], []
    for i, (m, n, k) in enumerate(PACKED):
        feeds[f"a{i}"] = r.normal(size=(m, k)).astype(np.float32)
        inits[f"b{i}"] = (r.normal(size=(k, n)) / np.sqrt(k)).astype(np.float32)
        nodes.append(helper.make_node("MatMul", [f"a{i}", f"b{i}"], [f"y{i}"]))
        outs.append(f"y{i}")
    feeds["ga"] = r.normal(size=(30, 26)).astype(np.float32)
    feeds["gb"] = r.normal(size=(30, 44)).astype(np.float32) / 5
    inits["gc"] = r.normal(size=(26, 44)).astype(np.float32)
    nodes.append(helper.make_node("Gemm", ["ga", "gb", "gc"], ["g"], transA=1, alpha=0.75,
                                  beta=-1.5))
    feeds["qa"] = r.normal(size=(2, 28, 16)).astype(np.float32)
    feeds["qb"] = r.normal(size=(2, 16, 48)).astype(np.float32)
    nodes.append(helper.make_node("MatMul", ["qa", "qb"], ["q"]))
    model = make_model(nodes, feeds, outs + ["g", "q"], inits)
    assert_close(compile_and_run(model, feeds, tmp_path, target=T), reference(model, feeds))


def test_neon_matmul_batched_activations_and_nan(tmp_path):
    """Both operands at run time (attention-style batched MatMul), and NaN / Inf in A."""
    r = rng(5)
    a = r.normal(size=(2, 3, 9, 6)).astype(np.float32)
    b = r.normal(size=(2, 3, 6, 11)).astype(np.float32)
    a[0, 1, 2, 3], a[1, 2, 0, 0], a[1, 0, 8, 5] = np.nan, np.inf, -np.inf
    check_node("MatMul", {"a": a, "b": b}, tmp_path, target=T)


@pytest.mark.parametrize("mr", [4, 8, 12])
def test_neon_matmul_packed_tile_rows(mr, tmp_path):
    """Packed-A row tiles of mr rows (schedule override): the full tiles' register
    transposition in the packing (aicc_sg_neon_packa<mr>), the K loop on pointers 8 k per
    iteration and its kc % 8 rest (K = 37, and 16 + 3 in a second K block of kc = 16; K = 64:
    kernels without the rest, 4 K blocks), the M % mr row tail, a masked column tail."""
    r = rng(100 + mr)
    feeds = {"a": r.normal(size=(3 * mr + 5, 37)).astype(np.float32),
             "c": r.normal(size=(2 * mr + 1, 19)).astype(np.float32),
             "e": r.normal(size=(2 * mr + 3, 64)).astype(np.float32)}
    inits = {"b": (r.normal(size=(37, 45)) / 6).astype(np.float32),
             "d": (r.normal(size=(19, 41)) / 4).astype(np.float32),
             "f": (r.normal(size=(64, 43)) / 8).astype(np.float32)}
    nodes = [helper.make_node("MatMul", ["a", "b"], ["y"]),
             helper.make_node("MatMul", ["c", "d"], ["z"]),
             helper.make_node("MatMul", ["e", "f"], ["w"])]
    model = make_model(nodes, feeds, ["y", "z", "w"], inits)
    cfg = tmp_path / "s.yaml"
    cfg.write_text(f"schedule:\n  gemm: {{mr: {mr}, kc: 16}}\n")
    got = compile_and_run(model, feeds, tmp_path, target=T, config=cfg)
    assert_close(got, reference(model, feeds))
