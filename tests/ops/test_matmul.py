"""Gemm and MatMul: compiled C vs onnxruntime, plus fused epilogues (bias + activation).

Every test that compiles runs on every target (generic: the portable kernel; x86-avx2 and
x86-avx512: the SIMD GEMM of kernels/gemm/simd.py with its row kernels 1..MR, panel groups, masked
column tails, K/M/N blocks and tile epilogue). Targets the host CPU cannot run are not generated."""
import itertools
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

import aicc
from aicc.bundle.writer import write_bundle
from aicc.compiler import compile_graph
from aicc.config import Options
from aicc.frontend import import_model
from aicc.ops import load_all, lookup
from aicc.targets import host_supports, load_target, runnable_targets
from tests.oracle import (STRICT_CFLAGS, assert_close, check, check_node, compile_and_run,
                          make_model, reference, rng)

SIZES = [1, 3, 17, 65]
AWKWARD = [1, 3, 7, 17, 65, 257]
# targets this CPU cannot execute are not generated (never counted as passing)
TARGETS = runnable_targets(derived=False)
SIMD = {"x86-avx2": "aicc_sg_avx2_", "x86-avx512": "aicc_sg_avx512_"}


def _rand(r, shape, dt=np.float32):
    return r.normal(size=shape).astype(dt)


# -- Gemm ---------------------------------------------------------------------------------

@pytest.mark.sweep
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("m,n,k",
                         list(itertools.product(SIZES, SIZES, SIZES))[::3] + [(65, 65, 65)])
def test_gemm_sizes(m, n, k, target, tmp_path):
    r = rng(m * 100 + n * 10 + k)
    check_node("Gemm", {"a": _rand(r, (m, k))}, tmp_path, target=target,
               initializers={"b": _rand(r, (k, n)), "c": _rand(r, (n,))})


# (M, N, K) from 1, 3, 7, 17, 65, 257: tails of every tile size, 257 > KC (two K blocks,
# the second accumulating over masked tails), > MC and > the column block
AWK = [(m, n, k) for m, n, k in itertools.product(AWKWARD, AWKWARD, AWKWARD)
       if (m * 7 + n * 3 + k) % 5 == 0 or max(m, n, k) < 4] + [(257, 257, 257)]


