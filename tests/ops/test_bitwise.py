"""BitShift and BitwiseAnd/Or/Xor/Not: unsigned BitShift and the bitwise ops against
onnxruntime; signed BitShift and out-of-range shift amounts against exact Python-integer
expectations (the opset-28 rules: result 0, or -1 for a right shift of a negative value)."""
import numpy as np
import pytest
from onnx import helper

from tests.oracle import check_node, compile_and_run, make_model, rng

UNSIGNED = [np.uint8, np.uint16, np.uint32, np.uint64]
SIGNED = [np.int8, np.int16, np.int32, np.int64]


def run(op, inputs, tmp_path, attrs=None, opset=18):
    node = helper.make_node(op, list(inputs), ["y"], **(attrs or {}))
    model = make_model([node], inputs, ["y"], opset=opset)
    return compile_and_run(model, inputs, tmp_path)["y"]


def _wrap(v, dt):
    bits = np.dtype(dt).itemsize * 8
    v &= (1 << bits) - 1
    if np.dtype(dt).kind == "i" and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


def expect_shift(x, s, left, dt):
    bits = np.dtype(dt).itemsize * 8
    xb, sb = np.broadcast_arrays(x, s)
    out = []
    for a, k in zip(xb.reshape(-1).tolist(), sb.reshape(-1).tolist()):
        if k < 0 or k >= bits:
            out.append(-1 if (not left and a < 0) else 0)
        elif left:
            out.append(_wrap(a << k, dt))
        else:
            out.append(a >> k)          # Python >> is arithmetic (floor)
    return np.array(out, dtype=np.int64).astype(dt).reshape(xb.shape) if np.dtype(dt).kind == "i" \
        else np.array(out, dtype=np.uint64).astype(dt).reshape(xb.shape)


@pytest.mark.parametrize("dt", UNSIGNED)
@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bitshift_unsigned_vs_ort(dt, direction, tmp_path):
    r = rng(1)
    bits = np.dtype(dt).itemsize * 8
    x = r.integers(0, np.iinfo(dt).max, size=(3, 4), dtype=np.uint64, endpoint=True).astype(dt)
    s = r.integers(0, bits, size=(4,)).astype(dt)
    check_node("BitShift", {"x": x, "s": s}, tmp_path, attrs={"direction": direction})


@pytest.mark.parametrize("dt", UNSIGNED + SIGNED)
@pytest.mark.parametrize("left", [True, False])
def test_bitshift_all_amounts(dt, left, tmp_path):
    """Every shift amount from -3 (signed) to bits + 3, on extreme and ordinary values."""
    info = np.iinfo(dt)
    bits = info.bits
    lo = -3 if info.min < 0 else 0
    hi = min(bits + 3, int(info.max))
    s = np.arange(lo, hi + 1).astype(dt)
    vals = [0, 1, 5, int(info.max), int(info.max) - 6] + ([int(info.min), -1, -77] if info.min else [])
    x = np.array(vals, dt).reshape(-1, 1)
    got = run("BitShift", {"x": x, "s": s}, tmp_path, attrs={"direction": "LEFT" if left else "RIGHT"},
              opset=28)
    want = expect_shift(x.astype(object), s.astype(object), left, dt)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op,fn", [("BitwiseAnd", np.bitwise_and), ("BitwiseOr", np.bitwise_or),
                                   ("BitwiseXor", np.bitwise_xor)])
@pytest.mark.parametrize("dt", UNSIGNED + SIGNED)
@pytest.mark.parametrize("sa,sb", [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((2, 1, 5), (3, 1))])
def test_bitwise_binary(op, fn, dt, sa, sb, tmp_path):
    r = rng(2)
    info = np.iinfo(dt)
    a = r.integers(info.min, info.max, size=sa, endpoint=True, dtype=np.int64 if info.min else
                   np.uint64).astype(dt)
    b = r.integers(info.min, info.max, size=sb, endpoint=True, dtype=np.int64 if info.min else
                   np.uint64).astype(dt)
    check_node(op, {"a": a, "b": b}, tmp_path, opset=18)
    np.testing.assert_array_equal(run(op, {"a": a, "b": b}, tmp_path), fn(a, b))


@pytest.mark.parametrize("dt", UNSIGNED + SIGNED)
def test_bitwise_not(dt, tmp_path):
    info = np.iinfo(dt)
    x = np.array([0, 1, info.max, info.min, 7], dt).reshape(5, 1) * np.ones((1, 3), dt)
    check_node("BitwiseNot", {"x": x}, tmp_path, opset=18)
    np.testing.assert_array_equal(run("BitwiseNot", {"x": x}, tmp_path), np.invert(x))
