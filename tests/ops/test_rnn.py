"""RNN, LSTM, GRU: compiled C vs onnxruntime (layout 1, which onnxruntime rejects, vs
onnx.reference) over directions, activations with alpha/beta, clip, sequence_lens,
initial states, peepholes, input_forget, linear_before_reset, output subsets, constant
and run-time weights."""
import numpy as np
import pytest
from onnx import helper

from aicc.errors import UnsupportedError
from aicc.targets import runnable_targets
from tests.oracle import check, compile_and_run, make_model, rng

SIMD = [t for t in runnable_targets() if t in ("x86-avx2", "x86-avx512")]

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
NAMES = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]


def _run(op, tmp_path, seq=4, batch=2, inp=3, hidden=5, direction="forward", bias=True,
         lens=None, h0=False, c0=False, peep=False, outputs=(1, 1, 1), const_weights=False,
         dtype=np.float32, layout=0, seed=0, target="generic", **attrs):
    r = rng(seed)
    ndir = 2 if direction == "bidirectional" else 1
    G = GATES[op]
    xs = (batch, seq, inp) if layout else (seq, batch, inp)
    hs = (batch, ndir, hidden) if layout else (ndir, batch, hidden)
    vals = {"X": r.normal(size=xs).astype(dtype),
            "W": (r.normal(size=(ndir, G * hidden, inp)) * 0.6).astype(dtype),
            "R": (r.normal(size=(ndir, G * hidden, hidden)) * 0.6).astype(dtype)}
    if bias:
        vals["B"] = (r.normal(size=(ndir, 2 * G * hidden)) * 0.5).astype(dtype)
    if lens is not None:
        vals["sequence_lens"] = np.array(lens, np.int32)
    if h0:
        vals["initial_h"] = r.normal(size=hs).astype(dtype)
    if c0:
        vals["initial_c"] = r.normal(size=hs).astype(dtype)
    if peep:
        vals["P"] = (r.normal(size=(ndir, 3 * hidden)) * 0.5).astype(dtype)
    last = max(i for i, n in enumerate(NAMES) if n in vals)
    names = [n if n in vals else "" for n in NAMES[:last + 1]]
    n_out = 3 if op == "LSTM" else 2
    outs = [f"y{k}" if outputs[k] else "" for k in range(n_out)]
    node = helper.make_node(op, names, outs, hidden_size=hidden, direction=direction,
                            **({"layout": layout} if layout else {}), **attrs)
    consts = ("W", "R", "B", "P") if const_weights else ()
    feeds = {k: v for k, v in vals.items() if k not in consts}
    model = make_model([node], feeds, [o for o in outs if o],
                       {k: v for k, v in vals.items() if k in consts}, opset=14)
    return check(model, feeds, tmp_path, target=target)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_directions(op, direction, tmp_path):
    _run(op, tmp_path, direction=direction, h0=True, c0=op == "LSTM")


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_sequence_lens(op, direction, tmp_path):
    _run(op, tmp_path, seq=5, batch=4, direction=direction, lens=[5, 2, 0, 1], h0=True,
         c0=op == "LSTM", seed=1)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_constant_weights_no_bias(op, tmp_path):
    _run(op, tmp_path, bias=False, const_weights=True, seq=3, batch=1, inp=17, hidden=11)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_outputs_subsets(op, tmp_path):
    _run(op, tmp_path, outputs=(0, 1, 1))
    _run(op, tmp_path, outputs=(1, 0, 0), direction="bidirectional")
    if op == "LSTM":
        _run(op, tmp_path, outputs=(0, 0, 1), direction="reverse", c0=True)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_clip(op, tmp_path):
    _run(op, tmp_path, clip=0.7, h0=True, direction="bidirectional", seed=3)


def test_gru_linear_before_reset(tmp_path):
    for d in ("forward", "bidirectional"):
        _run("GRU", tmp_path, linear_before_reset=1, direction=d, h0=True, lens=[4, 2])


def test_lstm_peepholes_input_forget(tmp_path):
    _run("LSTM", tmp_path, peep=True, h0=True, c0=True, direction="bidirectional")
    _run("LSTM", tmp_path, peep=True, h0=True, c0=True, lens=[3, 4], seed=4)
    _run("LSTM", tmp_path, input_forget=1, h0=True, c0=True, seed=5)
    _run("LSTM", tmp_path, input_forget=1, peep=True, direction="reverse", seed=6)


