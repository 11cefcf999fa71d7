"""Reshape-like ops, Transpose, Concat, Split, Expand, Tile, Where, Cast and the shape
producers: compiled C (data fed at run time) against onnxruntime."""
import numpy as np
import pytest
from onnx import helper

from aicc.errors import UnsupportedError
from aicc.targets import runnable_targets
from tests.oracle import check_node, compile_and_run, make_model, rng

DTYPES = [np.float32, np.int64, np.uint8, np.bool_]
ALL_DTYPES = [np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8,
              np.uint16, np.uint32, np.uint64, np.bool_]


def data(shape, dt, seed=0):
    r = rng(seed)
    dt = np.dtype(dt)
    if dt == np.bool_:
        return np.asarray(r.random(shape) < 0.5)
    if dt.kind == "f":
        return r.normal(size=shape).astype(dt)
    lo = 0 if dt.kind == "u" else -100
    return r.integers(lo, 100, size=shape).astype(dt)


def i64(*v):
    return np.array(v, np.int64)


# -- Reshape / Flatten / Squeeze / Unsqueeze -------------------------------------------

@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape,target", [((2, 3, 4), (4, 6)), ((2, 3, 4), (0, -1)),
                                          ((2, 3, 4), (-1,)), ((1, 7, 1), (7, 1, 1, 1)),
                                          ((5,), (1, 5))])
def test_reshape(dt, shape, target, tmp_path):
    check_node("Reshape", {"x": data(shape, dt)}, tmp_path, initializers={"s": i64(*target)})


def test_reshape_allowzero(tmp_path):
    x = data((2, 0, 3), np.float32)
    check_node("Reshape", {"x": x}, tmp_path, initializers={"s": i64(0, 3, 0)},
               attrs={"allowzero": 1}, opset=14)
    check_node("Reshape", {"x": data((2, 3, 4), np.int64)}, tmp_path,
               initializers={"s": i64(4, 0, -1)}, attrs={"allowzero": 0}, opset=14)


def test_reshape_runtime_shape_needs_static_output(tmp_path):
    """A run-time shape is fine when the output shape is declared (test_runtime_params.py);
    without a declared shape the output is not static and check() says why."""
    with pytest.raises(UnsupportedError, match="no static shape .*run-time shape"):
        check_node("Reshape", {"x": data((2, 3), np.float32), "s": i64(3, 2)}, tmp_path)


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
def test_flatten(axis, tmp_path):
    check_node("Flatten", {"x": data((2, 3, 5), np.float32)}, tmp_path, attrs={"axis": axis})


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("axes", [None, [0], [-1, 2]])
def test_squeeze(opset, axes, tmp_path):
    x = data((1, 3, 1, 1), np.uint8)
    if axes is None:
        check_node("Squeeze", {"x": x}, tmp_path, opset=opset)
    elif opset < 13:
        check_node("Squeeze", {"x": x}, tmp_path, attrs={"axes": axes}, opset=opset)
    else:
        check_node("Squeeze", {"x": x}, tmp_path, initializers={"a": i64(*axes)}, opset=opset)


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("axes", [[0], [-1], [1, 3]])
def test_unsqueeze(opset, axes, tmp_path):
    x = data((3, 4), np.bool_)
    if opset < 13:
        check_node("Unsqueeze", {"x": x}, tmp_path, attrs={"axes": axes}, opset=opset)
    else:
        check_node("Unsqueeze", {"x": x}, tmp_path, initializers={"a": i64(*axes)}, opset=opset)


# -- Transpose --------------------------------------------------------------------------

@pytest.mark.parametrize("shape,perm", [((2, 3), None), ((2, 3, 4), (0, 2, 1)),
                                        ((2, 3, 4, 5), (0, 3, 1, 2)), ((2, 3, 4, 5), (0, 2, 3, 1)),
                                        ((2, 3, 4, 5), (3, 2, 1, 0)), ((1, 5, 1, 7), (3, 0, 2, 1)),
                                        ((2, 3, 4, 5, 6), (0, 1, 4, 2, 3)), ((7,), None),
                                        ((3, 1, 4), (1, 0, 2)), ((2, 3, 4), (0, 1, 2))])
def test_transpose(shape, perm, tmp_path):
    attrs = {} if perm is None else {"perm": list(perm)}
    check_node("Transpose", {"x": data(shape, np.float32)}, tmp_path, attrs=attrs)


@pytest.mark.parametrize("dt", ALL_DTYPES)
def test_transpose_dtypes(dt, tmp_path):
    check_node("Transpose", {"x": data((3, 4, 5), dt)}, tmp_path, attrs={"perm": [2, 0, 1]})


