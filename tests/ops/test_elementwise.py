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


# -- helpers for exact (numpy-defined) expectations --------------------------------------

from onnx import helper  # noqa: E402

from tests.oracle import compile_and_run, make_model  # noqa: E402

INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
SIGNED = [np.int8, np.int16, np.int32, np.int64]


def run(op, inputs, tmp_path, attrs=None, opset=18, initializers=None, input_order=None):
    names = input_order or (list(inputs) + list(initializers or {}))
    node = helper.make_node(op, names, ["y"], **(attrs or {}))
    model = make_model([node], inputs, ["y"], initializers, opset=opset)
    return compile_and_run(model, inputs, tmp_path)["y"]


def _ints(dt, size, seed, lo=None, hi=None):
    info = np.iinfo(dt)
    lo = info.min if lo is None else lo
    hi = info.max if hi is None else hi
    return rng(seed).integers(lo, hi, size=size, endpoint=True,
                              dtype=np.int64 if info.min < 0 else np.uint64).astype(dt)


# -- integer unary ----------------------------------------------------------------------

# Neg and Relu are not defined on unsigned types by the spec: those pairs are not generated
@pytest.mark.parametrize("op,dt", [(op, dt) for op in ["Abs", "Relu", "Sign", "Neg"] for dt in INTS
                                   if not (op in ("Neg", "Relu") and np.dtype(dt).kind == "u")])
def test_unary_int(op, dt, tmp_path):
    x = _ints(dt, (3, 7), 11, lo=-50 if np.iinfo(dt).min else 0, hi=100)
    check_node(op, {"x": x}, tmp_path, opset=18)


@pytest.mark.parametrize("dt", SIGNED)
def test_abs_neg_int_min_wraps(dt, tmp_path):
    """-INT_MIN is INT_MIN (two's complement, as numpy), with no signed overflow in C."""
    info = np.iinfo(dt)
    x = np.array([info.min, info.min + 1, -1, 0, 1, info.max], dt)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(run("Abs", {"x": x}, tmp_path), np.abs(x))
        np.testing.assert_array_equal(run("Neg", {"x": x}, tmp_path), np.negative(x))


@pytest.mark.parametrize("op", ["Erf", "Sign", "Exp", "Tanh", "Sigmoid", "Softplus", "Elu",
                                "Selu", "Celu", "Floor", "Round", "Atan", "Mish"])
def test_unary_float64(op, tmp_path):
    x = (rng(12).normal(size=(3, 5)) * 3).astype(np.float64)
    x[0, 0] = 0.0
    check_node(op, {"x": x}, tmp_path, opset=18)


# -- integer binary arithmetic ----------------------------------------------------------

