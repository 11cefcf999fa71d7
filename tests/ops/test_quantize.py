"""QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear: compiled C vs onnxruntime (or
onnx.reference where onnxruntime lacks the case), per-tensor / per-axis / blocked, constant
and run-time scales, every integer type, ties (half to even), saturation, NaN/Inf."""
import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from aicc.targets import runnable_targets
from tests.oracle import assert_close, check, check_node, compile_and_run, make_model, rng

QT = [np.uint8, np.int8, np.uint16, np.int16]


def _zp(dt, shape, r):
    info = np.iinfo(dt)
    lo, hi = max(info.min, -100), min(info.max, 200)
    return r.integers(lo, hi + 1, size=shape).astype(dt)


def _ref(model, feeds):
    names = [o.name for o in model.graph.output]
    return dict(zip(names, ReferenceEvaluator(model).run(None, feeds)))


def _x_with_ties(r, shape, scale):
    """Normal data plus exact .5 ties of x / scale and values far out of range."""
    x = (r.normal(size=shape) * 200).astype(np.float32)
    flat = x.reshape(-1)
    k = np.arange(flat.size)
    flat[k % 5 == 0] = ((k[k % 5 == 0] % 17) - 8 + 0.5) * np.float32(scale)
    flat[k % 7 == 0] = 1e6 * np.sign(flat[k % 7 == 0] + 0.1)
    return x


@pytest.mark.parametrize("dt", QT)
@pytest.mark.parametrize("const", [True, False])
def test_quantize_per_tensor(dt, const, tmp_path):
    r = rng(1)
    s = np.float32(0.5)       # power of two: x / s exact, so ties are real ties
    x = _x_with_ties(r, (3, 37), s)
    zp = _zp(dt, (), r)
    if const:
        check_node("QuantizeLinear", {"x": x}, tmp_path, initializers={"s": s, "zp": zp},
                   opset=21)
    else:
        check_node("QuantizeLinear", {"x": x, "s": np.array(s), "zp": zp}, tmp_path, opset=21)


@pytest.mark.parametrize("opset", [10, 13, 19, 21])
def test_quantize_no_zero_point(opset, tmp_path):
    r = rng(2)
    x = (r.normal(size=(2, 5, 7)) * 50).astype(np.float32)
    check_node("QuantizeLinear", {"x": x}, tmp_path, initializers={"s": np.float32(0.37)},
               opset=opset)


@pytest.mark.parametrize("axis,shape", [(0, (5, 4)), (1, (2, 3, 4, 5)), (-1, (3, 2, 7)),
                                        (2, (1, 2, 9)), (0, (6,))])
@pytest.mark.parametrize("dt", [np.uint8, np.int8, np.int16])
def test_quantize_per_axis(axis, shape, dt, tmp_path):
    r = rng(3)
    d = shape[axis]
    x = (r.normal(size=shape) * 100).astype(np.float32)
    s = r.uniform(0.05, 2.0, size=(d,)).astype(np.float32)
    zp = _zp(dt, (d,), r)
    check_node("QuantizeLinear", {"x": x, "s": s}, tmp_path, attrs={"axis": axis},
               initializers={"zp": zp}, opset=21, input_order=["x", "s", "zp"])


@pytest.mark.parametrize("shape,axis,block", [((3, 4), 1, 2), ((3, 5), 1, 2), ((7, 4), 0, 3),
                                              ((2, 6, 3), 1, 4), ((2, 3, 8), -1, 8)])
@pytest.mark.parametrize("with_zp", [True, False])
def test_quantize_blocked(shape, axis, block, with_zp, tmp_path):
    r = rng(4)
    x = (r.normal(size=shape) * 30).astype(np.float32)
    sshape = list(shape)
    sshape[axis] = -(-shape[axis] // block)
    s = r.uniform(0.1, 1.0, size=sshape).astype(np.float32)
    feeds = {"x": x, "s": s}
    names = ["x", "s"]
    if with_zp:
        feeds["zp"] = _zp(np.int8, sshape, r)
        names.append("zp")
    attrs = {"axis": axis, "block_size": block}
    if not with_zp:
        attrs["output_dtype"] = TensorProto.INT16
    node = helper.make_node("QuantizeLinear", names, ["y"], **attrs)
    model = make_model([node], feeds, ["y"], opset=21)
    got = compile_and_run(model, feeds, tmp_path)
    assert_close(got, _ref(model, feeds))


def test_quantize_float64_and_int32_inputs(tmp_path):
    r = rng(5)
    x = (r.normal(size=(4, 9)) * 100).astype(np.float64)
    check_node("QuantizeLinear", {"x": x}, tmp_path,
               initializers={"s": np.float64(0.7), "zp": np.uint8(3)}, opset=21)
    xi = r.integers(-3000, 3000, size=(4, 9)).astype(np.int32)
    node = helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["y"])
    feeds = {"x": xi, "s": np.array(np.float32(9.5)), "zp": np.array(np.int8(-4))}
    model = make_model([node], feeds, ["y"], opset=13)
    assert_close(compile_and_run(model, feeds, tmp_path), _ref(model, feeds))


