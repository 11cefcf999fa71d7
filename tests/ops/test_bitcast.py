"""BitCast (opset 26): same bits under another type; compared with onnx.reference (the
oracle falls back to it when onnxruntime lacks opset 26)."""
import numpy as np
import pytest
from onnx import helper

from tests.oracle import check_node, compile_and_run, make_model, rng

PAIRS = [(np.float32, np.int32), (np.int32, np.float32), (np.float64, np.int64),
         (np.int64, np.float64), (np.uint32, np.int32), (np.int8, np.uint8),
         (np.uint16, np.int16), (np.float16, np.uint16), (np.uint16, np.float16),
         (np.uint64, np.float64), (np.bool_, np.uint8), (np.bool_, np.int8)]


def _data(dt, shape):
    r = rng(5)
    if dt == np.bool_:
        return r.integers(0, 2, shape).astype(bool)
    if np.dtype(dt).kind == "f":
        v = (r.standard_normal(shape) * 100).astype(dt)
        if v.size > 3:
            v.reshape(-1)[:3] = [np.nan, -0.0, np.inf]
        return v
    info = np.iinfo(dt)
    return r.integers(info.min, info.max, shape, dtype=dt, endpoint=True)


@pytest.mark.parametrize("src,dst", PAIRS)
@pytest.mark.parametrize("shape", [(7,), (2, 3, 5), ()])
def test_bitcast(src, dst, shape, tmp_path):
    x = _data(src, shape)
    got, _ = check_node("BitCast", {"x": x}, tmp_path,
                        attrs={"to": helper.np_dtype_to_tensor_dtype(np.dtype(dst))}, opset=26)
    assert np.ascontiguousarray(got["y0"]).tobytes() == x.tobytes()     # bit for bit


def test_bitcast_to_bool_normalises(tmp_path):
    x = np.array([0, 1, 2, 255], np.uint8)
    node = helper.make_node("BitCast", ["x"], ["y"], to=helper.np_dtype_to_tensor_dtype(
        np.dtype(bool)))
    model = make_model([node], {"x": x}, ["y"], opset=26)
    got = compile_and_run(model, {"x": x}, tmp_path)["y"]
    assert got.dtype == bool and got.tolist() == [False, True, True, True]
