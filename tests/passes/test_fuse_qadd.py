"""fuse-qadd: DequantizeLinear x2 -> Add -> QuantizeLinear becomes one aicc.QAdd; unchanged
cases; compiled numerics: the fused step gives the unfused chain's bytes on generic and every
x86 target (vector tails, uint8 / int8 mixes, saturation on both sides) and the numpy
reference of the chain (each dequantized value and the sum in float32, the division by the
output scale in float32, round half to even)."""
import numpy as np
import onnx
import pytest

import aicc
from aicc.config import Options
from aicc.targets import runnable_targets
from tests.oracle import STRICT_CFLAGS, make_model
from tests.passes.helpers import assert_unchanged, build, node, ops, run_pass

TARGETS = ["generic"] + [t for t in runnable_targets() if t.startswith("x86-")]


def _consts(ta=np.uint8, tb=np.uint8, ty=np.uint8, sy=0.11):
    return {"sa": np.array(0.05, np.float32), "za": np.array(131, ta) if ta == np.uint8
            else np.array(-7, ta),
            "sb": np.array(0.0837, np.float32), "zb": np.array(118, tb) if tb == np.uint8
            else np.array(5, tb),
            "sy": np.array(sy, np.float32), "zy": np.array(125, ty) if ty == np.uint8
            else np.array(-3, ty)}


def _nodes(extra=()):
    return [node("DequantizeLinear", ["a", "sa", "za"], ["da"]),
            node("DequantizeLinear", ["b", "sb", "zb"], ["db"]),
            node("Add", ["da", "db"], ["s"]),
            node("QuantizeLinear", ["s", "sy", "zy"], ["y"]), *extra]


def _feeds(shape, ta=np.uint8, tb=np.uint8, seed=0):
    r = np.random.default_rng(seed)

    def one(t):
        i = np.iinfo(t)
        return r.integers(i.min, int(i.max) + 1, size=shape).astype(t)
    return {"a": one(ta), "b": one(tb)}


def test_fused():
    feeds = _feeds((1, 4, 5, 6))
    before = build(_nodes(), feeds, ["y"], _consts())
    after = run_pass("fuse-qadd", before)
    assert ops(after) == ["DequantizeLinear", "DequantizeLinear", "QAdd"]
    q = after.nodes[-1]
    assert q.domain == "aicc" and q.inputs == ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"]
    assert q.outputs == ["y"]
    after = run_pass("eliminate-dead-nodes", after)
    assert ops(after) == ["QAdd"]


@pytest.mark.parametrize("why", ["sum read twice", "sum is an output", "broadcast"])
def test_not_fused(why):
    shape_b = (1, 4, 1, 6) if why == "broadcast" else (1, 4, 5, 6)
    feeds = {**_feeds((1, 4, 5, 6)), "b": _feeds(shape_b)["b"]}
    extra = [node("Neg", ["s"], ["n"])] if why == "sum read twice" else []
    outs = ["y", "n"] if extra else (["y", "s"] if why == "sum is an output" else ["y"])
    before = build(_nodes(extra), feeds, outs, _consts())
    assert_unchanged(before, run_pass("fuse-qadd", before))


def _chain_ref(f, c):
    def dq(x, s, z):
        return ((x.astype(np.int32) - z.astype(np.int32)).astype(np.float32)
                * s).astype(np.float32)
    v = (dq(f["a"], c["sa"], c["za"]) + dq(f["b"], c["sb"], c["zb"])).astype(np.float32)
    q = np.rint((v / c["sy"]).astype(np.float32)).astype(np.float64) + float(c["zy"])
    i = np.iinfo(c["zy"].dtype)
    return np.clip(q, i.min, i.max).astype(c["zy"].dtype)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape,ta,tb,ty", [
    ((1, 24, 11, 13), np.uint8, np.uint8, np.uint8),      # 3432: vectors and a tail
    ((2, 3, 5, 7), np.int8, np.uint8, np.int8),           # 210
    ((1, 5, 3), np.uint8, np.int8, np.uint8),             # 15: below one vector
])
def test_compiled_same_bytes(shape, ta, tb, ty, target, tmp_path):
    feeds = _feeds(shape, ta, tb, seed=len(shape))
    c = _consts(ta, tb, ty, sy=0.06)          # a narrow output scale: both sides saturate
    model = make_model(_nodes(), feeds, ["y"], c, opset=13)
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    fused = aicc.load(aicc.build(path, target=target, out=tmp_path / "f"), cflags=STRICT_CFLAGS)
    plain = aicc.load(aicc.build(path, target="generic", out=tmp_path / "u", overrides={
        "pipeline": [n for n, _ in Options.load().pipeline if n != "fuse-qadd"]}),
        cflags=STRICT_CFLAGS)
    assert [s["op"] for s in fused.manifest["steps"]] == ["QAdd"]
    assert "QAdd" not in [s["op"] for s in plain.manifest["steps"]]
    got = fused.run(feeds)["y"]
    assert got.tobytes() == plain.run(feeds)["y"].tobytes()
    np.testing.assert_array_equal(got, _chain_ref(feeds, c))
    i = np.iinfo(ty)
    assert (got == i.min).any() and (got == i.max).any() and ((got > i.min) & (got < i.max)).any()


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("which,value", [("sy", 0.0), ("sa", np.inf), ("sb", -np.inf),
                                         ("sa", np.nan), ("sy", np.inf), ("sa", 3e38),
                                         ("sy", 1e-38)])
def test_compiled_special_scales(which, value, target, tmp_path):
    """Scales that make values NaN or infinite (0 / 0, Inf - Inf, Inf * 0, overflow): NaN
    gives the zero point, +-Inf saturate, as the chain's QuantizeLinear (generic: the scalar
    rounding, not the vector blocks, when a NaN is possible)."""
    shape = (1, 3, 7, 5)                                 # 105: six blocks of 16 and a tail
    feeds = _feeds(shape, seed=3)
    c = {**_consts(), which: np.array(value, np.float32)}
    feeds["a"][0, 0, 0, :3], feeds["b"][0, 0, 0, :3] = c["za"], c["zb"]     # sums of 0 (0 / 0)
    model = make_model(_nodes(), feeds, ["y"], c, opset=13)
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    fused = aicc.load(aicc.build(path, target=target, out=tmp_path / "f"), cflags=STRICT_CFLAGS)
    assert [s["op"] for s in fused.manifest["steps"]] == ["QAdd"]
    got = fused.run(feeds)["y"]

    def dq(x, s, z):
        return ((x.astype(np.int32) - z.astype(np.int32)).astype(np.float32)
                * s).astype(np.float32)
    with np.errstate(all="ignore"):
        v = (dq(feeds["a"], c["sa"], c["za"]) + dq(feeds["b"], c["sb"], c["zb"]))
        q = np.rint((v / c["sy"]).astype(np.float32)).astype(np.float64)
    i, zy = np.iinfo(np.uint8), float(c["zy"])
    want = np.clip(np.where(np.isnan(q), zy, q + zy), i.min, i.max).astype(np.uint8)
    np.testing.assert_array_equal(got, want)
