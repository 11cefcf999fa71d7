"""DFT, STFT, Hann/Hamming/Blackman windows, MelWeightMatrix: compiled C vs numpy.fft
(DFT/STFT: the ground truth; onnxruntime differs from the spec on some irfft/onesided cases)
and onnx.reference (windows, MelWeightMatrix), with scalar parameters both as constants and
as run-time inputs; run-time values that disagree with the static shapes give zeros."""
import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from tests.oracle import assert_close, check, compile_and_run, make_model, rng


def _model(op, feeds, inits, order, out_type, attrs=None, opset=20):
    node = helper.make_node(op, order, ["y"], **(attrs or {}))
    return make_model([node], feeds, ["y"], inits, opset=opset, output_types={"y": out_type})


def _cplx(x):
    return x[..., 0] + 1j * x[..., 1] if x.shape[-1] == 2 else x[..., 0].astype(np.complex128)


def _stack(c, dt):
    return np.stack([c.real, c.imag], axis=-1).astype(dt)


def _close(got, want, dt):
    scale = max(1.0, float(np.abs(want).max()))
    tol = 1e-5 if dt == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol * 10, atol=tol * scale)


def _dft_expect(x, axis, L, inverse, onesided):
    c = _cplx(x.astype(np.float64))
    ax = axis % (x.ndim - 1) if axis < 0 else axis
    if axis < 0:
        ax = x.ndim + axis
    if inverse and onesided:
        return np.fft.irfft(c, n=L, axis=ax)[..., None]
    if inverse:
        return _stack(np.fft.ifft(c, n=L, axis=ax), np.float64)
    y = np.fft.fft(c, n=L, axis=ax)
    if onesided:
        y = np.take(y, range(L // 2 + 1), axis=ax)
    return _stack(y, np.float64)


DFT_CASES = [  # shape, axis, dft_length, inverse, onesided
    ((1, 10, 10, 1), 1, None, 0, 0), ((1, 10, 10, 1), 2, None, 0, 0),
    ((2, 7, 2), 1, None, 0, 0), ((2, 7, 2), 1, None, 1, 0), ((3, 9, 1), 1, None, 0, 1),
    ((3, 8, 1), 1, None, 0, 1), ((2, 5, 3, 2), 1, 8, 0, 0), ((2, 12, 3, 1), 1, 7, 0, 0),
    ((2, 6, 2), 1, None, 1, 1), ((2, 6, 2), 1, 11, 1, 1), ((2, 4, 3, 2), 2, 3, 1, 1),
    ((4, 16, 2), -2, None, 1, 0), ((1, 33, 1), 1, 33, 0, 1), ((6, 2), 0, None, 0, 0),
]


def _dft_out_shape(shape, axis, L, inverse, onesided):
    ax = axis + len(shape) if axis < 0 else axis
    if L is None:
        L = 2 * (shape[ax] - 1) if inverse and onesided else shape[ax]
    out = list(shape)
    out[ax] = L // 2 + 1 if (onesided and not inverse) else L
    out[-1] = 1 if inverse and onesided else 2
    return out, L


@pytest.mark.parametrize("case", DFT_CASES)
@pytest.mark.parametrize("how", ["opset17", "const", "runtime"])
def test_dft(case, how, tmp_path):
    shape, axis, L, inv, one = case
    r = rng(len(shape) + (L or 0))
    x = r.normal(size=shape).astype(np.float32)
    out, Lr = _dft_out_shape(shape, axis, L, inv, one)
    attrs = {"inverse": inv, "onesided": one}
    feeds, inits = {"x": x}, {}
    order = ["x", "dl" if L is not None else ""]
    if L is not None:
        (feeds if how == "runtime" else inits)["dl"] = np.array(L, np.int64)
    if how == "opset17":
        attrs["axis"] = axis
        opset = 17
    else:
        opset = 20
        order.append("ax")
        (feeds if how == "runtime" else inits)["ax"] = np.array(axis, np.int64)
    model = _model("DFT", feeds, inits, order, (np.float32, out), attrs, opset)
    got = compile_and_run(model, feeds, tmp_path)["y"]
    want = _dft_expect(x, axis, Lr, inv, one)
    assert got.shape == want.shape
    _close(got, want, np.float32)


def test_dft_float64_default_axis(tmp_path):
    x = rng(1).normal(size=(2, 3, 12, 2))
    model = _model("DFT", {"x": x}, None, ["x"], (np.float64, [2, 3, 12, 2]), {}, 20)
    got = compile_and_run(model, {"x": x}, tmp_path)["y"]
    _close(got, _dft_expect(x, -2, 12, 0, 0), np.float64)


@pytest.mark.parametrize("L,inverse", [(64, 0), (64, 1), (1, 0), (2, 1), (48, 0)])
def test_dft_float64_fft_lengths(L, inverse, tmp_path):
    """Powers of two take the radix-2 FFT (48: the direct sum): numpy's values to 1e-12."""
    x = rng(L).normal(size=(3, L, 2))
    model = _model("DFT", {"x": x}, None, ["x"], (np.float64, [3, L, 2]),
                   {"inverse": inverse}, 20)
    got = compile_and_run(model, {"x": x}, tmp_path)["y"]
    _close(got, _dft_expect(x, -2, L, inverse, 0), np.float64)


def test_dft_runtime_axis_mismatch_gives_zeros(tmp_path):
    """Axis 1 and 2 both fit [1, 10, 10, 1] -> [1, 10, 10, 2]; axis 0 or a bad dft_length
    does not: documented zeros."""
    x = rng(2).normal(size=(1, 10, 10, 1)).astype(np.float32)
    feeds = {"x": x, "dl": np.array(10, np.int64), "ax": np.array(0, np.int64)}
    model = _model("DFT", feeds, None, ["x", "dl", "ax"], (np.float32, [1, 10, 10, 2]), {}, 20)
    assert not compile_and_run(model, feeds, tmp_path)["y"].any()
    feeds["ax"], feeds["dl"] = np.array(-2, np.int64), np.array(9, np.int64)
    assert not compile_and_run(model, feeds, tmp_path)["y"].any()
    feeds["dl"] = np.array(10, np.int64)
    _close(compile_and_run(model, feeds, tmp_path)["y"], _dft_expect(x, 2, 10, 0, 0),
           np.float32)


def test_dft_nan_stays_in_its_line(tmp_path):
    x = np.ones((3, 8, 1), np.float32)
    x[1, 3, 0] = np.nan
    model = _model("DFT", {"x": x}, None, ["x"], (np.float32, [3, 8, 2]), {"axis": 1}, 17)
    got = compile_and_run(model, {"x": x}, tmp_path)["y"]
    assert np.isnan(got[1]).all() and not np.isnan(got[[0, 2]]).any()


# -- STFT ----------------------------------------------------------------------------------

def _stft_expect(x, step, L, window, onesided):
    c = _cplx(x.astype(np.float64))
    B, S = c.shape
    F = 1 + (S - L) // step
    w = np.ones(L) if window is None else window.astype(np.float64)
    nb = L // 2 + 1 if onesided else L
    out = np.zeros((B, F, nb), np.complex128)
    for f in range(F):
        out[:, f] = np.fft.fft(c[:, f * step:f * step + L] * w, axis=-1)[:, :nb]
    return _stack(out, np.float64)


@pytest.mark.parametrize("shape,step,L,use_window,onesided", [
    ((1, 128, 1), 8, 16, False, 1), ((1, 128, 1), 8, 16, True, 1), ((2, 50, 1), 7, 12, True, 0),
    ((2, 40, 2), 5, 9, True, 0), ((3, 33, 1), 4, 33, False, 1), ((1, 64, 1), 16, 15, False, 1)])
@pytest.mark.parametrize("runtime", [False, True])
def test_stft(shape, step, L, use_window, onesided, runtime, tmp_path):
    r = rng(shape[1] + L)
    x = r.normal(size=shape).astype(np.float32)
    win = np.hanning(L).astype(np.float32) if use_window else None
    feeds, inits = {"x": x}, {}
    dst = feeds if runtime else inits
    dst["step"] = np.array(step, np.int64)
    order = ["x", "step"]
    if use_window:
        dst["win"] = win
        order.append("win")
    else:
        order.append("")
        dst["L"] = np.array(L, np.int64)
        order.append("L")
    F, nb = 1 + (shape[1] - L) // step, (L // 2 + 1 if onesided else L)
    model = _model("STFT", feeds, inits, order, (np.float32, [shape[0], F, nb, 2]),
                   {"onesided": onesided}, 17)
    got = compile_and_run(model, feeds, tmp_path)["y"]
    _close(got, _stft_expect(x, step, L, win, onesided), np.float32)


def test_stft_rank2_real_signal(tmp_path):
    """[B, S] (TorchScript's export of torch.stft): a real signal, as onnxruntime reads it;
    L = 256 on the FFT path."""
    x = rng(7).normal(size=(2, 1600)).astype(np.float32)
    win = np.hanning(256).astype(np.float32)
    inits = {"step": np.array(128, np.int64), "win": win}
    F = 1 + (1600 - 256) // 128
    model = _model("STFT", {"x": x}, inits, ["x", "step", "win"], (np.float32, [2, F, 129, 2]),
                   {"onesided": 1}, 17)
    got = compile_and_run(model, {"x": x}, tmp_path)["y"]
    want = _stft_expect(x[..., None], 128, 256, win, 1)
    _close(got, want, np.float32)
    import onnxruntime as ort
    o = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(o.run(None, {"x": x})[0], want, rtol=1e-4, atol=1e-4)


def test_stft_default_onesided_shape_inference_bug_is_refused(tmp_path):
    """onnx shape inference reads onesided as 0 when absent (the spec default is 1)."""
    from aicc.errors import UnsupportedError
    x = np.zeros((1, 64, 1), np.float32)
    node = helper.make_node("STFT", ["x", "step", "", "L"], ["y"])
    model = make_model([node], {"x": x}, ["y"], {"step": np.array(8, np.int64),
                                                 "L": np.array(16, np.int64)}, opset=17)
    with pytest.raises(UnsupportedError, match="set onesided explicitly"):
        compile_and_run(model, {"x": x}, tmp_path)


def test_stft_bad_step_gives_zeros(tmp_path):
    x = rng(3).normal(size=(1, 32, 1)).astype(np.float32)
    feeds = {"x": x, "step": np.array(0, np.int64)}
    model = _model("STFT", feeds, {"L": np.array(8, np.int64)}, ["x", "step", "", "L"],
                   (np.float32, [1, 4, 5, 2]), {}, 17)
    assert not compile_and_run(model, feeds, tmp_path)["y"].any()


# -- windows ---------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
@pytest.mark.parametrize("size", [2, 7, 64])
@pytest.mark.parametrize("runtime", [False, True])
def test_window(op, periodic, size, runtime, tmp_path):
    n = np.array(size, np.int64 if runtime else np.int32)
    feeds, inits = ({"n": n}, None) if runtime else ({}, {"n": n})
    model = _model(op, feeds, inits, ["n"], (np.float32, [size]), {"periodic": periodic}, 17)
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    if runtime:
        got = compile_and_run(model, feeds, tmp_path)["y"]
    else:
        x = {"d": np.zeros(1, np.float32)}        # a constant-only model folds: add an input
        node = helper.make_node(op, ["n"], ["w"], periodic=periodic)
        add = helper.make_node("Add", ["w", "d"], ["y"])
        m2 = make_model([node, add], x, ["y"], inits, opset=17)
        got = compile_and_run(m2, x, tmp_path)["y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dt", [TensorProto.DOUBLE, TensorProto.INT32])
def test_window_output_datatype(dt, tmp_path):
    feeds = {"n": np.array(9, np.int64)}
    npdt = np.float64 if dt == TensorProto.DOUBLE else np.int32
    model = _model("HannWindow", feeds, None, ["n"], (npdt, [9]), {"output_datatype": dt}, 17)
    got = compile_and_run(model, feeds, tmp_path)["y"]
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    assert_close({"y": got}, {"y": want}, rtol=1e-12, atol=1e-12)


def test_window_symmetric_size_one(tmp_path):
    """Documented: [1] (onnx.reference divides 0 by 0)."""
    feeds = {"n": np.array(1, np.int64)}
    model = _model("HannWindow", feeds, None, ["n"], (np.float32, [1]), {"periodic": 0}, 17)
    np.testing.assert_array_equal(compile_and_run(model, feeds, tmp_path)["y"], [1.0])


# -- MelWeightMatrix -----------------------------------------------------------------------

@pytest.mark.parametrize("nmel,dl,sr,lo,hi", [(8, 16, 8192, 0.0, 4096.0),
                                             (10, 64, 16000, 20.0, 8000.0),
                                             (5, 31, 22050, 100.5, 3000.25),
                                             (40, 512, 16000, 0.0, 8000.0),
                                             (3, 8, 100, 40.0, 10.0)])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_melweightmatrix(nmel, dl, sr, lo, hi, dt, tmp_path):
    feeds = {"nm": np.array(nmel, np.int32), "dl": np.array(dl, np.int64),
             "sr": np.array(sr, np.int64), "lo": np.array(lo, dt), "hi": np.array(hi, dt)}
    model = _model("MelWeightMatrix", feeds, None, list(feeds), (np.float32, [dl // 2 + 1, nmel]),
                   {}, 17)
    got = compile_and_run(model, feeds, tmp_path)
    want = {"y": ReferenceEvaluator(model).run(None, feeds)[0]}
    assert_close(got, want)


def test_signal_chain(tmp_path):
    """Window -> STFT -> |.|^2 -> MelWeightMatrix MatMul: a log-mel front end."""
    x = rng(4).normal(size=(1, 400, 1)).astype(np.float32)
    nodes = [helper.make_node("HannWindow", ["L"], ["w"]),
             helper.make_node("STFT", ["x", "step", "w"], ["s"], onesided=1),
             helper.make_node("Mul", ["s", "s"], ["p2"]),
             helper.make_node("ReduceSum", ["p2", "ax"], ["p"], keepdims=0),
             helper.make_node("MelWeightMatrix", ["nm", "L", "sr", "lo", "hi"], ["m"]),
             helper.make_node("MatMul", ["p", "m"], ["y"])]
    inits = {"L": np.array(64, np.int64), "step": np.array(32, np.int64),
             "ax": np.array([-1], np.int64), "nm": np.array(12, np.int64),
             "sr": np.array(16000, np.int64), "lo": np.array(0, np.float32),
             "hi": np.array(8000, np.float32)}
    model = make_model(nodes, {"x": x}, ["y"], inits, opset=17)
    check(model, {"x": x}, tmp_path, rtol=1e-4, atol=1e-4)
