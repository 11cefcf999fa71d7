"""The NEON vector vocabulary (arm-neon: kernels/isa/neon ``vector``, ``integer``,
``int_bits``, ``vmath``) under qemu-aarch64: the element-wise vector functions (exp, tanh,
erf, log, expm1, trig and the activations built on them), Swish, the softmax rows, layer
norm and the recurrent GEMM products, against onnxruntime; the vector body and the lane-0
tail giving the same bits; and the element-wise functions giving x86-avx2's bits (the NEON
spellings keep the x86 ones' meanings: max / min return the second operand for NaN, the _CMP_
predicates, FMA). Several inputs and nodes share one model, so each case is one emulated
run. Skipped only when the cross toolchain or qemu is missing."""
import numpy as np
import pytest
from onnx import helper

from aicc.targets import load_target, runnable_targets
from tests.oracle import assert_close, compile_and_run, make_model, reference, rng

T = "arm-neon"
pytestmark = pytest.mark.skipif(bool(load_target(T).missing_tools()),
                                reason="arm-neon toolchain or qemu-aarch64 missing "
                                       "(make cross-toolchain)")
X86 = "x86-avx2" if "x86-avx2" in runnable_targets(derived=False) else None

# (output name, op, attributes, extra constant inputs); opset 20 (Gelu)
UNARY = [
    ("exp", "Exp", {}, {}), ("sigmoid", "Sigmoid", {}, {}), ("tanh", "Tanh", {}, {}),
    ("erf", "Erf", {}, {}), ("gelu", "Gelu", {}, {}),
    ("gelu_tanh", "Gelu", {"approximate": "tanh"}, {}),
    ("hsig", "HardSigmoid", {"alpha": 0.3, "beta": 0.4}, {}), ("hswish", "HardSwish", {}, {}),
    ("clip", "Clip", {}, {"lo": np.float32(-1.5), "hi": np.float32(2.0)}),
    ("sqrt", "Sqrt", {}, {}), ("leaky", "LeakyRelu", {"alpha": 0.1}, {}),
    ("log", "Log", {}, {}), ("softplus", "Softplus", {}, {}), ("mish", "Mish", {}, {}),
    ("elu", "Elu", {"alpha": 0.7}, {}), ("celu", "Celu", {"alpha": 1.5}, {}),
    ("selu", "Selu", {}, {}),
    ("sin", "Sin", {}, {}), ("cos", "Cos", {}, {}), ("atan", "Atan", {}, {}),
    ("asin", "Asin", {}, {}), ("acos", "Acos", {}, {}),
]
GROUPS = {"exp": UNARY[:8], "clamps": UNARY[8:11], "log": UNARY[11:17], "trig": UNARY[17:]}
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 1.4e-45, 3.4e38, -3.4e38, 1e-30,
           -1e-30, 88.72, 88.73, -87.5, -100.0, -110.0, 0.5, -0.5, 1.0, -1.0, 0.625, 0.875,
           2.25, 4.0, -4.0, 1.41421356, 0.7071, 20.0, -20.0, 30.0, -30.0, 1e4, -9000.0,
           2.0, -1.5, 0.99999994, -0.99999994]