def test_quantize_precision_attr(tmp_path):
    r = rng(6)
    x = (r.normal(size=(33,)) * 10).astype(np.float32)
    node = helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["y"],
                            precision=TensorProto.DOUBLE)
    feeds = {"x": x, "s": np.array(np.float32(0.1)), "zp": np.array(np.uint8(128))}
    model = make_model([node], feeds, ["y"], opset=23)
    assert_close(compile_and_run(model, feeds, tmp_path), _ref(model, feeds))


def test_quantize_nan_inf(tmp_path):
    """Documented: NaN -> zero point, +-Inf saturate (onnxruntime leaves NaN to the CPU)."""
    x = np.array([np.nan, np.inf, -np.inf, 1.0, -1.0, 0.0], np.float32)
    node = helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["y"])
    feeds = {"x": x, "s": np.array(np.float32(0.5)), "zp": np.array(np.int8(5))}
    model = make_model([node], feeds, ["y"], opset=21)
    got = compile_and_run(model, feeds, tmp_path)["y"]
    np.testing.assert_array_equal(got, np.array([5, 127, -128, 7, 3, 5], np.int8))
    feeds["s"] = np.array(np.float32(0.0))      # zero scale: x / 0 = +-Inf or NaN
    got = compile_and_run(model, feeds, tmp_path)["y"]
    np.testing.assert_array_equal(got, np.array([5, 127, -128, 127, -128, 5], np.int8))


# -- DequantizeLinear --------------------------------------------------------------------

@pytest.mark.parametrize("dt", QT + [np.int32])
@pytest.mark.parametrize("const", [True, False])
def test_dequantize_per_tensor(dt, const, tmp_path):
    r = rng(7)
    info = np.iinfo(dt)
    x = r.integers(info.min, int(info.max) + 1, size=(4, 21), dtype=np.int64).astype(dt)
    zp = _zp(dt, (), r)
    s = np.float32(0.0371)
    opset = 21
    if const:
        check_node("DequantizeLinear", {"x": x}, tmp_path, initializers={"s": s, "zp": zp},
                   opset=opset)
    else:
        check_node("DequantizeLinear", {"x": x, "s": np.array(s), "zp": zp}, tmp_path,
                   opset=opset)


@pytest.mark.parametrize("dt", [np.uint8, np.int32])
def test_dequantize_no_zero_point_and_float64(dt, tmp_path):
    r = rng(8)
    x = r.integers(0, 255, size=(3, 11)).astype(dt)
    check_node("DequantizeLinear", {"x": x}, tmp_path, initializers={"s": np.float32(1.7)})
    check_node("DequantizeLinear", {"x": x}, tmp_path, initializers={"s": np.float64(0.013)},
               opset=21)


@pytest.mark.parametrize("axis,shape", [(1, (1, 3, 3, 2)), (0, (4, 5)), (-1, (2, 3, 6))])
def test_dequantize_per_axis(axis, shape, tmp_path):
    r = rng(9)
    d = shape[axis]
    x = r.integers(-128, 128, size=shape).astype(np.int8)
    s = r.uniform(0.01, 1.0, size=(d,)).astype(np.float32)
    zp = _zp(np.int8, (d,), r)
    check_node("DequantizeLinear", {"x": x, "s": s, "zp": zp}, tmp_path, attrs={"axis": axis},
               opset=21)


@pytest.mark.parametrize("shape,axis,block", [((1, 4, 3, 2), 1, 2), ((3, 7), 1, 3),
                                              ((5, 2), 0, 2)])