@pytest.mark.sweep
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("m,n,k", AWK)
def test_matmul_awkward(m, n, k, target, tmp_path):
    """Constant B (packed at compile time) or, for every other shape, B fed at run time
    (packed into step scratch by the step). A is scaled by 1/sqrt(K) so that outputs are
    O(1), as in a normalized layer: the float32 rounding differences (~sqrt(K) ulp of the
    sum of |a*b|) then stay well inside atol 1e-5 for every K here."""
    r = rng(m * 7 + n * 3 + k)
    a, b = _rand(r, (m, k)) / np.float32(np.sqrt(k)), _rand(r, (k, n))
    if (m // 2 + n // 2 + k // 2) % 2:
        check_node("MatMul", {"a": a}, tmp_path, target=target, initializers={"b": b})
    else:
        check_node("MatMul", {"a": a, "b": b}, tmp_path, target=target)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("m", range(1, 16))
def test_matmul_every_row_kernel(m, target, tmp_path):
    """M = 1..15: each row-count kernel (1..MR) alone and after full tiles; N = 182 (5 panels
    and 22 columns on avx512, 11 and 6 on avx2) covers the 4- and 2-panel groups (1 row; 2 rows;
    3 rows on avx2, 3..6 on avx512), a single panel after them and a masked tail."""
    r = rng(m)
    check_node("MatMul", {"a": _rand(r, (m, 33))}, tmp_path, target=target,
               initializers={"b": _rand(r, (33, 182))})


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("m,k,act", [(49, 40, "Clip"), (61, 300, "Relu"), (96, 40, "Clip"),
                                     (97, 40, None), (145, 40, "Clip"), (196, 40, "Relu"),
                                     (288, 40, "Clip")])
def test_matmul_one_m_block(m, k, act, target, tmp_path):
    """MC < M <= 2 * MC runs as one M block with equal row tiles (49 -> 5 x 10 on avx512;
    145..288 on avx2); outside that range the usual blocks; with a fused bias and Clip / Relu
    / none, which the SIMD kernels apply in registers after the last K block (K = 300: two K
    blocks), N = 100 leaving a masked panel (the micro-kernels prefetch the next panel), and
    NaN / Inf in A reaching their rows (NaN passes the clamp, Inf is clamped)."""
    r = rng(m)
    a, b, c = _rand(r, (m, k)), _rand(r, (k, 100)), _rand(r, (100,))
    a[0, 1], a[m - 1, 0], a[m // 2, 2] = np.nan, np.inf, -np.inf
    nodes = [helper.make_node("MatMul", ["a", "b"], ["t"]), helper.make_node("Add", ["t", "c"], ["u"])]
    inits = {"b": b, "c": c}
    if act == "Clip":
        nodes.append(helper.make_node("Clip", ["u", "lo", "hi"], ["y"]))
        inits.update(lo=np.float32(-1.0), hi=np.float32(1.5))
    elif act == "Relu":
        nodes.append(helper.make_node("Relu", ["u"], ["y"]))
    else:
        nodes.append(helper.make_node("Identity", ["u"], ["y"]))
    model = make_model(nodes, {"a": a}, ["y"], inits)
    got = compile_and_run(model, {"a": a}, tmp_path, target=target)
    assert_close(got, reference(model, {"a": a}))


@pytest.mark.sweep
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("ta,tb", [(0, 0), (0, 1), (1, 0), (1, 1)])
@pytest.mark.parametrize("bconst", [True, False])
@pytest.mark.parametrize("m,n,k", [(5, 19, 11), (17, 65, 257)])
def test_gemm_transpose(ta, tb, bconst, m, n, k, target, tmp_path):
    r = rng(ta * 2 + tb)
    a = _rand(r, (k, m) if ta else (m, k)) / np.float32(1 if k < 64 else np.sqrt(k))
    b = _rand(r, (n, k) if tb else (k, n))
    c = _rand(r, (m, n))
    attrs = {"transA": ta, "transB": tb, "alpha": 0.75, "beta": -1.5}
    if bconst:
        check_node("Gemm", {"a": a}, tmp_path, attrs=attrs, initializers={"b": b, "c": c},
                   target=target)
    else:
        check_node("Gemm", {"a": a, "b": b, "c": c}, tmp_path, attrs=attrs, target=target)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("cshape", [None, (), (1,), (13,), (1, 13), (6, 1), (6, 13), (1, 1)])
def test_gemm_c_broadcast(cshape, target, tmp_path):
    r = rng(7)
    a, b = _rand(r, (6, 9)), _rand(r, (9, 13))
    if cshape is None:
        check_node("Gemm", {"a": a}, tmp_path, initializers={"b": b}, attrs={"alpha": 2.0},
                   target=target)
    else:
        check_node("Gemm", {"a": a, "c": _rand(r, cshape)}, tmp_path, initializers={"b": b},
                   attrs={"beta": 0.5}, input_order=["a", "b", "c"], target=target)


@pytest.mark.parametrize("target", TARGETS)
def test_gemm_float64(target, tmp_path):
    r = rng(8)
    check_node("Gemm", {"a": _rand(r, (4, 33), np.float64), "b": _rand(r, (33, 10), np.float64)},
               tmp_path, attrs={"transB": 0, "alpha": 0.3}, target=target,
               initializers={"c": _rand(r, (4, 10), np.float64)})


@pytest.mark.parametrize("target", TARGETS)
def test_gemm_torch_linear_layout(target, tmp_path):
    """torch.nn.Linear exports Gemm(x, W[N,K], b, transB=1) with constants W and b."""
    r = rng(9)
    check_node("Gemm", {"x": _rand(r, (1, 65))}, tmp_path, attrs={"transB": 1}, target=target,
               initializers={"w": _rand(r, (17, 65)), "b": _rand(r, (17,))})


@pytest.mark.parametrize("target", TARGETS)
def test_gemm_k_zero(target, tmp_path):
    """K == 0: Y = beta * C (the portable kernel on every target)."""
    r = rng(10)
    check_node("Gemm", {"a": _rand(r, (3, 0)), "c": _rand(r, (3, 5))}, tmp_path,
               initializers={"b": _rand(r, (0, 5))}, attrs={"beta": 2.0},
               input_order=["a", "b", "c"], target=target)


# -- MatMul -------------------------------------------------------------------------------

@pytest.mark.sweep
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("m,n,k", list(itertools.product(SIZES, SIZES, SIZES))[1::3])
@pytest.mark.parametrize("bconst", [True, False])
def test_matmul_sizes(m, n, k, bconst, target, tmp_path):
    r = rng(m * 100 + n * 10 + k + 1)
    a, b = _rand(r, (m, k)), _rand(r, (k, n))
    if bconst:
        check_node("MatMul", {"a": a}, tmp_path, initializers={"b": b}, target=target)
    else:
        check_node("MatMul", {"a": a, "b": b}, tmp_path, target=target)


BATCHED = [((2, 1, 5, 7), (3, 7, 4)), ((7,), (2, 7, 3)), ((2, 3, 7), (7,)), ((7,), (7,)),
           ((3, 7), (7,)), ((7,), (7, 5)), ((2, 3, 5, 7), (7, 9)), ((4, 6, 17), (4, 17, 3)),
           ((1, 6, 17), (4, 17, 33)), ((4, 1, 2, 3), (1, 5, 3, 2)), ((2, 1, 3), (1, 3, 4)),
           ((5, 4, 2, 3), (4, 3, 6)), ((3, 1, 8), (2, 1, 8, 1))]


BATCHED_BIG = [((2, 17, 65), (2, 65, 19)), ((3, 1, 7, 257), (1, 2, 257, 17)),
               ((2, 65, 33), (33, 257))]


@pytest.mark.sweep
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("sa,sb", BATCHED + BATCHED_BIG)
@pytest.mark.parametrize("bconst", [True, False])
def test_matmul_batched(sa, sb, bconst, target, tmp_path):
    r = rng(len(sa) * 10 + len(sb))
    a, b = _rand(r, sa), _rand(r, sb)
    if bconst:
        check_node("MatMul", {"a": a}, tmp_path, initializers={"b": b}, target=target)
    else:
        check_node("MatMul", {"a": a, "b": b}, tmp_path, target=target)


@pytest.mark.parametrize("target", TARGETS)
def test_matmul_const_a(target, tmp_path):
    r = rng(11)
    check_node("MatMul", {"b": _rand(r, (3, 9, 5))}, tmp_path, target=target,
               initializers={"a": _rand(r, (4, 9))}, input_order=["a", "b"])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("bconst", [True, False])
def test_matmul_float64(bconst, target, tmp_path):
    r = rng(12)
    a, b = _rand(r, (2, 5, 19), np.float64), _rand(r, (2, 19, 6), np.float64)
    if bconst:
        check_node("MatMul", {"a": a}, tmp_path, initializers={"b": b}, target=target)
    else:
        check_node("MatMul", {"a": a, "b": b}, tmp_path, target=target)


@pytest.mark.parametrize("target", TARGETS)
def test_matmul_long_k(target, tmp_path):
    # K = 4099: float32 sums in a different order than onnxruntime's blocked kernel; the
    # rounding error grows like sqrt(K) * eps * |terms|, so atol is loosened to 1e-4 here
    # (for the portable kernel and for the FMA kernels alike).
    r = rng(13)
    check_node("MatMul", {"a": _rand(r, (3, 4099))}, tmp_path, target=target,
               initializers={"b": _rand(r, (4099, 70))}, atol=1e-4)


@pytest.mark.parametrize("target", TARGETS)
def test_matmul_empty(target, tmp_path):
    r = rng(14)
    check_node("MatMul", {"a": _rand(r, (0, 5))}, tmp_path, initializers={"b": _rand(r, (5, 3))},
               target=target)
    check_node("MatMul", {"a": _rand(r, (2, 0))}, tmp_path, initializers={"b": _rand(r, (0, 3))},
               target=target)


@pytest.mark.parametrize("target", TARGETS)
def test_matmul_nan_inf(target, tmp_path):
    a = np.array([[1, np.nan, 0], [np.inf, 1, 2], [0, 0, 0]], np.float32)
    b = np.array([[1, 0], [0, 1], [2, 3]], np.float32)
    check_node("MatMul", {"a": a}, tmp_path, initializers={"b": b}, target=target)


def test_matmul_constant_folded(tmp_path):
    """Both operands constant: folded at compile time through MatMul.reference."""
    r = rng(15)
    nodes = [helper.make_node("MatMul", ["w1", "w2"], ["t"]),
             helper.make_node("Add", ["x", "t"], ["y"])]
    model = make_model(nodes, {"x": _rand(r, (3, 4))}, ["y"],
                       {"w1": _rand(r, (3, 5)), "w2": _rand(r, (5, 4))})
    from tests.oracle import check
    check(model, {"x": _rand(r, (3, 4))}, tmp_path)


# -- fused epilogues ------------------------------------------------------------------------

def _fused_run(model, feeds, rewrite, tmp_path, target="generic"):
    """Import ``model``, apply ``rewrite(graph)`` (the fusion a pass would do), compile and
    run; compare with onnxruntime on the original model."""
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    g = rewrite(import_model(path))
    opts = Options.load(target)
    g2, prog = compile_graph(g, opts, check=True)
    out = write_bundle(prog, tmp_path / "b", name=opts.name, target=opts.target, opts=opts,
                       model_sha="0" * 64, original_inputs=[])
    got = aicc.load(out, cflags=STRICT_CFLAGS).run(feeds)
    assert_close(got, reference(model, feeds))
    return g2, prog


def _fuse_tail(op_index, act, params, bias=True):
    def rewrite(g):
        mm = g.nodes[op_index]
        tail = g.nodes[op_index + 1:]
        if bias:
            add = tail[0]
            mm.inputs = mm.inputs + [add.inputs[1]]
        mm.attrs = dict(mm.attrs)
        if act:
            mm.attrs["aicc_act"] = act
            mm.attrs["aicc_act_params"] = params
        mm.outputs = [tail[-1].outputs[0]]
        g.nodes = g.nodes[:op_index + 1]
        return g
    return rewrite


ACTS = [("Relu", {}), ("Clip", {"min": 0.0, "max": 6.0}), ("Sigmoid", {}), (None, {}),
        ("LeakyRelu", {"alpha": 0.1}), ("Tanh", {})]


def _act_nodes(act, params, src, dst):
    if act == "Clip":
        return [helper.make_node("Clip", [src, "lo", "hi"], [dst])]
    return [helper.make_node(act, [src], [dst], **params)]


@pytest.mark.sweep
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("act,params", ACTS)
@pytest.mark.parametrize("sa,sb", [((3, 17), (17, 5)), ((2, 4, 9), (9, 33)),
                                   ((2, 4, 9), (2, 9, 6)), ((9,), (9, 3)),
                                   ((17, 257), (257, 65))])
@pytest.mark.parametrize("bconst", [True, False])
def test_matmul_fused_bias_act(act, params, sa, sb, bconst, target, tmp_path):
    r = rng(16)
    n = sb[-1]
    inits = {"bias": _rand(r, (n,)), "lo": np.array(0.0, np.float32),
             "hi": np.array(6.0, np.float32)}
    k = sa[-1]        # long K: outputs kept O(1) (see test_matmul_awkward)
    feeds = {"a": _rand(r, sa) * np.float32(2 if k < 64 else 2 / np.sqrt(k))}
    if bconst:
        inits["b"] = _rand(r, sb)
    else:
        feeds["b"] = _rand(r, sb)
    nodes = [helper.make_node("MatMul", ["a", "b"], ["mm"]),
             helper.make_node("Add", ["mm", "bias"], ["z" if act else "y"])]
    if act:
        nodes += _act_nodes(act, params, "z", "y")
    model = make_model(nodes, feeds, ["y"], inits)
    g, prog = _fused_run(model, feeds, _fuse_tail(0, act, params), tmp_path, target)
    assert [n.op_type for n in g.nodes] == ["MatMul"]
    if act:
        assert f"fused {act}" in prog.steps[0].body
    if target in SIMD:
        assert SIMD[target] in prog.steps[0].body


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("act,params", ACTS[:3])
def test_gemm_fused_act(act, params, target, tmp_path):
    r = rng(17)
    feeds = {"a": _rand(r, (5, 12)) * 2}
    inits = {"w": _rand(r, (7, 12)), "c": _rand(r, (7,)), "lo": np.array(0.0, np.float32),
             "hi": np.array(6.0, np.float32)}
    nodes = [helper.make_node("Gemm", ["a", "w", "c"], ["z"], transB=1)]
    nodes += _act_nodes(act, params, "z", "y")
    model = make_model(nodes, feeds, ["y"], inits)
    _fused_run(model, feeds, _fuse_tail(0, act, params, bias=False), tmp_path, target)


def _with_attrs(attrs):
    def rewrite(g):
        for n in g.nodes:
            n.attrs = {**n.attrs, **attrs}
        return g
    return rewrite


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("sched", [{"kc": 5, "mc": 4, "jb": 1}, {"mr": 1, "kc": 1},
                                   {"mr": 3, "kc": 64, "mc": 9}, {"mr": 14, "mc": 100}])
@pytest.mark.parametrize("fused", [False, True])
def test_schedule_override(sched, fused, target, tmp_path):
    """aicc_schedule on a node: tiny K/M/N blocks put every tile through several K blocks
    (partial sums in Y, masked reloads) and the epilogue through every block boundary."""
    r = rng(19)
    feeds = {"a": _rand(r, (2, 23, 37))}
    inits = {"b": _rand(r, (37, 70)), "bias": _rand(r, (70,))}
    nodes = [helper.make_node("MatMul", ["a", "b"], ["mm" if fused else "y"])]
    if fused:
        nodes += [helper.make_node("Add", ["mm", "bias"], ["z"]),
                  helper.make_node("Relu", ["z"], ["y"])]
    model = make_model(nodes, feeds, ["y"], inits)

    def rewrite(g):
        if fused:
            g = _fuse_tail(0, "Relu", {})(g)
        return _with_attrs({"aicc_schedule": sched})(g)
    _fused_run(model, feeds, rewrite, tmp_path, target)


@pytest.mark.parametrize("target", TARGETS)
def test_kernel_override(target, tmp_path):
    """aicc_kernel forces one variant of the target's list (here the portable one)."""
    r = rng(20)
    feeds = {"a": _rand(r, (5, 9))}
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], feeds, ["y"],
                       {"b": _rand(r, (9, 7))})
    _, prog = _fused_run(model, feeds, _with_attrs({"aicc_kernel": "generic"}), tmp_path, target)
    assert "aicc_sg_" not in prog.steps[0].body


