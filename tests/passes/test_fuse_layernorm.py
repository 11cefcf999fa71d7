"""fuse-layernorm: Before -> Expected structure for every spelling of the LayerNorm chain
(ReduceMean / Sub / Pow or Mul / ReduceMean / Add / Sqrt / Div [/ Mul gamma] [/ Add beta]), the
unchanged cases, and compiled numerics against onnxruntime running the unfused chain on every
runnable target (special values, float64, dynamic buckets, the TorchScript export)."""
import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import aicc
from aicc.config import Options
from aicc.targets import runnable_targets
from tests.models.fixtures import load_fixture
from tests.oracle import STRICT_CFLAGS, assert_close, make_model, reference
from tests.passes.helpers import (assert_same_outputs, assert_unchanged, build, node, ops,
                                  rand, run_pass)

INTER = {"m", "d", "p", "v", "a", "s", "n", "gm"}


def chain(sq="pow", eps_first=False, gamma="right", beta="right", axes=(-1,), axes2=None,
          axes_input=False, keepdims=None, eps=1e-5, two=2.0, inner=(8,), gshape=None,
          sub_rev=False, dtype=np.float32):
    """The LayerNorm chain of x as nodes + initializers: gamma / beta None (absent), "right"
    (Mul(n, gamma)) or "left" (Mul(gamma, n)); axes as the attribute or (axes_input, opset 18)
    a constant second input; the result is always "y"."""
    inits = {"two": np.asarray(two, dtype if isinstance(two, float) else None),
             "eps": np.asarray(eps, dtype)}
    ax_kw = {} if keepdims is None else {"keepdims": keepdims}

    def rmean(src, out, ax):
        if axes_input:
            inits[f"ax_{out}"] = np.asarray(ax, np.int64)
            return node("ReduceMean", [src, f"ax_{out}"], [out], **ax_kw)
        return node("ReduceMean", [src], [out], axes=list(ax), **ax_kw)

    last = "n" if gamma or beta else "y"
    nodes = [rmean("x", "m", axes),
             node("Sub", ["m", "x"] if sub_rev else ["x", "m"], ["d"]),
             node("Pow", ["d", "two"], ["p"]) if sq == "pow" else node("Mul", ["d", "d"], ["p"]),
             rmean("p", "v", axes2 or axes),
             node("Add", ["eps", "v"] if eps_first else ["v", "eps"], ["a"]),
             node("Sqrt", ["a"], ["s"]),
             node("Div", ["d", "s"], [last])]
    if gamma:
        inits["gamma"] = np.asarray(1 + 0.5 * rand(*(inner if gshape is None else gshape), seed=3), dtype)
        out = "gm" if beta else "y"
        nodes.append(node("Mul", ["n", "gamma"] if gamma == "right" else ["gamma", "n"], [out]))
        last = out
    if beta:
        inits["beta"] = np.asarray(0.5 * rand(*inner, seed=4), dtype)
        nodes.append(node("Add", [last, "beta"] if beta == "right" else ["beta", last], ["y"]))
    return nodes, inits


def graph(shape=(3, 8), opset=17, extra=(), outputs=("y",), dtype=np.float32, **kw):
    nodes, inits = chain(dtype=dtype, inner=kw.pop("inner", tuple(shape[-1:])), **kw)
    feeds = {"x": (rand(*shape, seed=5) * 3 + 1).astype(dtype)}
    return build(nodes + list(extra), feeds, list(outputs), inits, opset=opset), feeds


FORMS = [dict(sq="pow"), dict(sq="mul", eps_first=True, gamma="left", beta="left"),
         dict(sq="pow", gamma=None, beta=None), dict(sq="mul", beta=None),
         dict(sq="pow", gamma=None, beta="left")]


def _ln(g):
    assert ops(g) == ["LayerNormalization"], ops(g)
    return g.nodes[0]


