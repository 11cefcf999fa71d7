"""MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv: compiled C vs onnx.reference
(exact) and onnxruntime (exact for the integer ops; within one unit for the requantized ops,
since onnxruntime multiplies in float32 and the spec's reference in float64), over shapes,
batch broadcasting, per-column / per-channel zero points, uint8/int8 mixes, padding, strides,
dilations, groups, bias, and int32 wrap-around of long accumulations."""
import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from tests.oracle import assert_close, compile_and_run, make_model, ort_exact, rng


def _rand(r, dt, shape):
    info = np.iinfo(dt)
    return r.integers(info.min, int(info.max) + 1, size=shape).astype(dt)


def _conv_ref(feeds, inits, order, attrs):
    """numpy reference of ConvInteger / QLinearConv (onnx.reference mishandles per-channel
    zero points and scales outside 2-D): float64 Conv of the zero-point-shifted operands
    (exact for these magnitudes), then the requantization of op_qlinear_conv."""
    v = {**feeds, **(inits or {})}
    v = {k: np.asarray(v[k]) for k in v}
    q = len(order) >= 8
    x, xz, w = (v[order[0]], v.get(order[2]), v[order[3]]) if q else \
        (v[order[0]], v.get(order[2]) if len(order) > 2 else None, v[order[1]])
    wz = v.get(order[5]) if q else (v.get(order[3]) if len(order) > 3 else None)
    xf = x.astype(np.float64) - (0 if xz is None else xz.astype(np.float64))
    wf = w.astype(np.float64)
    if wz is not None:
        wf = wf - wz.astype(np.float64).reshape((-1,) + (1,) * (w.ndim - 1))
    node = helper.make_node("Conv", ["x", "w"], ["y"], **(attrs or {}))
    m = make_model([node], {"x": xf, "w": wf}, ["y"], opset=17)
    acc = ReferenceEvaluator(m).run(None, {"x": xf, "w": wf})[0].astype(np.int64)
    if not q:
        return ((acc + 2**31) % 2**32 - 2**31).astype(np.int32)
    sh = (1, -1) + (1,) * (x.ndim - 2)
    if len(order) > 8:
        acc = acc + v[order[8]].astype(np.int64).reshape(sh)
    mult = (v[order[1]] * v[order[4]] / v[order[6]]).astype(np.float32)
    yz = v[order[7]]
    r = acc.astype(np.int32) * mult.reshape(sh if mult.size > 1 else ()) + yz
    info = np.iinfo(yz.dtype)
    return np.round(np.clip(r, info.min, info.max)).astype(yz.dtype)


def _run(op, feeds, inits, order, tmp_path, attrs=None, opset=21, ort_tol=0):
    node = helper.make_node(op, order, ["y"], **(attrs or {}))
    model = make_model([node], feeds, ["y"], inits, opset=opset)
    got = compile_and_run(model, feeds, tmp_path)
    if "Conv" in op:
        want = {"y": _conv_ref(feeds, inits, order, attrs)}
    else:
        want = dict(zip(["y"], ReferenceEvaluator(model).run(None, feeds)))
    assert_close(got, want)
    if not ort_exact(model):     # onnxruntime's 8-bit sums saturate on this CPU (ort_exact)
        return got
    try:    # onnxruntime itself (oracle.reference would fall back to onnx.reference)
        import onnxruntime as rt
        sess = rt.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        ort = sess.run(None, feeds)[0]
    except Exception:  # noqa: BLE001 - onnxruntime lacks this case (e.g. per-channel zps)
        return got
    if ort_tol == 0:
        np.testing.assert_array_equal(got["y"], ort)
    else:
        diff = np.abs(got["y"].astype(np.int64) - ort.astype(np.int64))
        assert diff.max() <= ort_tol, diff.max()
    return got


MM_SHAPES = [((4, 3), (3, 2)), ((1, 17), (17, 9)), ((7, 1), (1, 5)), ((2, 5, 6), (6, 4)),
             ((3, 1, 4, 8), (2, 8, 3)), ((5,), (5, 3)), ((4, 6), (6,)), ((2, 3, 4), (2, 4, 5))]


@pytest.mark.parametrize("sa,sb", MM_SHAPES)
@pytest.mark.parametrize("ta,tb", [(np.uint8, np.uint8), (np.int8, np.int8),
                                   (np.uint8, np.int8)])
