"""Exp, Sigmoid and Tanh (kernels/vmath/exp.py on the x86 SIMD targets, kernels/vmath/portable.py on generic):
accuracy against float64 over the whole float32 range, special values, the vector body and the
lane-0 tail giving the same bits, and the fused forms (Conv epilogue, binary op, GEMM tile
epilogue) giving the standalone op's bits."""
import numpy as np
import onnx
import pytest
from onnx import helper

import aicc
from aicc.config import Options
from aicc.targets import runnable_targets
from tests.oracle import STRICT_CFLAGS, compile_and_run, make_model, reference, rng

TARGETS = runnable_targets(derived=False)
SIMD = [t for t in TARGETS if t in ("x86-avx2", "x86-avx512")]
FLT_MIN = 1.1754944e-38
EXACT = {"Exp": np.exp, "Tanh": np.tanh, "Sigmoid": lambda v: 1 / (1 + np.exp(-v))}
# largest relative error over normal results (measured on avx2 / avx512: 1.2e-7, 1.3e-7,
# 1.8e-7; math_c on generic: 1.2e-7, 1.3e-7, 1.8e-7), and absolute below FLT_MIN
REL = {"Exp": 2e-7, "Tanh": 2e-7, "Sigmoid": 2.5e-7}


def _run(op, x, tmp_path, target):
    m = make_model([helper.make_node(op, ["x"], ["y"])], {"x": x}, ["y"])
    return compile_and_run(m, {"x": x}, tmp_path, target=target)["y"]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op", sorted(EXACT))
def test_dense_accuracy(op, target, tmp_path):
    x = np.concatenate([np.linspace(-104, 89, 200001), np.logspace(-40, 2, 3000),
                        -np.logspace(-40, 2, 3000)]).astype(np.float32)
    y = _run(op, x, tmp_path, target).astype(np.float64)
    with np.errstate(all="ignore"):
        ref = EXACT[op](x.astype(np.float64))
    normal = (np.abs(ref) >= FLT_MIN) & (np.abs(ref) < 3.4e38)
    rel = np.abs(y[normal] - ref[normal]) / np.abs(ref[normal])
    assert rel.max() <= REL[op], x[normal][rel.argmax()]
    tiny = np.abs(ref) < FLT_MIN        # subnormal results: within the subnormal spacing
    bound = 3e-39 if op == "Sigmoid" else 1.5e-45
    assert np.abs(y[tiny] - ref[tiny]).max(initial=0) <= bound


@pytest.mark.parametrize("target", TARGETS)
def test_special_values(target, tmp_path):
    x = np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 88.7228, 88.72284, -103.0, -110.0,
                    3.4e38, -3.4e38, 1e-30, -1e-30, 20.0, -20.0])
    e, t, s = (_run(op, x, tmp_path, target) for op in ("Exp", "Tanh", "Sigmoid"))
    assert e[0] == 1 and e[1] == 1 and e[2] == np.inf and e[3] == 0 and np.isnan(e[4])
    assert np.isfinite(e[5]) and e[5] > 3.4e38 and e[6] == np.inf
    assert 0 < e[7] < FLT_MIN and e[8] == 0 and e[9] == np.inf and e[10] == 0
    assert t[0] == 0 and not np.signbit(t[0]) and t[1] == 0 and np.signbit(t[1])
    np.testing.assert_array_equal(t[[2, 3, 9, 10, 13, 14]], np.float32([1, -1, 1, -1, 1, -1]))
    assert np.isnan(t[4]) and t[11] == np.float32(1e-30) and t[12] == np.float32(-1e-30)
    np.testing.assert_array_equal(s[[0, 1, 2, 3, 9, 10]], np.float32([0.5, 0.5, 1, 0, 1, 0]))
    assert np.isnan(s[4])


@pytest.mark.parametrize("target", SIMD)
@pytest.mark.parametrize("op", sorted(EXACT))
def test_tail_same_bits(op, target, tmp_path):
    """Values in the vector body and the same values in the lane-0 tail: the same bits."""
    v = np.concatenate([rng(2).normal(size=40) * 8, [0.0, -0.0, np.inf, -np.inf, np.nan,
                                                     88.72, -87.5, -100.0]]).astype(np.float32)
    x = np.concatenate([v, v[:15]])          # 48 in vectors (16 | 48, 8 | 48), 15 in the tail
    y = _run(op, x, tmp_path, target)
    np.testing.assert_array_equal(y[48:].view(np.uint32), y[:15].view(np.uint32))