@pytest.mark.parametrize("kw", FORMS, ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()))
@pytest.mark.parametrize("opset", [13, 17, 18])
def test_fused(kw, opset):
    before, feeds = graph(opset=opset, axes_input=opset >= 18, **kw)
    after = run_pass("fuse-layernorm", before)
    n = _ln(after)
    assert n.outputs == ["y"] and n.inputs[0] == "x"
    assert n.attrs == {"axis": 1, "epsilon": float(np.float32(1e-5))}
    assert n.domain == ("" if opset >= 17 else "aicc")
    if kw.get("gamma", "right"):
        assert n.inputs[1] == "gamma"
    else:
        assert n.inputs[1] not in before.constants
        np.testing.assert_array_equal(after.constants[n.inputs[1]], np.ones(1, np.float32))
    assert n.inputs[2:] == (["beta"] if kw.get("beta", "right") else [])
    assert not INTER & set(after.types)
    assert_same_outputs(before, after, feeds, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("axes,gshape,want_axis,new_scale", [
    ((-2, -1), (3, 8), 1, None), ((1, 2), (1, 3, 8), 1, (3, 8)), ((2, 1), (), 1, (1,)),
    ((-1,), (1, 1, 8), 2, (8,)), ((0, 1, 2), (2, 3, 8), 0, None)])
@pytest.mark.parametrize("opset", [13, 17])
def test_multi_axis_and_param_shapes(axes, gshape, want_axis, new_scale, opset):
    shape = (2, 3, 8)
    inner = shape[want_axis:]
    before, feeds = graph(shape=shape, opset=opset, axes=axes, gshape=gshape, inner=inner,
                          eps=0.25)                          # large enough to be seen
    after = run_pass("fuse-layernorm", before)
    n = _ln(after)
    assert n.attrs == {"axis": want_axis, "epsilon": 0.25} and n.inputs[2] == "beta"
    if new_scale is None:
        assert n.inputs[1] == "gamma"
    else:
        assert n.inputs[1] not in before.constants
        assert after.constants[n.inputs[1]].shape == new_scale
    assert_same_outputs(before, after, feeds, rtol=1e-5, atol=1e-6)


def test_fresh_scale_name():
    """The ones scale of an unscaled chain takes a name no tensor has (here a graph input
    scales the result: no gamma)."""
    nodes, inits = chain(gamma=None, beta=None)
    nodes.append(node("Mul", ["y", "y_ln_scale"], ["z"]))
    feeds = {"x": rand(3, 8, seed=1), "y_ln_scale": rand(8, seed=2)}
    g = build(nodes, feeds, ["z"], inits, opset=13)
    after = run_pass("fuse-layernorm", g)
    assert ops(after) == ["LayerNormalization", "Mul"]
    assert after.nodes[0].inputs == ["x", "y_ln_scale_1"]
    assert after.nodes[1].inputs == ["y", "y_ln_scale"] and "y_ln_scale" not in after.constants
    assert_same_outputs(g, after, feeds, rtol=1e-5, atol=1e-6)


def test_two_chains_on_one_input():
    """Two chains reading x (its other reader stays): two LayerNormalizations."""
    n1, i1 = chain()
    n2, i2 = chain(sq="mul", gamma="left", beta=None, eps=1e-3)
    n2 = [node(n.op_type, [i if i == "x" else i + "2" for i in n.input], [o + "2" for o in n.output],
               **{a.name: h.get_attribute_value(a) for a in n.attribute}) for n in n2]
    inits = {**i1, **{k + "2": v for k, v in i2.items()}}
    feeds = {"x": rand(4, 8, seed=2)}
    g = build([*n1, *n2, node("Add", ["y", "y2"], ["o"]), node("Neg", ["x"], ["z"])],
              feeds, ["o", "z"], inits, opset=13)
    after = run_pass("fuse-layernorm", g)
    assert ops(after) == ["LayerNormalization", "LayerNormalization", "Add", "Neg"]
    assert after.nodes[1].attrs["epsilon"] == float(np.float32(1e-3))
    assert after.nodes[1].inputs == ["x", "gamma2"] and after.nodes[1].outputs == ["y2"]
    assert_same_outputs(g, after, feeds, rtol=1e-5, atol=1e-6)


# -- Expected = Before ------------------------------------------------------------------

@pytest.mark.parametrize("why,kw", [
    *[(f"{t} is a graph output", dict(outputs=("y", t))) for t in "mdpvas"],
    ("d read by a third node", dict(extra=[node("Neg", ["d"], ["z"])], outputs=("y", "z"))),
    ("non-trailing axis", dict(shape=(3, 8, 2), axes=(-2,), inner=(2,))),
    ("non-contiguous axes", dict(shape=(2, 3, 8), axes=(0, 2))),
    ("axes differ", dict(shape=(2, 3, 8), axes2=(-2, -1))),
    ("keepdims=0", dict(shape=(4, 4), keepdims=0, gamma=None, beta=None)),
    ("eps not one value", dict(eps=np.full(8, 1e-5))),
    ("Pow of 3", dict(two=3.0)),
    ("integer exponent", dict(two=np.int64(2))),
    ("Sub(m, x)", dict(sub_rev=True)),
    ("float16", dict(dtype=np.float16)),
])
def test_not_fused(why, kw):
    before, _ = graph(**kw)
    assert_unchanged(before, run_pass("fuse-layernorm", before))


@pytest.mark.parametrize("how", ["wrong gamma shape", "gamma an input", "n an output"])
def test_affine_tail_kept(how):
    """A Mul / Add whose operand is no LayerNorm parameter (or whose input is a graph output)
    stays; the chain up to the Div still becomes a LayerNormalization with a ones scale."""
    nodes, inits = chain()
    feeds = {"x": rand(3, 8, seed=6)}
    outs = ["y"]
    if how == "wrong gamma shape":
        inits["gamma"] = rand(3, 1, seed=7)              # a per-row scale
    elif how == "gamma an input":
        feeds["gamma"] = inits.pop("gamma")
    else:
        outs.append("n")
    g = build(nodes, feeds, outs, inits, opset=13)
    after = run_pass("fuse-layernorm", g)
    assert ops(after) == ["LayerNormalization", "Mul", "Add"]
    ln = after.nodes[0]
    assert ln.outputs == ["n"] and ln.inputs[0] == "x" and len(ln.inputs) == 2
    np.testing.assert_array_equal(after.constants[ln.inputs[1]], np.ones(1, np.float32))
    assert [n.inputs for n in after.nodes[1:]] == [["n", "gamma"], ["gm", "beta"]]
    assert_same_outputs(g, after, feeds, rtol=1e-5, atol=1e-6)


def test_pipeline_position():
    names = [n for n, _ in Options.load().pipeline]
    assert names.index("fuse-bias") < names.index("fuse-layernorm") \
        < names.index("fuse-binary-activation")


# -- compiled -----------------------------------------------------------------------------

TARGETS = runnable_targets(derived=False)


def _unfused(model, feeds):
    """onnxruntime on the model as written (no graph optimizations: its own LayerNorm fusion
    stays off)."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in model.graph.output], sess.run(None, feeds)))


def _steps(bundle_dir):
    return [s["op"] for s in json.loads((bundle_dir / "manifest.json").read_text())["steps"]]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kw,opset", [(FORMS[0], 13), (FORMS[2], 17), (FORMS[1], 18)],
                         ids=["pow-affine-13", "plain-17", "mul-swapped-18"])
def test_compiled_against_onnxruntime(kw, opset, target, dtype, tmp_path):
    """One LayerNormalization step instead of seven to nine, results as onnxruntime's unfused
    chain: rows of 37 (vector body and tail), a NaN in row 0, one 1e30 in row 1 and a row of
    values near 1e30 (float32: the squared deviations overflow, so the row is 0 * gamma +
    beta in both)."""
    nodes, inits = chain(dtype=dtype, inner=(37,), axes_input=opset >= 18, eps=0.1, **kw)
    x = (rand(5, 37, seed=11) * 3).astype(dtype)
    x[0, 7] = np.nan
    x[1, 3] = 1e30
    x[2] *= dtype(1e30)
    model = make_model(nodes, {"x": x}, ["y"], inits, opset=opset)
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    out = aicc.build(path, target=target, out=tmp_path / "b")
    assert _steps(out) == ["LayerNormalization"]
    got, want = aicc.load(out, cflags=STRICT_CFLAGS).run({"x": x}), _unfused(model, {"x": x})
    assert_close(got, want, rtol=1e-5, atol=1e-6)
    y = got["y"]
    assert np.isnan(y[0]).all() and np.isfinite(y[1:]).all()
    if dtype == np.float32:
        shift = inits["beta"] if "beta" in inits else 0
        np.testing.assert_array_equal(y[1], np.zeros(37, dtype) + shift)


@pytest.mark.parametrize("target", TARGETS)
def test_torchscript_export(target, tmp_path):
    """mlp_gelu_ln's TorchScript export (opset 13) writes nn.LayerNorm as ReduceMean / Sub /
    Pow / ReduceMean / Add / Sqrt / Div / Mul / Add: one aicc.LayerNormalization step, results
    as onnxruntime's."""
    path = load_fixture("mlp_gelu_ln", "ts")
    m = onnx.load(str(path))
    out = aicc.build(path, target=target, out=tmp_path / "b")
    steps = _steps(out)
    assert steps.count("LayerNormalization") == 1
    assert not {"ReduceMean", "Sqrt", "Pow", "Sub", "Div"} & set(steps)
    i = m.graph.input[0]
    shape = [d.dim_value or 1 for d in i.type.tensor_type.shape.dim]
    feeds = {i.name: (np.random.default_rng(4).standard_normal(shape) * 2).astype(np.float32)}
    b = aicc.load(out, cflags=STRICT_CFLAGS)
    assert_close(b.run(feeds), reference(m, feeds), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("opset", [13, 17])
@pytest.mark.parametrize("padded", ["other axis", "normalized axis"])
def test_dynamic_buckets(padded, opset, tmp_path):
    """A dynamic dim, buckets 4 and 8, every size 1..8 against onnxruntime: the fused node
    is position-wise over a padded other axis; across the padded normalized axis (no gamma:
    a [1] ones scale) it becomes aicc.NormDyn, as the chain padded fine before."""
    shape = [1, "seq", 8] if padded == "other axis" else [1, 4, "seq"]
    nodes, inits = chain(gamma=None, beta=None)
    g = h.make_graph(nodes, "ln", [h.make_tensor_value_info("x", T.FLOAT, shape)],
                     [h.make_tensor_value_info("y", T.FLOAT, shape)],
                     [onnx.numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    out = aicc.build(path, target=TARGETS[-1], out=tmp_path / "b", buckets={"seq": [4, 8]})
    assert _steps(out) == (["LayerNormalization"] if padded == "other axis" else ["NormDyn"])
    b = aicc.load(out, cflags=STRICT_CFLAGS)
    rng = np.random.default_rng(9)
    for n in range(1, 9):
        x = rng.standard_normal([n if d == "seq" else d for d in shape]).astype(np.float32)
        assert_close(b.run({"x": x}), _unfused(m, {"x": x}), rtol=1e-5, atol=1e-6)
