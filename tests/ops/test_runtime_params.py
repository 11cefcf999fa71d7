"""Data-movement ops whose "parameter" inputs (shape, axes, starts/ends/steps, pads,
constant_value, repeats, split, scales, sizes) are graph inputs fed at run time. The output
shape is declared in the model (as the ONNX conformance cases do); the compiled C reads the
parameters at run time (Slice, Pad, Resize) or derives everything from the static shapes
(Reshape, Squeeze, Unsqueeze, Expand, Tile, Split)."""
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

import aicc
from aicc.errors import UnsupportedError
from tests.oracle import STRICT_CFLAGS, check, compile_and_run, make_model, reference
from tests.ops.test_gather_slice import BIG, SLICES
from tests.ops.test_shape_ops import data, i64


def f32(*v):
    return np.array(v, np.float32)


def declared(op, inputs, attrs=None, opset=18, order=None, n_out=1):
    """One-node model, every input a graph input, output shapes declared from the reference."""
    names = order or list(inputs)
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, **(attrs or {}))
    want = reference(make_model([node], inputs, outs, opset=opset), inputs)
    types = {o: (want[o].dtype, list(want[o].shape)) for o in outs}
    return make_model([node], inputs, outs, opset=opset, output_types=types)


def bundle(model, tmp_path, name="b"):
    """Build and load a model once (to run it on several inputs)."""
    p = Path(tmp_path) / f"{name}.onnx"
    onnx.save(model, str(p))
    return aicc.load(aicc.build(p, out=Path(tmp_path) / name), cflags=STRICT_CFLAGS)


def run(op, inputs, tmp_path, attrs=None, opset=18, order=None, n_out=1):
    model = declared(op, inputs, attrs, opset, order, n_out)
    return check(model, inputs, tmp_path)


# -- shape-only ops: the parameter is never read ---------------------------------------------

@pytest.mark.parametrize("shape,target", [((2, 3, 4), (4, 2, 3)), ((2, 3, 4), (2, -1)),
                                          ((2, 3, 4), (0, 12)), ((6,), (1, 1, 6, 1))])
def test_reshape_runtime_shape(shape, target, tmp_path):
    run("Reshape", {"x": data(shape, np.float32), "s": i64(*target)}, tmp_path)


@pytest.mark.parametrize("axes", [[0], [-1], [0, 3]])
def test_squeeze_unsqueeze_runtime_axes(axes, tmp_path):
    run("Squeeze", {"x": data((1, 3, 2, 1), np.int64), "a": i64(*axes)}, tmp_path, opset=13)
    run("Unsqueeze", {"x": data((3, 2), np.uint8), "a": i64(*axes)}, tmp_path, opset=13)


@pytest.mark.parametrize("shape,target", [((3, 1), (2, 1, 6)), ((1,), (4,)), ((2, 3), (1, 1))])
def test_expand_runtime_shape(shape, target, tmp_path):
    run("Expand", {"x": data(shape, np.float32), "s": i64(*target)}, tmp_path)


@pytest.mark.parametrize("dt", [np.float32, np.bool_])
def test_tile_runtime_repeats(dt, tmp_path):
    run("Tile", {"x": data((2, 3, 1), dt), "r": i64(3, 1, 4)}, tmp_path)


@pytest.mark.parametrize("opset", [13, 18])
def test_split_runtime_split(opset, tmp_path):
    run("Split", {"x": data((2, 7), np.float32), "s": i64(2, 0, 5)}, tmp_path,
        attrs={"axis": 1}, opset=opset, n_out=3)


# -- Slice: parameters read in C ---------------------------------------------------------------

@pytest.mark.parametrize("starts,ends,axes,steps", SLICES)
def test_slice_runtime(starts, ends, axes, steps, tmp_path):
    ins = {"x": data((4, 5, 6), np.float32), "s": i64(*starts), "e": i64(*ends)}
    if axes is not None or steps is not None:
        ins["a"] = i64(*(axes if axes is not None else range(len(starts))))
    if steps is not None:
        ins["t"] = i64(*steps)
    run("Slice", ins, tmp_path)


def test_slice_runtime_mixed_and_int32(tmp_path):
    x = data((4, 5), np.int32)
    s, e = np.array([3, 0], np.int32), np.array([0, 5], np.int32)
    a, t = np.array([0, -1], np.int32), np.array([-1, 2], np.int32)
    run("Slice", {"x": x, "s": s, "e": e, "a": a, "t": t}, tmp_path)
    # only ends fed at run time; the others are constants
    node = helper.make_node("Slice", ["x", "s", "e", "a", "t"], ["y0"])
    model = make_model([node], {"x": x, "e": e}, ["y0"], {"s": s, "a": a, "t": t},
                       output_types={"y0": (np.int32, [3, 3])})
    check(model, {"x": x, "e": e}, tmp_path)


