"""Gemm and MatMul: compiled C vs onnxruntime, plus fused epilogues (bias + activation)."""
import itertools

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
from tests.oracle import STRICT_CFLAGS, assert_close, check_node, make_model, reference, rng

SIZES = [1, 3, 17, 65]


def _rand(r, shape, dt=np.float32):
    return r.normal(size=shape).astype(dt)


# -- Gemm ---------------------------------------------------------------------------------

@pytest.mark.parametrize("m,n,k",
                         list(itertools.product(SIZES, SIZES, SIZES))[::3] + [(65, 65, 65)])
def test_gemm_sizes(m, n, k, tmp_path):
    r = rng(m * 100 + n * 10 + k)
    check_node("Gemm", {"a": _rand(r, (m, k))}, tmp_path,
               initializers={"b": _rand(r, (k, n)), "c": _rand(r, (n,))})


@pytest.mark.parametrize("ta,tb", [(0, 0), (0, 1), (1, 0), (1, 1)])
@pytest.mark.parametrize("bconst", [True, False])
def test_gemm_transpose(ta, tb, bconst, tmp_path):
    r = rng(ta * 2 + tb)
    m, n, k = 5, 19, 11
    a = _rand(r, (k, m) if ta else (m, k))
    b = _rand(r, (n, k) if tb else (k, n))
    c = _rand(r, (m, n))
    attrs = {"transA": ta, "transB": tb, "alpha": 0.75, "beta": -1.5}
    if bconst:
        check_node("Gemm", {"a": a}, tmp_path, attrs=attrs, initializers={"b": b, "c": c})
    else:
        check_node("Gemm", {"a": a, "b": b, "c": c}, tmp_path, attrs=attrs)


@pytest.mark.parametrize("cshape", [None, (), (1,), (13,), (1, 13), (6, 1), (6, 13), (1, 1)])
def test_gemm_c_broadcast(cshape, tmp_path):
    r = rng(7)
    a, b = _rand(r, (6, 9)), _rand(r, (9, 13))
    if cshape is None:
        check_node("Gemm", {"a": a}, tmp_path, initializers={"b": b}, attrs={"alpha": 2.0})
    else:
        check_node("Gemm", {"a": a, "c": _rand(r, cshape)}, tmp_path, initializers={"b": b},
                   attrs={"beta": 0.5}, input_order=["a", "b", "c"])


def test_gemm_float64(tmp_path):
    r = rng(8)
    check_node("Gemm", {"a": _rand(r, (4, 33), np.float64), "b": _rand(r, (33, 10), np.float64)},
               tmp_path, attrs={"transB": 0, "alpha": 0.3},
               initializers={"c": _rand(r, (4, 10), np.float64)})


def test_gemm_torch_linear_layout(tmp_path):
    """torch.nn.Linear exports Gemm(x, W[N,K], b, transB=1) with constants W and b."""
    r = rng(9)
    check_node("Gemm", {"x": _rand(r, (1, 65))}, tmp_path, attrs={"transB": 1},
               initializers={"w": _rand(r, (17, 65)), "b": _rand(r, (17,))})


# -- MatMul -------------------------------------------------------------------------------

@pytest.mark.parametrize("m,n,k", list(itertools.product(SIZES, SIZES, SIZES))[1::3])
@pytest.mark.parametrize("bconst", [True, False])
def test_matmul_sizes(m, n, k, bconst, tmp_path):
    r = rng(m * 100 + n * 10 + k + 1)
    a, b = _rand(r, (m, k)), _rand(r, (k, n))
    if bconst:
        check_node("MatMul", {"a": a}, tmp_path, initializers={"b": b})
    else:
        check_node("MatMul", {"a": a, "b": b}, tmp_path)


BATCHED = [((2, 1, 5, 7), (3, 7, 4)), ((7,), (2, 7, 3)), ((2, 3, 7), (7,)), ((7,), (7,)),
           ((3, 7), (7,)), ((7,), (7, 5)), ((2, 3, 5, 7), (7, 9)), ((4, 6, 17), (4, 17, 3)),
           ((1, 6, 17), (4, 17, 33)), ((4, 1, 2, 3), (1, 5, 3, 2)), ((2, 1, 3), (1, 3, 4)),
           ((5, 4, 2, 3), (4, 3, 6)), ((3, 1, 8), (2, 1, 8, 1))]