def test_matmulinteger(sa, sb, ta, tb, tmp_path):
    r = rng(len(sa) * 10 + len(sb))
    a, b = _rand(r, ta, sa), _rand(r, tb, sb)
    feeds = {"a": a, "b": b, "az": np.array(_rand(r, ta, ())), "bz": np.array(_rand(r, tb, ()))}
    _run("MatMulInteger", feeds, None, ["a", "b", "az", "bz"], tmp_path, opset=10)


@pytest.mark.parametrize("const_b", [True, False])
def test_matmulinteger_per_column_and_omitted_zp(const_b, tmp_path):
    r = rng(3)
    a, b = _rand(r, np.uint8, (6, 11)), _rand(r, np.uint8, (11, 7))
    bz = _rand(r, np.uint8, (7,))
    feeds, inits = {"a": a}, {"b": b, "bz": bz}
    if not const_b:
        feeds, inits = {"a": a, "b": b, "bz": bz}, None
    _run("MatMulInteger", feeds, inits, ["a", "b", "", "bz"], tmp_path, opset=10)
    _run("MatMulInteger", {"a": a, "b": b}, None, ["a", "b"], tmp_path, opset=10)


def test_matmulinteger_wraps(tmp_path):
    """Long accumulations wrap modulo 2^32 (as int32 numpy and onnxruntime do)."""
    k = 40000
    a = np.full((2, k), 255, np.uint8)
    b = np.full((k, 3), 255, np.uint8)
    a[1, :] = 0
    feeds = {"a": a, "b": b}
    node = helper.make_node("MatMulInteger", ["a", "b"], ["y"])
    model = make_model([node], feeds, ["y"], opset=10)
    got = compile_and_run(model, feeds, tmp_path)["y"]
    want = ((a.astype(np.int64) @ b.astype(np.int64)) + 2**31) % 2**32 - 2**31
    np.testing.assert_array_equal(got, want.astype(np.int32))
    assert got[0, 0] < 0


def _qmm_feeds(r, sa, sb, ta, tb, ty, per_col=False):
    n = sb[-1] if len(sb) > 1 else 1
    return {"a": _rand(r, ta, sa), "as": np.array([0.02], np.float32),
            "az": np.array([_rand(r, ta, ())]), "b": _rand(r, tb, sb),
            "bs": (r.uniform(0.005, 0.05, size=(n,)) if per_col else np.array([0.03])).astype(np.float32),
            "bz": (_rand(r, tb, (n,)) if per_col else np.array([_rand(r, tb, ())])),
            "ys": np.array([0.9], np.float32), "yz": np.array([_rand(r, ty, ())])}


@pytest.mark.parametrize("sa,sb", MM_SHAPES[:6])
@pytest.mark.parametrize("t", [np.uint8, np.int8])
def test_qlinearmatmul(sa, sb, t, tmp_path):
    r = rng(sa[0] + 7 * sb[-1])
    feeds = _qmm_feeds(r, sa, sb, t, t, t)
    order = ["a", "as", "az", "b", "bs", "bz", "ys", "yz"]
    _run("QLinearMatMul", feeds, None, order, tmp_path, ort_tol=1)


def test_qlinearmatmul_per_column_const(tmp_path):
    r = rng(11)
    f = _qmm_feeds(r, (5, 16), (16, 6), np.uint8, np.int8, np.uint8, per_col=True)
    feeds = {k: f[k] for k in ("a", "as", "az", "ys", "yz")}
    inits = {k: f[k] for k in ("b", "bs", "bz")}
    _run("QLinearMatMul", feeds, inits, ["a", "as", "az", "b", "bs", "bz", "ys", "yz"],
         tmp_path, ort_tol=1)


def test_qlinearmatmul_saturates(tmp_path):
    r = rng(12)
    f = _qmm_feeds(r, (4, 32), (32, 4), np.int8, np.int8, np.int8)
    f["ys"] = np.array([0.001], np.float32)     # tiny output scale: most values saturate
    for k in ("az", "bz", "yz"):
        f[k] = np.zeros_like(f[k])
    got = _run("QLinearMatMul", f, None, ["a", "as", "az", "b", "bs", "bz", "ys", "yz"],
               tmp_path, ort_tol=1)["y"]
    assert (got == 127).any() and (got == -128).any()