def test_slice_runtime_disagreeing_values_are_safe(tmp_path):
    """Compiled for a [2, 3] output; run with parameters selecting less (zeros fill the rest),
    more (cut to the static shape), a bad axis (ignored) and a step of 0 (taken as 1)."""
    x = data((4, 5), np.float32)
    ins = {"x": x, "s": i64(1, 1), "e": i64(3, 4), "a": i64(0, 1), "t": i64(1, 1)}
    b = bundle(declared("Slice", ins), tmp_path)
    np.testing.assert_array_equal(b.run(ins)["y0"], x[1:3, 1:4])
    less = b.run({**ins, "s": i64(2, 3), "e": i64(3, BIG)})["y0"]
    np.testing.assert_array_equal(less, [[x[2, 3], x[2, 4], 0], [0, 0, 0]])
    more = b.run({**ins, "s": i64(0, 0), "e": i64(BIG, BIG)})["y0"]
    np.testing.assert_array_equal(more, x[:2, :3])
    bad = b.run({**ins, "a": i64(7, 1), "t": i64(0, 0)})["y0"]
    np.testing.assert_array_equal(bad, x[:2, 1:4])


# -- Pad: pads / constant_value / axes read in C ------------------------------------------------

PADS = [[0, 1, 2, 0, 1, 0], [1, 1, 1, 1, 1, 1], [0, -1, 2, 1, 0, -2], [-1, 0, 0, 0, 2, -1]]


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("pads", PADS)
def test_pad_runtime_pads(mode, pads, tmp_path):
    ins = {"x": data((3, 4, 5), np.float32), "p": i64(*pads)}
    if mode == "constant":
        ins["v"] = f32(-1.5)[0:1].reshape(())
    run("Pad", ins, tmp_path, attrs={"mode": mode})


@pytest.mark.parametrize("dt", [np.float32, np.int64, np.uint8, np.bool_, np.float16])
def test_pad_runtime_value_only(dt, tmp_path):
    """Constant pads, run-time constant_value (the Attention expansions' form)."""
    x = data((2, 3), dt)
    v = np.array(True if dt == np.bool_ else 7, dt)
    node = helper.make_node("Pad", ["x", "p", "v"], ["y0"])
    model = make_model([node], {"x": x, "v": v}, ["y0"], {"p": i64(1, 0, 2, 3)}, opset=18)
    check(model, {"x": x, "v": v}, tmp_path)


@pytest.mark.parametrize("axes", [[1], [-1, 0], [2, 0]])
def test_pad_runtime_axes(axes, tmp_path):
    k = len(axes)
    pads = [1, 2, 0, 3][:k] + [2, 0, 1, 1][:k]
    ins = {"x": data((2, 3, 4), np.float32), "p": i64(*pads), "v": f32(3.0).reshape(()),
           "a": i64(*axes)}
    run("Pad", ins, tmp_path)
    run("Pad", ins, tmp_path, attrs={"mode": "edge"})


def test_pad_runtime_disagreeing_values_are_safe(tmp_path):
    x = data((3, 4), np.float32)
    ins = {"x": x, "p": i64(1, 1, 1, 1)}
    b = bundle(declared("Pad", ins, attrs={"mode": "reflect"}), tmp_path)
    np.testing.assert_array_equal(b.run(ins)["y0"], np.pad(x, 1, mode="reflect"))
    for pads in ([2 ** 62, -2 ** 62, 0, 5], [-7, -7, 100, -100], [0, 0, 0, 0]):
        got = b.run({**ins, "p": i64(*pads)})["y0"]
        assert got.shape == (5, 6)                      # anything, but no crash


# -- Resize / Upsample: scales read in C --------------------------------------------------------

COORDS = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
          "tf_half_pixel_for_nn", "half_pixel_symmetric"]


@pytest.mark.parametrize("coord", COORDS)
@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("scales", [[1, 1, 2, 3], [1, 1, 0.5, 0.25], [1, 1, 0.6, 2.0],
                                    [1, 1, 1, 2.5]])
def test_resize_runtime_scales(coord, mode, scales, tmp_path):
    ins = {"x": data((2, 3, 5, 8), np.float32), "s": f32(*scales)}
    run("Resize", ins, tmp_path, attrs={"mode": mode, "coordinate_transformation_mode": coord},
        order=["x", "", "s"])


