"""Low-precision types (aicc/kernels/dtype/lowp.py): 8-bit/4-bit floats and 4-bit/2-bit integers in
Cast, QuantizeLinear, DequantizeLinear, data movement and upcast-to-float32 compute.

Expected values come from ml_dtypes and onnx.numpy_helper.saturate_cast (what the onnx
reference and the conformance data use); onnxruntime lacks most of these casts. Decoding is
checked bit-exactly on every code, encoding bit-exactly on edge values (NaN positions must
match; float4 has no NaN and maps it to a zero, compared as floats)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from tests.oracle import compile_and_run, make_model

F8 = ["float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz"]
FLOATS = F8 + ["float4_e2m1fn"]
INTS = ["int4", "uint4", "int2", "uint2"]


def _dt(name):
    return np.dtype(getattr(ml_dtypes, name))


def _tp(dt):
    return helper.np_dtype_to_tensor_dtype(np.dtype(dt))


def _cast_model(x, to_dt, saturate=None, opset=21):
    attrs = {"to": _tp(to_dt)}
    if saturate is not None:
        attrs["saturate"] = saturate
    node = helper.make_node("Cast", ["x"], ["y"], **attrs)
    return make_model([node], {"x": x}, ["y"], opset=opset,
                      output_types={"y": (np.dtype(to_dt), list(x.shape))})


def _same_codes(got, want):
    """Bit-exact, except that any NaN matches any NaN (and float4 compares as floats)."""
    assert got.dtype == want.dtype and got.shape == want.shape
    gf, wf = got.astype(np.float32), want.astype(np.float32)
    nan = np.isnan(gf) & np.isnan(wf)
    if want.dtype.name == "float4_e2m1fn":
        ok = nan | (gf == wf)
    else:
        ok = nan | (got.view(np.uint8) == want.view(np.uint8))
    bad = np.nonzero(~ok.reshape(-1))[0]
    assert bad.size == 0, [(float(gf.reshape(-1)[i]), float(wf.reshape(-1)[i])) for i in bad[:8]]


def _edge_values(name):
    """max, min subnormal, ties, NaN, Inf, out of range, and every midpoint +- 1 ulp."""
    fi = ml_dtypes.finfo(_dt(name))
    codes = np.arange(256, dtype=np.uint8) & (0xF if "float4" in name else 0xFF)
    f = codes.view(_dt(name)).astype(np.float32)
    f = np.unique(f[np.isfinite(f)])
    mid = (f[1:] + f[:-1]) / 2
    mx, sub, tiny = float(fi.max), float(fi.smallest_subnormal), float(fi.tiny)
    special = [0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, mx, mx * 1.01, mx * 1.2, 1e30,
               sub, sub / 2, sub * 0.51, sub * 1.5, sub * 2.5, tiny, tiny * 0.99, 1e-30, 3.0e38]
    vals = np.concatenate([special, np.negative(special), f, mid, np.nextafter(mid, np.inf),
                           np.nextafter(mid, -np.inf)]).astype(np.float32)
    return vals


@pytest.mark.parametrize("name", FLOATS)
def test_decode_all_codes(name, tmp_path):
    codes = np.arange(256, dtype=np.uint8) & (0xF if "float4" in name else 0xFF)
    x = codes.view(_dt(name)).reshape(16, 16)
    for to in (np.float32, np.float16):
        got = compile_and_run(_cast_model(x, to), {"x": x}, tmp_path)["y"]
        want = x.astype(to)
        nan = np.isnan(got) & np.isnan(want)
        bits = np.uint32 if to == np.float32 else np.uint16
        assert (nan | (got.view(bits) == want.view(bits))).all(), name


@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize("saturate", [1, 0])
def test_encode_edges(name, saturate, tmp_path):
    x = _edge_values(name)
    got = compile_and_run(_cast_model(x, _dt(name), saturate), {"x": x}, tmp_path)["y"]
    with np.errstate(all="ignore"):
        want = (numpy_helper.saturate_cast(x, _dt(name)) if saturate and name in F8
                else x.astype(_dt(name)))
    _same_codes(got, want)


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2fnuz"])
def test_encode_from_float64_and_float16(name, tmp_path):
    """float64 goes through float32 (rounding twice, as ml_dtypes); float16 is exact."""
    x64 = np.array([1.0 + 2.0 ** -4 + 2.0 ** -40, -(1.0 + 2.0 ** -4 + 2.0 ** -40), 0.3, 17.0,
                    -1e-300, 1e300], np.float64)
    got = compile_and_run(_cast_model(x64, _dt(name), 0), {"x": x64}, tmp_path)["y"]
    with np.errstate(all="ignore"):
        _same_codes(got, x64.astype(_dt(name)))
    x16 = _edge_values(name).astype(np.float16)
    got = compile_and_run(_cast_model(x16, _dt(name), 1), {"x": x16}, tmp_path)["y"]
    _same_codes(got, numpy_helper.saturate_cast(x16, _dt(name)))


def test_float8_to_float8_and_bool(tmp_path):
    x = np.arange(256, dtype=np.uint8).view(_dt("float8_e5m2")).reshape(4, 64)
    got = compile_and_run(_cast_model(x, _dt("float8_e4m3fn"), 1), {"x": x}, tmp_path)["y"]
    _same_codes(got, numpy_helper.saturate_cast(x.astype(np.float32), _dt("float8_e4m3fn")))
    got = compile_and_run(_cast_model(x, np.bool_), {"x": x}, tmp_path)["y"]
    np.testing.assert_array_equal(got, x.astype(np.float32) != 0)


@pytest.mark.parametrize("name", INTS)
def test_int_formats(name, tmp_path):
    dt = _dt(name)
    bits = 4 if "4" in name else 2
    # every stored byte (high bits ignored on reading) -> int8/uint8/float32
    codes = np.arange(256, dtype=np.uint8).view(dt).reshape(8, 32)
    wide = np.int8 if name.startswith("int") else np.uint8
    for to in (wide, np.float32, np.int64):
        got = compile_and_run(_cast_model(codes, to), {"x": codes}, tmp_path)["y"]
        np.testing.assert_array_equal(got, codes.astype(to))
    # integers wrap, floats truncate then wrap (as numpy astype), NaN/Inf -> 0
    xi = np.arange(-300, 301, 7, dtype=np.int32)
    got = compile_and_run(_cast_model(xi, dt), {"x": xi}, tmp_path)["y"]
    np.testing.assert_array_equal(got.view(np.uint8), xi.astype(dt).view(np.uint8))
    xf = np.concatenate([np.arange(-20, 20, 0.35), [np.nan, np.inf, -np.inf, 1e9]])
    xf = xf.astype(np.float32)
    got = compile_and_run(_cast_model(xf, dt), {"x": xf}, tmp_path)["y"]
    with np.errstate(all="ignore"):
        want = xf.astype(dt)
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    assert (got.view(np.uint8) < (1 << bits)).all()      # canonical codes


def _ref(model, feeds):
    return ReferenceEvaluator(model).run(None, feeds)


@pytest.mark.parametrize("q,shape,axis,sat", [
    ("int4", (3, 5), 1, 1), ("uint4", (4, 6), 0, 1), ("int2", (2, 7), 1, 1),
    ("uint2", (9,), 0, 1), ("float8_e4m3fn", (3, 5), 1, 0), ("float8_e5m2", (4, 3), 0, 1),
    ("float8_e4m3fnuz", (2, 6), 1, 0), ("float8_e5m2fnuz", (5,), 0, 1),
    ("float4_e2m1fn", (3, 4), 1, 1)])
def test_quantize_dequantize(q, shape, axis, sat, tmp_path):
    rs = np.random.default_rng(3)
    x = (rs.standard_normal(shape) * 40).astype(np.float32)
    # +-Inf only for float targets: onnx.reference turns rint(+Inf) into INT32_MIN (numpy's
    # undefined float->int cast); aicc saturates +Inf to the max (see aicc/ops/quantize.py)
    x.reshape(-1)[:3] = [np.inf, -np.inf, 1e6] if q in FLOATS else [1e3, -1e6, 1e6]
    n = shape[axis] if len(shape) > 1 else 1
    scale = (rs.random(n) + 0.5).astype(np.float32) if len(shape) > 1 else np.float32(0.7)
    zp_val = 0 if q in F8 else (1 if q in ("int4", "uint4", "uint2", "float4_e2m1fn") else -1)
    zp = np.full(np.shape(scale), zp_val).astype(_dt(q))
    attrs = {"axis": axis} | ({"saturate": sat} if q in F8 else {})
    for const in (True, False):
        feeds = {"x": x} if const else {"x": x, "s": np.asarray(scale), "z": zp}
        inits = {"s": np.asarray(scale), "z": zp} if const else None
        qn = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], **attrs)
        dn = helper.make_node("DequantizeLinear", ["y", "s", "z"], ["d"], axis=axis)
        m = make_model([qn, dn], feeds, ["y", "d"], initializers=inits, opset=23)
        got = compile_and_run(m, feeds, tmp_path)
        want_y, want_d = _ref(m, feeds)
        _same_codes(got["y"], want_y)
        np.testing.assert_allclose(got["d"], want_d, rtol=1e-6, equal_nan=True)


def test_dequantize_all_float8_codes(tmp_path):
    for name in FLOATS:
        codes = np.arange(256, dtype=np.uint8) & (0xF if "float4" in name else 0xFF)
        x = codes.view(_dt(name))
        node = helper.make_node("DequantizeLinear", ["x", "s"], ["y"])
        m = make_model([node], {"x": x}, ["y"], initializers={"s": np.float32(0.5)}, opset=21)
        got = compile_and_run(m, {"x": x}, tmp_path)["y"]
        np.testing.assert_array_equal(got, _ref(m, {"x": x})[0])


def test_upcast_and_data_movement(tmp_path):
    """Add on float8 runs in float32 (rounded back, saturating); int4 moves as bytes."""
    rs = np.random.default_rng(0)
    a = (rs.standard_normal((3, 4)) * 4).astype(_dt("float8_e4m3fn"))
    b = (rs.standard_normal((3, 4)) * 4).astype(_dt("float8_e4m3fn"))
    i4 = np.arange(-8, 16).astype(_dt("int4")).reshape(4, 6)
    nodes = [helper.make_node("Add", ["a", "b"], ["s"]),
             helper.make_node("Transpose", ["i"], ["t"], perm=[1, 0]),
             helper.make_node("Concat", ["i", "i"], ["c"], axis=0)]
    m = make_model(nodes, {"a": a, "b": b, "i": i4}, ["s", "t", "c"], opset=21)
    got = compile_and_run(m, {"a": a, "b": b, "i": i4}, tmp_path)
    want = (a.astype(np.float32) + b.astype(np.float32)).astype(a.dtype)
    _same_codes(got["s"], want)
    np.testing.assert_array_equal(got["t"], i4.T)
    np.testing.assert_array_equal(got["c"], np.concatenate([i4, i4]))


def test_cast_opset13_defaults_to_saturate(tmp_path):
    x = np.array([1000.0, -1e9, np.inf, 0.1], np.float32)
    m = _cast_model(x, _dt("float8_e4m3fn"), None, opset=19)
    got = compile_and_run(m, {"x": x}, tmp_path)["y"]
    _same_codes(got, numpy_helper.saturate_cast(x, _dt("float8_e4m3fn")))
    assert TensorProto.FLOAT8E4M3FN == _tp(_dt("float8_e4m3fn"))


@pytest.mark.parametrize("round_mode", ["up", "down", "nearest"])
@pytest.mark.parametrize("saturate", [1, 0])
def test_e8m0(round_mode, saturate, tmp_path):
    x = np.array([0.0, -0.0, 1.0, 1.5, 0.75, -3.0, 1e-40, 2.0 ** -127, 3.0e38, 1.7e38, np.inf,
                  np.nan, 1.25, 1.5000001, 2.0 ** 127, 6.0], np.float32)
    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT8E8M0,
                            saturate=saturate, round_mode=round_mode)
    m = make_model([node], {"x": x}, ["y"], opset=25,
                   output_types={"y": (_dt("float8_e8m0fnu"), [x.size])})
    got = compile_and_run(m, {"x": x}, tmp_path)["y"]
    want = numpy_helper.to_float8e8m0(x, bool(saturate), round_mode)
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    codes = np.arange(256, dtype=np.uint8).view(_dt("float8_e8m0fnu"))
    back = compile_and_run(_cast_model(codes, np.float32), {"x": codes}, tmp_path)["y"]
    np.testing.assert_array_equal(back, codes.astype(np.float32))
