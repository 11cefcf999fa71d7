"""fold-constants and infer-shapes."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from aicc.ir import Graph, Node, TensorType
from aicc.passes import PASSES
from tests.passes.helpers import (assert_same_outputs, assert_unchanged, build, node, ops, rand,
                                  run_pass)


def shape_chain_graph():
    """x [2,3,4] -> Reshape(x, Concat(Gather(Shape(x), 0), [-1])) -> [2, 12]."""
    nodes = [
        node("Shape", ["x"], ["s"]),
        node("Gather", ["s", "i0"], ["d0"], axis=0),
        node("Unsqueeze", ["d0", "ax"], ["d0u"]),
        node("Concat", ["d0u", "m1"], ["shp"], axis=0),
        node("Reshape", ["x", "shp"], ["y"]),
    ]
    inits = {"i0": np.array(0, np.int64), "ax": np.array([0], np.int64),
             "m1": np.array([-1], np.int64)}
    return build(nodes, {"x": rand(2, 3, 4)}, ["y"], inits)


def test_shape_chain_becomes_constant():
    before = shape_chain_graph()
    after = run_pass("fold-constants", before)
    assert ops(after) == ["Reshape"]
    shp = after.nodes[0].inputs[1]
    np.testing.assert_array_equal(after.constants[shp], [2, -1])
    assert after.constants[shp].dtype == np.int64
    assert all(k not in after.types for k in ("s", "d0", "d0u", "shp"))
    assert_same_outputs(before, after, {"x": rand(2, 3, 4)})


def test_constant_nodes():
    c = helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(
        np.arange(6, dtype=np.float32).reshape(2, 3)))
    f = helper.make_node("Constant", [], ["f"], value_float=2.0)
    ints = helper.make_node("Constant", [], ["ints"], value_ints=[1, 2, 3])
    before = build([c, f, ints, node("Mul", ["c", "f"], ["cf"]), node("Add", ["x", "cf"], ["y"]),
                    node("Cast", ["ints"], ["z"], to=TensorProto.FLOAT)],
                   {"x": rand(2, 3)}, ["y", "z"])
    after = run_pass("fold-constants", before)
    assert ops(after) == ["Add"]
    np.testing.assert_array_equal(after.constants["cf"], np.arange(6).reshape(2, 3) * 2.0)
    assert after.constants["f"].dtype == np.float32 and after.constants["f"].shape == ()
    np.testing.assert_array_equal(after.constants["z"], [1.0, 2.0, 3.0])
    assert after.constants["z"].dtype == np.float32
    assert_same_outputs(before, after, {"x": rand(2, 3)})


def test_sparse_constant():
    """Bug fixed: a Constant with sparse_value crashed the pass."""
    sp = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "v"),
        numpy_helper.from_array(np.array([1, 3], np.int64), "i"), [2, 2])
    before = build([helper.make_node("Constant", [], ["c"], sparse_value=sp),
                    node("Add", ["x", "c"], ["y"])], {"x": rand(2, 2)}, ["y"])
    after = run_pass("fold-constants", before)
    assert ops(after) == ["Add"]
    np.testing.assert_array_equal(after.constants["c"], [[0, 1], [0, 2]])
    # 2-D (coordinate) indices
    sp2 = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([5.0], np.float32), "v"),
        numpy_helper.from_array(np.array([[1, 0]], np.int64), "i"), [2, 2])
    g = build([helper.make_node("Constant", [], ["c"], sparse_value=sp2),
               node("Add", ["x", "c"], ["y"])], {"x": rand(2, 2)}, ["y"])
    np.testing.assert_array_equal(run_pass("fold-constants", g).constants["c"], [[0, 0], [5, 0]])


def test_random_not_folded():
    before = build([node("RandomNormal", [], ["r"], shape=[2, 3], seed=1.0),
                    node("RandomNormalLike", ["c"], ["rl"]),
                    node("Add", ["r", "rl"], ["s"]), node("Add", ["x", "s"], ["y"])],
                   {"x": rand(2, 3)}, ["y"], {"c": np.zeros((2, 3), np.float32)})
    after = run_pass("fold-constants", before)
    assert ops(after) == ["RandomNormal", "RandomNormalLike", "Add", "Add"]
    assert not {"r", "rl", "s"} & set(after.constants)


def test_shape_and_size_of_symbolic():
    """Shape of a tensor with a symbolic dim does not fold, except a slice of static dims
    (fixed: it did not fold before); Size folds only when fully static."""
    g = Graph(nodes=[Node("Shape", ["x"], ["s_all"], {}, "a"),
                     Node("Shape", ["x"], ["s_tail"], {"start": 1}, "b"),
                     Node("Shape", ["x"], ["s_neg"], {"start": -2, "end": -1}, "c"),
                     Node("Size", ["x"], ["n"], {}, "d")],
              inputs=["x"], outputs=["s_all", "s_tail", "s_neg", "n"],
              types={"x": TensorType(np.dtype("float32"), ("N", 3, 4)),
                     "s_all": TensorType(np.dtype("int64"), (3,)),
                     "s_tail": TensorType(np.dtype("int64"), (2,)),
                     "s_neg": TensorType(np.dtype("int64"), (1,)),
                     "n": TensorType(np.dtype("int64"), ())},
              constants={})
    after = run_pass("fold-constants", g)
    assert ops(after) == ["Shape", "Size"]
    np.testing.assert_array_equal(after.constants["s_tail"], [3, 4])
    np.testing.assert_array_equal(after.constants["s_neg"], [3])
    g.types["x"] = TensorType(np.dtype("float32"), (2, 3, 4))
    after = run_pass("fold-constants", g)
    assert ops(after) == []
    assert int(after.constants["n"]) == 24
    np.testing.assert_array_equal(after.constants["s_all"], [2, 3, 4])


def test_max_bytes():
    before = build([node("Tile", ["c", "reps"], ["big"]), node("Add", ["x", "big"], ["y"])],
                   {"x": rand(64, 64)}, ["y"],
                   {"c": np.ones((1, 64), np.float32), "reps": np.array([64, 1], np.int64)})
    after = run_pass("fold-constants", before, max_bytes=1024)
    assert_unchanged(before, after)
    after = run_pass("fold-constants", before)
    assert ops(after) == ["Add"] and after.constants["big"].shape == (64, 64)


def test_nothing_to_fold():
    g = build([node("Relu", ["x"], ["y"])], {"x": rand(2)}, ["y"])
    assert_unchanged(g, run_pass("fold-constants", g))


# -- infer-shapes -----------------------------------------------------------------------

def _sym(*dims):
    return TensorType(np.dtype("float32"), dims)


def test_infer_shapes_refines_after_folding():
    """Reshape with a (now) constant shape: the unknown output type becomes static."""
    g = Graph(nodes=[Node("Reshape", ["x", "shp"], ["r"], {}, "reshape"),
                     Node("Relu", ["r"], ["y"], {}, "relu")],
              inputs=["x"], outputs=["y"],
              types={"x": _sym(2, 3, 4), "r": _sym("?r:0", "?r:1"),
                     "y": _sym("?y:0", "?y:1")},
              constants={"shp": np.array([4, -1], np.int64)})
    after = run_pass("infer-shapes", g)
    assert after.types["r"].shape == (4, 6) and after.types["y"].shape == (4, 6)
    assert g.types["r"].shape == ("?r:0", "?r:1")      # input graph untouched


def test_infer_shapes_fills_missing_types():
    g = Graph(nodes=[Node("Relu", ["x"], ["t"], {}, "a"), Node("Neg", ["t"], ["y"], {}, "b")],
              inputs=["x"], outputs=["y"], types={"x": _sym(5, 2), "y": _sym(5, 2)},
              constants={})
    after = PASSES["infer-shapes"](g)       # the input does not verify (t untyped)
    assert after.types["t"] == _sym(5, 2)


def test_infer_shapes_skips_fused_graphs():
    g = Graph(nodes=[Node("MatMul", ["x", "w"], ["y"], {"aicc_act": "Relu",
                                                        "aicc_act_params": {}}, "mm")],
              inputs=["x"], outputs=["y"], types={"x": _sym(2, 3), "y": _sym("?", "?")},
              constants={"w": np.ones((3, 4), np.float32)})
    after = run_pass("infer-shapes", g)
    assert after.types["y"].shape == ("?", "?")


def test_infer_shapes_keeps_static_types():
    before = shape_chain_graph()
    after = run_pass("infer-shapes", run_pass("fold-constants", before))
    assert after.types["y"].shape == (2, 12)


@pytest.mark.parametrize("opset", [11, 13, 17])
def test_fold_then_infer_pipeline(opset):
    """Squeeze/Unsqueeze of constants fold with the right opset semantics."""
    inits = {"c": np.arange(3, dtype=np.float32).reshape(1, 3)}
    if opset >= 13:
        inits["ax"] = np.array([0], np.int64)
        sq = node("Squeeze", ["c", "ax"], ["cs"])
    else:
        sq = node("Squeeze", ["c"], ["cs"], axes=[0])
    before = build([sq, node("Add", ["x", "cs"], ["y"])], {"x": rand(2, 3)}, ["y"], inits,
                   opset=opset)
    after = run_pass("infer-shapes", run_pass("fold-constants", before))
    assert ops(after) == ["Add"] and after.constants["cs"].shape == (3,)
    assert_same_outputs(before, after, {"x": rand(2, 3)})


def _constant_of_shape_graph():
    from onnx import numpy_helper as nh
    return build([helper.make_node("ConstantOfShape", ["s"], ["c"],
                                   value=nh.from_array(np.array([2.0], np.float32))),
                  node("Add", ["x", "c"], ["y"])], {"x": rand(2, 3)}, ["y"],
                 {"s": np.array([2, 3], np.int64)})


def test_constant_of_shape_folds():
    after = run_pass("fold-constants", _constant_of_shape_graph())
    assert ops(after) == ["Add"]
    np.testing.assert_array_equal(after.constants["c"], np.full((2, 3), 2.0, np.float32))