@pytest.mark.parametrize("nm", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
def test_resize_runtime_nearest_modes(nm, tmp_path):
    ins = {"x": data((1, 2, 4, 6), np.float32), "s": f32(1, 1, 1.75, 0.7)}
    run("Resize", ins, tmp_path, attrs={"nearest_mode": nm}, order=["x", "", "s"])


def test_resize_runtime_scales_not_one_on_unchanged_dim(tmp_path):
    """Scale 1.2 on a dim of 2 keeps its size (floor(2.4) = 2) but is not identity."""
    ins = {"x": data((2, 2, 3), np.float32), "s": f32(1, 1.2, 2)}
    run("Resize", ins, tmp_path, attrs={"mode": "linear"}, order=["x", "", "s"])
    run("Resize", ins, tmp_path, attrs={"mode": "nearest"}, order=["x", "", "s"])


@pytest.mark.parametrize("policy", ["not_larger", "not_smaller"])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_runtime_sizes_policy(policy, mode, tmp_path):
    ins = {"x": data((1, 3, 4, 6), np.float32), "z": i64(7, 9)}
    run("Resize", ins, tmp_path, attrs={"mode": mode, "axes": [2, 3],
                                        "keep_aspect_ratio_policy": policy},
        order=["x", "", "", "z"])


def test_resize_runtime_axes_and_double(tmp_path):
    ins = {"x": data((2, 5, 3), np.float64), "s": f32(1.6)}
    run("Resize", ins, tmp_path, attrs={"mode": "linear", "axes": [1]}, order=["x", "", "s"])


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_upsample_and_resize10_runtime_scales(mode, tmp_path):
    ins = {"x": data((1, 2, 3, 4), np.float32), "s": f32(1, 1, 2, 1.5)}
    run("Upsample", ins, tmp_path, attrs={"mode": mode}, opset=9)
    run("Resize", ins, tmp_path, attrs={"mode": mode}, opset=10)


def test_resize_runtime_linear_5_axes_rejected(tmp_path):
    ins = {"x": data((1, 1, 2, 2, 2), np.float32), "s": f32(1, 1, 2, 2, 2)}
    model = declared("Resize", ins, attrs={"mode": "linear"}, order=["x", "", "s"])
    with pytest.raises(UnsupportedError, match="run-time scales over 5 axes"):
        compile_and_run(model, ins, tmp_path)


# -- a declared output shape that cannot be right is refused, never read out of bounds ----------

@pytest.mark.parametrize("op,ins,shape,why", [
    ("Reshape", {"x": data((2, 3), np.float32), "s": i64(4, 2)}, [4, 2], "does not hold"),
    ("Tile", {"x": data((2, 3), np.float32), "r": i64(2, 1)}, [5, 3], "not a tiling"),
])
def test_inconsistent_declared_shape_rejected(op, ins, shape, why, tmp_path):
    node = helper.make_node(op, list(ins), ["y0"])
    model = make_model([node], ins, ["y0"], opset=18, output_types={"y0": (np.float32, shape)})
    with pytest.raises(UnsupportedError, match=why):
        compile_and_run(model, ins, tmp_path)


def test_inconsistent_split_rejected(tmp_path):
    """(onnx shape inference itself catches bad declared Expand and OneHot shapes)"""
    ins = {"x": data((2, 6), np.float32), "s": i64(2, 4)}
    node = helper.make_node("Split", ["x", "s"], ["y0", "y1"], axis=1)
    model = make_model([node], ins, ["y0", "y1"], opset=18,
                       output_types={"y0": (np.float32, [3, 2]), "y1": (np.float32, [2, 4])})
    with pytest.raises(UnsupportedError, match="do not split"):
        compile_and_run(model, ins, tmp_path)


@pytest.mark.parametrize("coord", ["half_pixel", "pytorch_half_pixel", "asymmetric"])
@pytest.mark.parametrize("scales", [[1, 1, 2, 3], [1, 1, 0.5, 0.25], [1, 1, 0.6, 2.0],
                                    [1, 1, 1, 2.5]])
def test_resize_runtime_scales_cubic(coord, scales, tmp_path):
    ins = {"x": data((2, 3, 5, 8), np.float32), "s": f32(*scales)}
    run("Resize", ins, tmp_path, attrs={"mode": "cubic", "coordinate_transformation_mode": coord},
        order=["x", "", "s"])


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_resize_runtime_scales_antialias(mode, tmp_path):
    ins = {"x": data((1, 2, 9, 12), np.float32), "s": f32(1, 1, 0.6, 0.3)}
    run("Resize", ins, tmp_path, attrs={"mode": mode, "antialias": 1}, order=["x", "", "s"])


def test_resize_runtime_roi_crop(tmp_path):
    ins = {"x": data((1, 2, 4, 5), np.float32), "r": f32(0, 0, 0.4, -0.2, 1, 1, 1.2, 0.7),
           "s": f32(1, 1, 0.75, 1.4)}  # in * scale whole: onnxruntime and the reference agree
    run("Resize", ins, tmp_path, attrs={"mode": "linear", "extrapolation_value": 3.5,
                                        "coordinate_transformation_mode": "tf_crop_and_resize"},
        order=["x", "r", "s"])