@pytest.mark.parametrize("sa,sb", BATCHED)
@pytest.mark.parametrize("bconst", [True, False])
def test_matmul_batched(sa, sb, bconst, tmp_path):
    r = rng(len(sa) * 10 + len(sb))
    a, b = _rand(r, sa), _rand(r, sb)
    if bconst:
        check_node("MatMul", {"a": a}, tmp_path, initializers={"b": b})
    else:
        check_node("MatMul", {"a": a, "b": b}, tmp_path)


def test_matmul_const_a(tmp_path):
    r = rng(11)
    check_node("MatMul", {"b": _rand(r, (3, 9, 5))}, tmp_path,
               initializers={"a": _rand(r, (4, 9))}, input_order=["a", "b"])


@pytest.mark.parametrize("bconst", [True, False])
def test_matmul_float64(bconst, tmp_path):
    r = rng(12)
    a, b = _rand(r, (2, 5, 19), np.float64), _rand(r, (2, 19, 6), np.float64)
    if bconst:
        check_node("MatMul", {"a": a}, tmp_path, initializers={"b": b})
    else:
        check_node("MatMul", {"a": a, "b": b}, tmp_path)


def test_matmul_long_k(tmp_path):
    # K = 4099: float32 sums in a different order than onnxruntime's blocked kernel; the
    # rounding error grows like sqrt(K) * eps * |terms|, so atol is loosened to 1e-4 here.
    r = rng(13)
    check_node("MatMul", {"a": _rand(r, (3, 4099))}, tmp_path,
               initializers={"b": _rand(r, (4099, 70))}, atol=1e-4)


def test_matmul_empty(tmp_path):
    r = rng(14)
    check_node("MatMul", {"a": _rand(r, (0, 5))}, tmp_path, initializers={"b": _rand(r, (5, 3))})
    check_node("MatMul", {"a": _rand(r, (2, 0))}, tmp_path, initializers={"b": _rand(r, (0, 3))})


def test_matmul_nan_inf(tmp_path):
    a = np.array([[1, np.nan, 0], [np.inf, 1, 2], [0, 0, 0]], np.float32)
    b = np.array([[1, 0], [0, 1], [2, 3]], np.float32)
    check_node("MatMul", {"a": a}, tmp_path, initializers={"b": b})


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

def _fused_run(model, feeds, rewrite, tmp_path):
    """Import ``model``, apply ``rewrite(graph)`` (the fusion a pass would do), compile and
    run; compare with onnxruntime on the original model."""
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    g = rewrite(import_model(path))
    opts = Options.load("generic")
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


@pytest.mark.parametrize("act,params", ACTS)
@pytest.mark.parametrize("sa,sb", [((3, 17), (17, 5)), ((2, 4, 9), (9, 33)),
                                   ((2, 4, 9), (2, 9, 6)), ((9,), (9, 3))])
@pytest.mark.parametrize("bconst", [True, False])
def test_matmul_fused_bias_act(act, params, sa, sb, bconst, tmp_path):
    r = rng(16)
    n = sb[-1]
    inits = {"bias": _rand(r, (n,)), "lo": np.array(0.0, np.float32),
             "hi": np.array(6.0, np.float32)}
    feeds = {"a": _rand(r, sa) * 2}
    if bconst:
        inits["b"] = _rand(r, sb)
    else:
        feeds["b"] = _rand(r, sb)
    nodes = [helper.make_node("MatMul", ["a", "b"], ["mm"]),
             helper.make_node("Add", ["mm", "bias"], ["z" if act else "y"])]
    if act:
        nodes += _act_nodes(act, params, "z", "y")
    model = make_model(nodes, feeds, ["y"], inits)
    g, prog = _fused_run(model, feeds, _fuse_tail(0, act, params), tmp_path)
    assert [n.op_type for n in g.nodes] == ["MatMul"]
    if act:
        assert f"fused {act}" in prog.steps[0].body


@pytest.mark.parametrize("act,params", ACTS[:3])
def test_gemm_fused_act(act, params, tmp_path):
    r = rng(17)
    feeds = {"a": _rand(r, (5, 12)) * 2}
    inits = {"w": _rand(r, (7, 12)), "c": _rand(r, (7,)), "lo": np.array(0.0, np.float32),
             "hi": np.array(6.0, np.float32)}
    nodes = [helper.make_node("Gemm", ["a", "w", "c"], ["z"], transB=1)]
    nodes += _act_nodes(act, params, "z", "y")
    model = make_model(nodes, feeds, ["y"], inits)
    _fused_run(model, feeds, _fuse_tail(0, act, params, bias=False), tmp_path)


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
