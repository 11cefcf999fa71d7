import numpy as np
import pytest

from tests.oracle import check_node, rng

SHAPES = [((2, 3, 4), (4,)), ((2, 3, 4), (2, 3, 4)), ((3, 1, 5), (1, 4, 1)), ((1,), (7, 2)),
          ((2, 3, 4, 5), (3, 1, 1))]


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min"])
@pytest.mark.parametrize("sa,sb", SHAPES)
def test_binary_float(op, sa, sb, tmp_path):
    r = rng(1)
    a = r.normal(size=sa).astype(np.float32)
    b = r.normal(size=sb).astype(np.float32) + (3 if op == "Div" else 0)
    check_node(op, {"a": a, "b": b}, tmp_path)


def test_pow(tmp_path):
    r = rng(2)
    a = r.uniform(0.1, 3, size=(3, 4)).astype(np.float32)
    b = r.uniform(-2, 2, size=(4,)).astype(np.float32)
    check_node("Pow", {"a": a, "b": b}, tmp_path)
    check_node("Pow", {"a": a}, tmp_path, initializers={"e": np.array(2.0, np.float32)})


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("dt", [np.int32, np.int64])
def test_binary_int(op, dt, tmp_path):
    r = rng(3)
    a = r.integers(-100, 100, size=(3, 5)).astype(dt)
    b = r.integers(1, 9, size=(5,)).astype(dt) * np.where(r.random(5) < 0.5, -1, 1).astype(dt)
    check_node(op, {"a": a, "b": b}, tmp_path)


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
def test_compare(op, tmp_path):
    r = rng(4)
    a = r.integers(-3, 3, size=(4, 5)).astype(np.float32)
    b = r.integers(-3, 3, size=(5,)).astype(np.float32)
    check_node(op, {"a": a, "b": b}, tmp_path)


UNARY = ["Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Abs", "Neg", "Floor", "Ceil", "Round",
         "Sin", "Cos", "Atan", "Sign", "Softsign", "Softplus", "HardSwish", "Elu", "Selu",
         "Celu", "Mish"]


@pytest.mark.parametrize("op", UNARY)
def test_unary(op, tmp_path):
    x = (rng(5).normal(size=(2, 3, 7)) * 3).astype(np.float32)
    check_node(op, {"x": x}, tmp_path, opset=18)


@pytest.mark.parametrize("op,x", [("Sqrt", "pos"), ("Log", "pos"), ("Reciprocal", "pos")])
def test_unary_positive(op, x, tmp_path):
    v = rng(6).uniform(0.1, 5, size=(5, 6)).astype(np.float32)
    check_node(op, {"x": v}, tmp_path)


@pytest.mark.parametrize("attrs", [{}, {"alpha": 0.3}])
def test_leaky_relu(attrs, tmp_path):
    x = rng(7).normal(size=(4, 9)).astype(np.float32)
    check_node("LeakyRelu", {"x": x}, tmp_path, attrs=attrs)


@pytest.mark.parametrize("attrs", [{}, {"alpha": 0.1, "beta": 0.3}])
def test_hard_sigmoid(attrs, tmp_path):
    x = (rng(8).normal(size=(4, 9)) * 4).astype(np.float32)
    check_node("HardSigmoid", {"x": x}, tmp_path, attrs=attrs)


@pytest.mark.parametrize("lo,hi", [(0.0, 6.0), (-1.0, None), (None, 0.5)])
def test_clip(lo, hi, tmp_path):
    x = (rng(9).normal(size=(3, 8)) * 4).astype(np.float32)
    inits, order = {}, ["x", "", ""]
    if lo is not None:
        inits["lo"] = np.array(lo, np.float32)
        order[1] = "lo"
    if hi is not None:
        inits["hi"] = np.array(hi, np.float32)
        order[2] = "hi"
    while order and order[-1] == "":
        order.pop()
    check_node("Clip", {"x": x}, tmp_path, initializers=inits, input_order=order)


@pytest.mark.parametrize("approx", ["none", "tanh"])
def test_gelu(approx, tmp_path):
    x = (rng(10).normal(size=(3, 8)) * 3).astype(np.float32)
    check_node("Gelu", {"x": x}, tmp_path, attrs={"approximate": approx}, opset=20)


def test_nan_inf_propagate(tmp_path):
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0], np.float32)
    for op in ["Relu", "Sigmoid", "Tanh", "Exp", "Abs", "Neg"]:
        check_node(op, {"x": x}, tmp_path)
    check_node("Max", {"a": x, "b": np.zeros(6, np.float32)}, tmp_path)
