"""Requantization in 32-bit integer arithmetic on targets without double-precision hardware
(kernels/qgemm/fixed.py; cortex-m4, ``double_fpu: false``).

- The row helper compiled for this host (its portable clamp) over ~10^6 sums, multipliers and
  zero points: equal to the float64 form (rint of the float64 product, half to even, + zp,
  saturated; NaN -> zp) for |int32(acc + bias)| < 2^29; realistic sums and scales, any int32
  sum with any exponent (negative, +-Inf, NaN, zero, subnormal, >= 2^19), short significands
  (ties), the fast loop's bounds, rows of every length mod 4.
- One model with every int8 path on cortex-m4 under qemu (SSAT / USAT): QLinearConv on the dot
  kernel, the depthwise planes and the plain loops, per-tensor and per-channel scales, int8 and
  uint8 outputs, zero points, biases, ties, multipliers >= 1/2, special scales, both ends
  saturated, 63 outputs per channel; QLinearMatMul with constant b (per-column scales) and with
  b computed at run time (one output at a time); the QDQ classifier (MatMulInteger, float
  glue, QuantizeLinear); QDQ fully connected layers with int32 biases (QGemm: 20 rows; one row
  on the FPU's fused multiply-add; one row with multipliers above 0.75 on the row helper);
  QuantizeLinear with ties and n % 16 tails; QAdd. Equal to the
  generic target's bundle (the float64 form) on every output; onnxruntime (where its 8-bit
  integer sums are exact on this CPU: oracle.ort_exact) within one step,
  and on the requantized outputs only where its float32 product rounds to the other side:
  rint(fl32(fl32(a) m)) reproduces each of its differing values.
- The linked program has no soft-double or libm routine (arm-none-eabi-nm).
"""
import json
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

import aicc
from aicc.hostc import host_lib
from aicc.kernels.qgemm import fixed
from aicc.kernels.qgemm.requant import WRAP
from aicc.runner import open_bundle
from aicc.targets import load_target
from tests.oracle import PLAIN_CFLAGS, STRICT_CFLAGS, make_model, ort_exact
from tests.ops.test_qlinear import _conv_ref

M4 = "cortex-m4"
needs_m4 = pytest.mark.skipif(bool(load_target(M4).missing_tools()),
                              reason="make cross-toolchain")
SOFT = ("__aeabi_d", "__adddf3", "__subdf3", "__muldf3", "__divdf3", "__floatsidf",
        "__floatunsidf", "__fixdfsi", "__extendsfdf2", "__truncdfsf2", "__eqdf2", "__nedf2",
        "__ltdf2", "__gedf2", "rint", "lrint", "nearbyint", "round", "floor", "ceil", "fmaf")


# -- the helper on this host -------------------------------------------------------------------

def _host():
    src = ["#include <stdint.h>", "#include <stddef.h>", "#include <string.h>",
           "#define AICC_UNUSED __attribute__((unused))", WRAP]
    for t in ("int8", "uint8"):
        src += [fixed._text(fixed.SAT, t), fixed._text(fixed.ROW, t), fixed._text(fixed.ONE, t)]
    src.append("""
void one_s8(size_t n, const uint32_t *acc, const uint32_t *bias, const float *m,
            const int32_t *zp, uint32_t bnd, int8_t *y)
{ for (size_t i = 0; i < n; ++i) aicc_rqrowi_s8(1u, acc + i, bias[i], m[i], zp[i], bnd, y + i); }
void one_u8(size_t n, const uint32_t *acc, const uint32_t *bias, const float *m,
            const int32_t *zp, uint32_t bnd, uint8_t *y)
{ for (size_t i = 0; i < n; ++i) aicc_rqrowi_u8(1u, acc + i, bias[i], m[i], zp[i], bnd, y + i); }
void row_s8(size_t n, const uint32_t *acc, uint32_t bias, float m, int32_t zp, uint32_t bnd,
            int8_t *y)
{ aicc_rqrowi_s8(n, acc, bias, m, zp, bnd, y); }""")
    cdef = """
void one_s8(size_t, const uint32_t *, const uint32_t *, const float *, const int32_t *, uint32_t,
            int8_t *);
void one_u8(size_t, const uint32_t *, const uint32_t *, const float *, const int32_t *, uint32_t,
            uint8_t *);
void row_s8(size_t, const uint32_t *, uint32_t, float, int32_t, uint32_t, int8_t *);"""
    return host_lib("\n".join(src), cdef, "rqfixed")


