"""float16 / bfloat16: conversions (exact and round-to-nearest-even, edge values) and ops that
compute in float32 through the upcast-half pass, against onnxruntime / numpy."""
import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

from aicc.frontend import to_graph
from aicc.passes import run_pipeline
from tests.oracle import check, check_node, compile_and_run, make_model, rng

BF16 = np.dtype(ml_dtypes.bfloat16)

EDGE = np.array([0.0, -0.0, 1.0, -1.0, 65504.0, 65519.0, 65520.0, 1e6, -1e6, 6.1e-5, 6.0e-8,
                 5.96e-8, 2.98e-8, 2.99e-8, 1e-9, np.inf, -np.inf, np.nan, 1.0009765625,
                 1.00146484375, 0.333333, 3.14159265, -2.5e-6], np.float32)


def _bits(a):
    return np.asarray(a).view(np.uint16)


@pytest.mark.parametrize("to,npdt", [(TensorProto.FLOAT16, np.float16), (TensorProto.BFLOAT16, BF16)])
def test_float_to_half_rounding(to, npdt, tmp_path):
    x = np.concatenate([EDGE, rng(0).normal(size=200).astype(np.float32) * 100])
    got, _ = check_node("Cast", {"x": x}, tmp_path, attrs={"to": to})
    want = x.astype(npdt)
    nan = np.isnan(x)
    np.testing.assert_array_equal(_bits(got["y0"])[~nan], _bits(want)[~nan])
    assert np.isnan(got["y0"].astype(np.float32)[nan]).all()


@pytest.mark.parametrize("npdt,to", [(np.float16, TensorProto.FLOAT), (BF16, TensorProto.FLOAT),
                                     (np.float16, TensorProto.INT32), (np.float16, TensorProto.DOUBLE)])
def test_half_to_other(npdt, to, tmp_path):
    x = np.concatenate([EDGE[np.isfinite(EDGE)], rng(1).normal(size=50) * 100]).astype(npdt)
    if to == TensorProto.INT32:
        x = x[np.abs(x.astype(np.float32)) < 1e5]
    check_node("Cast", {"x": x}, tmp_path, attrs={"to": to})


def test_all_float16_subnormals_and_normals_round_trip(tmp_path):
    bits = np.arange(0, 0x7C00, 7, dtype=np.uint16)
    x = bits.view(np.float16)
    got, _ = check_node("Cast", {"x": x}, tmp_path, attrs={"to": TensorProto.FLOAT})
    np.testing.assert_array_equal(got["y0"], x.astype(np.float32))


def _boundary_floats():
    """float32 bit patterns at every exponent with the mantissas where rounding to float16 /
    bfloat16 turns (the dropped bits just below, at and above half a step, odd and even kept
    bits), both signs, NaN payloads and seeded random patterns."""
    mant = np.array([0, 1, 0xFFF, 0x1000, 0x1001, 0x1FFF, 0x2000, 0x3000, 0x5000, 0x7FFF,
                     0x8000, 0x8001, 0x18000, 0x3FF000, 0x400000, 0x7FE000, 0x7FF000, 0x7FFFFF],
                    np.uint32)
    exps = np.arange(256, dtype=np.uint32) << 23
    bits = (exps[:, None] | mant[None, :]).ravel()
    bits = np.concatenate([bits, rng(7).integers(0, 2**31, 4000, dtype=np.uint32)])
    bits = np.concatenate([bits, bits | np.uint32(0x80000000)])
    return bits.view(np.float32)


@pytest.mark.parametrize("target", ["generic", "x86-avx2"])
def test_float_to_float16_at_every_boundary(target, tmp_path):
    """The branch-free conversion (kernels/dtype/half.py) against numpy's rounding, bit for bit; NaN: quiet,
    the sign and the payload's top 9 bits kept."""
    x = _boundary_floats()
    got, _ = check_node("Cast", {"x": x}, tmp_path, attrs={"to": TensorProto.FLOAT16},
                        target=target)
    got = _bits(got["y0"])
    nan = np.isnan(x)
    np.testing.assert_array_equal(got[~nan], _bits(x[~nan].astype(np.float16)))
    xb = x[nan].view(np.uint32)
    want = ((xb >> 16) & 0x8000) | 0x7E00 | ((xb >> 13) & 0x3FF)
    if target == "generic":
        np.testing.assert_array_equal(got[nan], want.astype(np.uint16))
    assert np.isnan(got[nan].view(np.float16)).all()


