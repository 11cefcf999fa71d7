"""fuse-gelu: Before -> Expected structure for every spelling of the erf GELU chain, the
unchanged cases, and compiled numerics against onnxruntime running the unfused chain (generic
and the host's SIMD targets; special values, vector tails, float64, the TorchScript export)."""
import math

import numpy as np
import onnx
import pytest

import aicc
from aicc.config import Options
from aicc.targets import runnable_targets
from tests.models.fixtures import fixture_path
from tests.oracle import STRICT_CFLAGS, assert_close, make_model, reference
from tests.passes.helpers import (assert_same_outputs, assert_unchanged, build, node, ops,
                                  rand, run_pass)

SQRT2 = np.float32(math.sqrt(2.0))


def chain(scale="div", form="x_s_half", add_first=False, mul_first=False, c=None, one=1.0,
          half=0.5, dtype=np.float32):
    """The erf GELU of x as nodes + initializers: a = x / sqrt2 (``div``) or x * (1/sqrt2)
    (``mul``), e = Erf(a), s = e + 1 (1 + e with add_first), then (x * s) * 0.5
    (``x_s_half``), (x * 0.5) * s (``x_half_s``) or x * (0.5 * s) (``s_half_x``); mul_first
    swaps the Mul operands."""
    if c is None:
        c = math.sqrt(2.0) if scale == "div" else math.sqrt(0.5)
    inits = {"c": np.array(c, dtype), "one": np.array(one, dtype), "half": np.array(half, dtype)}
    sw = (lambda a, b: [b, a]) if mul_first else (lambda a, b: [a, b])
    nodes = [node("Div", ["x", "c"], ["a"]) if scale == "div" else node("Mul", sw("x", "c"), ["a"]),
             node("Erf", ["a"], ["e"]),
             node("Add", ["one", "e"] if add_first else ["e", "one"], ["s"])]
    if form == "x_s_half":
        nodes += [node("Mul", sw("x", "s"), ["m"]), node("Mul", sw("m", "half"), ["y"])]
    elif form == "s_half_x":     # torch.onnx's dynamo exporter: x * (0.5 * s)
        nodes += [node("Mul", sw("half", "s"), ["h"]), node("Mul", sw("x", "h"), ["y"])]
    else:
        nodes += [node("Mul", sw("x", "half"), ["h"]), node("Mul", sw("h", "s"), ["y"])]
    return nodes, inits


def graph(shape=(3, 37), opset=17, extra=(), outputs=("y",), dtype=np.float32, **kw):
    nodes, inits = chain(dtype=dtype, **kw)
    feeds = {"x": (rand(*shape, seed=5) * 3).astype(dtype)}
    return build(nodes + list(extra), feeds, list(outputs), inits, opset=opset), feeds


FORMS = [dict(scale=s, form=f, add_first=a, mul_first=m)
         for s in ("div", "mul") for f in ("x_s_half", "x_half_s", "s_half_x")
         for a, m in ((False, False), (True, True))]


@pytest.mark.parametrize("kw", FORMS, ids=lambda kw: "-".join(str(v) for v in kw.values()))
@pytest.mark.parametrize("opset", [17, 20])
def test_fused(kw, opset):
    one_gelu(*graph(opset=opset, **kw), opset, {}, {"a", "e", "s", "m", "h"}, 1e-6, 1e-7)


def one_gelu(before, feeds, opset, attrs, gone, rtol, atol):
    """fuse-gelu turns the graph into one Gelu of x with these attributes (standard domain
    from opset 20, aicc before), the chain's tensors ``gone``, the same outputs."""
    after = run_pass("fuse-gelu", before)
    assert ops(after) == ["Gelu"]
    n = after.nodes[0]
    assert n.inputs == ["x"] and n.outputs == ["y"] and n.attrs == attrs
    assert n.domain == ("" if opset >= 20 else "aicc")
    assert not gone & set(after.types)
    assert_same_outputs(before, after, feeds, rtol=rtol, atol=atol)


