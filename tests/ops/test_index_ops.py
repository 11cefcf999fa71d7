"""Indexing / rearranging ops: SpaceToDepth, DepthToSpace, Trilu, OneHot, ScatterND,
ScatterElements, Scatter, TensorScatter, EyeLike, ReverseSequence, CenterCropPad, and the
data-dependent NonZero / Compress / Unique. Compiled C against onnxruntime (onnx.reference
where onnxruntime lacks the op or the opset)."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from aicc.errors import UnsupportedError
from tests.oracle import check, check_node, compile_and_run, make_model
from tests.ops.test_runtime_params import declared
from tests.ops.test_shape_ops import data, i64

DTYPES = [np.float32, np.int64, np.uint8, np.bool_]


# -- SpaceToDepth / DepthToSpace ----------------------------------------------------------------

@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape,b", [((1, 2, 4, 6), 2), ((2, 3, 6, 9), 3), ((1, 1, 5, 5), 1),
                                     ((2, 2, 8, 4), 4)])
def test_space_to_depth(dt, shape, b, tmp_path):
    check_node("SpaceToDepth", {"x": data(shape, dt)}, tmp_path, attrs={"blocksize": b},
               opset=13)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape,b", [((1, 8, 2, 3), 2), ((2, 18, 3, 1), 3), ((1, 4, 1, 1), 2),
                                     ((1, 5, 3, 3), 1)])
def test_depth_to_space(mode, dt, shape, b, tmp_path):
    check_node("DepthToSpace", {"x": data(shape, dt)}, tmp_path,
               attrs={"blocksize": b, "mode": mode}, opset=13)


def test_space_to_depth_crd_opset28(tmp_path):
    """The mode attribute of SpaceToDepth is newer than onnxruntime's opsets: onnx.reference."""
    for mode in ("DCR", "CRD"):
        check_node("SpaceToDepth", {"x": data((2, 3, 4, 6), np.float32)}, tmp_path,
                   attrs={"blocksize": 2, "mode": mode}, opset=28)


def test_depth_space_bad_blocksize(tmp_path):
    node = helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=2)
    x = data((1, 6, 2, 2), np.float32)
    model = make_model([node], {"x": x}, ["y"], opset=13,
                       output_types={"y": (np.float32, [1, 1, 4, 4])})
    with pytest.raises(UnsupportedError, match="not divisible by blocksize"):
        compile_and_run(model, {"x": x}, tmp_path)


# -- Trilu ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, 0, 1, -2, 7, -9, 2 ** 62])
@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 3), (5, 1), (1, 4)])
def test_trilu_constant_k(upper, k, shape, tmp_path):
    x = data(shape, np.float32)
    if k is None:
        check_node("Trilu", {"x": x}, tmp_path, attrs={"upper": upper}, opset=14)
    else:
        check_node("Trilu", {"x": x}, tmp_path, attrs={"upper": upper},
                   initializers={"k": i64(k).reshape(())}, opset=14)


@pytest.mark.parametrize("dt", DTYPES + [np.float16, np.int8])
@pytest.mark.parametrize("upper", [0, 1])
def test_trilu_runtime_k(dt, upper, tmp_path):
    x = data((2, 4, 3), dt)
    for k in (-1, 0, 2):
        check_node("Trilu", {"x": x, "k": i64(k).reshape(())}, tmp_path,
                   attrs={"upper": upper}, opset=14)


def test_trilu_nan_and_empty(tmp_path):
    x = np.full((3, 3), np.nan, np.float32)
    check_node("Trilu", {"x": x}, tmp_path, opset=14)
    check_node("Trilu", {"x": np.zeros((0, 3), np.float32)}, tmp_path, opset=14)


# -- OneHot ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("axis", [-1, 0, 1, -2])
@pytest.mark.parametrize("idt", [np.int64, np.int32, np.float32, np.uint8])
def test_onehot(axis, idt, tmp_path):
    ind = np.array([[0, 3, 1], [2, 4, 0]]).astype(idt)
    if idt != np.uint8:
        ind[1, 1] = -1
    check_node("OneHot", {"i": ind, "v": np.array([-2.0, 5.5], np.float32)}, tmp_path,
               attrs={"axis": axis}, initializers={"d": np.array(5, np.int64)},
               input_order=["i", "d", "v"], opset=11)