def _float64(a, m, zp, lo, hi):
    """The float64 form: clip(rint(a * m) + zp), NaN -> zp clipped."""
    with np.errstate(all="ignore"):
        v = a.astype(np.float64) * np.asarray(m, np.float64)
        r = np.clip(np.rint(v) + zp, lo, hi)
    return np.where(np.isnan(v), np.clip(zp, lo, hi), r).astype(np.int64)


def _wrap(acc, bias):
    return ((acc.astype(np.uint64) + bias.astype(np.uint64)) & 0xFFFFFFFF) \
        .astype(np.uint32).view(np.int32)


def _cases(r, kind, n):
    """(acc, bias, m, bnd): uint32 sums and biases, float32 multipliers, the bound."""
    i32 = lambda lo, hi: r.integers(lo, hi, n).astype(np.int32).view(np.uint32)  # noqa: E731
    sign = r.choice([-1.0, 1.0], n)
    if kind == "realistic":        # sums < 2^24, |m| ~ 2^-20 .. 2^-3, unsaturated
        acc, bias = i32(-2**24, 2**24), i32(-2**20, 2**20)
        a = np.abs(_wrap(acc, bias).astype(np.float64)) + 1
        m = r.uniform(1, 200, n) / a
        return acc, bias, m.astype(np.float32), 2**24
    if kind == "any":              # every int32, every exponent of either sign
        acc = r.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
        bias = r.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
        return acc, bias, (sign * 2.0 ** r.uniform(-40, 25, n)).astype(np.float32), 0xFFFFFFFF
    if kind == "ties":             # short significands: a m a half-integer for many a
        m = r.integers(1, 16, n) * 2.0 ** r.integers(-10, 0, n) * sign
        return i32(-1000, 1000), i32(-100, 100), m.astype(np.float32), 1000
    if kind == "special":
        sp = np.array([0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 1e-40, 2**-33, 2**-34, 2**-31,
                       2**-32, 2**-32 * 1.5, 0.5, np.nextafter(0.5, 0), 1, 3e38, 2**19, 2**20,
                       7.5e5, -2**-31], np.float32)
        a = np.array([0, 1, -1, 2, -2, 3, 5, 1024, 1025, -1025, 2**20, 2**29, -2**29,
                      2**31 - 1, -2**31], np.int64)
        return (r.choice(a, n).astype(np.int32).view(np.uint32), np.zeros(n, np.uint32),
                r.choice(sp, n), 0xFFFFFFFF)
    if kind == "fast_edge":        # the fast loop's bounds: bnd + |bias| just below 2^29
        acc, bias = i32(-2**28, 2**28), i32(-2**28 + 1, 2**28)
        return acc, bias, (2.0 ** r.uniform(-31.5, -1, n)).astype(np.float32), 2**28
    assert kind == "edges"         # |m| around 2^-33 .. 2^-31 and 1/2, any sum
    return (r.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32), np.zeros(n, np.uint32),
            (sign * 2.0 ** r.uniform(-34, 0.5, n)).astype(np.float32), 0xFFFFFFFF)


