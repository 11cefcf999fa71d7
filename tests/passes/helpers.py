"""Helpers for the pass tests: build small graphs, run one pass (checking the IR invariants and
that the input graph is left untouched), and a numpy interpreter of a Graph for numerics.

Style (after TVM Relax's pass tests): each test builds ``Before``, runs the pass and compares
with the expected structure; ``assert_unchanged`` covers the ``Expected = Before`` cases.
"""
from __future__ import annotations

import copy

import numpy as np
from onnx import helper

from aicc.frontend import prepare, to_graph
from aicc.ir import verify
from aicc.ops import load_all, lookup
from aicc.kernels.vmath.act import apply_epilogue, unfused
from aicc.ops.reference import node_proto, run_onnx_reference
from aicc.passes import PASSES, load_all as load_passes
from aicc.passes.fold_constants import constant_node_value
from tests.oracle import make_model

node = helper.make_node


def build(nodes, inputs: dict, outputs: list, inits: dict | None = None, opset: int = 17,
          output_types: dict | None = None):
    """Graph of onnx NodeProtos; ``inputs`` {name: ndarray} (typed from the arrays)."""
    m = make_model(nodes, inputs, outputs, inits, opset=opset, output_types=output_types)
    return to_graph(prepare(m))


def _snapshot(g):
    return (str(g), [(n.op_type, list(n.inputs), list(n.outputs), copy.deepcopy(n.attrs))
                     for n in g.nodes],
            {k: (id(v), v.copy()) for k, v in g.constants.items()}, dict(g.types),
            list(g.inputs), list(g.outputs))


def _same_snapshot(a, b) -> bool:
    if a[0] != b[0] or a[3:] != b[3:] or len(a[1]) != len(b[1]):
        return False
    for x, y in zip(a[1], b[1]):
        if x[:3] != y[:3] or set(x[3]) != set(y[3]):
            return False
    if set(a[2]) != set(b[2]):
        return False
    return all(a[2][k][0] == b[2][k][0] and np.array_equal(a[2][k][1], b[2][k][1], equal_nan=True)
               for k in a[2])


def run_pass(name, g, **opts):
    """Run pass ``name``; check the result verifies and the input graph was not modified."""
    load_passes()
    before = _snapshot(g)
    out = PASSES[name](g, **opts)
    assert _same_snapshot(before, _snapshot(g)), f"{name} modified its input graph"
    verify(out)
    return out


def ops(g) -> list:
    return [n.op_type for n in g.nodes]


def find(g, op_type):
    found = [n for n in g.nodes if n.op_type == op_type]
    assert len(found) == 1, (op_type, ops(g))
    return found[0]


def assert_unchanged(before, after):
    """Expected = Before: same nodes (op, inputs, outputs, attrs), constants, outputs."""
    assert ops(after) == ops(before)
    for a, b in zip(before.nodes, after.nodes):
        assert (a.op_type, a.inputs, a.outputs) == (b.op_type, b.inputs, b.outputs)
        assert set(a.attrs) == set(b.attrs)
        assert not any(k.startswith("aicc_") for k in set(b.attrs) - set(a.attrs))
    assert set(after.constants) == set(before.constants)
    assert after.outputs == before.outputs and after.inputs == before.inputs


# -- numpy interpreter -------------------------------------------------------------------

FUSED_PRODUCERS = {"Conv", "ConvTranspose", "Gemm", "MatMul"}


def _is_fused(n) -> bool:
    return any(k.startswith("aicc_") for k in n.attrs) or (
        n.op_type == "MatMul" and len(n.inputs) > 2 and n.inputs[2])


def eval_node(n, g, ins: list) -> list:
    """Outputs of one node. Standard ONNX nodes run through onnxruntime (the ground truth;
    onnx.reference gets grouped ConvTranspose and BatchNormalization-9 with a ``momentum``
    attribute wrong). Fused nodes (``aicc_act``, MatMul bias) use the registered op's
    reference(), or, while an op module is missing, onnxruntime on the unfused node followed
    by the fused epilogue (activations.apply_epilogue)."""
    load_all()
    if n.op_type == "Constant" and n.domain in ("", "ai.onnx"):
        return [constant_node_value(n)]
    if not _is_fused(n) and n.domain in ("", "ai.onnx"):
        return _standard_reference(n, g, ins)
    op = lookup(n, g.opset)
    if op is not None:
        return [np.asarray(v) for v in op.reference(n, g, ins)]
    assert n.op_type in FUSED_PRODUCERS, n
    base = unfused(n)
    bias = None
    if n.op_type == "MatMul":
        base.inputs = list(n.inputs[:2])
        bias = ins[2] if len(ins) > 2 else None
        ins = ins[:2]
    (y,) = _standard_reference(base, g, ins)
    return [apply_epilogue(n, y, bias)]


def _standard_reference(n, g, ins) -> list:
    """A standard ONNX node through onnxruntime (onnx.reference gets e.g. grouped
    ConvTranspose wrong), onnx.reference when onnxruntime cannot run it."""
    feeds = {i: np.asarray(v) for i, v in zip(n.inputs, ins) if i}
    vi = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
          for k, v in feeds.items()]
    outs = [helper.make_value_info(o, helper.TypeProto()) for o in n.outputs if o]
    gp = helper.make_graph([node_proto(n)], "one", vi, outs)
    m = helper.make_model(gp, opset_imports=[helper.make_opsetid("", g.opset)])
    m.ir_version = min(m.ir_version, 10)
    try:
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
        res = sess.run(None, feeds)
    except Exception:  # noqa: BLE001 - op/dtype onnxruntime lacks
        return run_onnx_reference(n, g, ins)
    it = iter(res)
    return [next(it) if o else None for o in n.outputs]


def run_graph(g, feeds: dict) -> dict:
    env = dict(g.constants)
    env.update({k: np.asarray(v) for k, v in feeds.items()})
    for n in g.nodes:
        outs = eval_node(n, g, [env[i] if i else None for i in n.inputs])
        for o, v in zip(n.outputs, outs):
            if o:
                env[o] = np.asarray(v)
    return {o: env[o] for o in g.outputs}


def assert_same_outputs(before, after, feeds: dict, rtol=1e-5, atol=1e-5):
    want = run_graph(before, feeds)
    got = run_graph(after, feeds)
    assert set(got) == set(want)
    for k in want:
        assert got[k].shape == want[k].shape and got[k].dtype == want[k].dtype, k
        np.testing.assert_allclose(got[k], want[k], rtol=rtol, atol=atol, err_msg=k)


def rand(*shape, seed=0, lo=None, hi=None, dtype=np.float32):
    r = np.random.default_rng(seed)
    v = r.uniform(lo, hi, size=shape) if lo is not None else r.normal(size=shape)
    return v.astype(dtype)