@pytest.mark.parametrize("dt", INTS)
@pytest.mark.parametrize("op,fn", [("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply)])
def test_int_arith_wraps(op, fn, dt, tmp_path):
    a, b = _ints(dt, (4, 6), 13), _ints(dt, (6,), 14)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(run(op, {"a": a, "b": b}, tmp_path), fn(a, b))


@pytest.mark.parametrize("dt", SIGNED)
def test_int_div_edges(dt, tmp_path):
    """Documented: x / 0 = 0, INT_MIN / -1 = INT_MIN (onnxruntime traps on both)."""
    info = np.iinfo(dt)
    a = np.array([7, -7, 7, -7, info.min, info.min, 5, info.max], dt)
    b = np.array([2, 2, -2, -2, -1, 1, 0, -1], dt)
    want = np.array([3, -3, -3, 3, info.min, info.min, 0, -info.max], dt)
    np.testing.assert_array_equal(run("Div", {"a": a, "b": b}, tmp_path), want)


@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int16, np.uint32, np.int64])
@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
def test_compare_int(op, dt, tmp_path):
    a, b = _ints(dt, (3, 4), 15, 0, 5), _ints(dt, (4,), 16, 0, 5)
    check_node(op, {"a": a, "b": b}, tmp_path, opset=18)


@pytest.mark.parametrize("op", ["And", "Or", "Xor", "Equal"])
def test_logic_bool(op, tmp_path):
    r = rng(17)
    a, b = r.random((2, 3, 4)) < 0.5, r.random((3, 1)) < 0.5
    check_node(op, {"a": a, "b": b}, tmp_path, opset=18)
    check_node("Not", {"a": a}, tmp_path, opset=18)


# -- Pow ----------------------------------------------------------------------------------

@pytest.mark.parametrize("da,db", [(np.float32, np.int32), (np.float32, np.int64),
                                   (np.float64, np.float32), (np.float32, np.float64),
                                   (np.int32, np.float32), (np.int64, np.float64),
                                   (np.int32, np.int32), (np.int64, np.int64),
                                   (np.int64, np.int32)])
def test_pow_mixed_dtypes(da, db, tmp_path):
    r = rng(18)
    a = r.integers(-5, 6, size=(3, 4)).astype(da)
    b = r.integers(0, 4, size=(4,)).astype(db)
    check_node("Pow", {"a": a, "b": b}, tmp_path, opset=18)


def test_pow_int_exact_wrap_and_negative_exponent(tmp_path):
    """Integer Pow is exact modulo 2^bits (as numpy); negative exponents truncate 1/a^|e|."""
    a = np.array([3, 100000, -7, 2, 1, -1, -1, 5, 0], np.int32)
    b = np.array([2, 3, 3, 40, -3, -3, -2, -1, -2], np.int32)
    want = np.array([9, -1530494976, -343, 0, 1, -1, 1, 0, 0], np.int32)
    np.testing.assert_array_equal(run("Pow", {"a": a, "b": b}, tmp_path), want)


def test_pow_int_base_float_exponent_saturates(tmp_path):
    a = np.array([2, 2, -2, 4, 10], np.int32)
    b = np.array([0.5, 40.0, 31.0, -0.5, np.nan], np.float32)
    want = np.array([1, 2 ** 31 - 1, -2 ** 31, 0, 0], np.int32)
    np.testing.assert_array_equal(run("Pow", {"a": a, "b": b}, tmp_path), want)


# -- Mod ----------------------------------------------------------------------------------

@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_mod_float(fmod, dt, tmp_path):
    r = rng(19)
    a = (r.normal(size=(3, 4, 5)) * 10).astype(dt)
    b = (r.uniform(0.5, 4, size=(4, 1)) * np.where(r.random((4, 1)) < 0.5, -1, 1)).astype(dt)
    check_node("Mod", {"a": a, "b": b}, tmp_path, attrs={"fmod": fmod}, opset=18)


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_mod_float_edge_cases(fmod, dt, tmp_path):
    inf, nan = np.inf, np.nan
    a = np.array([0.0, -0.0, 0.0, -0.0, -3.0, 3.0, -1.0, 1.0, inf, -inf, 1.0, 1.0, nan, 1.0,
                  6.0, -6.0], dt)
    b = np.array([-2.0, 2.0, 2.0, -2.0, inf, inf, -inf, -inf, 2.0, 2.0, 0.0, -0.0, 2.0, nan,
                  3.0, 3.0], dt)
    with np.errstate(all="ignore"):
        want = np.fmod(a, b) if fmod else np.mod(a, b)
    got = run("Mod", {"a": a, "b": b}, tmp_path, attrs={"fmod": fmod})
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dt", INTS)
def test_mod_int(fmod, dt, tmp_path):
    info = np.iinfo(dt)
    a = _ints(dt, (3, 8), 20)
    b = _ints(dt, (8,), 21, lo=-9 if info.min else 1, hi=9)
    b[b == 0] = 3
    check_node("Mod", {"a": a, "b": b}, tmp_path, attrs={"fmod": fmod}, opset=18)
    fn = np.fmod if fmod else np.mod
    np.testing.assert_array_equal(run("Mod", {"a": a, "b": b}, tmp_path, attrs={"fmod": fmod}),
                                  fn(a, b))


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dt", SIGNED)
def test_mod_int_edges(fmod, dt, tmp_path):
    """x mod 0 = 0 (numpy), INT_MIN mod -1 = 0 (no trap)."""
    info = np.iinfo(dt)
    a = np.array([info.min, info.min, 5, -5, info.max, -7], dt)
    b = np.array([-1, 0, 0, -1, info.min, 3], dt)
    with np.errstate(all="ignore"):
        want = (np.fmod if fmod else np.mod)(a, b)
    np.testing.assert_array_equal(run("Mod", {"a": a, "b": b}, tmp_path, attrs={"fmod": fmod}),
                                  want)


# -- Clip -----------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int8, np.int32, np.uint8, np.int64])
@pytest.mark.parametrize("which", ["both", "min", "max", "swapped"])
def test_clip_runtime_bounds(dt, which, tmp_path):
    """min/max fed at run time (graph inputs), read from their pointers."""
    if np.dtype(dt).kind == "f":
        x = (rng(22).normal(size=(3, 8)) * 4).astype(dt)
    else:
        x = _ints(dt, (3, 8), 22, lo=0 if np.dtype(dt).kind == "u" else -20, hi=20)
    lo, hi = np.array(2, dt), np.array(9, dt)
    if which == "swapped":
        lo, hi = hi, lo
    ins = {"x": x}
    order = ["x", "", ""]
    if which in ("both", "min", "swapped"):
        ins["lo"], order[1] = lo, "lo"
    if which in ("both", "max", "swapped"):
        ins["hi"], order[2] = hi, "hi"
    while order[-1] == "":
        order.pop()
    check_node("Clip", ins, tmp_path, input_order=order, opset=13)


def test_clip_mixed_const_and_runtime(tmp_path):
    x = (rng(23).normal(size=(4, 5)) * 4).astype(np.float32)
    check_node("Clip", {"x": x, "lo": np.array(-1.0, np.float32)}, tmp_path,
               initializers={"hi": np.array(1.5, np.float32)}, input_order=["x", "lo", "hi"],
               opset=13)
    check_node("Clip", {"x": x, "hi": np.array(1.5, np.float32)}, tmp_path,
               initializers={"lo": np.array(-1.0, np.float32)}, input_order=["x", "lo", "hi"],
               opset=13)


@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int64, np.uint64])
def test_clip_int_constant_bounds(dt, tmp_path):
    info = np.iinfo(dt)
    x = _ints(dt, (5, 6), 24)
    lo = np.array(info.min if info.min else 0, dt)       # a bound at the type limit
    hi = np.array(info.max // 3, dt)
    check_node("Clip", {"x": x}, tmp_path, initializers={"lo": lo, "hi": hi},
               input_order=["x", "lo", "hi"], opset=13)


def test_clip_int64_exact_bounds(tmp_path):
    """Bounds beyond 2^53 are baked exactly (no float round trip)."""
    x = np.array([2 ** 62, 2 ** 62 + 1, 2 ** 62 + 3, -5], np.int64)
    lo, hi = np.array(2 ** 62 + 1, np.int64), np.array(2 ** 62 + 2, np.int64)
    got = run("Clip", {"x": x}, tmp_path, initializers={"lo": lo, "hi": hi})
    np.testing.assert_array_equal(got, np.clip(x, lo, hi))


# -- variadic Sum / Mean / Max / Min ----------------------------------------------------------

VAR_SHAPES = [[(2, 3, 4)], [(2, 3, 4), (4,)], [(3, 1, 5), (1, 4, 1), (5,)],
              [(2, 3), (2, 3), (1, 3), (2, 1)], [(1,), (6, 1), (1, 7)]]


@pytest.mark.parametrize("op", ["Sum", "Mean", "Max", "Min"])
@pytest.mark.parametrize("shapes", VAR_SHAPES)
def test_variadic_float(op, shapes, tmp_path):
    r = rng(25)
    ins = {f"x{i}": r.normal(size=s).astype(np.float32) for i, s in enumerate(shapes)}
    check_node(op, ins, tmp_path, opset=13)


@pytest.mark.parametrize("op", ["Sum", "Max", "Min"])
@pytest.mark.parametrize("dt", INTS)
def test_variadic_int(op, dt, tmp_path):
    ins = {f"x{i}": _ints(dt, s, 26 + i) for i, s in enumerate([(3, 4), (4,), (3, 1)])}
    want = {"Sum": lambda v: v[0] + v[1] + v[2], "Max": lambda v: np.maximum.reduce(v),
            "Min": lambda v: np.minimum.reduce(v)}[op]
    with np.errstate(over="ignore"):
        exp = want(np.broadcast_arrays(*ins.values())).astype(dt)
    np.testing.assert_array_equal(run(op, ins, tmp_path, opset=13), exp)
    if op != "Sum":
        check_node(op, ins, tmp_path, opset=13)


@pytest.mark.parametrize("op", ["Max", "Min", "Sum", "Mean"])
def test_variadic_float64_nan(op, tmp_path):
    a = np.array([np.nan, 1.0, 2.0, -np.inf, 0.0], np.float64)
    b = np.array([1.0, np.nan, 3.0, 5.0, -0.0], np.float64)
    c = np.array([0.5, 0.5, np.nan, 1.0, 1.0], np.float64)
    check_node(op, {"a": a, "b": b, "c": c}, tmp_path, opset=13)
    check_node(op, {"a": a, "b": b}, tmp_path, opset=13)


# -- IsNaN / IsInf / PRelu / Shrink -------------------------------------------------------------

SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.0, 3e38], np.float32)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_isnan_isinf(dt, tmp_path):
    x = SPECIAL.astype(dt).reshape(2, 4)
    check_node("IsNaN", {"x": x}, tmp_path, opset=13)
    for pos, neg in [(1, 1), (1, 0), (0, 1), (0, 0)]:
        check_node("IsInf", {"x": x}, tmp_path, opset=13,
                   attrs={"detect_positive": pos, "detect_negative": neg})


