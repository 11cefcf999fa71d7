"""Resize / Upsample and Pad: compiled C (data fed at run time) against onnxruntime."""
import numpy as np
import pytest
from onnx import helper

from aicc.errors import UnsupportedError
from tests.oracle import check_node, compile_and_run, make_model
from tests.ops.test_shape_ops import DTYPES, data, i64

E = np.array([], np.float32)
COORDS = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
          "tf_half_pixel_for_nn", "half_pixel_symmetric"]
SCALES = [[1, 1, 2, 3], [1, 1, 0.5, 0.25], [1, 1, 0.6, 1.7], [1, 1, 1.5, 0.5], [1, 1, 1, 2.5],
          [1, 1, 3, 1]]


def f32(*v):
    return np.array(v, np.float32)


def resize(x, tmp_path, opset=19, scales=None, sizes=None, atol=1e-5, **attrs):
    """Resize with scales or sizes as constants (roi empty; scales empty for opset 11)."""
    inits = {"roi": E}
    if scales is not None:
        inits["s"] = f32(*scales)
        order = ["x", "roi", "s"]
    else:
        inits["z"] = i64(*sizes)
        if opset < 13:
            inits["s"] = E
        order = ["x", "roi", "s" if opset < 13 else "", "z"]
    check_node("Resize", {"x": x}, tmp_path, attrs=attrs, initializers=inits,
               input_order=order, opset=opset, atol=atol)


@pytest.mark.parametrize("coord", COORDS)
@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("scales", SCALES)
def test_resize_scales(coord, mode, scales, tmp_path):
    x = data((2, 3, 5, 7), np.float32)
    resize(x, tmp_path, scales=scales, mode=mode, coordinate_transformation_mode=coord)


@pytest.mark.parametrize("coord", COORDS)
@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("sizes", [(2, 3, 9, 4), (2, 3, 1, 1), (2, 3, 5, 14), (2, 3, 13, 3)])
def test_resize_sizes(coord, mode, sizes, tmp_path):
    x = data((2, 3, 5, 7), np.float32)
    resize(x, tmp_path, sizes=sizes, mode=mode, coordinate_transformation_mode=coord)


