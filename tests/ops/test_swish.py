"""Swish (opset 24) and SwiGLU (opset 28): compiled C vs onnxruntime (onnx.reference for
SwiGLU, which onnxruntime lacks)."""
import numpy as np
import pytest

from tests.oracle import check_node, rng

SHAPES = [(3,), (2, 4), (2, 3, 17), (1, 65, 7)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("alpha", [1.0, 0.5, 1.702])
def test_swish(shape, alpha, tmp_path):
    x = (rng(len(shape)).normal(size=shape) * 4).astype(np.float32)
    check_node("Swish", {"x": x}, tmp_path, attrs={"alpha": alpha}, opset=24)


def test_swish_special_values(tmp_path):
    x = np.array([0.0, -0.0, 1e30, -1e30, 100.0, -100.0, np.nan, np.inf, 3.5], np.float32)
    check_node("Swish", {"x": x}, tmp_path, opset=24)


def test_swish_float64(tmp_path):
    x = rng(3).normal(size=(4, 9)) * 5
    check_node("Swish", {"x": x}, tmp_path, attrs={"alpha": 0.75}, opset=24,
               rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_swiglu(shape, alpha, tmp_path):
    r = rng(len(shape) + 10)
    a = (r.normal(size=shape) * 3).astype(np.float32)
    b = r.normal(size=shape).astype(np.float32)
    check_node("SwiGLU", {"a": a, "b": b}, tmp_path, attrs={"alpha": alpha}, opset=28)


@pytest.mark.parametrize("dt", [np.float64, np.float16])
def test_swiglu_dtypes(dt, tmp_path):
    r = rng(20)
    a = (r.normal(size=(3, 8)) * 3).astype(dt)
    b = r.normal(size=(3, 8)).astype(dt)
    tol = 2e-3 if dt == np.float16 else 1e-12
    check_node("SwiGLU", {"a": a, "b": b}, tmp_path, opset=28, rtol=tol, atol=tol)


def test_swiglu_const_b(tmp_path):
    r = rng(21)
    check_node("SwiGLU", {"a": r.normal(size=(2, 5)).astype(np.float32)}, tmp_path,
               initializers={"b": r.normal(size=(2, 5)).astype(np.float32)}, opset=28)