@pytest.mark.parametrize("xs,ss", [((2, 3, 4, 5), (3, 1, 1)), ((2, 3, 4), (4,)), ((5,), (1,)),
                                   ((2, 3), (2, 3))])
def test_prelu(xs, ss, tmp_path):
    r = rng(27)
    x = r.normal(size=xs).astype(np.float32)
    s = r.uniform(0, 0.5, size=ss).astype(np.float32)
    check_node("PRelu", {"x": x, "s": s}, tmp_path, opset=16)
    check_node("PRelu", {"x": x}, tmp_path, initializers={"s": s}, opset=16)


@pytest.mark.parametrize("dt", [np.int32, np.int64, np.uint32, np.float64])
def test_prelu_types(dt, tmp_path):
    x = _ints(np.int32, (3, 4), 28, -9, 9) if np.dtype(dt).kind != "u" else _ints(np.int32, (3, 4), 28, 0, 9)
    x = x.astype(dt)
    s = np.array([2, 3, 1, 0], dt)
    check_node("PRelu", {"x": x, "s": s}, tmp_path, opset=16)


def test_prelu_nan(tmp_path):
    check_node("PRelu", {"x": SPECIAL, "s": np.array([0.25], np.float32)}, tmp_path, opset=16)


@pytest.mark.parametrize("attrs", [{}, {"lambd": 1.5}, {"lambd": 1.5, "bias": 1.5},
                                   {"lambd": 0.0, "bias": -0.5}])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_shrink(attrs, dt, tmp_path):
    x = np.concatenate([np.linspace(-3, 3, 13), SPECIAL.astype(np.float64)]).astype(dt)
    check_node("Shrink", {"x": x}, tmp_path, attrs=attrs, opset=13)