@pytest.mark.parametrize("nm", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
@pytest.mark.parametrize("coord", ["half_pixel", "asymmetric", "align_corners"])
@pytest.mark.parametrize("sizes", [(1, 2, 10, 3), (1, 2, 15, 21), (1, 2, 2, 14)])
def test_resize_nearest_modes(nm, coord, sizes, tmp_path):
    """Sizes chosen so that many source coordinates land exactly on .5 ties."""
    x = data((1, 2, 5, 7), np.float32)
    resize(x, tmp_path, sizes=sizes, mode="nearest", nearest_mode=nm,
           coordinate_transformation_mode=coord)


@pytest.mark.parametrize("dt", [np.float32, np.int64, np.uint8, np.int32, np.float64])
def test_resize_nearest_dtypes(dt, tmp_path):
    resize(data((1, 2, 3, 4), dt), tmp_path, scales=[1, 1, 2, 1.5], mode="nearest")


@pytest.mark.parametrize("shape,scales", [((6,), [2.5]), ((4, 5), [0.5, 3]), ((2, 3, 4), [1, 2, 2]),
                                          ((1, 2, 3, 4, 5), [1, 1, 2, 0.5, 1.5]),
                                          ((2, 4, 5, 3), [1, 2, 0.6, 1])])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_ranks(shape, scales, mode, tmp_path):
    """1-D .. 5-D, trilinear, NHWC-style bilinear."""
    resize(data(shape, np.float32), tmp_path, scales=scales, mode=mode)


def test_resize_linear_double(tmp_path):
    resize(data((1, 1, 4, 5), np.float64), tmp_path, scales=[1, 1, 1.5, 2.5], mode="linear")


@pytest.mark.parametrize("opset", [11, 13])
def test_resize_opset11_13(opset, tmp_path):
    x = data((1, 3, 4, 6), np.float32)
    resize(x, tmp_path, opset=opset, scales=[1, 1, 2, 0.5], mode="linear",
           coordinate_transformation_mode="align_corners")
    resize(x, tmp_path, opset=opset, sizes=[1, 3, 7, 5], mode="nearest",
           coordinate_transformation_mode="asymmetric", nearest_mode="floor")


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("scales", [[1, 1, 2, 3], [1, 1, 0.5, 0.6], [1, 1, 1.5, 2.5]])
def test_resize_opset10(mode, scales, tmp_path):
    x = data((1, 2, 4, 5), np.float32)
    check_node("Resize", {"x": x}, tmp_path, attrs={"mode": mode},
               initializers={"s": f32(*scales)}, opset=10)


@pytest.mark.parametrize("policy", ["stretch", "not_larger", "not_smaller"])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_axes_policy(policy, mode, tmp_path):
    x = data((1, 3, 4, 6), np.float32)
    check_node("Resize", {"x": x}, tmp_path,
               attrs={"mode": mode, "axes": [2, 3], "keep_aspect_ratio_policy": policy},
               initializers={"z": i64(7, 9)}, input_order=["x", "", "", "z"], opset=18)
    check_node("Resize", {"x": x}, tmp_path, attrs={"mode": mode, "axes": [-1]},
               initializers={"s": f32(1.5)}, input_order=["x", "", "s"], opset=18)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_upsample(mode, tmp_path):
    x = data((1, 2, 3, 4), np.float32)
    check_node("Upsample", {"x": x}, tmp_path, attrs={"mode": mode, "scales": [1.0, 1.0, 2.0, 1.5]},
               opset=7)
    check_node("Upsample", {"x": x}, tmp_path, attrs={"mode": mode},
               initializers={"s": f32(1, 1, 3, 2)}, opset=9)


def test_resize_nan_propagates(tmp_path):
    x = data((1, 1, 3, 3), np.float32)
    x[0, 0, 1, 1] = np.nan
    resize(x, tmp_path, scales=[1, 1, 2, 2], mode="linear")
    resize(x, tmp_path, scales=[1, 1, 2, 2], mode="nearest")


@pytest.mark.parametrize("coord", COORDS)
@pytest.mark.parametrize("scales", SCALES)
def test_resize_cubic_scales(coord, scales, tmp_path):
    x = data((2, 3, 5, 7), np.float32)
    if coord in ("align_corners", "half_pixel_symmetric"):
        # cubic follows the ONNX reference (as the conformance cases); onnxruntime uses the
        # integer output length here, which differs when in * scale is fractional
        from onnx.reference import ReferenceEvaluator
        from tests.oracle import assert_close
        node = helper.make_node("Resize", ["x", "roi", "s"], ["y"], mode="cubic",
                                coordinate_transformation_mode=coord)
        model = make_model([node], {"x": x}, ["y"], {"roi": E, "s": f32(*scales)}, opset=19)
        want = {"y": ReferenceEvaluator(model).run(None, {"x": x})[0]}
        assert_close(compile_and_run(model, {"x": x}, tmp_path), want, atol=1e-4)
        return
    resize(x, tmp_path, scales=scales, mode="cubic", coordinate_transformation_mode=coord,
           atol=1e-4)


@pytest.mark.parametrize("a,excl", [(-0.5, 1), (-0.75, 1), (-0.6, 0)])
@pytest.mark.parametrize("sizes", [(2, 3, 9, 4), (2, 3, 1, 1), (2, 3, 5, 14), (2, 3, 13, 3)])
def test_resize_cubic_sizes_coeff(a, excl, sizes, tmp_path):
    x = data((2, 3, 5, 7), np.float32)
    resize(x, tmp_path, sizes=sizes, mode="cubic", cubic_coeff_a=a, exclude_outside=excl,
           atol=1e-4)


def test_resize_cubic_double_3d(tmp_path):
    resize(data((2, 4, 5), np.float64), tmp_path, scales=[1, 2.5, 0.6], mode="cubic")


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("sizes", [(1, 2, 3, 3), (1, 2, 2, 5), (1, 2, 7, 2), (1, 2, 12, 9)])
def test_resize_antialias(mode, sizes, tmp_path):
    x = data((1, 2, 12, 9), np.float32)
    resize(x, tmp_path, sizes=sizes, mode=mode, antialias=1, atol=1e-4)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("roi,ev", [((0, 0, 0.4, 0.6, 1, 1, 0.6, 0.8), 0.0),
                                    ((0, 0, 0.4, 0.6, 1, 1, 1.2, 1.7), 10.0),
                                    ((0, 0, -0.3, 0.1, 1, 1, 0.9, 0.2), -2.5)])
@pytest.mark.parametrize("sizes", [(1, 2, 3, 3), (1, 2, 1, 6)])
def test_resize_tf_crop_and_resize(mode, roi, ev, sizes, tmp_path):
    x = data((1, 2, 4, 5), np.float32)
    check_node("Resize", {"x": x}, tmp_path, initializers={"roi": f32(*roi), "z": i64(*sizes)},
               input_order=["x", "roi", "", "z"], opset=19, atol=1e-4,
               attrs={"mode": mode, "coordinate_transformation_mode": "tf_crop_and_resize",
                      "extrapolation_value": ev})


def test_resize_tf_crop_and_resize_axes_runtime_roi(tmp_path):
    x = data((1, 2, 4, 5), np.float32)
    roi = f32(0.6, 0.4, 0.8, 0.6)
    node = helper.make_node("Resize", ["x", "roi", "", "z"], ["y"], axes=[3, 2], mode="linear",
                            coordinate_transformation_mode="tf_crop_and_resize")
    model = make_model([node], {"x": x, "roi": roi}, ["y"], {"z": i64(3, 3)}, opset=19)
    from tests.oracle import check
    check(model, {"x": x, "roi": roi}, tmp_path)


@pytest.mark.parametrize("attrs,why", [({"mode": "nearest",
                                         "coordinate_transformation_mode": "tf_crop_and_resize"},
                                        "tf_crop_and_resize with mode nearest")])
def test_resize_unsupported(attrs, why, tmp_path):
    _unsupported(data((1, 1, 3, 3), np.float32), attrs, why, tmp_path)


def test_resize_cubic_int_unsupported(tmp_path):
    _unsupported(data((1, 1, 3, 3), np.uint8), {"mode": "cubic"}, "float", tmp_path)


def test_resize_linear_int_unsupported(tmp_path):
    _unsupported(data((1, 1, 3, 3), np.uint8), {"mode": "linear"}, "float", tmp_path)


def _unsupported(x, attrs, why, tmp_path):
    node = helper.make_node("Resize", ["x", "roi", "s"], ["y"], **attrs)
    model = make_model([node], {"x": x}, ["y"], {"roi": f32(0, 0, 0, 0, 1, 1, 1, 1),
                                                 "s": f32(1, 1, 2, 2)}, opset=19)
    with pytest.raises(UnsupportedError, match=why):
        compile_and_run(model, {"x": x}, tmp_path)


# -- Pad ----------------------------------------------------------------------------------------

PADS = [[0, 1, 2, 3, 1, 0, 1, 2], [1, 1, 1, 1, 1, 1, 1, 1], [0, 0, 0, 2, 0, 0, 0, 0],
        [2, 0, 0, 0, 0, 3, 0, 0], [0, 0, 3, 0, 0, 0, 0, 4]]


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("pads", PADS)
def test_pad_modes(mode, pads, tmp_path):
    x = data((3, 4, 5, 6), np.float32)
    check_node("Pad", {"x": x}, tmp_path, attrs={"mode": mode}, initializers={"p": i64(*pads)},
               opset=19)


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "wrap"])
@pytest.mark.parametrize("pads", [[0, -1, 1, -2, 1, 0, -1, 2], [-1, 0, 0, -2, 0, -1, 0, 1]])
def test_pad_negative(mode, pads, tmp_path):
    """Negative pads crop (first, as onnxruntime does)."""
    x = data((3, 4, 5, 6), np.float32)
    check_node("Pad", {"x": x}, tmp_path, attrs={"mode": mode}, initializers={"p": i64(*pads)},
               opset=19)