@pytest.mark.parametrize("target", TARGETS)
def test_gemm_fused_all_epilogue_forms(target, tmp_path):
    """Gemm with alpha, beta and each C form, fused activation, transposed A: the tile
    epilogue's three C paths (none, row vector, per-row scalar) on several tiles."""
    r = rng(21)
    for i, cshape in enumerate([(1, 40), (19, 1), (19, 40), ()]):
        d = tmp_path / f"c{i}"
        d.mkdir()
        feeds = {"a": _rand(r, (23, 19)) * 2}
        inits = {"w": _rand(r, (23, 40)), "c": _rand(r, cshape)}
        nodes = [helper.make_node("Gemm", ["a", "w", "c"], ["z"], transA=1, alpha=0.5,
                                  beta=-2.0),
                 helper.make_node("LeakyRelu", ["z"], ["y"], alpha=0.2)]
        model = make_model(nodes, feeds, ["y"], inits)
        _fused_run(model, feeds, _fuse_tail(0, "LeakyRelu", {"alpha": 0.2}, bias=False),
                   d, target)


def test_fused_reference():
    """reference() of a fused node = standard reference, then bias, then activation."""
    load_all()
    from aicc.ir import Graph, Node, TensorType
    r = rng(18)
    a, b, bias = _rand(r, (2, 3, 4)), _rand(r, (4, 5)), _rand(r, (5,))
    g = Graph(nodes=[], inputs=["a", "b", "bias"], outputs=["y"],
              types={"a": TensorType(np.dtype(np.float32), a.shape),
                     "b": TensorType(np.dtype(np.float32), b.shape),
                     "bias": TensorType(np.dtype(np.float32), bias.shape)},
              constants={}, opset=17)
    node = Node("MatMul", ["a", "b", "bias"], ["y"],
                {"aicc_act": "Clip", "aicc_act_params": {"min": 0.0, "max": 1.0}})
    y = lookup(node, 17).reference(node, g, [a, b, bias])[0]
    np.testing.assert_allclose(y, np.clip(a @ b + bias, 0, 1), rtol=1e-6)
    gn = Node("Gemm", ["a2", "b"], ["y"], {"transB": 0, "aicc_act": "Relu"})
    a2 = _rand(r, (3, 4))
    y = lookup(gn, 17).reference(gn, g, [a2, b])[0]
    np.testing.assert_allclose(y, np.maximum(a2 @ b, 0), rtol=1e-6)


