"""remove-identity, eliminate-dead-nodes, materialize-outputs."""
import numpy as np
import pytest

from aicc.errors import UnsupportedError
from aicc.ir import Graph, Node, TensorType
from aicc.passes import PASSES
from tests.passes.helpers import (assert_same_outputs, assert_unchanged, build, node, ops, rand,
                                  run_pass)


# -- remove-identity ----------------------------------------------------------------------

def test_identity_chain_bypassed():
    before = build([node("Identity", ["x"], ["a"]), node("Identity", ["a"], ["b"]),
                    node("Relu", ["b"], ["y"])], {"x": rand(3)}, ["y"])
    after = run_pass("remove-identity", before)
    assert ops(after) == ["Relu"] and after.nodes[0].inputs == ["x"]
    assert_same_outputs(before, after, {"x": rand(3)})


def test_identity_feeding_graph_output_kept():
    before = build([node("Relu", ["x"], ["r"]), node("Identity", ["r"], ["a"]),
                    node("Identity", ["a"], ["y"]), node("Neg", ["a"], ["z"])],
                   {"x": rand(3)}, ["y", "z"])
    after = run_pass("remove-identity", before)
    assert ops(after) == ["Relu", "Identity", "Neg"]
    assert after.nodes[1].inputs == ["r"] and after.nodes[1].outputs == ["y"]
    assert after.nodes[2].inputs == ["r"]
    assert_same_outputs(before, after, {"x": rand(3)})


def test_identity_of_input_to_output_kept():
    before = build([node("Identity", ["x"], ["y"])], {"x": rand(3)}, ["y"])
    assert_unchanged(before, run_pass("remove-identity", before))


def test_dropout():
    # opset 11: no training_mode input; the mask is unused
    g = build([node("Dropout", ["x"], ["d"], ratio=0.5), node("Relu", ["d"], ["y"])],
              {"x": rand(3)}, ["y"], opset=11)
    after = run_pass("remove-identity", g)
    assert ops(after) == ["Relu"] and after.nodes[0].inputs == ["x"]
    # a Dropout feeding a graph output becomes the Identity copy
    g = build([node("Dropout", ["x", "r", "tm"], ["y"])], {"x": rand(3)}, ["y"],
              {"r": np.array(0.5, np.float32), "tm": np.array(False)})
    after = run_pass("remove-identity", g)
    assert ops(after) == ["Identity"] and after.nodes[0].inputs == ["x"]


def test_dropout_not_removed():
    # the mask is used
    g = build([node("Dropout", ["x"], ["d", "m"]), node("Not", ["m"], ["y"])],
              {"x": rand(3)}, ["y", "d"])
    assert_unchanged(g, run_pass("remove-identity", g))
    # training mode (fixed: was removed as an identity)
    g = build([node("Dropout", ["x", "r", "tm"], ["d"]), node("Relu", ["d"], ["y"])],
              {"x": rand(3)}, ["y"], {"r": np.array(0.5, np.float32), "tm": np.array(True)})
    assert_unchanged(g, run_pass("remove-identity", g))
    # training mode chosen at run time
    g = build([node("Dropout", ["x", "r", "tm"], ["d"]), node("Relu", ["d"], ["y"])],
              {"x": rand(3), "tm": np.array(False)}, ["y"], {"r": np.array(0.5, np.float32)})
    assert_unchanged(g, run_pass("remove-identity", g))


def test_relu_of_relu_bypassed():
    """Relu is idempotent: a Relu of a Relu's output reads it directly (on NaN, +-Inf and -0
    too); one that is a graph output stays (the copy); a Relu of anything else stays."""
    x = np.array([-2.0, -0.0, 0.0, 1.5, np.nan, np.inf, -np.inf], np.float32)
    before = build([node("Relu", ["x"], ["r"]), node("Relu", ["r"], ["r2"]),
                    node("Neg", ["r2"], ["y"]), node("Relu", ["r"], ["z"]),
                    node("Neg", ["x"], ["n"]), node("Relu", ["n"], ["w"])],
                   {"x": x}, ["y", "z", "w"])
    after = run_pass("remove-identity", before)
    assert ops(after) == ["Relu", "Neg", "Relu", "Neg", "Relu"]
    assert after.nodes[1].inputs == ["r"] and after.nodes[2].inputs == ["r"]
    assert_same_outputs(before, after, {"x": x})