def test_float16_moves_as_bits(tmp_path):
    """float16 has no C arithmetic type here, but data movement copies its bits."""
    x = data((3, 4, 5), np.float16)
    x[0, 0, 0] = np.nan
    check_node("Transpose", {"x": x}, tmp_path, attrs={"perm": [1, 2, 0]})
    check_node("Concat", {"a": x, "b": x[:, :1]}, tmp_path, attrs={"axis": 1})
    check_node("Expand", {"x": x[:1]}, tmp_path, initializers={"s": i64(2, 3, 4, 5)})


@pytest.mark.parametrize("shape,perm", [((67, 45), (1, 0)), ((2, 33, 40, 3), (0, 3, 2, 1)),
                                        ((3, 37, 50), (0, 2, 1))])
def test_transpose_tiled(shape, perm, tmp_path):
    """Large enough for the blocked path, with sizes that do not divide the tile."""
    check_node("Transpose", {"x": data(shape, np.int64)}, tmp_path, attrs={"perm": list(perm)})


@pytest.mark.parametrize("target", runnable_targets(derived=False))
@pytest.mark.parametrize("shape,perm", [((1, 19, 37, 13), (0, 2, 3, 1)),
                                        ((1, 130, 9, 15), (0, 2, 3, 1)),
                                        ((2, 141, 8, 9), (0, 3, 1, 2)), ((67, 45), (1, 0))])
def test_transpose_float_blocks(shape, perm, target, tmp_path):
    """float32 through the 8 x 8 register blocks on the SIMD targets: several 64-column panels,
    row and column counts that are not multiples of 8."""
    check_node("Transpose", {"x": data(shape, np.float32)}, tmp_path, attrs={"perm": list(perm)},
               target=target)


@pytest.mark.parametrize("target", runnable_targets(derived=False))
@pytest.mark.parametrize("dt", [np.uint8, np.int8])
@pytest.mark.parametrize("shape,perm", [((1, 19, 37, 13), (0, 2, 3, 1)),
                                        ((1, 130, 17, 15), (0, 2, 3, 1)),
                                        ((2, 141, 8, 9), (0, 3, 1, 2)), ((67, 45), (1, 0))])
def test_transpose_byte_blocks(shape, perm, dt, target, tmp_path):
    """Bytes through the 16 x 16 register blocks on the SIMD targets (the channel-last int8
    chains' transposes): several 64-column panels, sizes that are not multiples of 16."""
    check_node("Transpose", {"x": data(shape, dt)}, tmp_path, attrs={"perm": list(perm)},
               target=target)


def test_transpose_empty(tmp_path):
    check_node("Transpose", {"x": data((2, 0, 3), np.float32)}, tmp_path, attrs={"perm": [2, 1, 0]})


# -- Concat / Split ---------------------------------------------------------------------

@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2])
def test_concat(dt, axis, tmp_path):
    shapes = []
    for k, n in enumerate((2, 3, 1)):
        s = [2, 3, 4]
        s[axis] = n
        shapes.append(tuple(s))
    ins = {f"x{k}": data(s, dt, seed=k) for k, s in enumerate(shapes)}
    check_node("Concat", ins, tmp_path, attrs={"axis": axis})


def test_concat_constant_and_empty(tmp_path):
    a = data((2, 3), np.float32)
    check_node("Concat", {"a": a, "e": np.zeros((2, 0), np.float32)}, tmp_path,
               initializers={"c": data((2, 5), np.float32, seed=3)}, attrs={"axis": 1})


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("axis,split", [(0, None), (1, [1, 2]), (-1, [3, 0, 2]), (2, [5])])
@pytest.mark.parametrize("opset", [11, 13])
def test_split(dt, axis, split, opset, tmp_path):
    x = data((4, 3, 5), dt)
    n = 2 if split is None else len(split)
    attrs, inits = {"axis": axis}, {}
    if split is not None and opset < 13:
        attrs["split"] = split
    elif split is not None:
        inits["s"] = i64(*split)
    check_node("Split", {"x": x}, tmp_path, attrs=attrs, initializers=inits, n_outputs=n,
               opset=opset)


@pytest.mark.parametrize("n,dim", [(3, 7), (2, 4), (4, 9)])
def test_split_num_outputs(n, dim, tmp_path):
    x = data((2, dim), np.float32)
    check_node("Split", {"x": x}, tmp_path, attrs={"axis": 1, "num_outputs": n}, n_outputs=n,
               opset=18)


# -- Expand / Tile / Where ----------------------------------------------------------------

@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape,target", [((3, 1), (2, 3, 4)), ((1,), (5,)), ((4,), (2, 1, 4)),
                                          ((2, 1, 3), (2, 5, 1)), ((1, 1), (3, 1))])