def _values(seed=0):
    """64 values (a multiple of 4): the special ones, then normals of a few scales."""
    r = rng(seed)
    rest = 64 - len(SPECIAL)
    return np.concatenate([SPECIAL, r.normal(size=rest) * np.repeat([0.3, 3, 30], -(-rest // 3))[:rest]]
                          ).astype(np.float32)


def _unary_model(ops, x):
    nodes, inits = [], {}
    for out, op, attrs, consts in ops:
        ins = ["x", *(f"{out}_{k}" for k in consts)]
        inits.update({f"{out}_{k}": v for k, v in consts.items()})
        nodes.append(helper.make_node(op, ins, [out], **attrs))
    return make_model(nodes, {"x": x}, [o for o, *_ in ops], inits, opset=20)


def _bits_equal(a, b, what):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    nan = np.isnan(a)
    np.testing.assert_array_equal(nan, np.isnan(b), err_msg=what)
    np.testing.assert_array_equal(a[~nan].view(np.uint32), b[~nan].view(np.uint32),
                                  err_msg=what)


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_neon_unary(group, tmp_path):
    """Each op's values against onnxruntime; the 7 values after the first 64 repeat the first
    7, 3 of them in the lane-0 tail (71 = 17 vectors + 3): the same bits as in the vectors;
    and the same bits as x86-avx2's vector kernels (libm's sinf / cosf past |x| 8192 aside)."""
    ops = GROUPS[group]
    v = _values()
    x = np.concatenate([v, v[:7]])
    model = _unary_model(ops, x)
    got = compile_and_run(model, {"x": x}, tmp_path, target=T)
    want = reference(model, {"x": x})
    finite = np.abs(x) < 1e30       # onnxruntime's own edge cases (Inf, huge) aside
    for out, *_ in ops:
        np.testing.assert_allclose(got[out][finite], want[out][finite], rtol=2e-5, atol=1e-6,
                                   equal_nan=True, err_msg=out)
        _bits_equal(got[out][64:], got[out][:7], f"{out}: tail")
    if X86:
        ref = compile_and_run(model, {"x": x}, tmp_path, target=X86)
        for out, op, *_ in ops:
            keep = np.abs(x) <= 8192 if op in ("Sin", "Cos") else np.ones(x.shape, bool)
            _bits_equal(got[out][keep], ref[out][keep], f"{out}: arm-neon vs {X86}")


def test_neon_unary_specials(tmp_path):
    """Special values where the kernels promise them: exp / tanh / sigmoid / erf / log ends,
    -0 kept, NaN passing the clamps (the x86 max / min meaning), log of 0 and negatives."""
    x = np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1.0, 100.0, -110.0, 3.0, -3.0])
    ops = [u for u in UNARY if u[0] in ("exp", "tanh", "sigmoid", "erf", "log", "hsig",
                                         "hswish", "clip", "leaky", "sqrt", "softplus")]
    y = compile_and_run(_unary_model(ops, x), {"x": x}, tmp_path, target=T)
    e, t, s, er, lg = y["exp"], y["tanh"], y["sigmoid"], y["erf"], y["log"]
    np.testing.assert_array_equal(e[[0, 1, 2, 3]], np.float32([1, 1, np.inf, 0]))
    assert np.isnan(e[4]) and e[7] == np.inf and e[8] == 0 and e[5] == 1
    assert t[1] == 0 and np.signbit(t[1]) and not np.signbit(t[0]) and np.isnan(t[4])
    np.testing.assert_array_equal(t[[2, 3, 7, 8]], np.float32([1, -1, 1, -1]))
    assert t[5] == np.float32(1e-40)
    np.testing.assert_array_equal(s[[0, 2, 3, 7, 8]], np.float32([0.5, 1, 0, 1, 0]))
    assert er[1] == 0 and np.signbit(er[1]) and er[2] == 1 and er[3] == -1 and np.isnan(er[4])
    assert lg[0] == -np.inf and lg[1] == -np.inf and lg[2] == np.inf and np.isnan(lg[6])
    assert np.isnan(lg[3]) and np.isnan(lg[4]) and np.isfinite(lg[5])
    for k in ("hsig", "hswish", "clip", "leaky", "sqrt", "softplus"):
        assert np.isnan(y[k][4]), k
    assert np.signbit(y["clip"][1]) and np.signbit(y["leaky"][1]) and np.signbit(y["sqrt"][1])
    np.testing.assert_array_equal(y["clip"][[2, 3]], np.float32([2.0, -1.5]))


def test_neon_swish(tmp_path):
    """Sigmoid(x) * x (fused to aicc.Swish) and x * Sigmoid(1.7 x) of 4 k + 3 values."""
    x = np.concatenate([_values(1), _values(2)[:39]])
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["s", "x"], ["y"]),
             helper.make_node("HardSwish", ["x"], ["h"])]
    model = make_model(nodes, {"x": x}, ["y", "h"])
    got = compile_and_run(model, {"x": x}, tmp_path, target=T)
    want = reference(model, {"x": x})
    finite = np.abs(x) < 1e30
    assert_close({k: v[finite] for k, v in got.items()}, {k: v[finite] for k, v in want.items()},
                 rtol=2e-5, atol=1e-6)