@pytest.mark.parametrize("dt", DTYPES + [np.int8, np.float64])
@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_dtypes(dt, mode, tmp_path):
    x = data((3, 5), dt)
    v = np.array(True if dt == np.bool_ else 7, dt)
    check_node("Pad", {"x": x}, tmp_path, attrs={"mode": mode},
               initializers={"p": i64(1, 2, 2, 1), "v": v}, opset=18)


def test_pad_constant_value_and_axes(tmp_path):
    x = data((2, 3, 4), np.float32)
    check_node("Pad", {"x": x}, tmp_path, initializers={"p": i64(1, 2, 2, 1), "v": f32(-2.5),
                                                       "a": i64(-1, 0)}, opset=18)
    check_node("Pad", {"x": x}, tmp_path, initializers={"p": i64(0, 1, 0, 0, 1, 0)}, opset=11)
    check_node("Pad", {"x": x}, tmp_path, initializers={"p": i64(2, 0, 1, 0), "v": f32(np.nan),
                                                       "a": i64(1, 2)}, opset=18)


def test_pad_float16(tmp_path):
    x = data((3, 4), np.float16)
    check_node("Pad", {"x": x}, tmp_path, initializers={"p": i64(1, 0, 2, 3),
                                                       "v": np.array(-1.5, np.float16)}, opset=13)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_opset2_attrs(mode, tmp_path):
    x = data((2, 3, 4), np.float32)
    check_node("Pad", {"x": x}, tmp_path, attrs={"mode": mode, "pads": [0, 1, 2, 0, 1, 1],
                                                 "value": 1.5}, opset=7)


