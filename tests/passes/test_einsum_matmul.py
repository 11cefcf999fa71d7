"""einsum-to-matmul: Before -> Expected structure, the unchanged cases, and compiled numerics
against onnxruntime (generic and the host's SIMD targets): the rewritten Einsums run as
MatMul, the others keep einsum.py's loops."""
import numpy as np
import pytest

from aicc.targets import runnable_targets
from tests.oracle import check_node, rng
from tests.passes.helpers import assert_same_outputs, assert_unchanged, build, node, ops, run_pass

TARGETS = ["generic"] + [t for t in runnable_targets() if t in ("x86-avx2", "x86-avx512")]


def graph(eq, shapes, dtype=np.float32, const_b=False):
    r = rng(len(eq))
    vals = [r.normal(size=s).astype(dtype) for s in shapes]
    names = [f"x{k}" for k in range(len(shapes))]
    feeds = dict(zip(names, vals))
    inits = {}
    if const_b:
        inits["x1"] = feeds.pop("x1")
    return build([node("Einsum", names, ["y"], equation=eq)], feeds, ["y"], inits,
                 opset=12), feeds


REWRITTEN = [   # (equation, shapes, op sequence after the pass)
    ("bhid,bhjd->bhij", [(1, 3, 5, 8), (1, 3, 6, 8)],
     ["Transpose", "Reshape", "Reshape", "MatMul", "Reshape"]),
    ("ij,jk->ik", [(3, 4), (4, 5)], ["Reshape", "Reshape", "MatMul", "Reshape"]),
    ("ij,jk", [(3, 4), (4, 5)], ["Reshape", "Reshape", "MatMul", "Reshape"]),
    ("ij,kj->ik", [(3, 4), (5, 4)], ["Transpose", "Reshape", "Reshape", "MatMul", "Reshape"]),
    ("bij,bjk->bki", [(2, 3, 4), (2, 4, 5)],
     ["Reshape", "Reshape", "MatMul", "Reshape", "Transpose"]),
    ("i,j->ij", [(3,), (4,)], ["Reshape", "Reshape", "MatMul", "Reshape"]),
    ("i,i", [(5,), (5,)], ["Reshape", "Reshape", "MatMul", "Reshape"]),
    ("...ij,...jk->...ik", [(2, 3, 3, 4), (2, 3, 4, 2)],
     ["Reshape", "Reshape", "MatMul", "Reshape"]),
    ("abcd,cdef->abef", [(2, 3, 4, 5), (4, 5, 2, 3)], ["Reshape", "Reshape", "MatMul", "Reshape"]),
    ("nchw,kc->nkhw", [(2, 3, 4, 5), (6, 3)],
     ["Transpose", "Transpose", "Reshape", "Reshape", "MatMul", "Reshape", "Transpose"]),
]


@pytest.mark.parametrize("eq,shapes,expected", REWRITTEN, ids=[r[0] for r in REWRITTEN])
def test_rewritten(eq, shapes, expected):
    before, feeds = graph(eq, shapes)
    after = run_pass("einsum-to-matmul", before)
    assert ops(after) == expected
    assert after.nodes[-1].outputs == ["y"]
    assert_same_outputs(before, after, feeds, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("why,eq,shapes,dtype", [
    ("one operand", "ij->ji", [(3, 4)], np.float32),
    ("three operands", "ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)], np.float32),
    ("diagonal", "ii,ij->ij", [(3, 3), (3, 4)], np.float32),
    ("summed out of one input", "ij,jk->k", [(3, 4), (4, 5)], np.float32),
    ("broadcast ellipsis", "...ij,...jk->...ik", [(2, 1, 3, 4), (1, 3, 4, 2)], np.float32),
    ("integers", "ij,jk->ik", [(3, 4), (4, 5)], np.int32),
    ("empty dim", "ij,jk->ik", [(2, 0), (0, 3)], np.float32),
])
def test_unchanged(why, eq, shapes, dtype):
    before, _ = graph(eq, shapes, dtype)
    assert_unchanged(before, run_pass("einsum-to-matmul", before))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("eq,shapes", [
    ("bhid,bhjd->bhij", [(2, 3, 17, 8), (2, 3, 9, 8)]),
    ("bhij,bhjd->bhid", [(1, 2, 7, 9), (1, 2, 9, 33)]),
    ("nchw,kc->nkhw", [(2, 5, 4, 3), (7, 5)]),
    ("i,j->ij", [(5,), (19,)]),
    ("abcd,cdef->abef", [(2, 3, 4, 5), (4, 5, 2, 3)]),
])
def test_compiled(eq, shapes, target, tmp_path):
    r = rng(len(eq) + len(target))
    inputs = {f"x{k}": r.normal(size=s).astype(np.float32) for k, s in enumerate(shapes)}
    check_node("Einsum", inputs, tmp_path, attrs={"equation": eq}, opset=12, target=target)


def test_constant_operand_folds():
    """A constant B: after fold-constants its Transpose / Reshape are constants."""
    before, feeds = graph("nchw,kc->nkhw", [(2, 3, 4, 5), (6, 3)], const_b=True)
    after = run_pass("fold-constants", run_pass("einsum-to-matmul", before))
    assert ops(after) == ["Transpose", "Reshape", "MatMul", "Reshape", "Transpose"]
    assert_same_outputs(before, after, feeds, rtol=1e-5, atol=1e-5)