@pytest.mark.parametrize("kind", ["realistic", "any", "ties", "special", "fast_edge", "edges"])
def test_fixed_helper_equals_float64(kind):
    ffi, lib = _host()
    r = np.random.default_rng(["realistic", "any", "ties", "special", "fast_edge",
                               "edges"].index(kind))
    n = 150_000
    for signed in (True, False):
        lo, hi = (-128, 127) if signed else (0, 255)
        acc, bias, m, bnd = _cases(r, kind, n)
        zp = r.integers(lo, hi + 1, n).astype(np.int32)
        y = np.zeros(n, np.int8 if signed else np.uint8)
        (lib.one_s8 if signed else lib.one_u8)(
            n, ffi.from_buffer("uint32_t[]", acc), ffi.from_buffer("uint32_t[]", bias),
            ffi.from_buffer("float[]", m), ffi.from_buffer("int32_t[]", zp), bnd,
            ffi.from_buffer(y))
        a = _wrap(acc, bias)
        want = _float64(a, m, zp, lo, hi)
        got = y.astype(np.int64)
        small = np.abs(a.astype(np.int64)) < 2**29
        np.testing.assert_array_equal(got[small], want[small])
        assert np.abs(got - want).max() <= 1       # |a| >= 2^29: the float64 product rounds
        if kind in ("realistic", "ties"):
            assert ((got > lo) & (got < hi)).mean() > 0.3, "mostly saturated"
        if kind == "ties":
            with np.errstate(all="ignore"):
                frac = np.abs(a * m.astype(np.float64)) % 1
            assert (frac == 0.5).mean() > 0.05


def test_fixed_helper_rows():
    """Rows of 0 .. 13 and 125 outputs (the fast loop's blocks of 4 and its rest) with one
    multiplier, bias and zero point each, fast and general loops."""
    ffi, lib = _host()
    r = np.random.default_rng(7)
    for n in [*range(14), 125]:
        for m, bias, bnd in [(np.float32(0.0037), 1234, 2**20), (np.float32(0.375), -7, 300),
                             (np.float32(1.5), 3, 2**20), (np.float32(2.1e-5), 2**30, 2**20)]:
            acc = r.integers(-300 if bnd == 300 else -2**20, 300 if bnd == 300 else 2**20,
                             n).astype(np.int32).view(np.uint32)
            zp = int(r.integers(-128, 128))
            y = np.zeros(n, np.int8)
            b = np.uint32(bias & 0xFFFFFFFF)
            lib.row_s8(n, ffi.from_buffer("uint32_t[]", acc), int(b), float(m), zp, bnd,
                       ffi.from_buffer(y))
            want = _float64(_wrap(acc, np.full(n, b, np.uint32)), m, zp, -128, 127)
            np.testing.assert_array_equal(y.astype(np.int64), want, err_msg=f"n={n} m={m}")


# -- every int8 path on cortex-m4 -------------------------------------------------------------

def _qnp(x, s, zp, dt):
    info = np.iinfo(dt)
    return np.clip(np.rint(x / np.float32(s)) + zp, info.min, info.max).astype(dt)