def test_check_rejects(tmp_path):
    from aicc.errors import UnsupportedError
    with pytest.raises(UnsupportedError, match="dtype int32"):
        check_node("MatMul", {"a": np.ones((2, 3), np.int32), "b": np.ones((3, 2), np.int32)},
                   tmp_path)


def test_simd_results_independent_of_schedule(tmp_path):
    """The SIMD kernels compute each output as FMA chains in ascending k, one per K block
    (summed from zero, then added in order): for one K blocking, tile sizes and the
    instruction set (AVX2 or AVX-512) do not change a single bit."""
    runnable = [t for t in ("x86-avx2", "x86-avx512") if host_supports(load_target(t))]
    if not runnable:
        pytest.skip("no SIMD target runs on this CPU")
    r = rng(22)
    feeds = {"a": _rand(r, (3, 29, 300))}
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], feeds, ["y"],
                       {"b": _rand(r, (300, 45))})
    outs = []
    for i, (t, sched) in enumerate([(t, s) for t in runnable
                                    for s in ({"kc": 100}, {"kc": 100, "mc": 5, "mr": 2, "jb": 1})]):
        d = tmp_path / f"r{i}"
        d.mkdir()
        _fused_run(model, feeds, _with_attrs({"aicc_schedule": sched}), d, t)
        outs.append(aicc.load(d / "b", cflags=STRICT_CFLAGS).run(feeds)["y"])
    for o in outs[1:]:
        np.testing.assert_array_equal(o, outs[0])