def test_onehot_out_of_range_and_float_indices(tmp_path):
    ind = np.array([-6, -5, 5, 9, 2.7, -0.5, np.nan, np.inf, -np.inf, -5.9], np.float32)
    got = compile_and_run(make_model(
        [helper.make_node("OneHot", ["i", "d", "v"], ["y"])], {"i": ind},
        ["y"], {"d": np.array(5, np.int64), "v": np.array([0, 1], np.int32)}, opset=11),
        {"i": ind}, tmp_path)["y"]
    want = np.zeros((10, 5), np.int32)
    for r, j in ((1, 0), (4, 2), (5, 0), (9, 0)):          # -5 -> 0, 2.7 -> 2, -0.5 -> 0, -5.9 -> 0
        want[r, j] = 1
    np.testing.assert_array_equal(got, want)


def test_onehot_runtime_depth_declared(tmp_path):
    ins = {"i": np.array([1, 0, 3], np.int64), "d": np.array(4.0, np.float32),
           "v": np.array([0, 7], np.int64)}
    check(declared("OneHot", ins, order=["i", "d", "v"], opset=11), ins, tmp_path)


# -- ScatterND / ScatterElements / Scatter --------------------------------------------------------

REDS = ["none", "add", "mul", "max", "min"]


@pytest.mark.parametrize("red", REDS)
@pytest.mark.parametrize("dt", [np.float32, np.int32, np.int64, np.float64])
@pytest.mark.parametrize("dshape,ind", [((4, 4, 4), [[0], [2]]), ((4, 5), [[1, 2], [3, 0], [0, 4]]),
                                        ((6,), [[5], [1], [-2]]), ((3, 4, 2), [[[1, 2]], [[-1, 0]]])])
def test_scatter_nd(red, dt, dshape, ind, tmp_path):
    ind = np.array(ind, np.int64)
    k = ind.shape[-1]
    upd = data(ind.shape[:-1] + dshape[k:], dt, seed=1)
    check_node("ScatterND", {"x": data(dshape, dt), "i": ind, "u": upd}, tmp_path,
               attrs={"reduction": red}, opset=18)


def test_scatter_nd_duplicates_and_out_of_range(tmp_path):
    x = data((5,), np.float32)
    ind = np.array([[1], [1], [7], [-6], [3]], np.int64)
    u = np.array([1, 2, 100, 200, 4], np.float32)
    node = helper.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction="add")
    ins = {"x": x, "i": ind, "u": u}
    got = compile_and_run(make_model([node], ins, ["y"], opset=18), ins, tmp_path)["y"]
    want = x.copy()
    want[1] += 3
    want[3] += 4                                    # 7 and -6 are out of range: skipped
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_scatter_nd_bool_and_int8_wrap(tmp_path):
    xb = np.array([True, False, False, True])
    for red in ("none", "max", "min"):
        check_node("ScatterND", {"x": xb, "i": np.array([[1], [3]], np.int64),
                                 "u": np.array([True, False])}, tmp_path,
                   attrs={"reduction": red}, opset=18)
    x8 = np.array([100, -100, 5], np.int8)
    node = helper.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction="add")
    ins = {"x": x8, "i": np.array([[0], [1]], np.int64), "u": np.array([100, -100], np.int8)}
    got = compile_and_run(make_model([node], ins, ["y"], opset=18), ins, tmp_path)["y"]
    np.testing.assert_array_equal(got, np.array([-56, 56, 5], np.int8))


@pytest.mark.parametrize("red", REDS)
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("idt", [np.int64, np.int32])
def test_scatter_elements(red, axis, idt, tmp_path):
    x = data((3, 5), np.float32)
    ind = np.array([[0, 2, 1], [2, -1, 0]], idt)
    check_node("ScatterElements", {"x": x, "i": ind, "u": data((2, 3), np.float32, seed=2)},
               tmp_path, attrs={"axis": axis, "reduction": red}, opset=18)


