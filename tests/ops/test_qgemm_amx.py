"""The AMX tile kernels of x86-avx512-amx (kernels/qgemm/amx.py): QLinearConv / ConvInteger whose
weights fit int8 (the implicit conv, k tiles of 4..16 channel groups) and QLinearMatMul /
MatMulInteger (rows >= MIN_ROWS) give the numpy reference's values and the generic target's,
bit for bit; the bundle really ran the tiles (the process holds the AMX permission that only
the bundle asks for here); built with -DAICC_NO_AMX the same bundle runs the VNNI kernels and
gives the same values."""
import ctypes
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

import aicc
from aicc.kernels.qgemm import amx as qgemm_amx
from aicc.targets import runnable_targets
from tests.oracle import STRICT_CFLAGS, make_model, rng
from tests.ops.test_qgemm_simd import _both, _qconv_ref, _qmm_ref, _requant_inits, quad_matmul
from tests.ops.test_qlinear import _conv_ref, _rand

TARGET = "x86-avx512-amx"
pytestmark = pytest.mark.skipif(TARGET not in runnable_targets(),
                                reason="this machine has no AMX-INT8")

CONVS = {   # x shape, w shape, attrs, channel groups per k tile
    "c64_3x3": ((1, 64, 10, 9), (40, 64, 3, 3), {"pads": [1, 1, 1, 1]}, 16),
    "c32_s2": ((1, 32, 11, 12), (20, 32, 3, 3), {"pads": [1, 1, 0, 1], "strides": [2, 2]}, 8),
    "c80_1x1_batch": ((2, 80, 6, 7), (33, 80, 1, 1), {}, 10),
    "group": ((1, 32, 7, 7), (12, 16, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}, 4),
    "1d_dil": ((1, 24, 50), (17, 24, 3), {"pads": [2, 2], "dilations": [2]}, 6),
    "wide": ((1, 16, 40, 45), (13, 16, 3, 3), {"pads": [1, 1, 1, 1]}, 4),
}


def _amx_granted() -> bool:
    """Whether this process holds the AMX tile permission (arch_prctl ARCH_GET_XCOMP_PERM)."""
    libc = ctypes.CDLL(None, use_errno=True)
    bits = ctypes.c_uint64(0)
    assert libc.syscall(158, 0x1022, ctypes.byref(bits)) == 0
    return bool(bits.value >> 18 & 1)


def _build(tmp_path) -> Path:
    """The x86-avx512-amx bundle _both made in tmp_path (the other one is generic's)."""
    builds = [m.parent for m in Path(tmp_path).glob("b*/manifest.json")
              if json.loads(m.read_text())["target"] == TARGET]
    assert len(builds) == 1
    return builds[0]


def _c_text(tmp_path) -> str:
    return (_build(tmp_path) / "model.c").read_text()


def _no_amx(tmp_path, feeds):
    """The bundle's sources compiled again, with -DAICC_NO_AMX (the VNNI kernels)."""
    out = Path(tmp_path) / "no_amx"
    shutil.copytree(_build(tmp_path), out, ignore=shutil.ignore_patterns("*.o", "*.a", "*.so"))
    return aicc.load(out, cflags=STRICT_CFLAGS + " -DAICC_NO_AMX").run(feeds)["y"]


@pytest.mark.parametrize("case", sorted(CONVS))
@pytest.mark.parametrize("xt,wt,wz", [(np.uint8, np.int8, 0), (np.int8, np.int8, 0),
                                      (np.uint8, np.uint8, 128)])
def test_conv_amx(case, xt, wt, wz, tmp_path):
    xs, ws, attrs, kr = CONVS[case]
    r = rng(90 + len(case) + wz + (xt == np.int8))
    m = ws[0]
    feeds = {"x": _rand(r, xt, xs)}
    inits = {"w": _rand(r, wt, ws), "xz": np.array(_rand(r, xt, ())), "wz": np.full((m,), wz, wt)}
    acc = _conv_ref(feeds, inits, ["x", "w", "xz", "wz"], attrs)
    inits.update(_requant_inits(r, acc, xt, m))
    order = ["x", "xs", "xz", "w", "wsc", "wz", "ys", "yz", "b"]
    model = make_model([helper.make_node("QLinearConv", order, ["y"], **attrs)], feeds, ["y"],
                       inits, opset=10)
    got = _both(model, feeds, tmp_path, TARGET, form="qb")
    assert f"AMX tiles of {kr} channel groups" in _c_text(tmp_path)
    assert _amx_granted()
    np.testing.assert_array_equal(got, _qconv_ref({**feeds, **inits}, attrs))
    assert ((got > np.iinfo(xt).min) & (got < np.iinfo(xt).max)).mean() > 0.5
    np.testing.assert_array_equal(_no_amx(tmp_path, feeds), got)
    node = helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], **attrs)
    model = make_model([node], feeds, ["y"], {k: inits[k] for k in ("w", "xz", "wz")}, opset=10)
    np.testing.assert_array_equal(_both(model, feeds, tmp_path / "ci", TARGET, form="qb"), acc)


def test_conv_few_channel_groups_stay_on_vnni(tmp_path):
    """cin 9 (3 groups of 4: k tiles of 12 k) keeps the VNNI kernel."""
    assert qgemm_amx.conv_chunk(3) == 0 and qgemm_amx.conv_chunk(20) == 10
    r = rng(5)
    feeds = {"x": _rand(r, np.uint8, (1, 9, 8, 7))}
    inits = {"w": _rand(r, np.int8, (6, 9, 3, 3)), "xz": np.array(np.uint8(130)),
             "wz": np.zeros((6,), np.int8)}
    node = helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"])
    model = make_model([node], feeds, ["y"], inits, opset=10)
    got = _both(model, feeds, tmp_path, TARGET, form="qb")
    assert "AMX" not in _c_text(tmp_path)
    np.testing.assert_array_equal(got, _conv_ref(feeds, inits, ["x", "w", "xz", "wz"], {}))


@pytest.mark.parametrize("sa,sb,amx", [((70, 33), (33, 45), True), ((3, 17, 200), (200, 70), True),
                                       ((3, 64), (64, 32), True), ((2, 64), (64, 40), False)])
@pytest.mark.parametrize("ta", [np.uint8, np.int8])
def test_matmul_amx(sa, sb, amx, ta, tmp_path):
    model, feeds, inits, acc = quad_matmul(rng(sa[0] + sb[-1]), sa, sb, ta)
    got = _both(model, feeds, tmp_path, TARGET, form="qa")
    assert ("AMX tiles" in _c_text(tmp_path)) == amx
    np.testing.assert_array_equal(got, _qmm_ref({**feeds, **inits}))
    np.testing.assert_array_equal(_no_amx(tmp_path, feeds), got)
    node = helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])
    model = make_model([node], feeds, ["y"], {k: inits[k] for k in ("b", "az", "bz")}, opset=10)
    np.testing.assert_array_equal(_both(model, feeds, tmp_path / "mi", TARGET, form="qa"),
                                  acc.astype(np.int32))