def _compiled(model, path, target, pipeline=None):
    onnx.save(model, str(path))
    over = {"pipeline": pipeline} if pipeline else None
    return aicc.load(aicc.build(path, target=target, out=path.with_suffix(""), overrides=over),
                     cflags=STRICT_CFLAGS)


@pytest.mark.parametrize("target", SIMD)
@pytest.mark.parametrize("act", ["Sigmoid", "Tanh"])
def test_fused_forms_same_bits(act, target, tmp_path):
    """Conv -> act (conv epilogue), MatMul + bias -> act (GEMM tile epilogue), Add -> act
    (binary op): fused and unfused builds give the same bits; with a standalone Softplus (its
    exp through the lane-0 form) they match onnxruntime."""
    r = rng(4)
    x = (r.normal(size=(1, 6, 7, 9)) * 3).astype(np.float32)
    a = (r.normal(size=(5, 37)) * 2).astype(np.float32)
    inits = {"w": r.normal(size=(10, 6, 3, 3)).astype(np.float32),
             "cb": r.normal(size=10).astype(np.float32),
             "m": r.normal(size=(37, 21)).astype(np.float32),
             "mb": r.normal(size=21).astype(np.float32),
             "b": r.normal(size=(5, 37)).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w", "cb"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node(act, ["c"], ["y1"]),
             helper.make_node("MatMul", ["a", "m"], ["mm"]),
             helper.make_node("Add", ["mm", "mb"], ["mmb"]),
             helper.make_node(act, ["mmb"], ["y2"]),
             helper.make_node("Add", ["a", "b"], ["s"]),
             helper.make_node(act, ["s"], ["y3"]),
             helper.make_node("MatMul", ["a", "m"], ["mm2"]),
             helper.make_node("Softplus", ["mm2"], ["y4"])]
    model = make_model(nodes, {"x": x, "a": a}, ["y1", "y2", "y3", "y4"], inits)
    feeds = {"x": x, "a": a}
    fused = _compiled(model, tmp_path / "f.onnx", target)
    acts = [s.get("fused", {}).get("act") for s in fused.manifest["steps"]]
    assert acts.count(act) == 3
    plain = _compiled(model, tmp_path / "u.onnx", target,
                      [n for n, _ in Options.load().pipeline
                       if n not in ("fuse-activation", "fuse-binary-activation")])
    got, want = fused.run(feeds), plain.run(feeds)
    for k in want:
        assert got[k].tobytes() == want[k].tobytes(), k
    ref = reference(model, feeds)
    for k in ref:
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-4, atol=1e-5, err_msg=k)


def _gelu_tanh(x, tmp_path, target):
    m = make_model([helper.make_node("Gelu", ["x"], ["y"], approximate="tanh")], {"x": x},
                   ["y"], opset=20)
    return compile_and_run(m, {"x": x}, tmp_path, target=target)["y"]


@pytest.mark.parametrize("target", TARGETS)
def test_gelu_tanh(target, tmp_path):
    """Gelu(approximate=tanh) (a vector loop on the SIMD targets): against the float64 formula
    (relative error too, also for x < 0),
    the lane-0 tail giving the vector body's bits, special values."""
    v = np.concatenate([np.linspace(-12, 12, 4001), rng(5).normal(size=40) * 3,
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e30]]).astype(np.float32)
    x = np.concatenate([v, v[:15]])
    y = _gelu_tanh(x, tmp_path, target)
    d = v.astype(np.float64)
    with np.errstate(all="ignore"):
        # 0.5 x (1 + tanh(u)) as x / (1 + exp(-2u)): the same function, without float64's own
        # cancellation in 1 + tanh(u) for x < -6
        ref = d / (1 + np.exp(-2 * np.sqrt(2 / np.pi) * (d + 0.044715 * d ** 3)))
    fin = np.isfinite(d[:-7])
    np.testing.assert_allclose(y[:len(v) - 7][fin], ref[:-7][fin], rtol=2e-6, atol=1e-7)
    # relative accuracy for x >= -5 (below, the function's own condition number passes 35:
    # the rounding of x alone moves it by more), negative x included: computed as
    # x / (1 + exp(-2u)), without the cancellation of 1 + tanh(u) (that form: 5e-5 near -5)
    near = fin & (d[:-7] >= -5)
    np.testing.assert_allclose(y[:len(v) - 7][near], ref[:-7][near], rtol=2e-6, atol=0)
    assert y[len(v) - 7] == 0 and y[len(v) - 5] == np.inf
    assert np.isnan(y[len(v) - 3])
    np.testing.assert_array_equal(y[len(v):].view(np.uint32), y[:15].view(np.uint32))