ACT_CASES = {
    "RNN": [(["Relu"], [], []), (["Sigmoid"], [], []), (["Affine"], [0.5], [0.1]),
            (["LeakyRelu"], [0.2], []), (["ThresholdedRelu"], [0.3], []),
            (["ScaledTanh"], [1.5], [0.7]), (["HardSigmoid"], [0.3], [0.4]),
            (["Elu"], [0.8], []), (["Softsign"], [], []), (["Softplus"], [], []),
            (["LeakyRelu"], [], []), (["HardSigmoid"], [], [])],
    "GRU": [(["HardSigmoid", "Softsign"], [0.25], [0.45]), (["Sigmoid", "Relu"], [], []),
            (["Sigmoid", "Elu"], [], [])],
    "LSTM": [(["HardSigmoid", "Tanh", "Softsign"], [0.25], [0.45]),
             (["Sigmoid", "ScaledTanh", "Affine"], [1.2, 0.5], [0.8, 0.2]),
             (["sigmoid", "tanh", "relu"], [], [])],
}


@pytest.mark.parametrize("op,acts,alpha,beta",
                         [(op, *c) for op, cs in ACT_CASES.items() for c in cs])
def test_activations(op, acts, alpha, beta, tmp_path):
    attrs = {"activations": acts}
    if alpha:
        attrs["activation_alpha"] = alpha
    if beta:
        attrs["activation_beta"] = beta
    _run(op, tmp_path, h0=True, seq=3, **attrs)


def test_bidirectional_activations_per_direction(tmp_path):
    _run("GRU", tmp_path, direction="bidirectional",
         activations=["Sigmoid", "Tanh", "HardSigmoid", "Relu"], activation_alpha=[0.3],
         activation_beta=[0.6])
    _run("RNN", tmp_path, direction="bidirectional", activations=["Tanh", "Relu"])


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_float64(op, tmp_path):
    _run(op, tmp_path, dtype=np.float64, h0=True, direction="bidirectional")


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_layout1(op, tmp_path):
    """onnxruntime rejects layout 1: compared with onnx.reference (no sequence_lens)."""
    _run(op, tmp_path, layout=1, h0=True, c0=op == "LSTM", direction="bidirectional", batch=3)


def test_longer_hidden(tmp_path):
    _run("LSTM", tmp_path, seq=6, batch=1, inp=40, hidden=64, const_weights=True)
    _run("GRU", tmp_path, seq=6, batch=1, inp=40, hidden=33, const_weights=True)


def test_unsupported_activation(tmp_path):
    x = np.zeros((2, 1, 3), np.float32)
    w = np.zeros((1, 4, 3), np.float32)
    rr = np.zeros((1, 4, 4), np.float32)
    node = helper.make_node("RNN", ["X", "W", "R"], ["", "y"], hidden_size=4,
                            activations=["Gelu"])
    model = make_model([node], {"X": x}, ["y"], {"W": w, "R": rr}, opset=14,
                       output_types={"y": (np.float32, [1, 1, 4])})
    with pytest.raises(UnsupportedError, match="activation 'Gelu'"):
        compile_and_run(model, {"X": x}, tmp_path)


@pytest.mark.parametrize("target", SIMD)
@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("hidden,inp", [(5, 3), (37, 19), (16, 64)])
def test_simd_products(op, hidden, inp, target, tmp_path):
    """The x86 SIMD products (rnn_kernels.gemm_simd on transposed weights): G * H columns in
    tiles, single vectors and a scalar tail (5, 19, 37) or none (16, 64), both directions,
    initial states, sequence lengths, clip; GRU with linear_before_reset (its third product);
    LSTM with peepholes; weights fed at run time (transposed into scratch) and constant
    (transposed at build time)."""
    extra = {"GRU": {"linear_before_reset": 1}, "LSTM": {"peep": True, "c0": True}}.get(op, {})
    _run(op, tmp_path, seq=5, batch=2, inp=inp, hidden=hidden, direction="bidirectional",
         lens=[5, 3], h0=True, clip=2.5, target=target, **extra)
    d = tmp_path / "const"
    d.mkdir()
    _run(op, d, seq=3, batch=1, inp=inp, hidden=hidden, const_weights=True, target=target)


@pytest.mark.parametrize("target", SIMD)
@pytest.mark.parametrize("op", ["GRU", "LSTM"])
def test_simd_projection_chunks(op, target, tmp_path):
    """Input projections ahead in chunks of 16 steps: 37 steps (chunks of 16, 16, 5), lengths
    that end inside a chunk or on its edge, both directions, batch 3 (rows of X 3 * I apart),
    and layout 1 (rows I apart) against onnx.reference."""
    _run(op, tmp_path, seq=37, batch=3, inp=7, hidden=9, direction="bidirectional",
         lens=[37, 16, 21], h0=True, target=target)
    d = tmp_path / "l1"
    d.mkdir()
    _run(op, d, seq=19, batch=2, inp=7, hidden=9, direction="reverse", layout=1,
         const_weights=True, target=target)