def test_scatter_elements_3d_int_and_out_of_range(tmp_path):
    x = data((2, 3, 4), np.int64)
    ind = np.array([[[3, 0], [1, 1]], [[0, 2], [-4, 3]]], np.int64)
    check_node("ScatterElements", {"x": x, "i": ind, "u": data((2, 2, 2), np.int64, seed=3)},
               tmp_path, attrs={"axis": 2, "reduction": "mul"}, opset=18)
    ins = {"x": np.zeros((2, 2), np.float32), "i": np.array([[5, 1]], np.int64),
           "u": np.array([[1, 2]], np.float32)}
    node = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1)
    got = compile_and_run(make_model([node], ins, ["y"], opset=18), ins, tmp_path)["y"]
    np.testing.assert_array_equal(got, [[0, 2], [0, 0]])


def test_scatter_deprecated(tmp_path):
    x = data((3, 3), np.float32)
    check_node("Scatter", {"x": x, "i": np.array([[1, 0, 2], [0, 2, 1]], np.int64),
                           "u": data((2, 3), np.float32, seed=4)}, tmp_path, opset=9)
    check_node("Scatter", {"x": x, "i": np.array([[1, 0]], np.int64),
                           "u": data((1, 2), np.float32, seed=4)}, tmp_path,
               attrs={"axis": 1}, opset=10)


def test_scatter_float16_reduction_rejected(tmp_path):
    ins = {"x": np.zeros(3, np.float16), "i": np.array([[0]], np.int64),
           "u": np.ones(1, np.float16)}
    node = helper.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction="add")
    with pytest.raises(UnsupportedError, match="reduction add on float16"):
        compile_and_run(make_model([node], ins, ["y"], opset=18), ins, tmp_path)
    check_node("ScatterND", ins, tmp_path, opset=18)          # plain writes move bits


# -- TensorScatter ----------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["linear", "circular"])
@pytest.mark.parametrize("axis", [-2, 2, 1])
def test_tensor_scatter(mode, axis, tmp_path):
    cache = data((2, 3, 5, 4), np.float32)
    ushape = list(cache.shape)
    ushape[axis] = 2
    upd = data(tuple(ushape), np.float32, seed=5)
    idx = np.array([1, 3 if mode == "circular" or axis == 1 else 3], np.int64)
    if axis == 1:
        idx = np.array([1, 0], np.int64)
    check_node("TensorScatter", {"c": cache, "u": upd, "w": idx}, tmp_path,
               attrs={"mode": mode, "axis": axis}, opset=24)
    check_node("TensorScatter", {"c": cache, "u": upd}, tmp_path,
               attrs={"mode": mode, "axis": axis}, opset=24)


def test_tensor_scatter_out_of_range_skipped(tmp_path):
    cache = np.zeros((2, 4, 1), np.float32)
    upd = np.ones((2, 2, 1), np.float32)
    ins = {"c": cache, "u": upd, "w": np.array([3, -1], np.int64)}
    node = helper.make_node("TensorScatter", ["c", "u", "w"], ["y"], axis=1)
    got = compile_and_run(make_model([node], ins, ["y"], opset=24), ins, tmp_path)["y"]
    want = cache.copy()
    want[0, 3] = 1                                   # row 4 and both rows of batch 1 skipped
    np.testing.assert_array_equal(got, want)


# -- EyeLike / ReverseSequence / CenterCropPad -------------------------------------------------------

@pytest.mark.parametrize("k", [0, 1, -1, 3, -5, 9])
@pytest.mark.parametrize("dtype", [None, TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.BOOL,
                                   TensorProto.INT8, TensorProto.UINT64])
def test_eyelike(k, dtype, tmp_path):
    attrs = {"k": k} if dtype is None else {"k": k, "dtype": dtype}
    check_node("EyeLike", {"x": data((4, 6), np.int32)}, tmp_path, attrs=attrs, opset=9)
    check_node("EyeLike", {"x": data((5, 3), np.float32)}, tmp_path, attrs=attrs, opset=9)