def test_two_chains_and_neighbours():
    """A chain on a MatMul's output and a second one on its result; other nodes stay."""
    n1, i1 = chain()
    n2, i2 = chain(scale="mul", form="x_half_s")
    ren = {"x": "g1", "a": "a2", "e": "e2", "s": "s2", "m": "m2", "h": "h2", "y": "g2",
           "c": "c2", "one": "one2", "half": "half2"}
    n2 = [node(n.op_type, [ren.get(i, i) for i in n.input], [ren.get(o, o) for o in n.output])
          for n in n2]
    n1 = [node(n.op_type, list(n.input), ["g1" if o == "y" else o for o in n.output]) for n in n1]
    feeds = {"p": rand(4, 16, seed=2)}
    inits = {"W": rand(16, 24, seed=3), **i1, **{ren[k]: v for k, v in i2.items()}}
    g = build([node("MatMul", ["p", "W"], ["x"]), *n1, *n2, node("Neg", ["g2"], ["y"])],
              feeds, ["y"], inits)
    after = run_pass("fuse-gelu", g)
    assert ops(after) == ["MatMul", "Gelu", "Gelu", "Neg"]
    assert [n.outputs for n in after.nodes[1:3]] == [["g1"], ["g2"]]
    assert_same_outputs(g, after, feeds, rtol=1e-6, atol=1e-6)


# -- Expected = Before ------------------------------------------------------------------

@pytest.mark.parametrize("why,kw", [
    ("scale is not sqrt 2", dict(c=1.5)),
    ("scale is not 1 / sqrt 2", dict(scale="mul", c=0.7)),
    ("Add of 2, not 1", dict(one=2.0)),
    ("halving by 0.6", dict(half=0.6)),
    ("halving by 0.6 first", dict(form="x_half_s", half=0.6)),
    ("halving s by 0.6", dict(form="s_half_x", half=0.6)),
    ("halved sum read twice", dict(form="s_half_x", extra=[node("Neg", ["h"], ["n"])],
                                   outputs=("y", "n"))),
    ("Erf output read twice", dict(extra=[node("Neg", ["e"], ["n"])], outputs=("y", "n"))),
    ("intermediate is a graph output", dict(outputs=("y", "s"))),
    ("product is a graph output", dict(outputs=("y", "m"))),
    ("half product read twice", dict(form="x_half_s", extra=[node("Neg", ["h"], ["n"])],
                                     outputs=("y", "n"))),
])
def test_not_fused(why, kw):
    before, _ = graph(**kw)
    assert_unchanged(before, run_pass("fuse-gelu", before))


def test_constant_broadcast_not_fused():
    """A [1, 1, 1] constant grows x's rank: the chain's result is not x's shape."""
    nodes, inits = chain()
    inits["half"] = np.full((1, 1, 1), 0.5, np.float32)
    g = build(nodes, {"x": rand(3, 5, seed=1)}, ["y"], inits)
    assert_unchanged(g, run_pass("fuse-gelu", g))


def test_vector_constant_not_fused():
    nodes, inits = chain()
    inits["c"] = np.full(5, SQRT2, np.float32)
    g = build(nodes, {"x": rand(3, 5, seed=1)}, ["y"], inits)
    assert_unchanged(g, run_pass("fuse-gelu", g))


def test_other_multiplicand_not_fused():
    """(z * s) * 0.5 with z != x is not a GELU."""
    nodes, inits = chain()
    nodes[3] = node("Mul", ["z", "s"], ["m"])
    feeds = {"x": rand(3, 5, seed=1), "z": rand(3, 5, seed=2)}
    g = build(nodes, feeds, ["y"], inits)
    assert_unchanged(g, run_pass("fuse-gelu", g))


# -- compiled -----------------------------------------------------------------------------

TARGETS = ["generic"] + [t for t in runnable_targets() if t in ("x86-avx2", "x86-avx512")]
SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30, 1e-40, 2.3, -2.3, 3.9,
                    -3.9, 5.0, -5.0, 0.87, -0.88], np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kw", [FORMS[0], FORMS[-1]], ids=["div", "mul-swapped"])