@pytest.mark.parametrize("target", [t for t in TARGETS if t.startswith("x86-")])
def test_prefetch_kb_schedule(target, tmp_path):
    """schedule gemm prefetch_kb: kernels without the next-panel prefetch when B is not
    larger (here: never); the same bits as the default kernels."""
    r = np.random.default_rng(4)
    a = r.standard_normal((37, 64)).astype(np.float32)
    b = r.standard_normal((64, 40)).astype(np.float32)
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a}, ["y"], {"b": b})
    cfg = tmp_path / "nopf.yaml"
    cfg.write_text("schedule:\n  gemm: {prefetch_kb: 100000}\n")
    (tmp_path / "d").mkdir()
    (tmp_path / "n").mkdir()
    base = compile_and_run(model, {"a": a}, tmp_path / "d", target=target)["y"]
    nopf = compile_and_run(model, {"a": a}, tmp_path / "n", target=target, config=cfg)["y"]
    np.testing.assert_array_equal(base, nopf)
    np.testing.assert_allclose(base, a @ b, rtol=1e-4, atol=1e-4)
    code = [p.read_text() for p in (tmp_path / "n").glob("b*/model.c")]
    assert code and "uintptr_t)(b0 + k" not in code[0]
    assert "uintptr_t)(b0 + k" in next((tmp_path / "d").glob("b*/model.c")).read_text()