def test_float_to_bfloat16_at_every_boundary(tmp_path):
    x = _boundary_floats()
    got, _ = check_node("Cast", {"x": x}, tmp_path, attrs={"to": TensorProto.BFLOAT16})
    got = _bits(got["y0"])
    nan = np.isnan(x)
    np.testing.assert_array_equal(got[~nan], _bits(x[~nan].astype(BF16)))
    xb = x[nan].view(np.uint32)
    np.testing.assert_array_equal(got[nan], ((xb >> 16) | 0x40).astype(np.uint16))


@pytest.mark.parametrize("target", ["generic", "x86-avx2"])
@pytest.mark.parametrize("to", [TensorProto.FLOAT16, TensorProto.BFLOAT16])
def test_round_half_at_every_boundary(to, target, tmp_path):
    """aicc.RoundHalf (float32 -> nearest half value -> float32; generic: kernels/dtype/half.py's
    aicc_round_h / aicc_round_bf) against numpy / ml_dtypes, bit for bit; NaN stays NaN with
    its sign (generic: quiet, the payload's top bits kept, as the Cast pair gives)."""
    x = _boundary_floats()
    model = helper.make_model(
        helper.make_graph([helper.make_node("RoundHalf", ["x"], ["y"], domain="aicc", to=to)],
                          "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, x.shape)]),
        opset_imports=[helper.make_opsetid("", 19), helper.make_opsetid("aicc", 1)])
    got = compile_and_run(model, {"x": x}, tmp_path, target=target)["y"].view(np.uint32)
    nan = np.isnan(x)
    half = np.float16 if to == TensorProto.FLOAT16 else BF16
    with np.errstate(over="ignore"):
        want = x.astype(half).astype(np.float32).view(np.uint32)
    np.testing.assert_array_equal(got[~nan], want[~nan])
    xb = x[nan].view(np.uint32)
    assert np.isnan(got[nan].view(np.float32)).all()
    np.testing.assert_array_equal(got[nan] >> 31, xb >> 31)
    if target == "generic":
        keep = 0x807FE000 if to == TensorProto.FLOAT16 else 0x807F0000
        np.testing.assert_array_equal(got[nan], (xb & keep) | 0x7FC00000)


def test_every_float16_to_float32(tmp_path):
    """All 65536 float16 bit patterns, NaN payloads and signs included, bit for bit."""
    x = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    got, _ = check_node("Cast", {"x": x}, tmp_path, attrs={"to": TensorProto.FLOAT})
    np.testing.assert_array_equal(got["y0"].view(np.uint32), x.astype(np.float32).view(np.uint32))


@pytest.mark.parametrize("op", ["Add", "Mul", "Div"])
def test_binary_float16(op, tmp_path):
    a = rng(2).normal(size=(3, 8)).astype(np.float16)
    b = (rng(3).normal(size=(8,)) + 3).astype(np.float16)
    check_node(op, {"a": a, "b": b}, tmp_path, rtol=1e-3, atol=1e-3)


def test_conv_relu_float16(tmp_path):
    x = rng(4).normal(size=(1, 3, 8, 8)).astype(np.float16)
    w = (rng(5).normal(size=(4, 3, 3, 3)) * 0.3).astype(np.float16)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"])]
    check(make_model(nodes, {"x": x}, ["y"], {"w": w}), {"x": x}, tmp_path, rtol=2e-3, atol=2e-3)


def test_upcast_pass_structure():
    x = np.zeros((2, 4), np.float16)
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"]),
             helper.make_node("Sigmoid", ["r"], ["y"])]
    m = make_model(nodes, {"x": x}, ["y"], {"s": np.array([4, 2], np.int64)})
    g = run_pipeline(to_graph(m), [("upcast-half", {})], check=True)
    assert [n.op_type for n in g.nodes] == ["Reshape", "Cast", "Sigmoid", "Cast"]
    assert g.dtype(g.nodes[2].inputs[0]) == np.float32
    assert g.dtype("y") == np.float16 and g.outputs == ["y"]