def _model(r):
    """(model, feeds, {output: (kind, exact int32 sums a, float32 multipliers m) for the
    QLinear outputs whose onnxruntime differences are checked one by one})."""
    f32 = np.float32
    shape = (1, 8, 9, 7)
    # x / 0.25 = k / 2: ties for QuantizeLinear; both ends saturate
    xf = (r.integers(-300, 300, size=shape) * 0.125).astype(f32)
    xm = (r.integers(-300, 300, size=(20, 33)) * 0.125).astype(f32)
    bm = r.integers(0, 256, size=(33, 10)).astype(np.uint8)     # QLinearMatMul's run-time b
    feeds = {"xf": xf, "xm": xm, "bm": bm}
    inits = {"s_in": f32(0.25), "zu": np.uint8(128), "zs": np.int8(-3), "one": f32(1.0)}
    nodes = [helper.make_node("QuantizeLinear", ["xf", "s_in", "zu"], ["qu"]),
             helper.make_node("QuantizeLinear", ["xf", "s_in", "zs"], ["qs"]),
             helper.make_node("QuantizeLinear", ["xm", "s_in", "zu"], ["qm"])]
    xq = {"qu": (_qnp(xf, 0.25, 128, np.uint8), 128), "qs": (_qnp(xf, 0.25, -3, np.int8), -3)}
    outs, check = ["qu", "qs"], {}

    def conv(name, x, w, ws, yt, yz, attrs, bias=True, spread=150.0, ties=None, bmax=3000):
        """QLinearConv name: w, ws (None: scales putting the sums' spread near `spread` output
        units, per channel when ws == "pc"); ties: the float32 multipliers to use instead."""
        xv, xz = xq[x]
        cout = w.shape[0]
        b = r.integers(-bmax, bmax, size=cout).astype(np.int32)
        acc = _conv_ref({"x": xv, "w": w, "xz": np.asarray(xz, xv.dtype)}, None,
                        ["x", "w", "xz"], attrs).astype(np.int64)
        if bias:
            acc = acc + b.reshape(1, -1, 1, 1)
        if ties is not None:
            ws = np.asarray(ties, f32)                 # x scale 0.25, y scale 0.25: m = ws
        elif isinstance(ws, str):
            per = ws == "pc"
            ws = (r.uniform(0.7, 1.3, cout if per else 1) * spread / acc.std() / 0.25 * 0.5)
            ws = ws.astype(f32)
        ys = f32(0.25) if ties is not None else f32(0.5)
        inits.update({f"{name}_w": w, f"{name}_ws": ws, f"{name}_wz": np.zeros(
            ws.size, np.int8), f"{name}_ys": ys, f"{name}_yz": np.array(yz, yt)})
        if bias:
            inits[f"{name}_b"] = b
        ins = [x, "s_in", "zu" if xv.dtype == np.uint8 else "zs", f"{name}_w", f"{name}_ws",
               f"{name}_wz", f"{name}_ys", f"{name}_yz"] + ([f"{name}_b"] if bias else [])
        nodes.append(helper.make_node("QLinearConv", ins, [name], **attrs))
        outs.append(name)
        m = ((f32(0.25) * ws).astype(f32) / ys).astype(f32)
        check[name] = (acc, m.reshape((1, -1, 1, 1) if m.size > 1 else ()), yz)

    w3 = lambda co, ci: r.integers(-127, 128, size=(co, ci, 3, 3)).astype(np.int8)  # noqa: E731
    p1 = {"pads": [1, 1, 1, 1]}
    # (onnxruntime's QLinearConv: y of x's type)
    conv("dot_pc", "qs", w3(8, 8), "pc", np.int8, -5, p1)
    conv("dot_pt", "qu", w3(8, 8), "pt", np.uint8, 120, p1)
    conv("dw_pc", "qs", w3(8, 1), "pc", np.int8, 7, {**p1, "group": 8})
    conv("dw_pt_s2", "qu", w3(8, 1), "pt", np.uint8, 0, {**p1, "group": 8, "strides": [2, 2]},
         bias=False)
    conv("loop_pc", "qs", w3(8, 2), "pc", np.int8, -128, {**p1, "group": 4})
    # significands of a few bits: many sums land on half-integers; 0.75 .. 96: |m| >= 1/2
    conv("ties", "qs", r.integers(-1, 2, size=(8, 8, 1, 1)).astype(np.int8), None, np.int8, 1,
         {}, ties=[0.5, 0.25, 0.375, 0.125, 0.75, 1.5, 0.0625, 96.0], bmax=20)
    conv("ties_dw", "qu", r.integers(-1, 2, size=(8, 1, 3, 3)).astype(np.int8), None,
         np.uint8, 131, {**p1, "group": 8}, ties=[0.5, 0.25, 0.375, 3.0, 0.125, 0.625, 1.0, 2.5],
         bmax=20)
    # 0, +-Inf, NaN, 3e38, tiny, negative: the float64 form's values (not onnxruntime's)
    conv("special", "qu", w3(8, 8), None, np.uint8, 3, p1,
         ties=[0, np.inf, -np.inf, np.nan, 3e38, 1e-30, -0.004, 1e-12])
    del check["special"]
    # QLinearMatMul: constant b with per-column scales (the dot kernel), run-time b
    am = _qnp(xm, 0.25, 128, np.uint8).astype(np.int64) - 128
    b = r.integers(-127, 128, size=(33, 10)).astype(np.int8)
    acc = am @ b.astype(np.int64)
    bs = (r.uniform(0.7, 1.3, 10) * 150 / acc.std() / 0.25 * 0.5).astype(f32)
    inits.update({"mm_b": b, "mm_bs": bs, "mm_bz": np.zeros(10, np.int8), "mm_ys": f32(0.5),
                  "mm_yz": np.uint8(125), "mr_bz": np.uint8(100), "mr_ys": f32(40.0),
                  "mr_yz": np.uint8(128)})
    nodes.append(helper.make_node("QLinearMatMul", ["qm", "s_in", "zu", "mm_b", "mm_bs", "mm_bz",
                                                    "mm_ys", "mm_yz"], ["mm"]))
    check["mm"] = (acc, ((f32(0.25) * bs).astype(f32) / f32(0.5)).astype(f32), 125)
    nodes.append(helper.make_node("QLinearMatMul", ["qm", "s_in", "zu", "bm", "one", "mr_bz",
                                                    "mr_ys", "mr_yz"], ["mr"]))
    check["mr"] = (am @ (bm.astype(np.int64) - 100), np.float32(0.25 / 40.0), 128)
    outs += ["mm", "mr"]
    # the QDQ classifier (fuse-qdq: MatMulInteger, Cast, Mul, Add) and its QuantizeLinear
    wg = r.integers(-127, 128, size=(10, 33)).astype(np.int8)
    gs = r.uniform(0.002, 0.004, 10).astype(f32)
    inits.update({"g_w": wg, "g_ws": gs, "g_wz": np.zeros(10, np.int8),
                  "g_c": r.normal(0, 2, 10).astype(f32), "g_ys": f32(0.3), "g_yz": np.int8(4)})
    nodes += [helper.make_node("DequantizeLinear", ["qm", "s_in", "zu"], ["g_x"]),
              helper.make_node("DequantizeLinear", ["g_w", "g_ws", "g_wz"], ["g_wf"], axis=0),
              helper.make_node("Gemm", ["g_x", "g_wf", "g_c"], ["g_f"], transB=1),
              helper.make_node("QuantizeLinear", ["g_f", "g_ys", "g_yz"], ["gemm"])]
    # a residual QAdd (fuse-qadd): DequantizeLinear, Add, QuantizeLinear of two convs
    inits.update({"a_s1": f32(0.5), "a_z1": np.int8(-5), "a_s2": f32(0.5), "a_z2": np.int8(7),
                  "a_ys": f32(0.7), "a_yz": np.int8(-1)})
    nodes += [helper.make_node("DequantizeLinear", ["dot_pc", "a_s1", "a_z1"], ["a_1"]),
              helper.make_node("DequantizeLinear", ["dw_pc", "a_s2", "a_z2"], ["a_2"]),
              helper.make_node("Add", ["a_1", "a_2"], ["a_f"]),
              helper.make_node("QuantizeLinear", ["a_f", "a_ys", "a_yz"], ["qadd"])]
    outs += ["gemm", "qadd"]
    # fully connected layers with an int32 bias (fuse-qdq: aicc.QGemm): 20 rows on the row
    # helper; one row with per-column multipliers on the FPU's fused multiply-add
    # (fixed.one_fma), and with multipliers above 0.75 on the row helper, column by column
    a1 = am[:1]
    feeds["xm1"] = xm[:1].copy()
    nodes.append(helper.make_node("QuantizeLinear", ["xm1", "s_in", "zu"], ["qm1"]))

    def qgemm(name, x, a, w, m_scale, yz, bmax=4000):
        gb = r.integers(-bmax, bmax, size=10).astype(np.int32)
        acc = a @ w.T.astype(np.int64) + gb
        ws = (r.uniform(0.7, 1.3, 10) * m_scale * 0.5 / 0.25).astype(f32)
        inits.update({f"{name}_w": w, f"{name}_ws": ws, f"{name}_b": gb,
                      f"{name}_bs": (f32(0.25) * ws).astype(f32), f"{name}_ys": f32(0.5),
                      f"{name}_yz": np.int8(yz)})
        nodes.extend([
            helper.make_node("DequantizeLinear", [x, "s_in", "zu"], [f"{name}_x"]),
            helper.make_node("DequantizeLinear", [f"{name}_w", f"{name}_ws"], [f"{name}_wf"],
                             axis=0),
            helper.make_node("DequantizeLinear", [f"{name}_b", f"{name}_bs"], [f"{name}_bf"],
                             axis=0),
            helper.make_node("Gemm", [f"{name}_x", f"{name}_wf", f"{name}_bf"], [f"{name}_f"],
                             transB=1),
            helper.make_node("QuantizeLinear", [f"{name}_f", f"{name}_ys", f"{name}_yz"],
                             [name])])
        outs.append(name)
        check[name] = (acc, ((f32(0.25) * ws).astype(f32) / f32(0.5)).astype(f32), yz)
    wq = r.integers(-127, 128, size=(10, 33)).astype(np.int8)
    qgemm("qg20", "qm", am, wq, 150 / (am @ wq.T.astype(np.int64)).std(), -2)
    qgemm("qg1", "qm1", a1, wq, 150 / (am @ wq.T.astype(np.int64)).std(), 3)
    sparse = (r.integers(-1, 2, size=(10, 33)) * (r.random((10, 33)) < 0.03)).astype(np.int8)
    qgemm("qg1big", "qm1", a1, sparse, 0.9, -1, bmax=60)
    return make_model(nodes, feeds, outs, inits, opset=13), feeds, check