def test_neon_erf_gelu_dense(tmp_path):
    """The NEON erf (one Horner chain per lane, TBL-picked coefficients, vectors of small
    lanes on the small piece alone: vmath/erf_tbl.py) and the Gelu on it, densely over
    [-6, 6], at and next to every piece boundary (0.875, 2.25, 4) of both signs, tiny and huge
    magnitudes, +-0, +-Inf, NaN (also among small lanes): within 1.5e-7 of the exact erf
    (relative 3e-7 below 0.5), the specials, and x86-avx2's bits (erf.py's piecewise form)
    for both."""
    import math
    bounds = np.float32([0.875, 2.25, 4.0])
    edges = np.concatenate([bounds, np.nextafter(bounds, np.float32(0)),
                            np.nextafter(bounds, np.float32(9))])
    # first, whole vectors: NaN with small lanes (the small piece alone), with mid and big
    # lanes, all NaN, all small with -0 and a subnormal
    lanes = [np.nan, 0.1, -0.2, 0.3, np.nan, 0.1, 1.5, -3.0, np.nan, np.nan, np.nan, np.nan,
             -0.0, 1e-40, -0.874, 0.874]
    x = np.concatenate([lanes, np.linspace(-6, 6, 24001), edges, -edges,
                        np.logspace(-40, 38, 400), -np.logspace(-40, 38, 400), SPECIAL,
                        [0.0, -0.0, np.inf, -np.inf, np.nan]]).astype(np.float32)
    nodes = [helper.make_node("Erf", ["x"], ["erf"]), helper.make_node("Gelu", ["x"], ["gelu"])]
    model = make_model(nodes, {"x": x}, ["erf", "gelu"], opset=20)
    got = compile_and_run(model, {"x": x}, tmp_path, target=T)
    y = got["erf"].astype(np.float64)
    ok = ~np.isnan(x)
    assert np.isnan(y[[0, 4, 8, 9, 10, 11]]).all()
    exact = np.array([math.erf(v) for v in x[ok].astype(np.float64)])
    err = np.abs(y[ok] - exact)
    assert err.max() <= 1.5e-7, x[ok][err.argmax()]
    small = np.abs(x[ok]) < 0.5
    assert (err[small] / np.maximum(np.abs(exact[small]), 1e-38)).max() <= 3e-7
    assert np.isnan(y[-1]) and np.isnan(got["gelu"][-1])
    np.testing.assert_array_equal(got["erf"][-5:-1], np.float32([0.0, -0.0, 1.0, -1.0]))
    assert np.signbit(got["erf"][-4]) and not np.signbit(got["erf"][-5])
    if X86:
        (tmp_path / "x86").mkdir()
        ref = compile_and_run(model, {"x": x}, tmp_path / "x86", target=X86)
        for out in ("erf", "gelu"):
            _bits_equal(got[out], ref[out], f"{out}: arm-neon vs {X86}")


ROW_LENGTHS = (1, 3, 4, 5, 7, 8, 9, 12, 17, 33, 100)