def test_compiled_against_onnxruntime(kw, target, dtype, tmp_path):
    """One Gelu step instead of five, results as onnxruntime's unfused chain: a 3 x 37 input
    (vector body and scalar tail on both ISAs) with specials on the first row."""
    compiled_one_gelu(*chain(dtype=dtype, **kw), dtype, target, tmp_path, 1e-6, 1e-7)


def compiled_one_gelu(nodes, inits, dtype, target, tmp_path, rtol, atol):
    """The chain built for target on a 3 x 37 input with specials on the first row: one Gelu
    step, results as onnxruntime's unfused chain; NaN, +Inf -> +Inf, -Inf -> NaN."""
    x = (rand(3, 37, seed=11) * 3).astype(dtype)
    x[0, :SPECIAL.size] = SPECIAL
    model = make_model(nodes, {"x": x}, ["y"], inits)
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    b = aicc.load(aicc.build(path, target=target, out=tmp_path / "b"), cflags=STRICT_CFLAGS)
    assert [s["op"] for s in b.manifest["steps"]] == ["Gelu"]
    got, want = b.run({"x": x}), reference(model, {"x": x})
    assert_close(got, want, rtol=rtol, atol=atol)
    assert np.isnan(got["y"][0, 0]) and got["y"][0, 1] == np.inf and np.isnan(got["y"][0, 2])


@pytest.mark.parametrize("target", TARGETS)
def test_torchscript_export(target, tmp_path):
    """The TorchScript export of an MLP with F.gelu (Div / Erf / Add / Mul / Mul at opset
    13): one aicc.Gelu step, results as onnxruntime's."""
    path = fixture_path("mlp_gelu_ln", "ts")
    m = onnx.load(str(path))
    b = aicc.load(aicc.build(path, target=target, out=tmp_path / "b"), cflags=STRICT_CFLAGS)
    assert "Erf" not in [s["op"] for s in b.manifest["steps"]]
    assert "Gelu" in [s["op"] for s in b.manifest["steps"]]
    i = m.graph.input[0]
    shape = [d.dim_value or 1 for d in i.type.tensor_type.shape.dim]
    feeds = {i.name: (np.random.default_rng(4).standard_normal(shape) * 2).astype(np.float32)}
    assert_close(b.run(feeds), reference(m, feeds), rtol=1e-4, atol=1e-5)


def test_pipeline_position():
    names = [n for n, _ in Options.load().pipeline]
    assert names.index("fuse-bias") < names.index("fuse-gelu") < names.index("fuse-activation")


def test_input_read_elsewhere():
    """A chain whose x is a graph input read by another node too: the Gelu still forms (x
    itself is not part of the chain) and the other reader keeps x."""
    nodes, inits = chain()
    nodes.append(node("Add", ["x", "y"], ["z"]))
    feeds = {"x": rand(2, 9, seed=8)}
    g = build(nodes, feeds, ["z"], inits)
    after = run_pass("fuse-gelu", g)
    assert ops(after) == ["Gelu", "Add"]
    assert after.nodes[1].inputs == ["x", "y"]
    assert_same_outputs(g, after, feeds, rtol=1e-6, atol=1e-7)


# -- the tanh approximation (GPT-2's NewGELU, F.gelu(approximate="tanh") below opset 20) ----

KAPPA, BETA = 0.044715, math.sqrt(2.0 / math.pi)