@pytest.fixture(scope="module")
def m4_run(tmp_path_factory):
    """The model built for cortex-m4 (run under qemu) and for generic (this host)."""
    tmp = tmp_path_factory.mktemp("rqfixed")
    model, feeds, check = _model(np.random.default_rng(50))
    path = tmp / "m.onnx"
    onnx.save(model, str(path))
    outs = {}
    for target in (M4, "generic"):      # (no sanitizer for the bare-metal program)
        b = aicc.build(path, target=target, out=tmp / target)
        outs[target] = open_bundle(b, cflags=PLAIN_CFLAGS if target == M4 else STRICT_CFLAGS) \
            .run(feeds)
    return model, feeds, check, outs, tmp


@needs_m4
def test_m4_int8_paths_match_float64_and_onnxruntime(m4_run):
    model, feeds, check, outs, tmp = m4_run
    got, want = outs[M4], outs["generic"]
    text = (tmp / M4 / "model.c").read_text()
    assert "aicc_rqrowi_s8(" in text and "aicc_rqrowi_u8(" in text and "aicc_rqonei_" in text
    assert "aicc_qround_double" not in text and "(double)" not in text
    assert text.count("aicc_rqfma_s8(") == 2        # the helper and qg1's call (not qg1big's)
    steps = {s["op"] for s in json.loads((tmp / M4 / "manifest.json").read_text())["steps"]}
    assert {"QLinearConv", "QLinearMatMul", "MatMulInteger", "QAdd", "QGemm"} <= steps, steps
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
    if not ort_exact(model):     # onnxruntime's 8-bit sums saturate on this CPU (ort_exact)
        return
    import onnxruntime as rt
    sess = rt.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    ort = dict(zip([o.name for o in model.graph.output], sess.run(None, feeds)))
    total = diffs = 0
    for k, w in ort.items():
        if k == "special":
            continue
        g = got[k].astype(np.int64)
        d = np.abs(g - w.astype(np.int64))
        assert d.max() <= 1, k
        info = np.iinfo(got[k].dtype)
        live = ((g > info.min) & (g < info.max)).mean()
        assert live > (0.1 if k in ("qu", "qs", "dw_pt_s2", "qg1big") else 0.3), (k, live)
        if k in check:          # onnxruntime: rint(fl32(fl32(a) m)) + zp, saturated
            a, m, yz = check[k]
            f = (a.astype(np.float32) * m).astype(np.float32)
            emu = np.clip(np.rint(f.astype(np.float64)) + int(yz), info.min, info.max)
            np.testing.assert_array_equal(w[d != 0], emu[d != 0], err_msg=k)
        elif k in ("qu", "qs", "qadd"):
            assert not d.any(), k            # one float32 division, one rounding: as aicc
        total, diffs = total + d.size, diffs + int((d != 0).sum())
    assert diffs <= total // 200, (diffs, total)     # near-ties only
    assert (got["ties"] != 0).any() and not (got["ties"].astype(np.int64) - ort["ties"]).any()