# targets that extend another with a GEMM schedule of their own (x86-avx512-amx: Intel tiles)
OWN_GEMM = [t for t in runnable_targets() if load_target(t).base and load_target(t).schedule.get(
    "gemm") != load_target(load_target(t).base).schedule.get("gemm")]


@pytest.mark.parametrize("target", OWN_GEMM)
def test_derived_target_gemm_schedule(target, tmp_path):
    """A derived target's own GEMM schedule (amx: K blocks of at most 512, here 3 x 367, N
    blocks of 1024, up to 14 rows a tile) with several K and N blocks and row / column tails, against onnx.reference."""
    r = rng(23)
    feeds = {"a": _rand(r, (45, 1100))}
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], feeds, ["y"],
                       {"b": _rand(r, (1100, 1043))})
    check(model, feeds, tmp_path, target=target, atol=1e-4)
    g = load_target(target).schedule["gemm"]
    kc = -(-1100 // -(-1100 // g["kc"]))      # K = 1100 in equal blocks of at most kc
    c = next(Path(tmp_path).glob("b*/model.c")).read_text()
    # pf1: only the first row tile of the first M block runs the prefetching kernel (45 rows)
    assert re.search(rf"aicc_sg_avx512_m\d+k{kc}c\d+j\d+n{g['nc']}pf1_", c)
    assert "if (ic == 0 && ir == 0)" in c


# column counts per ISA whose panels are not 2 vectors wide (gemm_simd.panel_vectors): 1 vector
# (full and masked) and 3 vectors (full panels, then a masked third one)
PANEL_N = {"x86-avx512": {1: (16, 5), 3: (48, 144, 40)}, "x86-avx2": {1: (8, 5), 3: (24, 72, 21)}}


@pytest.mark.parametrize("target", [t for t in TARGETS if t in PANEL_N])
@pytest.mark.parametrize("m", [1, 2, 3, 4, 5, 9, 13, 30, 61])
def test_matmul_panel_widths(m, target, tmp_path):
    """Narrow GEMMs take panels of 1 vector (N <= lanes) or 3 vectors (N = 24 on avx2: no
    half-empty 16-column panel): every row-kernel count (M = 1 .. 61, with full tiles, the
    equal tiles of one M block and remainders), a masked last panel, K = 33 and 300 (two K
    blocks), a fused bias + Clip (registers) or Sigmoid (the epilogue function), NaN / Inf
    in A, against onnxruntime; the generated C holds the v1 / v3 kernels."""
    r = rng(m)
    ns = [n for v in (1, 3) for n in PANEL_N[target][v]]
    feeds = {"a": _rand(r, (m, 300))}
    feeds["a"][0, 3], feeds["a"][m - 1, 1] = np.nan, np.inf
    nodes, inits, outs = [], {}, []
    for i, n in enumerate(ns):
        k = 300 if i % 2 else 33
        src = "a" if k == 300 else f"a{i}"
        if k != 300:
            nodes.append(helper.make_node("Slice", ["a", "s0", "s1", "ax"], [src]))
        inits.update({f"b{i}": _rand(r, (k, n)) / np.float32(np.sqrt(k)), f"c{i}": _rand(r, (n,))})
        nodes += [helper.make_node("MatMul", [src, f"b{i}"], [f"t{i}"]),
                  helper.make_node("Add", [f"t{i}", f"c{i}"], [f"u{i}"])]
        if i % 3 == 2:
            nodes.append(helper.make_node("Sigmoid", [f"u{i}"], [f"y{i}"]))
        else:
            nodes.append(helper.make_node("Clip", [f"u{i}", "lo", "hi"], [f"y{i}"]))
        outs.append(f"y{i}")
    inits.update(s0=np.array([0], np.int64), s1=np.array([33], np.int64),
                 ax=np.array([1], np.int64), lo=np.float32(-1.0), hi=np.float32(1.5))
    model = make_model(nodes, feeds, outs, inits)
    check(model, feeds, tmp_path, target=target)
    c = next(Path(tmp_path).glob("b*/model.c")).read_text()
    isa = SIMD[target]
    assert re.search(rf"{isa}k\d+v1(s\d+)?\b", c) and re.search(rf"{isa}k\d+v3(s\d+)?\b", c)


@pytest.mark.parametrize("target", [t for t in TARGETS if t in SIMD])
@pytest.mark.parametrize("k,kc", [(33, 17), (65, 22), (129, 26), (257, 29), (320, 32),
                                  (600, 32), (256, 32)])
def test_matmul_equal_k_blocks(k, kc, target, tmp_path):
    """K longer than the schedule's kc (32; x86-avx2: its chains, ks 32) runs in equal K
    blocks (65 -> 22 + 22 + 21, not 32 + 32 + 1), each summed from zero and added to the
    partial sums, with a fused bias +
    Relu after the last one, against onnxruntime."""
    r = rng(k)
    feeds = {"a": _rand(r, (29, k)) / np.float32(np.sqrt(k))}
    nodes = [helper.make_node("MatMul", ["a", "b"], ["t"]), helper.make_node("Add", ["t", "c"], ["u"]),
             helper.make_node("Relu", ["u"], ["y"])]
    model = make_model(nodes, feeds, ["y"], {"b": _rand(r, (k, 70)), "c": _rand(r, (70,))})
    check(model, feeds, tmp_path, target=target)
    c = next(Path(tmp_path).glob("b*/model.c")).read_text()
    # K blocks of kc, or (x86-avx2: schedule ks) chains of kc in longer K blocks
    assert re.search(rf"{SIMD[target]}m\d+k{kc}c", c) or re.search(
        rf"{SIMD[target]}m\d+k\d+c\d+j\d+n\d+\w*s{kc}_r", c)


@pytest.mark.parametrize("target", [t for t in TARGETS if t == "x86-avx2"])
@pytest.mark.parametrize("k", [31, 40, 333, 1100])
def test_chains_same_bits_as_short_k_blocks(k, target, tmp_path):
    """x86-avx2's K blocks of up to 768 hold chains of up to 32 products (gemm/tile.py
    tile_chains, partial sums in a stack tile between chains): the same bits as K blocks of
    32 with one chain each (aicc_schedule kc 32), across masked columns, a remainder row tile,
    a short last chain and K blocks after the first (K = 1100); both within float32 rounding
    of the float64 product."""
    r = rng(23)
    a = (_rand(r, (29, k)) / np.sqrt(k)).astype(np.float32)
    b = _rand(r, (k, 45))
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a}, ["y"], {"b": b})
    outs = []
    for i, attrs in enumerate([{}, {"aicc_schedule": {"kc": 32}}]):
        d = tmp_path / f"r{i}"
        d.mkdir()
        _fused_run(model, {"a": a}, _with_attrs(attrs), d, target)
        assert ("ks0" in (d / "b" / "model.c").read_text()) == (not attrs and k > 32)
        outs.append(aicc.load(d / "b", cflags=STRICT_CFLAGS).run({"a": a})["y"])
    np.testing.assert_array_equal(outs[0], outs[1])
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(outs[0], want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("target", [t for t in TARGETS if t == "x86-avx2"])
def test_long_sums_take_longer_chains(target, tmp_path):
    """Sums of K >= 2048 products take chains of 64 (call.k_blocks: the length that lowers
    ks + K / ks, the rounding steps): K = 6000 in chains of 64 (93, then one of 48) gives the
    bits of K blocks of 64 summed one after the other, and a root-mean-square error against
    float64 below that of blocks of 32."""
    r = rng(31)
    k = 6000
    a = np.maximum(_rand(r, (29, k)), 0).astype(np.float32)
    b = (_rand(r, (k, 45)) / np.sqrt(k)).astype(np.float32)
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a}, ["y"], {"b": b})
    outs = []
    for i, attrs in enumerate([{}, {"aicc_schedule": {"kc": 64, "ks": 0}},
                               {"aicc_schedule": {"kc": 32}}]):
        d = tmp_path / f"r{i}"
        d.mkdir()
        _fused_run(model, {"a": a}, _with_attrs(attrs), d, target)
        if i == 0:
            assert re.search(r"avx2_m\d+k\d+c\d+j\d+n\d+s64_", (d / "b" / "model.c").read_text())
        outs.append(aicc.load(d / "b", cflags=STRICT_CFLAGS).run({"a": a})["y"])
    np.testing.assert_array_equal(outs[0], outs[1])
    want = a.astype(np.float64) @ b.astype(np.float64)
    rms = [np.sqrt(((o - want) ** 2).mean()) for o in (outs[0], outs[2])]
    assert rms[0] < 0.95 * rms[1], rms