def tanh_chain(cube="pow", form="x_half_s", swap=False, kappa=KAPPA, beta=BETA, one=1.0,
               exponent=3.0, cube_of="x"):
    """The tanh GELU of x: c3 = Pow(x, 3) (``pow``; ``mul``: (x * x) * x, ``mul_r``:
    x * (x * x)), q = c3 * kappa, a = x + q, b = a * beta, t = Tanh(b), s = t + 1, then the
    product of x, s and 0.5 in one of chain()'s forms; swap: every Add / Mul operand order
    reversed; cube_of: the tensor the cube is taken of."""
    sw = (lambda a, b: [b, a]) if swap else (lambda a, b: [a, b])
    ex = np.array(exponent, np.int64 if float(exponent).is_integer() and exponent == 3
                  and cube == "pow_int" else np.float32)
    inits = {"k": np.array(kappa, np.float32), "bt": np.array(beta, np.float32),
             "one": np.array(one, np.float32), "half": np.array(0.5, np.float32), "three": ex}
    if cube in ("pow", "pow_int"):
        nodes = [node("Pow", [cube_of, "three"], ["c3"])]
    elif cube == "mul":
        nodes = [node("Mul", [cube_of, cube_of], ["sq"]), node("Mul", sw("sq", cube_of), ["c3"])]
    else:
        nodes = [node("Mul", [cube_of, cube_of], ["sq"]), node("Mul", sw(cube_of, "sq"), ["c3"])]
    nodes += [node("Mul", sw("c3", "k"), ["q"]), node("Add", sw("x", "q"), ["a"]),
              node("Mul", sw("a", "bt"), ["b"]), node("Tanh", ["b"], ["t"]),
              node("Add", sw("t", "one"), ["s"])]
    if form == "x_s_half":
        nodes += [node("Mul", sw("x", "s"), ["m"]), node("Mul", sw("m", "half"), ["y"])]
    elif form == "s_half_x":
        nodes += [node("Mul", sw("half", "s"), ["h"]), node("Mul", sw("x", "h"), ["y"])]
    else:
        nodes += [node("Mul", sw("x", "half"), ["h"]), node("Mul", sw("h", "s"), ["y"])]
    return nodes, inits


def tanh_graph(shape=(3, 37), opset=17, extra=(), outputs=("y",), feeds=None, **kw):
    nodes, inits = tanh_chain(**kw)
    feeds = feeds or {"x": (rand(*shape, seed=5) * 3).astype(np.float32)}
    return build(nodes + list(extra), feeds, list(outputs), inits, opset=opset), feeds


TANH_FORMS = [dict(cube=c, form=f, swap=s) for c in ("pow", "pow_int", "mul", "mul_r")
              for f in ("x_s_half", "x_half_s", "s_half_x") for s in (False, True)]


@pytest.mark.parametrize("kw", TANH_FORMS, ids=lambda kw: "-".join(str(v) for v in kw.values()))
@pytest.mark.parametrize("opset", [17, 20])
def test_tanh_fused(kw, opset):
    # the chain's 1 + tanh(u) cancels for x < 0: the fused form is the more accurate one,
    # a few 1e-8 apart there on N(0, 3) inputs
    one_gelu(*tanh_graph(opset=opset, **kw), opset, {"approximate": "tanh"},
             {"c3", "sq", "q", "a", "b", "t", "s", "m", "h"}, 1e-5, 1e-6)


@pytest.mark.parametrize("why,kw", [
    ("kappa 0.05", dict(kappa=0.05)),
    ("beta 0.8", dict(beta=0.8)),
    ("Add of 2, not 1", dict(one=2.0)),
    ("square, not cube", dict(exponent=2.0)),
    ("cube of another tensor", dict(cube_of="z", feeds={"x": rand(3, 5, seed=1),
                                                         "z": rand(3, 5, seed=2)})),
    ("Tanh output read twice", dict(extra=[node("Neg", ["t"], ["n"])], outputs=("y", "n"))),
    ("cube read twice", dict(extra=[node("Neg", ["c3"], ["n"])], outputs=("y", "n"))),
    ("square read twice", dict(cube="mul", extra=[node("Neg", ["sq"], ["n"])],
                               outputs=("y", "n"))),
    ("inner sum is a graph output", dict(outputs=("y", "a"))),
])
def test_tanh_not_fused(why, kw):
    before, _ = tanh_graph(**kw)
    assert_unchanged(before, run_pass("fuse-gelu", before))


@pytest.mark.parametrize("target", TARGETS)
def test_tanh_compiled_against_onnxruntime(target, tmp_path):
    """One Gelu(tanh) step instead of nine, results as onnxruntime's unfused chain (vector
    body and scalar tail), specials on the first row: NaN, +Inf -> +Inf, -Inf -> NaN."""
    compiled_one_gelu(*tanh_chain(cube="pow", form="x_half_s"), np.float32, target, tmp_path,
                      1e-5, 1e-6)