@needs_m4
def test_m4_int8_program_links_no_soft_double(m4_run):
    """The program linked for the bundle (harness, startup, newlib) calls no double routine."""
    model, feeds, check, outs, tmp = m4_run
    b = open_bundle(tmp / M4)
    with tempfile.TemporaryDirectory() as d:
        exe, _ = b._program(feeds, Path(d))
        nm = subprocess.run([load_target(M4).tool("nm"), str(exe)], capture_output=True,
                            text=True, check=True).stdout
    names = [ln.split()[-1] for ln in nm.splitlines() if ln.strip()]
    assert "aicc_rqrowi_s8" in " ".join(names)
    bad = [s for s in names if s.startswith(SOFT)]
    assert not bad, bad


@needs_m4
def test_m4_fully_connected_only_compiles_clean(tmp_path):
    """A model of one-row QDQ fully connected layers only (the FC autoencoder's form: the
    matrix-vector kernel and the fused multiply-add requantization): its C has no helper it
    does not call (-Wall -Wextra -pedantic -Werror under the cortex-m4 compiler), and its
    outputs are the generic bundle's."""
    r = np.random.default_rng(8)
    f32 = np.float32
    inits = {"s_in": f32(0.05), "z_in": np.int8(-3)}
    nodes = [helper.make_node("QuantizeLinear", ["x", "s_in", "z_in"], ["q0"]),
             helper.make_node("DequantizeLinear", ["q0", "s_in", "z_in"], ["d0"])]
    prev, k = "d0", 40
    for i, n in enumerate((24, 16)):
        w = r.integers(-127, 128, size=(n, k)).astype(np.int8)
        ws = r.uniform(0.002, 0.006, n).astype(f32)
        inits.update({f"w{i}": w, f"ws{i}": ws, f"b{i}": r.integers(-900, 900, n).astype(np.int32),
                      f"bs{i}": (f32(0.05) * ws).astype(f32), f"ys{i}": f32(0.08),
                      f"yz{i}": np.int8(2)})
        nodes += [helper.make_node("DequantizeLinear", [f"w{i}", f"ws{i}"], [f"wf{i}"], axis=0),
                  helper.make_node("DequantizeLinear", [f"b{i}", f"bs{i}"], [f"bf{i}"], axis=0),
                  helper.make_node("Gemm", [prev, f"wf{i}", f"bf{i}"], [f"g{i}"], transB=1),
                  helper.make_node("QuantizeLinear", [f"g{i}", f"ys{i}", f"yz{i}"], [f"q{i + 1}"]),
                  helper.make_node("DequantizeLinear", [f"q{i + 1}", f"ys{i}", f"yz{i}"],
                                   [f"d{i + 1}"])]
        prev, k = f"d{i + 1}", n
    feeds = {"x": r.normal(0, 2, (1, 40)).astype(f32)}
    path = tmp_path / "fc.onnx"
    onnx.save(make_model(nodes, feeds, [prev], inits, opset=13), str(path))
    outs = {}
    for target in (M4, "generic"):
        b = aicc.build(path, target=target, out=tmp_path / target)
        outs[target] = open_bundle(b, cflags=PLAIN_CFLAGS).run(feeds)[prev]
    assert "aicc_rqfma_s8(" in (tmp_path / M4 / "model.c").read_text()
    np.testing.assert_array_equal(outs[M4], outs["generic"])
    assert np.unique(outs[M4]).size > 5