def test_dequantize_blocked(shape, axis, block, tmp_path):
    r = rng(10)
    x = r.integers(0, 256, size=shape).astype(np.uint8)
    sshape = list(shape)
    sshape[axis] = -(-shape[axis] // block)
    feeds = {"x": x, "s": r.uniform(0.01, 1, size=sshape).astype(np.float32),
             "zp": _zp(np.uint8, sshape, r)}
    node = helper.make_node("DequantizeLinear", ["x", "s", "zp"], ["y"], axis=axis,
                            block_size=block)
    model = make_model([node], feeds, ["y"], opset=21)
    assert_close(compile_and_run(model, feeds, tmp_path), _ref(model, feeds))


def test_dequantize_output_dtype(tmp_path):
    r = rng(11)
    feeds = {"x": r.integers(-128, 128, size=(17,)).astype(np.int8),
             "s": np.array(np.float32(0.25)), "zp": np.array(np.int8(-3))}
    node = helper.make_node("DequantizeLinear", ["x", "s", "zp"], ["y"],
                            output_dtype=TensorProto.DOUBLE)
    model = make_model([node], feeds, ["y"], opset=23)
    assert_close(compile_and_run(model, feeds, tmp_path), _ref(model, feeds))


def test_quantize_dequantize_roundtrip(tmp_path):
    r = rng(12)
    x = r.normal(size=(2, 3, 8)).astype(np.float32)
    n1 = helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"], axis=1)
    n2 = helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"], axis=1)
    inits = {"s": np.array([0.01, 0.02, 0.05], np.float32),
             "zp": np.array([0, 10, -10], np.int8)}
    model = make_model([n1, n2], {"x": x}, ["y"], inits, opset=13)
    check(model, {"x": x}, tmp_path)


# -- DynamicQuantizeLinear -------------------------------------------------------------------

@pytest.mark.parametrize("data", [
    np.array([0, 2, -3, -2.5, 1.34, 0.5], np.float32),
    np.array([-1.0, -2.1, -1.3, -2.5, -3.34, -4.0], np.float32),
    np.array([1, 2.1, 1.3, 2.5, 3.34, 4.0, 1.5, 2.6, 3.9, 4.0, 3.0, 2.345], np.float32),
    np.zeros(7, np.float32),
    np.full(5, 3.0, np.float32),
    rng(13).normal(size=(3, 4, 50)).astype(np.float32) * 7,
])
def test_dynamic_quantize(data, tmp_path):
    check_node("DynamicQuantizeLinear", {"x": data}, tmp_path, n_outputs=3, opset=11)


def test_unsupported_types_have_reasons():
    from aicc.errors import UnsupportedError
    from aicc.frontend.onnx_import import prepare, to_graph
    from aicc.ops import check_supported, load_all
    load_all()
    node = helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["y"])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    # int4 and the 8-bit floats are supported now (tests/ops/test_lowp.py); e8m0 is not
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT8E8M0, [4])
    g = helper.make_graph([node], "g", [x], [y], initializer=[
        helper.make_tensor("s", TensorProto.FLOAT, [], [1.0]),
        helper.make_tensor("zp", TensorProto.FLOAT8E8M0, [], [0])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 25)])
    with pytest.raises(UnsupportedError, match="float8_e8m0fnu not supported"):
        check_supported(to_graph(prepare(m)))


SIMD = [t for t in runnable_targets() if t in ("x86-avx2", "x86-avx512")]


@pytest.mark.parametrize("target", SIMD)
@pytest.mark.parametrize("dt", QT)
def test_quantize_simd_generic_values(dt, target, tmp_path):
    """The vector loop (kernels/qgemm/quantize.py) gives the generic target's values: ties, values far
    out of range, NaN, +-Inf, a zero point at either end of the range, the tail (77 values:
    not a multiple of 8 or 16); against onnxruntime where it defines the result."""
    r = rng(11)
    info = np.iinfo(dt)
    for s, zp in ((np.float32(0.5), info.min), (np.float32(0.37), info.max),
                  (np.float32(3.0), (int(info.min) + int(info.max)) // 2)):
        x = _x_with_ties(r, (77,), s)
        x[[3, 40, 71]] = [np.nan, np.inf, -np.inf]
        x[[5, 6]] = [2.0 ** 23, -(2.0 ** 30)]
        feeds = {"x": x}
        model = make_model([helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["y"])], feeds,
                           ["y"], {"s": s, "zp": np.array(zp, dt)}, opset=21)
        got, want = (compile_and_run(model, feeds, tmp_path, target=t)["y"]
                     for t in (target, "generic"))
        np.testing.assert_array_equal(got, want)
        ok = np.isfinite(x) & (np.abs(x) <= 1e6)      # (onnx.reference wraps beyond)
        np.testing.assert_array_equal(got[ok], _ref(model, feeds)["y"][ok])


@pytest.mark.parametrize("target", SIMD)
def test_quantize_simd_no_tail(target, tmp_path):
    """64 values: whole vectors only, no scalar tail (its helper unused: must still compile
    under -Werror)."""
    x = rng(12).standard_normal(64).astype(np.float32) * 40
    feeds = {"x": x}
    model = make_model([helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["y"])], feeds,
                       ["y"], {"s": np.float32(0.5), "zp": np.array(3, np.uint8)}, opset=21)
    got = compile_and_run(model, feeds, tmp_path, target=target)["y"]
    np.testing.assert_array_equal(got, _ref(model, feeds)["y"])