@pytest.mark.parametrize("shape,pads", [((5,), [2, 3]), ((1, 1), [1, 0, 0, 1]),
                                        ((4, 1, 3), [0, 2, 0, 0, 3, 0])])
@pytest.mark.parametrize("mode", ["constant", "edge"])
def test_pad_shapes(shape, pads, mode, tmp_path):
    check_node("Pad", {"x": data(shape, np.int64)}, tmp_path, attrs={"mode": mode},
               initializers={"p": i64(*pads)}, opset=13)


@pytest.mark.parametrize("mode", ["reflect", "wrap", "edge"])
def test_pad_wider_than_input(mode, tmp_path):
    """aicc's documented extension (onnxruntime refuses wide reflect pads): numpy.pad semantics."""
    x = data((2, 3), np.float32)
    node = helper.make_node("Pad", ["x", "p"], ["y"], mode=mode)
    model = make_model([node], {"x": x}, ["y"], {"p": i64(3, 5, 4, 7)}, opset=19)
    got = compile_and_run(model, {"x": x}, tmp_path)["y"]
    np.testing.assert_array_equal(got, np.pad(x, ((3, 4), (5, 7)), mode=mode))


def test_resize_antialias_too_wide_unsupported(tmp_path):
    x = data((1, 1, 2, 200), np.float32)
    node = helper.make_node("Resize", ["x", "", "", "z"], ["y"], mode="cubic", antialias=1)
    model = make_model([node], {"x": x}, ["y"], {"z": i64(1, 1, 2, 2)}, opset=19)
    with pytest.raises(UnsupportedError, match="64 taps"):
        compile_and_run(model, {"x": x}, tmp_path)
