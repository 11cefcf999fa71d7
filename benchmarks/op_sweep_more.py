"""More one-node cases for benchmarks.op_sweep (binary ops, reductions over other axes, half
Casts, norms, dilated / asymmetric / grouped convs, Resize modes, GridSample, attention
pieces, ...). ``python -m benchmarks.op_sweep`` runs them after its own cases; the cases
still slower than onnxruntime go into docs/PERFORMANCE.md's notes by hand."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from benchmarks.op_sweep import ACT, _chain, _one, _w, _x, make_model


def _bin(op, a, b, const=False, opset=17):
    if const:
        return make_model(
            [helper.make_node(op, ["x", "z"], ["y"])],
            {"x": _x(*a)},
            ["y"],
            {"z": _w(*b) + 2},
            opset=opset,
        )
    return make_model(
        [helper.make_node(op, ["x", "z"], ["y"])], {"x": _x(*a), "z": _x(*b)}, ["y"], opset=opset
    )


def _conv2(cin, cout, hw, k, **a):
    kh, kw = k if isinstance(k, tuple) else (k, k)
    attrs = dict(
        kernel_shape=[kh, kw],
        pads=a.pop("pads", [kh // 2 * a.get("dil", 1), kw // 2 * a.get("dil", 1)] * 2),
        strides=[a.pop("stride", 1)] * 2,
        group=a.pop("group", 1),
        dilations=[a.pop("dil", 1)] * 2,
    )
    shape = (1, cin, hw, hw) if isinstance(hw, int) else (1, cin) + hw
    return _one("Conv", shape, attrs, {"w": _w(cout, cin // attrs["group"], kh, kw), "b": _w(cout)})


def _conv1d(cin, cout, n, k, pads, dil=1, group=1):
    attrs = dict(kernel_shape=[k], pads=pads, dilations=[dil], group=group)
    return _one("Conv", (1, cin, n), attrs, {"w": _w(cout, cin // group, k), "b": _w(cout)})


CASES = {
    "div_ch": lambda: _bin("Div", ACT, (1, 64, 1, 1), True),
    "div_same": lambda: _bin("Div", ACT, ACT),
    "sub_row": lambda: _bin("Sub", (8, 128, 128), (128,)),
    "max_same": lambda: _bin("Max", ACT, ACT),
    "min_bcast": lambda: _bin("Min", ACT, (1, 1, 56, 56)),
    "pow_rt": lambda: _bin("Pow", ACT, ACT),
    "mod_f": lambda: make_model(
        [helper.make_node("Mod", ["x", "z"], ["y"], fmod=1)],
        {"x": _x(*ACT)},
        ["y"],
        {"z": np.array(3.0, np.float32)},
    ),
    "softmax_ch": lambda: _one("Softmax", (1, 21, 128, 128), {"axis": 1}, opset=13),
    "logsoftmax_ch": lambda: _one("LogSoftmax", (1, 21, 128, 128), {"axis": 1}, opset=13),
    "reducesum_hw": lambda: _one(
        "ReduceSum", ACT, inits={"ax": np.array([2, 3], np.int64)}, opset=13
    ),
    "reducemean_last": lambda: _one("ReduceMean", (128, 768), {"axes": [-1]}),
    "reducelse": lambda: _one("ReduceLogSumExp", (64, 1000), {"axes": [1]}),
    "reduceprod": lambda: _one("ReduceProd", (64, 1000), {"axes": [1]}),
    "reducemin_hw": lambda: _one("ReduceMin", ACT, {"axes": [2, 3]}),
    "globalmaxpool": lambda: _one("GlobalMaxPool", (1, 512, 14, 14)),
    "convtranspose_3x3s2": lambda: make_model(
        [
            helper.make_node(
                "ConvTranspose",
                ["x", "w"],
                ["y"],
                strides=[2, 2],
                pads=[1, 1, 1, 1],
                output_padding=[1, 1],
            )
        ],
        {"x": _x(1, 64, 28, 28)},
        ["y"],
        {"w": _w(64, 32, 3, 3)},
    ),
    "convtranspose_4x4s2": lambda: make_model(
        [helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1])],
        {"x": _x(1, 64, 28, 28)},
        ["y"],
        {"w": _w(64, 32, 4, 4)},
    ),
    "pad_const": lambda: _one(
        "Pad", ACT, inits={"p": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)}
    ),
    "pad_edge": lambda: _one(
        "Pad", ACT, {"mode": "edge"}, inits={"p": np.array([0, 0, 2, 2, 0, 0, 2, 2], np.int64)}
    ),
    "space_to_depth": lambda: _one("SpaceToDepth", ACT, {"blocksize": 2}),
    "sum3": lambda: make_model(
        [helper.make_node("Sum", ["x", "a", "b"], ["y"])],
        {"x": _x(*ACT), "a": _x(*ACT), "b": _x(*ACT)},
        ["y"],
    ),
    "mean3": lambda: make_model(
        [helper.make_node("Mean", ["x", "a", "b"], ["y"])],
        {"x": _x(*ACT), "a": _x(*ACT), "b": _x(*ACT)},
        ["y"],
    ),
    "lpnorm": lambda: _one("LpNormalization", ACT, {"axis": 1}),
    "gather_elements": lambda: make_model(
        [helper.make_node("GatherElements", ["x", "i"], ["y"], axis=1)],
        {"x": _x(64, 1000)},
        ["y"],
        {"i": np.random.default_rng(0).integers(0, 1000, (64, 100)).astype(np.int64)},
    ),
    "hardmax": lambda: _one("Hardmax", (64, 1000)),
    "tan": lambda: _one("Tan", ACT),
    "sinh": lambda: _one("Sinh", ACT),
    "tanh_small": lambda: _one("Tanh", (1, 128, 768)),
    "clip_rt": lambda: make_model(
        [helper.make_node("Clip", ["x", "lo", "hi"], ["y"])],
        {"x": _x(*ACT), "lo": np.zeros((), np.float32), "hi": np.zeros((), np.float32)},
        ["y"],
    ),
    "equal_where": lambda: make_model(
        [
            helper.make_node("Equal", ["x", "z"], ["c"]),
            helper.make_node("Where", ["c", "x", "z"], ["y"]),
        ],
        {"x": _x(*ACT), "z": _x(*ACT)},
        ["y"],
    ),
    "not_and": lambda: make_model(
        [
            helper.make_node("Less", ["x", "z"], ["c"]),
            helper.make_node("Not", ["c"], ["d"]),
            helper.make_node("Cast", ["d"], ["y"], to=TensorProto.FLOAT),
        ],
        {"x": _x(*ACT), "z": _x(*ACT)},
        ["y"],
    ),
    "isnan": lambda: make_model(
        [
            helper.make_node("IsNaN", ["x"], ["c"]),
            helper.make_node("Cast", ["c"], ["y"], to=TensorProto.FLOAT),
        ],
        {"x": _x(*ACT)},
        ["y"],
    ),
    "cast_f16": lambda: make_model(
        [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT16)], {"x": _x(*ACT)}, ["y"]
    ),
    "cast_from_f16": lambda: make_model(
        [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)],
        {"x": np.zeros(ACT, np.float16)},
        ["y"],
    ),
    "batch_matmul_4d": lambda: make_model(
        [helper.make_node("MatMul", ["x", "z"], ["y"])],
        {"x": _x(1, 12, 128, 64), "z": _x(1, 12, 64, 128)},
        ["y"],
    ),
    "transpose_0312": lambda: _one("Transpose", ACT, {"perm": [0, 3, 1, 2]}),
    "shrink": lambda: _one("Shrink", ACT, {"lambd": 0.5}),
    "thresholded": lambda: _one("ThresholdedRelu", ACT, opset=10),
    "softsign": lambda: _one("Softsign", ACT),
    "sign": lambda: _one("Sign", ACT),
    "neg_abs_ceil": lambda: _chain([("Neg", {}), ("Ceil", {})], ACT),
    "erf_gelu_exact": lambda: _one("Gelu", (1, 128, 3072), opset=20),
    "layernorm_noaffine": lambda: make_model(
        [helper.make_node("LayerNormalization", ["x", "s"], ["y"], axis=-1)],
        {"x": _x(196, 768)},
        ["y"],
        {"s": _w(768) + 1},
    ),
    "rmsnorm": lambda: make_model(
        [helper.make_node("RMSNormalization", ["x", "s"], ["y"], axis=-1)],
        {"x": _x(196, 768)},
        ["y"],
        {"s": _w(768) + 1},
        opset=23,
    ),
    "conv_dil2_256": lambda: _conv2(256, 256, 33, 3, dil=2),
    "conv_dil4_128": lambda: _conv2(128, 128, 33, 3, dil=4),
    "conv_1x7_128": lambda: _conv2(128, 128, 17, (1, 7)),
    "conv_7x1_128": lambda: _conv2(128, 128, 17, (7, 1)),
    "conv_g32_256": lambda: _conv2(256, 256, 28, 3, group=32),
    "conv_g2_64": lambda: _conv2(64, 64, 56, 3, group=2),
    "conv_7x7s2_first": lambda: _conv2(3, 64, 224, 7, stride=2),
    "conv_3x3_first_s2": lambda: _conv2(3, 32, 224, 3, stride=2),
    "conv_1x1_2048": lambda: _conv2(1024, 2048, 7, 1),
    "conv_3x3_1ch": lambda: _conv2(1, 16, 128, 3),
    "conv_rect_in": lambda: _conv2(32, 32, (20, 100), 3),
    "conv1d_k9": lambda: _conv1d(64, 64, 1000, 9, [4, 4]),
    "conv1d_dw_k31": lambda: _conv1d(256, 256, 500, 31, [15, 15], group=256),
    "resize_cubic": lambda: make_model(
        [helper.make_node("Resize", ["x", "", "s"], ["y"], mode="cubic")],
        {"x": _x(1, 3, 128, 128)},
        ["y"],
        {"s": np.array([1, 1, 2, 2], np.float32)},
    ),
    "resize_linear_ac": lambda: make_model(
        [
            helper.make_node(
                "Resize",
                ["x", "", "s"],
                ["y"],
                mode="linear",
                coordinate_transformation_mode="align_corners",
            )
        ],
        {"x": _x(1, 64, 64, 64)},
        ["y"],
        {"s": np.array([1, 1, 2, 2], np.float32)},
    ),
    "gridsample": lambda: make_model(
        [helper.make_node("GridSample", ["x", "g"], ["y"], align_corners=0)],
        {
            "x": _x(1, 32, 64, 64),
            "g": (np.random.default_rng(0).uniform(-1, 1, (1, 64, 64, 2))).astype(np.float32),
        },
        ["y"],
        opset=16,
    ),
    "avgpool_ceil": lambda: _one(
        "AveragePool", (1, 64, 57, 57), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}
    ),
    "maxpool_3x3s1": lambda: _one("MaxPool", ACT, {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    "lstm_bidir": lambda: make_model(
        [
            helper.make_node(
                "LSTM", ["x", "W", "R", "B"], ["y"], hidden_size=128, direction="bidirectional"
            )
        ],
        {"x": _x(50, 1, 64)},
        ["y"],
        {"W": _w(2, 512, 64), "R": _w(2, 512, 128), "B": _w(2, 1024)},
    ),
    "matmul_bias_gelu": lambda: make_model(
        [
            helper.make_node("MatMul", ["x", "w"], ["m"]),
            helper.make_node("Add", ["m", "b"], ["a"]),
            helper.make_node("Gelu", ["a"], ["y"]),
        ],
        {"x": _x(1, 197, 768)},
        ["y"],
        {"w": _w(768, 3072), "b": _w(3072)},
        opset=20,
    ),
    "attn_sdpa": lambda: make_model(
        [
            helper.make_node("MatMul", ["q", "kt"], ["s"]),
            helper.make_node("Mul", ["s", "sc"], ["ss"]),
            helper.make_node("Add", ["ss", "mask"], ["sm"]),
            helper.make_node("Softmax", ["sm"], ["p"], axis=-1),
            helper.make_node("MatMul", ["p", "v"], ["y"]),
        ],
        {
            "q": _x(1, 12, 197, 64),
            "kt": _x(1, 12, 64, 197),
            "v": _x(1, 12, 197, 64),
            "mask": _x(1, 1, 1, 197),
        },
        ["y"],
        {"sc": np.array(0.125, np.float32)},
    ),
    "scatternd": lambda: make_model(
        [helper.make_node("ScatterND", ["x", "i", "u"], ["y"])],
        {"x": _x(1000, 64), "u": _x(100, 64)},
        ["y"],
        {"i": np.arange(0, 1000, 10, dtype=np.int64).reshape(100, 1)},
    ),
    "instnorm_big": lambda: _one(
        "InstanceNormalization", (1, 64, 128, 128), inits={"sc": _w(64) + 1, "bi": _w(64)}
    ),
    "reduce_mean_ch": lambda: _one("ReduceMean", ACT, {"axes": [1]}),
    "argmax_ch21": lambda: _one("ArgMax", (1, 21, 128, 128), {"axis": 1}),
    "cumsum_last": lambda: make_model(
        [helper.make_node("CumSum", ["x", "a"], ["y"])],
        {"x": _x(64, 1000)},
        ["y"],
        {"a": np.array(1, np.int64)},
    ),
    "einsum_bmk": lambda: make_model(
        [helper.make_node("Einsum", ["x", "w"], ["y"], equation="bmk,kn->bmn")],
        {"x": _x(8, 128, 256)},
        ["y"],
        {"w": _w(256, 256)},
    ),
    "conv1d_dil8": lambda: _conv1d(64, 64, 1000, 3, [8, 8], dil=8),
    "conv1d_dil1": lambda: _conv1d(64, 64, 1000, 3, [1, 1]),
    "conv1d_causal_dil4": lambda: _conv1d(128, 128, 2000, 2, [4, 0], dil=4),
    "conv_dil1_256": lambda: _conv2(256, 256, 33, 3),
    "dw_dil2_384": lambda: _conv2(384, 384, 33, 3, dil=2, group=384),
    "dw_dil4_576": lambda: _conv2(576, 576, 33, 3, dil=4, group=576),
    "aspp_dil12_320": lambda: _conv2(320, 256, 33, 3, dil=12),
    "pow_general": lambda: make_model(
        [helper.make_node("Pow", ["x", "e"], ["y"])],
        {"x": _x(*ACT)},
        ["y"],
        {"e": np.array(1.7, np.float32)},
    ),
    "sqrt_div_l2": lambda: make_model(
        [
            helper.make_node("ReduceL2", ["x"], ["n"], axes=[1], keepdims=1),
            helper.make_node("Div", ["x", "n"], ["y"]),
        ],
        {"x": _x(*ACT)},
        ["y"],
    ),
}