def test_expand(dt, shape, target, tmp_path):
    check_node("Expand", {"x": data(shape, dt)}, tmp_path, initializers={"s": i64(*target)})


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape,reps", [((2, 3), (2, 3)), ((2, 3, 4), (1, 1, 3)),
                                        ((5,), (4,)), ((2, 1, 3), (3, 2, 1)), ((2, 3), (1, 1))])
def test_tile(dt, shape, reps, tmp_path):
    check_node("Tile", {"x": data(shape, dt)}, tmp_path, initializers={"r": i64(*reps)})


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("sc,sx,sy", [((2, 3), (2, 3), (2, 3)), ((3,), (2, 3), (1,)),
                                      ((2, 1), (1, 4), (2, 4)), ((), (3, 2), (2,))])
def test_where(dt, sc, sx, sy, tmp_path):
    c = data(sc, np.bool_, seed=5)
    check_node("Where", {"c": c, "x": data(sx, dt, 1), "y": data(sy, dt, 2)}, tmp_path)


def test_where_nan(tmp_path):
    x = np.array([np.nan, np.inf, -0.0, 1.0], np.float32)
    check_node("Where", {"c": np.array([True, False, True, True]), "x": x, "y": x[::-1].copy()},
               tmp_path)


@pytest.mark.parametrize("target", runnable_targets(derived=False))
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int64, np.uint8])
def test_where_vectorized_bits(dt, target, tmp_path):
    """The blend loop (where.py's inline select) on every target: random conditions over 1000
    values plus a broadcast case, selected bit for bit (NaN payloads and -0 kept)."""
    r = np.random.default_rng(9)
    c = r.integers(0, 2, size=(10, 100)).astype(np.bool_)
    x, y = data((10, 100), dt, 1), data((10, 100), dt, 2)
    if np.dtype(dt).kind == "f":
        x.reshape(-1)[:4] = [np.nan, -0.0, np.inf, -np.nan]
        y.reshape(-1)[4:8] = [np.nan, -0.0, -np.inf, 0.0]
    for cc, yy in ((c, y), (c[:, :1], y[:1])):
        m = make_model([helper.make_node("Where", ["c", "x", "y"], ["o"])],
                       {"c": cc, "x": x, "y": yy}, ["o"])
        got = compile_and_run(m, {"c": cc, "x": x, "y": yy}, tmp_path, target=target)["o"]
        assert got.tobytes() == np.where(cc, x, yy).tobytes()


# -- Cast ------------------------------------------------------------------------------------

def _cast_input(src, dst):
    """Values whose conversion is defined in ONNX (in range of the destination)."""
    src, dst = np.dtype(src), np.dtype(dst)
    if src == np.bool_:
        return np.array([True, False, True, True, False])
    if src.kind == "f":
        v = np.array([0, 1.5, -1.5, 2.7, -2.7, 99.9, -99.9, 0.25, 7, -0.0])
        if dst.kind == "u":
            v = np.abs(v)
        return v.astype(src)
    v = np.array([0, 1, -1, 127, 128, 255, 256, -129, 70000, -70000, 2 ** 31 - 1, -2 ** 31])
    return v.astype(src)  # wraps modulo 2^bits


@pytest.mark.parametrize("src", ALL_DTYPES)
@pytest.mark.parametrize("dst", ALL_DTYPES)
def test_cast(src, dst, tmp_path):
    to = helper.np_dtype_to_tensor_dtype(np.dtype(dst))
    check_node("Cast", {"x": _cast_input(src, dst)}, tmp_path, attrs={"to": to})


@pytest.mark.parametrize("target", runnable_targets(derived=False))
@pytest.mark.parametrize("src", [np.float32, np.float64])
def test_cast_saturation(src, target, tmp_path):
    """Documented aicc behaviour (ONNX leaves it undefined): saturate, NaN -> 0, NaN -> true;
    the values at the edges of each range; repeated so the vector loops see them too."""
    x = np.array([np.nan, np.inf, -np.inf, 1e20, -1e20, 300.7, -300.7, 2.0 ** 31, -2.0 ** 63,
                  -0.9, 0.9, 2147483520.0, -2147483648.0, 2.0 ** 32, 4294967040.0, 127.99,
                  128.0, -128.5, -129.0, 255.5, 256.0, -0.0, 2.0 ** 63, 9.2233715e18], src)
    x = np.tile(x, 3)
    outs = [np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64, np.bool_]
    nodes = [helper.make_node("Cast", ["x"], [f"y{k}"], to=helper.np_dtype_to_tensor_dtype(
        np.dtype(dt))) for k, dt in enumerate(outs)]
    model = make_model(nodes, {"x": x}, [f"y{k}" for k in range(len(outs))])
    got = compile_and_run(model, {"x": x}, tmp_path, target=target)
    for k, dt in enumerate(outs):
        if dt == np.bool_:
            want = x != 0
        else:
            info = np.iinfo(dt)
            with np.errstate(invalid="ignore"):
                want = np.clip(np.nan_to_num(np.trunc(x.astype(np.float64)), nan=0.0,
                                             posinf=np.inf, neginf=-np.inf),
                               float(info.min), float(info.max))
            want = np.array([info.max if w >= float(info.max) else int(w) for w in want], dt)
        np.testing.assert_array_equal(got[f"y{k}"], want, err_msg=str(dt))


