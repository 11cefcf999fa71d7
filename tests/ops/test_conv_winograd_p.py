"""Portable Winograd conv (kernels/winograd/portable.py) on the generic target against onnxruntime:
F(2x2,3x3) and F(4x4,3x3) forced on the x86 suite's awkward shapes (output sizes 1..9, odd
planes, C = 1, asymmetric pads, SAME_UPPER, batch 2, fused and scalar-pass activations, no
bias), several tile blocks and panels, planes narrower than a panel; the ``auto`` choice and
what it leaves on im2col; refused geometries; the target's ``conv_c`` switch; NaN/Inf."""
import numpy as np
import pytest

from aicc.kernels.winograd.portable import block_tiles
from tests.ops.test_conv_winograd import (BLOCKS, NARROW, P1, REFUSED, SHAPES, convs, refused,
                                          test_winograd_nan_inf)

T = "generic"
MARK = "portable Winograd"


@pytest.mark.parametrize("m", [2, 4])
def test_portable_winograd_shapes(m, tmp_path):
    convs(tmp_path, T, SHAPES + NARROW, sched={"algo": "winograd", "wino_m": m}, marker=MARK)


@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("kb", [1, 40])
def test_portable_winograd_blocks(kb, m, tmp_path):
    """wino_kb 1: blocks of 8 tiles (one panel: many blocks, the last one partial); 40: blocks
    of several panels. Batch 2 and a tile row that crosses panels in BLOCKS."""
    cases = BLOCKS + [((2, 24, 19, 23), (10, 24, 3, 3), P1, {"act": "Relu"})]
    convs(tmp_path, T, cases, sched={"algo": "winograd", "wino_m": m, "wino_kb": kb},
          marker=MARK)


def test_block_tiles():
    """A multiple of 8 within the V budget, at most all tiles rounded up to 8; large
    transformed weights take at least C K / (C + K) tiles per block."""
    assert block_tiles(256, 6, 64, 64, 196) == 24          # 36 * 64 * 4 B per tile
    assert block_tiles(256, 4, 512, 512, 16) == 16         # U 16 MiB: one block of all
    assert block_tiles(256, 4, 256, 256, 49) == 56
    assert block_tiles(1, 4, 16, 16, 100) == 8
    assert block_tiles(4096, 4, 8, 8, 5) == 8


def test_portable_winograd_auto(tmp_path):
    """auto: F(2,3) (as accurate as im2col; F(4,3) only when asked) on ResNet-style layers
    (ReLU'd activations, He-scaled weights, C up to 256) within the suite's tolerances; the
    same layers with F(4,3) asked for in the target's conv_c schedule."""
    layers = [((1, 64, 28, 28), (64, 64, 3, 3), P1, {"act": "Relu"}),
              ((1, 16, 32, 32), (16, 16, 3, 3), P1, {"act": "Relu", "scale": 3}),
              ((1, 8, 16, 16), (8, 8, 3, 3), P1, {}),
              ((1, 256, 12, 12), (256, 256, 3, 3), P1, {}),
              ((1, 128, 7, 7), (128, 128, 3, 3), P1, {"act": "Relu"}),
              ((1, 65, 14, 14), (64, 65, 3, 3), P1, {"act": "Relu"})]
    convs(tmp_path / "m2", T, layers, marker="portable Winograd F(2x2, 3x3)")
    convs(tmp_path / "m4", T, [layers[0], layers[2]], sched={"algo": "auto", "wino_m": 4},
          marker="portable Winograd F(4x4, 3x3)")


def test_portable_winograd_auto_skips(tmp_path):
    """auto keeps im2col / the plane kernels for stride 2, groups, 1x1, dilation, fewer than 8
    input or output channels, fewer than 16 F(2,3) tiles, run-time weights; and for every
    conv when the build YAML sets conv_c algo im2col."""
    cases = [((1, 16, 16, 16), (16, 16, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}, {}),
             ((1, 16, 16, 16), (16, 8, 3, 3), {"pads": [1, 1, 1, 1], "group": 2}, {}),
             ((1, 16, 16, 16), (16, 16, 1, 1), {}, {}),
             ((1, 16, 16, 16), (16, 16, 3, 3), {"pads": [2, 2, 2, 2], "dilations": [2, 2]}, {}),
             ((1, 4, 32, 32), (16, 4, 3, 3), P1, {}),
             ((1, 16, 32, 32), (4, 16, 3, 3), P1, {}),
             ((1, 64, 6, 6), (64, 64, 3, 3), P1, {}),            # 9 tiles
             ((1, 64, 1, 9), (64, 64, 3, 3), P1, {})]
    convs(tmp_path / "a", T, cases, marker=None, absent="Winograd")
    convs(tmp_path / "b", T, [((1, 32, 16, 16), (32, 32, 3, 3), P1, {})], runtime_w=True,
          marker=None, absent="Winograd")
    convs(tmp_path / "c", T, [((1, 32, 16, 16), (32, 32, 3, 3), P1, {})],
          sched={"algo": "im2col"}, marker="im2col", absent="Winograd")


@pytest.mark.parametrize("case", REFUSED)
def test_portable_winograd_forced_refused(case, tmp_path):
    x, w, attrs = refused(case)
    with pytest.raises(Exception, match="winograd"):
        convs(tmp_path, T, [(x, w, attrs, {})], sched={"algo": "winograd"},
              runtime_w=case == "runtime_w")


def test_portable_winograd_bad_tile(tmp_path):
    with pytest.raises(Exception, match="wino_m"):
        convs(tmp_path, T, SHAPES[:1], sched={"algo": "winograd", "wino_m": 3})


@pytest.mark.parametrize("m", [2, 4])
def test_portable_winograd_nan_inf(m, tmp_path):
    """The x86 suite's NaN/Inf check: non-finite where onnxruntime is, and only in the tiles
    whose patches hold a NaN / Inf input; all other outputs match."""
    test_winograd_nan_inf(m, T, tmp_path)


@pytest.mark.parametrize("algo", ["auto", "winograd"])
def test_portable_winograd_float64_stays_im2col(algo, tmp_path):
    """float64 convs keep the im2col GEMM whatever the schedule (float32 only, as the x86
    targets' conv schedules)."""
    import onnx
    from onnx import helper

    import aicc
    from tests.oracle import make_model, reference, rng
    r = rng(3)
    x = r.normal(size=(1, 16, 12, 12))
    w = r.normal(size=(16, 16, 3, 3)) / 12
    model = make_model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
                       {"x": x}, ["y"], {"w": w})
    onnx.save(model, tmp_path / "m.onnx")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"schedule:\n  conv_c: {{algo: {algo}}}\n")
    out = aicc.build(tmp_path / "m.onnx", target=T, out=tmp_path / "b", config=cfg)
    assert "Winograd" not in (out / "model.c").read_text()
    got = aicc.load(out).run({"x": x})["y"]
    np.testing.assert_allclose(got, reference(model, {"x": x})["y"], rtol=1e-10, atol=1e-12)