# -- convolutions -----------------------------------------------------------------------------

CONV = {
    "3x3": ((1, 2, 5, 5), (3, 2, 3, 3), {}),
    "pad": ((1, 1, 3, 3), (2, 1, 2, 2), {"pads": [1, 1, 1, 1]}),
    "stride_dil": ((2, 3, 9, 8), (4, 3, 3, 2), {"strides": [2, 1], "dilations": [1, 2],
                                                "pads": [1, 0, 2, 1]}),
    "group": ((1, 4, 6, 6), (6, 2, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    "depthwise": ((1, 3, 7, 5), (3, 1, 3, 3), {"group": 3, "strides": [2, 2]}),
    "same_upper": ((1, 2, 6, 7), (2, 2, 3, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    "1d": ((2, 3, 11), (4, 3, 3), {"pads": [2, 1]}),
    "3d": ((1, 2, 4, 5, 3), (2, 2, 2, 3, 2), {"pads": [1, 0, 1, 0, 1, 1]}),
    "1x1": ((1, 8, 4, 4), (5, 8, 1, 1), {}),
}


@pytest.mark.parametrize("case", sorted(CONV))
@pytest.mark.parametrize("per_channel", [False, True])
def test_convinteger(case, per_channel, tmp_path):
    xs, ws, attrs = CONV[case]
    r = rng(len(case) + per_channel)
    feeds = {"x": _rand(r, np.uint8, xs), "w": _rand(r, np.uint8, ws),
             "xz": np.array(_rand(r, np.uint8, ()))}
    feeds["wz"] = _rand(r, np.uint8, (ws[0],)) if per_channel else np.array(_rand(r, np.uint8, ()))
    _run("ConvInteger", feeds, None, ["x", "w", "xz", "wz"], tmp_path, attrs=attrs, opset=10)


def test_convinteger_int8_const_weights_no_zp(tmp_path):
    r = rng(5)
    feeds = {"x": _rand(r, np.int8, (1, 3, 6, 6))}
    inits = {"w": _rand(r, np.int8, (4, 3, 3, 3))}
    _run("ConvInteger", feeds, inits, ["x", "w"], tmp_path, attrs={"pads": [1, 1, 1, 1]},
         opset=10)


@pytest.mark.parametrize("case", ["3x3", "stride_dil", "group", "depthwise", "1d", "1x1"])
@pytest.mark.parametrize("t", [np.uint8, np.int8])
@pytest.mark.parametrize("bias", [False, True])
def test_qlinearconv(case, t, bias, tmp_path):
    xs, ws, attrs = CONV[case]
    r = rng(len(case) * 3 + bias)
    m = ws[0]
    feeds = {"x": _rand(r, t, xs), "xs": np.array(np.float32(0.05)),
             "xz": np.array(_rand(r, t, ())), "w": _rand(r, np.int8, ws),
             "wsc": r.uniform(0.002, 0.02, size=(m,)).astype(np.float32),
             "wz": np.zeros((m,), np.int8), "ys": np.array(np.float32(0.2)),
             "yz": np.array(_rand(r, t, ()))}
    order = ["x", "xs", "xz", "w", "wsc", "wz", "ys", "yz"]
    if bias:
        feeds["b"] = r.integers(-5000, 5000, size=(m,)).astype(np.int32)
        order.append("b")
    _run("QLinearConv", feeds, None, order, tmp_path, attrs=attrs, opset=10, ort_tol=1)


def test_qlinearconv_per_tensor_const(tmp_path):
    r = rng(9)
    feeds = {"x": _rand(r, np.uint8, (1, 2, 7, 7))}
    inits = {"xs": np.float32(0.1), "xz": np.uint8(128), "w": _rand(r, np.uint8, (3, 2, 3, 3)),
             "wsc": np.float32(0.01), "wz": np.uint8(120), "ys": np.float32(0.3),
             "yz": np.uint8(100)}
    _run("QLinearConv", feeds, inits, ["x", "xs", "xz", "w", "wsc", "wz", "ys", "yz"],
         tmp_path, attrs={"pads": [1, 1, 1, 1], "strides": [2, 2]}, opset=10, ort_tol=1)