def test_cast_double_overflow(tmp_path):
    x = np.array([1e300, -1e300, np.nan, 1.0000000001], np.float64)
    check_node("Cast", {"x": x}, tmp_path, attrs={"to": helper.np_dtype_to_tensor_dtype(
        np.dtype(np.float32))})


@pytest.mark.parametrize("dst", [np.int32, np.float64, np.bool_, np.uint8])
def test_cast_like(dst, tmp_path):
    x = _cast_input(np.float32, dst)
    check_node("CastLike", {"x": x}, tmp_path, initializers={"t": np.zeros(1, dst)}, opset=15)


# -- shape producers (normally folded: compiled here with an empty pipeline) -------------

def _unfolded(nodes, inputs, outputs, tmp_path, opset=17, inits=None):
    cfg = tmp_path / "nofold.yaml"
    cfg.write_text("pipeline: [infer-shapes]\n")
    model = make_model(nodes, inputs, outputs, inits, opset=opset)
    from tests.oracle import reference
    want = reference(model, inputs)
    got = compile_and_run(model, inputs, tmp_path, config=cfg)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])
        assert got[k].dtype == want[k].dtype


def test_shape_size_unfolded(tmp_path):
    x = data((2, 3, 5, 7), np.float32)
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Shape", ["x"], ["s2"], start=1, end=-1),
             helper.make_node("Size", ["x"], ["n"])]
    _unfolded(nodes, {"x": x}, ["s", "s2", "n"], tmp_path, opset=15)


@pytest.mark.parametrize("value", [None, np.array([2.5], np.float32), np.array([7], np.int64),
                                   np.array([True])])
def test_constant_of_shape_unfolded(value, tmp_path):
    attrs = {} if value is None else {"value": helper.make_tensor(
        "v", helper.np_dtype_to_tensor_dtype(value.dtype), [1], value.tolist())}
    nodes = [helper.make_node("ConstantOfShape", ["s"], ["y"], **attrs)]
    _unfolded(nodes, {}, ["y"], tmp_path, inits={"s": i64(2, 3)})


def test_constant_and_range_unfolded(tmp_path):
    big = np.arange(20, dtype=np.int32).reshape(4, 5)
    nodes = [helper.make_node("Constant", [], ["c"], value=helper.make_tensor(
                 "v", helper.np_dtype_to_tensor_dtype(big.dtype), big.shape, big.ravel().tolist())),
             helper.make_node("Constant", [], ["f"], value_floats=[1.5, -2.0]),
             helper.make_node("Range", ["a", "b", "d"], ["r"])]
    inits = {"a": np.array(1.0, np.float32), "b": np.array(3.2, np.float32),
             "d": np.array(0.3, np.float32)}
    _unfolded(nodes, {}, ["c", "f", "r"], tmp_path, inits=inits)


AVX_TARGETS = [t for t in runnable_targets(derived=False) if t in ("x86-avx2", "x86-avx512")]


@pytest.mark.parametrize("target", AVX_TARGETS)
@pytest.mark.parametrize("shape,perm", [((1, 40, 7, 7), (0, 2, 3, 1)), ((2, 33, 45), (0, 2, 1)),
                                        ((1, 49, 96), (0, 2, 1)), ((64, 64), (1, 0)),
                                        ((3, 2, 35, 41), (1, 0, 3, 2)), ((1, 24, 9, 10), (0, 2, 3, 1)),
                                        ((1, 8, 3, 5), (0, 2, 3, 1)), ((1, 13, 9), (0, 2, 1))])
def test_transpose_avx_blocks(shape, perm, target, tmp_path):
    """float32 transpositions in 8 x 8 AVX register blocks (sizes that leave edges), bits
    unchanged: NaN payloads, -0.0 and Inf survive."""
    x = data(shape, np.float32)
    flat = x.reshape(-1)
    flat[::7] = np.float32(-0.0)
    flat[3::11] = np.inf
    flat.view(np.uint32)[5::13] = np.uint32(0x7FC01234)     # a NaN with a payload
    got, _ = check_node("Transpose", {"x": x}, tmp_path, attrs={"perm": list(perm)},
                        target=target)
    want = np.transpose(x, perm)
    assert np.array_equal(got["y0"].view(np.uint32), want.view(np.uint32))
