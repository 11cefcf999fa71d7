"""Speed cliffs outside the benchmark models (issue 4): one-node (or two-node) models of ops
that real exports use, and the committed PyTorch fixtures, each built for a target and timed
side by side with onnxruntime (aicc.bench.bench: interleaved, median, 1 thread). Prints one
line per case with both medians and the ratio; cases slower than onnxruntime are marked.

    .venv/bin/python -m benchmarks.op_sweep [-t x86-avx512] [-k softmax] [--fixtures] [-s 0.5]

The cases here, then benchmarks/op_sweep_more.py's.

Nothing here is a test: the cases still slower than onnxruntime go into the notes of
docs/PERFORMANCE.md by hand.
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

import aicc
from aicc.errors import AiccError
from aicc.bench import bench
from tests.oracle import make_model

R = np.random.default_rng(0)


def _w(*shape):
    return (R.standard_normal(shape) * 0.1).astype(np.float32)


def _x(*shape):
    return np.zeros(shape, np.float32)


def _one(op, shape, attrs=None, inits=None, extra_inputs=(), opset=17):
    inits = inits or {}
    node = helper.make_node(op, ["x", *extra_inputs, *inits], ["y"], **(attrs or {}))
    return make_model([node], {"x": _x(*shape)}, ["y"], inits, opset=opset)


def _chain(ops, shape, opset=17):
    """A chain of unary ops (name, attrs) over one input."""
    nodes, prev = [], "x"
    for i, (op, attrs) in enumerate(ops):
        out = "y" if i == len(ops) - 1 else f"t{i}"
        nodes.append(helper.make_node(op, [prev], [out], **attrs))
        prev = out
    return make_model(nodes, {"x": _x(*shape)}, ["y"], opset=opset)


def _silu(shape):
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"])]
    return make_model(nodes, {"x": _x(*shape)}, ["y"])


def _where(shape):
    nodes = [helper.make_node("Greater", ["x", "z"], ["c"]),
             helper.make_node("Where", ["c", "x", "z"], ["y"])]
    return make_model(nodes, {"x": _x(*shape), "z": _x(*shape)}, ["y"])


def _matmul(a_shape, b_shape, const_b=False):
    if const_b:
        return make_model([helper.make_node("MatMul", ["x", "b"], ["y"])], {"x": _x(*a_shape)},
                          ["y"], {"b": _w(*b_shape)})
    return make_model([helper.make_node("MatMul", ["x", "b"], ["y"])],
                      {"x": _x(*a_shape), "b": _x(*b_shape)}, ["y"])


def _conv(cin, cout, hw, k, stride=1, group=1, dims=2, pads=None):
    p = k // 2
    shape = (1, cin) + (hw,) * dims
    attrs = dict(kernel_shape=[k] * dims, strides=[stride] * dims,
                 pads=pads if pads is not None else [p] * (2 * dims), group=group)
    return _one("Conv", shape, attrs, {"w": _w(cout, cin // group, *([k] * dims)), "b": _w(cout)})


def _rnn(op, steps, inp, hid):
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    inits = {"W": _w(1, gates * hid, inp), "R": _w(1, gates * hid, hid),
             "B": _w(1, 2 * gates * hid)}
    node = helper.make_node(op, ["x", "W", "R", "B"], ["y"], hidden_size=hid)
    return make_model([node], {"x": _x(steps, 1, inp)}, ["y"], inits)


def _layernorm(rows, width):
    return _one("LayerNormalization", (rows, width), {"axis": -1},
                {"g": _w(width) + 1, "b": _w(width)})


def _einsum():
    node = helper.make_node("Einsum", ["x", "z"], ["y"], equation="bhid,bhjd->bhij")
    return make_model([node], {"x": _x(1, 12, 128, 64), "z": _x(1, 12, 128, 64)}, ["y"])


def _resize(scale):
    node = helper.make_node("Resize", ["x", "", "s"], ["y"], mode="nearest")
    return make_model([node], {"x": _x(1, 64, 28, 28)}, ["y"],
                      {"s": np.array([1, 1, scale, scale], np.float32)})


def _topk():
    node = helper.make_node("TopK", ["x", "k"], ["y", "i"], axis=-1)
    return make_model([node], {"x": _x(64, 1000)}, ["y", "i"], {"k": np.array([5], np.int64)})


def _cast():
    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT32)
    return make_model([node], {"x": _x(1, 64, 56, 56)}, ["y"])


def _qlinear_conv(cin, cout, hw, k, stride=1, group=1):
    r = np.random.default_rng(3)
    inits = {"xs": np.array(0.02, np.float32), "xz": np.array(128, np.uint8),
             "w": r.integers(-127, 128, (cout, cin // group, k, k)).astype(np.int8),
             "ws": np.array(0.01, np.float32), "wz": np.array(0, np.int8),
             "ys": np.array(0.05, np.float32), "yz": np.array(128, np.uint8),
             "b": r.integers(-1000, 1000, cout).astype(np.int32)}
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
                            ["y"], pads=[k // 2] * 4, strides=[stride] * 2, group=group)
    return make_model([node], {"x": np.zeros((1, cin, hw, hw), np.uint8)}, ["y"], inits)


def _qlinear_matmul(m, k, n):
    r = np.random.default_rng(4)
    inits = {"as": np.array(0.02, np.float32), "az": np.array(128, np.uint8),
             "b": r.integers(-127, 128, (k, n)).astype(np.int8),
             "bs": np.array(0.01, np.float32), "bz": np.array(0, np.int8),
             "ys": np.array(0.05, np.float32), "yz": np.array(128, np.uint8)}
    node = helper.make_node("QLinearMatMul", ["x", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])
    return make_model([node], {"x": np.zeros((m, k), np.uint8)}, ["y"], inits)


ACT = (1, 64, 56, 56)
CASES = {
    "quantize_u8": lambda: _one("QuantizeLinear", ACT, inits={
        "s": np.array(0.02, np.float32), "z": np.array(128, np.uint8)}),
    "dequantize_u8": lambda: make_model(
        [helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"])],
        {"x": np.zeros(ACT, np.uint8)}, ["y"],
        {"s": np.array(0.02, np.float32), "z": np.array(128, np.uint8)}),
    "qlinearconv_64_3x3": lambda: _qlinear_conv(64, 64, 28, 3),
    "qlinearconv_64_3x3_s2_128": lambda: _qlinear_conv(64, 128, 56, 3, stride=2),
    "qlinearconv_1x1_64_128": lambda: _qlinear_conv(64, 128, 28, 1),
    "qlinearconv_dw_3x3_64": lambda: _qlinear_conv(64, 64, 56, 3, group=64),
    "qlinearmatmul_128x512x512": lambda: _qlinear_matmul(128, 512, 512),
    "qlinearmatmul_1x512x512": lambda: _qlinear_matmul(1, 512, 512),
    "relu": lambda: _one("Relu", ACT),
    "sigmoid": lambda: _one("Sigmoid", ACT),
    "tanh": lambda: _one("Tanh", ACT),
    "exp": lambda: _one("Exp", ACT),
    "erf": lambda: _one("Erf", ACT),
    "gelu_tanh": lambda: _one("Gelu", ACT, {"approximate": "tanh"}, opset=20),
    "silu": lambda: _silu(ACT),
    "hardswish": lambda: _one("HardSwish", ACT),
    "where": lambda: _where(ACT),
    "cast_int32": _cast,
    "softmax_128x128": lambda: _one("Softmax", (2, 128, 128), {"axis": -1}),
    "softmax_64x1000": lambda: _one("Softmax", (64, 1000), {"axis": -1}),
    "logsoftmax_64x1000": lambda: _one("LogSoftmax", (64, 1000), {"axis": -1}),
    "layernorm_128x128": lambda: _layernorm(128, 128),
    "layernorm_196x768": lambda: _layernorm(196, 768),
    "reducemean_hw": lambda: _one("ReduceMean", ACT, {"axes": [2, 3]}),
    "reducesum_last": lambda: _one("ReduceSum", (256, 1024), inits={"a": np.array([-1])}),
    "transpose_0231": lambda: _one("Transpose", ACT, {"perm": [0, 2, 3, 1]}),
    "transpose_0213": lambda: _one("Transpose", (1, 128, 12, 64), {"perm": [0, 2, 1, 3]}),
    "concat_ch": lambda: make_model([helper.make_node("Concat", ["x", "z"], ["y"], axis=1)],
                                    {"x": _x(*ACT), "z": _x(*ACT)}, ["y"]),
    "maxpool_2x2s2": lambda: _one("MaxPool", ACT, {"kernel_shape": [2, 2], "strides": [2, 2]}),
    "maxpool_3x3s2": lambda: _one("MaxPool", ACT, {"kernel_shape": [3, 3], "strides": [2, 2],
                                                   "pads": [1, 1, 1, 1]}),
    "avgpool_3x3s1": lambda: _one("AveragePool", ACT, {"kernel_shape": [3, 3],
                                                       "pads": [1, 1, 1, 1]}),
    "resize_nearest_x2": lambda: _resize(2.0),
    "matmul_batched": lambda: _matmul((12, 128, 64), (12, 64, 128)),
    "matmul_const_384x768": lambda: _matmul((1, 384, 768), (768, 768), const_b=True),
    "einsum_attn": _einsum,
    "conv1d_k3": lambda: _conv(64, 64, 256, 3, dims=1),
    "conv_3x3_s2": lambda: _conv(64, 128, 56, 3, stride=2),
    "conv_dw_3x3": lambda: _conv(128, 128, 56, 3, group=128),
    "conv_grouped_g4": lambda: _conv(64, 64, 56, 3, group=4),
    "conv_5x5": lambda: _conv(32, 32, 56, 5),
    "conv_3d_k3": lambda: _conv(16, 16, 16, 3, dims=3),
    "convtranspose_2x2s2": lambda: _one("ConvTranspose", (1, 128, 8, 8),
                                        {"kernel_shape": [2, 2], "strides": [2, 2]},
                                        {"w": _w(128, 64, 2, 2)}),
    "lstm_50x64x128": lambda: _rnn("LSTM", 50, 64, 128),
    "gru_50x64x128": lambda: _rnn("GRU", 50, 64, 128),
    "topk_5_of_1000": _topk,
    "argmax_last": lambda: _one("ArgMax", (64, 1000), {"axis": -1}),
    "cumsum": lambda: _one("CumSum", (64, 1000), inits={"a": np.array(1)}),
    "resize_bilinear_x2": lambda: make_model(
        [helper.make_node("Resize", ["x", "", "s"], ["y"], mode="linear")],
        {"x": _x(1, 64, 28, 28)}, ["y"], {"s": np.array([1, 1, 2, 2], np.float32)}),
    "pad_reflect": lambda: _one("Pad", ACT, {"mode": "reflect"},
                                {"p": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)}),
    "slice_half_ch": lambda: _one("Slice", ACT, inits={
        "st": np.array([0], np.int64), "en": np.array([32], np.int64),
        "ax": np.array([1], np.int64)}),
    "split_ch": lambda: make_model(
        [helper.make_node("Split", ["x", "sp"], ["y", "z"], axis=1)], {"x": _x(*ACT)},
        ["y", "z"], {"sp": np.array([32, 32], np.int64)}),
    "mul_channel_scale": lambda: make_model(
        [helper.make_node("Mul", ["x", "z"], ["y"])],
        {"x": _x(*ACT), "z": _x(1, 64, 1, 1)}, ["y"]),
    "add_broadcast_row": lambda: make_model(
        [helper.make_node("Add", ["x", "z"], ["y"])],
        {"x": _x(8, 128, 128), "z": _x(1, 128, 128)}, ["y"]),
    "sqrt": lambda: _one("Sqrt", ACT),
    "sin": lambda: _one("Sin", ACT),
    "cos": lambda: _one("Cos", ACT),
    "atan": lambda: _one("Atan", ACT),
    "asin_acos": lambda: _chain([("Tanh", {}), ("Asin", {}), ("Acos", {})], ACT),
    "reciprocal": lambda: _one("Reciprocal", ACT),
    "log": lambda: _one("Log", ACT),
    "abs_neg": lambda: _chain([("Abs", {}), ("Neg", {})], ACT),
    "floor": lambda: _one("Floor", ACT),
    "round": lambda: _one("Round", ACT),
    "softplus": lambda: _one("Softplus", ACT),
    "mish": lambda: _one("Mish", ACT, opset=18),
    "log_positive": lambda: _chain([("Abs", {}), ("Log", {})], ACT),
    "elu": lambda: _one("Elu", ACT),
    "selu": lambda: _one("Selu", ACT),
    "celu": lambda: _one("Celu", ACT),
    "leakyrelu": lambda: _one("LeakyRelu", ACT),
    "prelu_ch": lambda: make_model([helper.make_node("PRelu", ["x", "s"], ["y"])],
                                   {"x": _x(*ACT)}, ["y"], {"s": _w(64, 1, 1)}),
    "clip_relu6": lambda: _one("Clip", ACT, inits={"lo": np.array(0, np.float32),
                                                   "hi": np.array(6, np.float32)}),
    "pow_cube": lambda: _one("Pow", ACT, inits={"e": np.array(3.0, np.float32)}),
    "pow_half": lambda: _one("Pow", ACT, inits={"e": np.array(0.5, np.float32)}),
    "pow_square": lambda: _one("Pow", ACT, inits={"e": np.array(2.0, np.float32)}),
    "batchnorm_alone": lambda: _one("BatchNormalization", ACT, inits={
        "sc": _w(64) + 1, "bi": _w(64), "mu": _w(64), "va": np.abs(_w(64)) + 1}),
    "instancenorm": lambda: _one("InstanceNormalization", ACT, inits={
        "sc": _w(64) + 1, "bi": _w(64)}),
    "groupnorm_g8": lambda: make_model(     # (shape inference leaves the output untyped)
        [helper.make_node("GroupNormalization", ["x", "sc", "bi"], ["y"], num_groups=8)],
        {"x": _x(*ACT)}, ["y"], {"sc": _w(64) + 1, "bi": _w(64)}, opset=21,
        output_types={"y": (np.float32, list(ACT))}),
    "reducemax_ch": lambda: _one("ReduceMax", ACT, {"axes": [1]}),
    "argmax_ch": lambda: _one("ArgMax", ACT, {"axis": 1}),
    "gap": lambda: _one("GlobalAveragePool", (1, 512, 14, 14)),
    "depth_to_space": lambda: _one("DepthToSpace", ACT, {"blocksize": 2}),
    "tile_2x": lambda: _one("Tile", (1, 64, 28, 28), inits={"r": np.array([1, 1, 2, 2], np.int64)}),
    "expand_ch": lambda: _one("Expand", (1, 1, 56, 56), inits={
        "s": np.array([1, 64, 56, 56], np.int64)}),
    "conv_1x1_s2": lambda: _conv(64, 128, 56, 1, stride=2),
    "conv_dw_5x5_s2": lambda: _conv(96, 96, 56, 5, stride=2, group=96),
    "conv_1x1_big": lambda: _conv(256, 256, 28, 1),
    "conv_3x3_512_7x7": lambda: _conv(512, 512, 7, 3),
    "gather_axis1": lambda: make_model(
        [helper.make_node("Gather", ["x", "i"], ["y"], axis=1)], {"x": _x(*ACT)}, ["y"],
        {"i": np.arange(0, 64, 2, dtype=np.int64)}),
    "reduce_l2_ch": lambda: _one("ReduceL2", ACT, {"axes": [1]}),
    "lrn": lambda: _one("LRN", ACT, {"size": 5}),
    "onehot": lambda: make_model(
        [helper.make_node("OneHot", ["x", "d", "v"], ["y"])],
        {"x": np.zeros((4096,), np.int64)}, ["y"],
        {"d": np.array([100], np.int64), "v": np.array([0, 1], np.float32)}),
    "nms": lambda: make_model(
        [helper.make_node("NonMaxSuppression", ["b", "x", "m", "iou", "st"], ["y"])],
        {"b": np.zeros((1, 1000, 4), np.float32), "x": np.zeros((1, 1, 1000), np.float32)},
        ["y"], {"m": np.array([100], np.int64), "iou": np.array([0.5], np.float32),
                "st": np.array([0.0], np.float32)}),
    "gather_rows": lambda: make_model(
        [helper.make_node("Gather", ["e", "x"], ["y"])],
        {"x": np.zeros((1, 128), np.int64)}, ["y"], {"e": _w(1000, 128)}),
}


def run_case(name, model, target, tmp, seconds):
    path = Path(tmp) / f"{name}.onnx"
    onnx.save(model, str(path))
    out = aicc.build(path, target=target, out=Path(tmp) / f"{name}_{target}")
    return bench(out, path, seconds=seconds)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("-t", "--target", default="x86-avx512")
    ap.add_argument("-k", "--keyword", default="")
    ap.add_argument("-s", "--seconds", type=float, default=0.5)
    ap.add_argument("--fixtures", action="store_true",
                    help="the committed PyTorch fixtures (tests/models) instead of the op cases")
    a = ap.parse_args(argv)
    if a.fixtures:
        from tests.models.fixtures import list_fixtures, load_fixture
        cases = {f"{n}_{e}": (lambda n=n, e=e: onnx.load(load_fixture(n, e)))
                 for n, e in list_fixtures()}
    else:
        from benchmarks.op_sweep_more import CASES as MORE
        cases = {**CASES, **MORE}
    print(f"{'case':28s} {'aicc us':>9s} {'ort us':>9s} {'ratio':>6s}   ({a.target})")
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in cases.items():
            if a.keyword not in name:
                continue
            try:
                r = run_case(name, make(), a.target, tmp, a.seconds)
            except AiccError as e:
                print(f"{name:28s} not built: {str(e).splitlines()[0]}")
                continue
            us_a, us_o = r["aicc"]["median_ms"] * 1e3, r["onnxruntime"]["median_ms"] * 1e3
            mark = "  <-- slower" if r["ratio"] > 1.1 else ""
            print(f"{name:28s} {us_a:9.1f} {us_o:9.1f} {r['ratio']:6.2f}{mark}", flush=True)


if __name__ == "__main__":
    main()
