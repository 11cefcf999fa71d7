"""memory-order: a branchy graph where the model's order holds a big tensor across a long
branch gets a lower peak; the result is a valid topological order with the same numbers."""
import numpy as np
from onnx import helper

from aicc.frontend import to_graph
from aicc.ir import verify
from aicc.passes import run_pipeline
from aicc.passes.memory_order import simulated_peak
from tests.oracle import check, make_model


def branchy():
    """Two branches, each with a big intermediate that shrinks again. The model order
    computes both big tensors before shrinking either; finishing one branch first halves
    the peak."""
    r = np.random.default_rng(0)
    x = r.normal(size=(1, 64)).astype(np.float32)
    inits = {f"up{k}": (r.normal(size=(64, 4096)) * 0.1).astype(np.float32) for k in "ab"}
    inits.update({f"down{k}": (r.normal(size=(4096, 8)) * 0.02).astype(np.float32) for k in "ab"})
    nodes = [helper.make_node("MatMul", ["x", "upa"], ["a1"]),
             helper.make_node("MatMul", ["x", "upb"], ["b1"]),
             helper.make_node("MatMul", ["a1", "downa"], ["a2"]),
             helper.make_node("MatMul", ["b1", "downb"], ["b2"]),
             helper.make_node("Add", ["a2", "b2"], ["y"])]
    return make_model(nodes, {"x": x}, ["y"], inits), {"x": x}


def test_lower_peak_and_valid_order():
    m, _ = branchy()
    g = to_graph(m)
    after = run_pipeline(g, [("memory-order", {})])
    verify(after)
    assert simulated_peak(after, after.nodes) < simulated_peak(g, g.nodes)
    assert sorted(n.name for n in after.nodes) == sorted(n.name for n in g.nodes)


def test_model_strategy_keeps_order():
    m, _ = branchy()
    g = to_graph(m)
    after = run_pipeline(g, [("memory-order", {"strategy": "model"})])
    assert [n.name for n in after.nodes] == [n.name for n in g.nodes]


def test_numbers_unchanged(tmp_path):
    m, feeds = branchy()
    check(m, feeds, tmp_path)