def test_isas_same_bits(tmp_path):
    """exp (scalef on AVX-512, two integer-exponent scalings on AVX2) and what is built on it
    give the same bits on both SIMD targets, subnormal results included. Sigmoid, Tanh and
    Gelu(tanh) take AVX2's one-scaling exp for 1 + exp (exp.py vexp plus1): dense around its
    edges, exp's argument near -87 (its clamp), near 88.4 - 88.7 (n = 128, results up to
    FLT_MAX) and past 88.72 (+Inf)."""
    if not {"x86-avx2", "x86-avx512"} <= set(TARGETS):
        pytest.skip("needs both SIMD targets on this CPU")
    edges = np.concatenate([np.linspace(86, 89.5, 20001), np.linspace(43, 44.8, 20001)])
    x = np.concatenate([np.linspace(-104, 89, 100001), rng(6).normal(size=999) * 20,
                        edges, -edges, [np.inf, -np.inf, np.nan]]).astype(np.float32)
    for op in sorted(EXACT):
        a, b = (_run(op, x, tmp_path, t) for t in ("x86-avx2", "x86-avx512"))
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32), err_msg=op)
    a, b = (_gelu_tanh(x, tmp_path, t) for t in ("x86-avx2", "x86-avx512"))
    np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


PLAIN_CASES = {   # op, attributes, constant inputs after x
    "HardSigmoid": ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, {}),
    "HardSwish": ("HardSwish", {}, {}),
    "Clip": ("Clip", {}, {"lo": np.float32(-1.5), "hi": np.float32(2.25)}),
    "ClipMin": ("Clip", {}, {"lo": np.float32(0.5)}),
    "ClipNaN": ("Clip", {}, {"lo": np.float32(np.nan), "hi": np.float32(1.0)}),
    "Sqrt": ("Sqrt", {}, {}),
}


@pytest.mark.parametrize("target", SIMD)
@pytest.mark.parametrize("case", sorted(PLAIN_CASES))
def test_vector_selects_generic_bits(case, target, tmp_path):
    """HardSigmoid (non-default alpha / beta), HardSwish, Clip (both bounds, one, a NaN bound)
    as vector min / max and Sqrt as vector sqrt: the generic target's bits (its scalar selects
    and sqrtf), NaN, +-Inf, -0 and the clamp edges included, in the vector body and the tail;
    fused after two Convs with different parameters (one vector helper per parameter set)."""
    op, attrs, consts = PLAIN_CASES[case]
    v = np.concatenate([np.linspace(-5, 5, 1001), [np.nan, np.inf, -np.inf, -0.0, 0.0, 3.0,
                                                   -3.0, 2.5, -1.3333334, 1e30, -1e30, 2.25]])
    x = np.concatenate([v, v[:13]]).astype(np.float32)
    ins = ["x", *consts]
    m = make_model([helper.make_node(op, ins, ["y"], **attrs)], {"x": x}, ["y"], dict(consts))
    got, want = (compile_and_run(m, {"x": x}, tmp_path, target=t)["y"]
                 for t in (target, "generic"))
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    if op == "Sqrt":
        return
    w = rng(7).normal(size=(4, 3, 3, 3)).astype(np.float32)
    xc = (rng(8).normal(size=(1, 3, 9, 11)) * 4).astype(np.float32)
    other = {k: (np.float32(v * 0.5) if k in ("lo", "hi") else v) for k, v in consts.items()}
    inits = {"w": w, **consts, **{f"{k}2": v for k, v in other.items()}}
    attrs2 = {k: v * 0.5 for k, v in attrs.items()}
    mc = make_model([helper.make_node("Conv", ["x", "w"], ["c1"], pads=[1, 1, 1, 1]),
                     helper.make_node(op, ["c1", *consts], ["y1"], **attrs),
                     helper.make_node("Conv", ["x", "w"], ["c2"]),
                     helper.make_node(op, ["c2", *[f"{k}2" for k in consts]], ["y2"], **attrs2)],
                    {"x": xc}, ["y1", "y2"], inits)
    fused = compile_and_run(mc, {"x": xc}, tmp_path, target=target)
    ref = reference(mc, {"x": xc})
    for k in ("y1", "y2"):
        np.testing.assert_allclose(fused[k], ref[k], rtol=1e-4, atol=1e-5, err_msg=k)