@pytest.mark.parametrize("dt", [np.int8, np.int32, np.uint8, np.int64])
def test_shrink_int(dt, tmp_path):
    x = _ints(dt, (4, 5), 29, lo=0 if np.dtype(dt).kind == "u" else -10, hi=10)
    check_node("Shrink", {"x": x}, tmp_path, attrs={"lambd": 2.0, "bias": 1.0}, opset=13)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("e", [1.0, 2.0, 3.0, 0.5])
def test_pow_constant_exponent(e, dt, tmp_path):
    """A constant exponent of 1, 2 or 3 multiplies instead of calling pow (0.5 still calls
    it): against onnxruntime, special values and the vector tails included."""
    x = np.concatenate([rng(9).normal(size=61) * 30, [0.0, -0.0, np.inf, -np.inf, np.nan,
                                                      1e20, -1e-20, 3.4e38]]).astype(dt)
    got, _ = check_node("Pow", {"x": x}, tmp_path, initializers={"e": np.array(e, dt)})
    y = got["y0"]
    if e == 0.5:              # (numpy's -inf ** 0.5 is NaN, C's pow gives +inf)
        return
    with np.errstate(all="ignore"):
        want = np.power(x.astype(np.float64), e).astype(dt)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(want))
    np.testing.assert_array_equal(np.signbit(y), np.signbit(want))
    if e == 2.0:              # x * x: pow's correctly rounded square
        np.testing.assert_array_equal(y, (x.astype(np.float64) ** 2).astype(dt))