# -- eliminate-dead-nodes -----------------------------------------------------------------

def test_dead_nodes_and_constants_dropped():
    before = build([node("Add", ["x", "c1"], ["a"]), node("Mul", ["x", "c2"], ["dead"]),
                    node("Neg", ["dead"], ["dead2"]), node("Relu", ["a"], ["y"])],
                   {"x": rand(3), "unused": rand(2)}, ["y"],
                   {"c1": rand(3), "c2": rand(3), "c3": rand(3)})
    after = run_pass("eliminate-dead-nodes", before)
    assert ops(after) == ["Add", "Relu"]
    assert set(after.constants) == {"c1"}
    assert after.inputs == ["x", "unused"]          # the interface is kept
    assert "dead" not in after.types and "dead2" not in after.types
    assert_same_outputs(before, after, {"x": rand(3), "unused": rand(2)})


def test_multi_output_node_partly_live_kept():
    before = build([node("Split", ["x"], ["a", "b"], axis=0, num_outputs=2),
                    node("Relu", ["a"], ["y"])], {"x": rand(4)}, ["y"], opset=18)
    assert_unchanged(before, run_pass("eliminate-dead-nodes", before))


def test_constant_output_kept():
    g = Graph(nodes=[], inputs=["x"], outputs=["c"], types={"x": TensorType(np.float32, (1,))},
              constants={"c": np.ones(2, np.float32), "d": np.ones(2, np.float32)})
    after = run_pass("eliminate-dead-nodes", g)
    assert set(after.constants) == {"c"}


# -- materialize-outputs ------------------------------------------------------------------

def test_constant_output_gets_copy():
    g = Graph(nodes=[Node("Relu", ["x"], ["y"], {}, "relu")], inputs=["x"], outputs=["y", "c"],
              types={"x": TensorType(np.dtype("float32"), (3,)),
                     "y": TensorType(np.dtype("float32"), (3,))},
              constants={"c": np.arange(4, dtype=np.int64)})
    after = run_pass("materialize-outputs", g)
    assert ops(after) == ["Relu", "Identity"]
    copy = after.nodes[1]
    assert copy.outputs == ["c"] and copy.inputs[0] in after.constants
    assert "c" not in after.constants
    assert after.types["c"] == TensorType(np.dtype("int64"), (4,))
    assert_same_outputs(g, after, {"x": rand(3)})


def test_constant_output_also_consumed():
    """Fixed: a constant output read by another node made the graph fail verify (the copy
    step is appended last); the reader now keeps reading the constant."""
    g = Graph(nodes=[Node("Add", ["x", "c"], ["y"], {}, "add")], inputs=["x"],
              outputs=["y", "c"],
              types={"x": TensorType(np.dtype("float32"), (3,)),
                     "y": TensorType(np.dtype("float32"), (3,))},
              constants={"c": np.arange(3, dtype=np.float32), "c__aicc_const": np.ones(1)})
    after = run_pass("materialize-outputs", g)
    assert ops(after) == ["Add", "Identity"]
    src = after.nodes[1].inputs[0]
    assert src != "c__aicc_const" and after.nodes[0].inputs == ["x", src]
    np.testing.assert_array_equal(after.constants["c__aicc_const"], [1.0])  # not clobbered
    assert_same_outputs(g, after, {"x": rand(3)})


def test_nothing_to_materialize():
    g = build([node("Relu", ["x"], ["y"])], {"x": rand(3)}, ["y"])
    assert_unchanged(g, run_pass("materialize-outputs", g))


def test_input_as_output_rejected():
    g = Graph(nodes=[], inputs=["x"], outputs=["x"],
              types={"x": TensorType(np.dtype("float32"), (3,))}, constants={})
    with pytest.raises(UnsupportedError, match="'x'.*also graph outputs"):
        PASSES["materialize-outputs"](g)


def test_duplicate_output_rejected():
    g = Graph(nodes=[Node("Relu", ["x"], ["y"], {}, "r")], inputs=["x"], outputs=["y", "y"],
              types={"x": TensorType(np.dtype("float32"), (3,)),
                     "y": TensorType(np.dtype("float32"), (3,))}, constants={})
    with pytest.raises(UnsupportedError, match="twice"):
        PASSES["materialize-outputs"](g)