def _softmax_inputs(seed=3):
    r = rng(seed)
    feeds = {}
    for D in ROW_LENGTHS:
        x = (r.normal(size=(4, D)) * 4).astype(np.float32)
        x[1, -1] = -np.inf                  # a -Inf in a row: 0 / -Inf there
        if D > 1:
            x[2, D // 2] = np.nan           # a NaN row
        x[3] = x[3] + 80.0                  # large values: exp(x - max) still in range
        feeds[f"x{D}"] = x
    return feeds


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_neon_softmax_rows(op, tmp_path):
    """Contiguous rows of every length around the vector (4), its quad (16) and the exp
    loop's pair, with -Inf, NaN rows and large values; plus [2, 6, 5] over its middle axis
    (the strided helper) and an all -Inf row."""
    feeds = _softmax_inputs()
    feeds["mid"] = rng(4).normal(size=(2, 6, 5)).astype(np.float32)
    feeds["ninf"] = np.float32([[-np.inf] * 6, [1, 2, 3, -np.inf, np.inf, 0]])
    nodes = [helper.make_node(op, [k], [f"y_{k}"], axis=1 if k == "mid" else -1) for k in feeds]
    model = make_model(nodes, feeds, [f"y_{k}" for k in feeds], opset=17)
    got = compile_and_run(model, feeds, tmp_path, target=T)
    assert_close(got, reference(model, feeds), rtol=1e-5, atol=1e-6)
    for D in ROW_LENGTHS[1:]:
        assert np.isnan(got[f"y_x{D}"][2]).all()
    assert np.isnan(got["y_ninf"]).all()


def test_neon_softmax_opset11_axis(tmp_path):
    """Opset 11: the input coerced to rows of prod(shape[axis:]) (7 * 5 = 35 values)."""
    x = rng(5).normal(size=(3, 7, 5)).astype(np.float32) * 3
    nodes = [helper.make_node("Softmax", ["x"], ["y"], axis=1),
             helper.make_node("LogSoftmax", ["x"], ["z"], axis=1)]
    model = make_model(nodes, {"x": x}, ["y", "z"], opset=11)
    got = compile_and_run(model, {"x": x}, tmp_path, target=T)
    assert_close(got, reference(model, {"x": x}), rtol=1e-5, atol=1e-6)


def test_neon_layernorm(tmp_path):
    """Rows of awkward lengths, scale and bias, one over the last two axes, one without bias;
    rows of a multiple of 16 (the NEON rows, isa/neon/norm.py: 32, 128 without bias, 48 over
    the last two axes) besides the portable helper's; x86-avx2's bits (the 16-lane order on
    every target)."""
    r = rng(6)
    feeds, nodes, inits, outs = {}, [], {}, []
    for D, axis in ((3, -1), (5, -1), (17, -1), (100, -1), (6, -2), (32, -1), (128, -1),
                    (16, -2)):
        shape = (4, 3, D) if axis == -2 else (4, D)
        inner = shape[axis:]
        x = (r.normal(size=shape) * 3 + 1).astype(np.float32)
        x[0, 0] = np.nan if axis == -1 else x[0, 0]
        feeds[f"x{D}"] = x
        inits[f"s{D}"] = r.normal(size=inner).astype(np.float32)
        inits[f"b{D}"] = r.normal(size=inner).astype(np.float32)
        ins = [f"x{D}", f"s{D}"] + ([f"b{D}"] if D not in (5, 128) else [])
        nodes.append(helper.make_node("LayerNormalization", ins, [f"y{D}"], axis=axis,
                                      epsilon=1e-5))
        outs.append(f"y{D}")
    model = make_model(nodes, feeds, outs, inits, opset=17)
    got = compile_and_run(model, feeds, tmp_path, target=T)
    assert_close(got, reference(model, feeds), rtol=1e-4, atol=1e-5)
    assert np.isnan(got["y128"][0]).all() and not np.isnan(got["y128"][1:]).any()
    if X86:
        (tmp_path / "x86").mkdir()
        ref = compile_and_run(model, feeds, tmp_path / "x86", target=X86)
        for out in outs:
            _bits_equal(got[out], ref[out], f"{out}: arm-neon vs {X86}")


@pytest.mark.parametrize("op", ["GRU", "LSTM"])
def test_neon_rnn(op, tmp_path):
    """The recurrent GEMM products on NEON vectors: weights fed at run time (transposed into
    scratch by the portable transposition) and constant, hidden 13 (3 vectors + a rest)."""
    r = rng(7)
    G, hidden, inp = {"GRU": 3, "LSTM": 4}[op], 13, 6
    x = r.normal(size=(5, 2, inp)).astype(np.float32)
    w = (r.normal(size=(1, G * hidden, inp)) * 0.5).astype(np.float32)
    rr = (r.normal(size=(1, G * hidden, hidden)) * 0.5).astype(np.float32)
    b = (r.normal(size=(1, 2 * G * hidden)) * 0.5).astype(np.float32)
    nodes = [helper.make_node(op, ["x", "w", "r", "b"], ["y", "yh"], hidden_size=hidden),
             helper.make_node(op, ["x", "cw", "cr", "b"], ["z", "zh"], hidden_size=hidden)]
    feeds = {"x": x, "w": w, "r": rr, "b": b}
    model = make_model(nodes, feeds, ["y", "yh", "z", "zh"], {"cw": w, "cr": rr}, opset=14)
    got = compile_and_run(model, feeds, tmp_path, target=T)
    assert_close(got, reference(model, feeds), rtol=1e-4, atol=1e-5)


def test_neon_binary(tmp_path):
    """Float Add / Sub / Mul / Div of same-shape operands and with one value on either side
    (isa/neon/binary.py: 16 values per step, then the tail; 16 x 3 + 5 values, and 64 with
    no tail), a row
    broadcast (the portable loops), NaN / Inf / -0 among the values: onnxruntime's values and
    x86-avx2's bits."""
    r = rng(12)
    x = (r.normal(size=(53,)) * 3).astype(np.float32)
    x[[3, 17, 40]] = [np.nan, np.inf, -0.0]
    w = (r.normal(size=(53,)) * 2).astype(np.float32)
    w[[5, 17, 41]] = [-np.inf, np.inf, 0.0]
    inits = {"s": np.array(0.37, np.float32), "row": r.normal(size=(53,)).astype(np.float32)}
    feeds = {"x": x, "w": w, "m": r.normal(size=(3, 53)).astype(np.float32),
             "v": r.normal(size=(4, 16)).astype(np.float32)}
    nodes, outs = [helper.make_node("Mul", ["v", "v"], ["vv"])], ["vv"]     # no tail
    for op in ("Add", "Sub", "Mul", "Div"):
        for k, (p, q) in enumerate((("x", "w"), ("x", "s"), ("s", "w"))):
            nodes.append(helper.make_node(op, [p, q], [f"{op}{k}"]))
            outs.append(f"{op}{k}")
    nodes.append(helper.make_node("Add", ["m", "row"], ["bcast"]))
    outs.append("bcast")
    model = make_model(nodes, feeds, outs, inits)
    got = compile_and_run(model, feeds, tmp_path, target=T)
    assert_close(got, reference(model, feeds), rtol=1e-6, atol=1e-7)
    if X86:
        (tmp_path / "x86").mkdir()
        ref = compile_and_run(model, feeds, tmp_path / "x86", target=X86)
        for out in outs:
            _bits_equal(got[out], ref[out], f"{out}: arm-neon vs {X86}")


def test_neon_transpose_blocks(tmp_path):
    """2-D float transpositions in 4 x 4 NEON register blocks (kernels/move/copy.py
    tr4_helper): a lone Transpose (its own header), edges of 1-3 rows and columns, a batched
    one, NaN / -0 bits moved unchanged."""
    r = rng(13)
    x = r.normal(size=(37, 45)).astype(np.float32)
    x[0, :3] = [np.nan, -0.0, np.inf]
    y = r.normal(size=(2, 9, 16, 12)).astype(np.float32)
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0]),
             helper.make_node("Transpose", ["y"], ["yt"], perm=[0, 2, 3, 1])]
    feeds = {"x": x, "y": y}
    model = make_model(nodes, feeds, ["xt", "yt"])
    got = compile_and_run(model, feeds, tmp_path, target=T)
    _bits_equal(got["xt"], x.T, "xt")
    _bits_equal(got["yt"], y.transpose(0, 2, 3, 1), "yt")