@pytest.mark.parametrize("axes", [(0, 1), (1, 0)])
@pytest.mark.parametrize("dt", [np.float32, np.int64, np.bool_])
def test_reverse_sequence(axes, dt, tmp_path):
    ta, ba = axes
    x = data((5, 4, 3) if ta == 0 else (4, 5, 3), dt)
    check_node("ReverseSequence", {"x": x, "l": np.array([5, 1, 0 + 2, 4], np.int64)}, tmp_path,
               attrs={"time_axis": ta, "batch_axis": ba}, opset=10)
    check_node("ReverseSequence", {"x": x[..., 0], "l": np.array([3, 5, 1, 2], np.int64)},
               tmp_path, attrs={"time_axis": ta, "batch_axis": ba}, opset=10)


def test_reverse_sequence_lengths_clamped(tmp_path):
    x = data((4, 2), np.float32)
    ins = {"x": x, "l": np.array([-3, 99], np.int64)}
    node = helper.make_node("ReverseSequence", ["x", "l"], ["y"], time_axis=0, batch_axis=1)
    got = compile_and_run(make_model([node], ins, ["y"], opset=10), ins, tmp_path)["y"]
    np.testing.assert_array_equal(got, np.stack([x[:, 0], x[::-1, 1]], axis=1))


@pytest.mark.parametrize("shape,target,axes", [((20, 10, 3), (10, 7, 3), None),
                                               ((6, 4, 3), (9, 5), [0, 1]),
                                               ((5, 8, 3), (8, 3), [0, 1]),
                                               ((3, 5, 7), (4, 2), [-1, 0])])
def test_center_crop_pad(shape, target, axes, tmp_path):
    attrs = {} if axes is None else {"axes": axes}
    x = data(shape, np.float32)
    check_node("CenterCropPad", {"x": x}, tmp_path, attrs=attrs,
               initializers={"s": i64(*target)}, opset=18)
    ins = {"x": x, "s": i64(*target)}
    check(declared("CenterCropPad", ins, attrs=attrs, opset=18), ins, tmp_path)


# -- NonZero / Compress / Unique ---------------------------------------------------------------------

def test_nonzero_declared_count(tmp_path):
    for x in (np.array([[1, 0], [1, 1]], np.bool_), np.array([0, -0.0, np.nan, 2], np.float32),
              data((3, 4, 2), np.int32) % 3):
        check(declared("NonZero", {"x": x}, opset=13), {"x": x}, tmp_path)


def test_nonzero_count_mismatch_fills_minus_one(tmp_path):
    x = np.array([[1, 0], [0, 1]], np.float32)
    node = helper.make_node("NonZero", ["x"], ["y"])
    model = make_model([node], {"x": x}, ["y"], opset=13,
                       output_types={"y": (np.int64, [2, 3])})
    got = compile_and_run(model, {"x": x}, tmp_path)["y"]
    np.testing.assert_array_equal(got, [[0, 1, -1], [0, 1, -1]])
    model = make_model([node], {"x": x}, ["y"], opset=13,
                       output_types={"y": (np.int64, [2, 1])})
    np.testing.assert_array_equal(compile_and_run(model, {"x": x}, tmp_path)["y"], [[0], [0]])


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_compress_declared_count(axis, tmp_path):
    x = data((3, 4), np.float32)
    n = 12 if axis is None else x.shape[axis]
    cond = np.array([True, False, True, True, False] * 3)[:n - 1]     # shorter than the axis
    ins = {"x": x, "c": cond}
    attrs = {} if axis is None else {"axis": axis}
    check(declared("Compress", ins, attrs=attrs, opset=11), ins, tmp_path)


def test_dynamic_outputs_rejected_clearly(tmp_path):
    x = data((2, 3), np.float32)
    for op, ins, what in (("NonZero", {"x": x}, "nonzero elements"),
                          ("Compress", {"x": x, "c": np.array([True, False])}, "true conditions")):
        node = helper.make_node(op, list(ins), ["y"], **({"axis": 0} if op == "Compress" else {}))
        with pytest.raises(UnsupportedError, match=f"{op} .*depends on the input values .*{what}"):
            compile_and_run(make_model([node], ins, ["y"], opset=13), ins, tmp_path)
    node = helper.make_node("Unique", ["x"], ["y"])
    with pytest.raises(UnsupportedError, match="Unique .*distinct values"):
        compile_and_run(make_model([node], {"x": x}, ["y"], opset=13), {"x": x}, tmp_path)
