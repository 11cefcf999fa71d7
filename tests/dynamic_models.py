"""Models with dynamic dims for tests/test_dynamic.py (onnx.helper + seeded numpy).

transformer: token ids + attention mask [1, seq] -> hidden [1, seq, 32] and a mean-pooled
  [1, 32]; the positions come from a Shape -> Gather -> Slice subgraph of a position table.
lstm: frames [frames, 1, 6] -> LSTM -> the last frame's state -> Gemm -> [1, 4].
gru_batch_first: [1, frames, 5] -> Transpose -> GRU -> Y_h -> [1, 8], plus Y [frames, ...].
cnn: [batch, 3, 12, 12] -> Conv/BN/Relu/MaxPool/Conv/GlobalAveragePool/Gemm/Softmax -> [batch, 10].
fcn: [1, 3, h, w] -> Conv 3x3, MaxPool 2x2 (ceil), Conv, nearest Resize x2, ConvTranspose,
  a residual Add -> [1, 4, ~h, ~w].
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh


def _model(nodes, inputs, outputs, inits, opset=17):
    g = h.make_graph(nodes, "dyn", inputs, outputs,
                     [nh.from_array(np.asarray(v), k) for k, v in inits.items()])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 9
    onnx.checker.check_model(m)
    return m


def _w(rng, *shape, scale=0.3):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def transformer(vocab=50, d=32, heads=2, ffn=64, maxpos=64, layers=2):
    rng = np.random.default_rng(11)
    hd = d // heads
    inits = {"emb": _w(rng, vocab, d, scale=1.0), "pos": _w(rng, maxpos, d, scale=0.5),
             "zero": np.array([0], np.int64), "one": np.array([1], np.int64),
             "idx1": np.array(1, np.int64), "neg": np.array(-1e4, np.float32),
             "onef": np.array(1.0, np.float32), "scale": np.array(1 / np.sqrt(hd), np.float32),
             "shp_split": np.array([1, -1, heads, hd], np.int64),
             "shp_merge": np.array([1, -1, d], np.int64),
             "half": np.array(0.5, np.float32), "rsqrt2": np.array(1 / np.sqrt(2), np.float32)}
    nodes = [
        h.make_node("Gather", ["emb", "ids"], ["tok"]),
        h.make_node("Shape", ["ids"], ["ids_shape"]),
        h.make_node("Gather", ["ids_shape", "idx1"], ["seq_len"]),
        h.make_node("Unsqueeze", ["seq_len", "zero"], ["seq_len1"]),
        h.make_node("Slice", ["pos", "zero", "seq_len1", "zero"], ["posv"]),
        h.make_node("Add", ["tok", "posv"], ["x0"]),
        h.make_node("Cast", ["mask"], ["maskf"], to=T.FLOAT),
        h.make_node("Sub", ["onef", "maskf"], ["inv"]),
        h.make_node("Mul", ["inv", "neg"], ["bias2"]),
        h.make_node("Unsqueeze", ["bias2", "one"], ["bias3"]),
        h.make_node("Unsqueeze", ["bias3", "one"], ["bias4"]),      # [1, 1, 1, seq]
    ]
    x = "x0"
    for L in range(layers):
        p = f"l{L}_"
        for nm, shape in (("wq", (d, d)), ("wk", (d, d)), ("wv", (d, d)), ("wo", (d, d)),
                          ("w1", (d, ffn)), ("w2", (ffn, d))):
            inits[p + nm] = _w(rng, *shape, scale=1 / np.sqrt(shape[0]))
        for nm, n in (("bq", d), ("b1", ffn), ("b2", d), ("ln1b", d), ("ln2b", d)):
            inits[p + nm] = _w(rng, n, scale=0.1)
        inits[p + "ln1s"] = 1 + _w(rng, d, scale=0.1)
        inits[p + "ln2s"] = 1 + _w(rng, d, scale=0.1)
        for t in ("q", "k", "v"):
            nodes.append(h.make_node("MatMul", [x, p + "w" + t], [p + t + "0"]))
            if t == "q":
                nodes.append(h.make_node("Add", [p + "q0", p + "bq"], [p + "q0b"]))
            src = p + "q0b" if t == "q" else p + t + "0"
            nodes.append(h.make_node("Reshape", [src, "shp_split"], [p + t + "r"]))
            perm = [0, 2, 3, 1] if t == "k" else [0, 2, 1, 3]
            nodes.append(h.make_node("Transpose", [p + t + "r"], [p + t + "h"], perm=perm))
        nodes += [
            h.make_node("MatMul", [p + "qh", p + "kh"], [p + "s0"]),
            h.make_node("Mul", [p + "s0", "scale"], [p + "s1"]),
            h.make_node("Add", [p + "s1", "bias4"], [p + "s2"]),
            h.make_node("Softmax", [p + "s2"], [p + "a"], axis=-1),
            h.make_node("MatMul", [p + "a", p + "vh"], [p + "c0"]),
            h.make_node("Transpose", [p + "c0"], [p + "c1"], perm=[0, 2, 1, 3]),
            h.make_node("Reshape", [p + "c1", "shp_merge"], [p + "c2"]),
            h.make_node("MatMul", [p + "c2", p + "wo"], [p + "o"]),
            h.make_node("Add", [x, p + "o"], [p + "r1"]),
            h.make_node("LayerNormalization", [p + "r1", p + "ln1s", p + "ln1b"], [p + "n1"],
                        axis=-1),
            h.make_node("MatMul", [p + "n1", p + "w1"], [p + "f0"]),
            h.make_node("Add", [p + "f0", p + "b1"], [p + "f1"]),
            # GELU, erf form as exporters write it
            h.make_node("Mul", [p + "f1", "rsqrt2"], [p + "g0"]),
            h.make_node("Erf", [p + "g0"], [p + "g1"]),
            h.make_node("Add", [p + "g1", "onef"], [p + "g2"]),
            h.make_node("Mul", [p + "f1", p + "g2"], [p + "g3"]),
            h.make_node("Mul", [p + "g3", "half"], [p + "g4"]),
            h.make_node("MatMul", [p + "g4", p + "w2"], [p + "f2"]),
            h.make_node("Add", [p + "f2", p + "b2"], [p + "f3"]),
            h.make_node("Add", [p + "n1", p + "f3"], [p + "r2"]),
            h.make_node("LayerNormalization", [p + "r2", p + "ln2s", p + "ln2b"], [p + "out"],
                        axis=-1),
        ]
        x = p + "out"
    nodes += [h.make_node("Identity", [x], ["hidden"]),
              h.make_node("ReduceMean", [x], ["pooled"], axes=[1], keepdims=0)]
    return _model(nodes,
                  [h.make_tensor_value_info("ids", T.INT64, [1, "seq"]),
                   h.make_tensor_value_info("mask", T.INT64, [1, "seq"])],
                  [h.make_tensor_value_info("hidden", T.FLOAT, [1, "seq", d]),
                   h.make_tensor_value_info("pooled", T.FLOAT, [1, d])], inits)


def lstm(feat=6, hidden=12, out=4):
    rng = np.random.default_rng(12)
    inits = {"W": _w(rng, 1, 4 * hidden, feat), "R": _w(rng, 1, 4 * hidden, hidden),
             "B": _w(rng, 1, 8 * hidden, scale=0.1), "fc": _w(rng, hidden, out),
             "fcb": _w(rng, out, scale=0.1), "shp": np.array([1, hidden], np.int64)}
    nodes = [h.make_node("LSTM", ["x", "W", "R", "B"], ["Y", "Y_h", "Y_c"], hidden_size=hidden),
             h.make_node("Reshape", ["Y_h", "shp"], ["last"]),
             h.make_node("Gemm", ["last", "fc", "fcb"], ["y"])]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, ["frames", 1, feat])],
                  [h.make_tensor_value_info("y", T.FLOAT, [1, out])], inits)


def gru_batch_first(feat=5, hidden=8):
    rng = np.random.default_rng(13)
    inits = {"W": _w(rng, 2, 3 * hidden, feat), "R": _w(rng, 2, 3 * hidden, hidden),
             "B": _w(rng, 2, 6 * hidden, scale=0.1)}
    nodes = [h.make_node("Transpose", ["x"], ["xt"], perm=[1, 0, 2]),
             h.make_node("GRU", ["xt", "W", "R", "B"], ["Y", "Y_h"], hidden_size=hidden,
                         direction="bidirectional", linear_before_reset=1),
             h.make_node("Transpose", ["Y_h"], ["state"], perm=[1, 0, 2]),
             h.make_node("Tanh", ["Y"], ["seq_out"])]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [1, "frames", feat])],
                  [h.make_tensor_value_info("state", T.FLOAT, [1, 2, hidden]),
                   h.make_tensor_value_info("seq_out", T.FLOAT, ["frames", 2, 1, hidden])],
                  inits)


def cnn(classes=10):
    rng = np.random.default_rng(14)
    inits = {"w1": _w(rng, 8, 3, 3, 3), "b1": _w(rng, 8, scale=0.1),
             "s": 1 + _w(rng, 8, scale=0.1), "bb": _w(rng, 8, scale=0.1),
             "m": _w(rng, 8, scale=0.1), "v": 1 + np.abs(_w(rng, 8, scale=0.1)),
             "w2": _w(rng, 16, 8, 3, 3), "fc": _w(rng, classes, 16), "fcb": _w(rng, classes)}
    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             h.make_node("BatchNormalization", ["c1", "s", "bb", "m", "v"], ["n1"]),
             h.make_node("Relu", ["n1"], ["r1"]),
             h.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             h.make_node("Conv", ["p1", "w2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
             h.make_node("Relu", ["c2"], ["r2"]),
             h.make_node("GlobalAveragePool", ["r2"], ["gp"]),
             h.make_node("Flatten", ["gp"], ["fl"]),
             h.make_node("Gemm", ["fl", "fc", "fcb"], ["logits"], transB=1),
             h.make_node("Softmax", ["logits"], ["y"], axis=1)]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, ["batch", 3, 12, 12])],
                  [h.make_tensor_value_info("y", T.FLOAT, ["batch", classes])], inits)


def mobilenet_block(c=32):
    """MobileNetV2-like block with dynamic batch, height and width: 3x3 stride-2 conv ->
    Relu, depthwise 3x3 -> Clip(0,6), pointwise + residual Add, depthwise stride 2, then the
    spatial mean. On the x86 targets layout-nhwc runs the convs channel-last (aicc.ConvNHWC,
    MatMul), whose padding rules follow the NHWC axes."""
    rng = np.random.default_rng(16)
    inits = {"w0": _w(rng, c, 3, 3, 3), "wd": _w(rng, c, 1, 3, 3), "bd": _w(rng, c, scale=0.1),
             "wp": _w(rng, c, c, 1, 1), "bp": _w(rng, c, scale=0.1), "we": _w(rng, c, 1, 3, 3),
             "lo": np.array(0, np.float32), "hi": np.array(6, np.float32)}
    nodes = [h.make_node("Conv", ["x", "w0"], ["c0"], pads=[1, 1, 1, 1], strides=[2, 2]),
             h.make_node("Relu", ["c0"], ["r0"]),
             h.make_node("Conv", ["r0", "wd", "bd"], ["c1"], pads=[1, 1, 1, 1], group=c),
             h.make_node("Clip", ["c1", "lo", "hi"], ["r1"]),
             h.make_node("Conv", ["r1", "wp", "bp"], ["c2"]),
             h.make_node("Add", ["c2", "r0"], ["a"]),
             h.make_node("Conv", ["a", "we"], ["c3"], pads=[1, 1, 1, 1], strides=[2, 2], group=c),
             h.make_node("GlobalAveragePool", ["c3"], ["y"])]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, ["batch", 3, "h", "w"])],
                  [h.make_tensor_value_info("y", T.FLOAT, ["batch", c, 1, 1])], inits)


def fcn():
    rng = np.random.default_rng(15)
    inits = {"w1": _w(rng, 6, 3, 3, 3), "b1": _w(rng, 6, scale=0.1),
             "w2": _w(rng, 6, 6, 3, 3), "b2": _w(rng, 6, scale=0.1),
             "wt": _w(rng, 6, 4, 2, 2), "bt": _w(rng, 4, scale=0.1),
             "w3": _w(rng, 4, 6, 1, 1), "b3": _w(rng, 4, scale=0.1),
             "scales": np.array([1, 1, 2, 2], np.float32)}
    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             h.make_node("Relu", ["c1"], ["r1"]),
             h.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2],
                         ceil_mode=1),
             h.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1],
                         dilations=[1, 1]),
             h.make_node("Relu", ["c2"], ["r2"]),
             h.make_node("ConvTranspose", ["r2", "wt", "bt"], ["up1"], strides=[2, 2]),
             h.make_node("Resize", ["r2", "", "scales"], ["up2r"], mode="nearest"),
             h.make_node("Conv", ["up2r", "w3", "b3"], ["up2"]),
             h.make_node("Add", ["up1", "up2"], ["y"])]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [1, 3, "h", "w"])],
                  [h.make_tensor_value_info("y", T.FLOAT, [1, 4, "oh", "ow"])], inits)


def fcn_bilinear():
    """Conv stride 2 -> bilinear x2 (half-pixel coordinates, the border clamps) -> Conv."""
    rng = np.random.default_rng(16)
    inits = {"w1": _w(rng, 4, 3, 3, 3), "w2": _w(rng, 2, 4, 3, 3),
             "scales": np.array([1, 1, 2, 2], np.float32)}
    nodes = [h.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
             h.make_node("Relu", ["c1"], ["r1"]),
             h.make_node("Resize", ["r1", "", "scales"], ["up"], mode="linear",
                         coordinate_transformation_mode="pytorch_half_pixel"),
             h.make_node("Conv", ["up", "w2"], ["y"], pads=[1, 1, 1, 1])]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [1, 3, "h", "w"])],
                  [h.make_tensor_value_info("y", T.FLOAT, [1, 2, "oh", "ow"])], inits)


def resize_to_input_size():
    """Conv stride 2, then a Resize back to the input's own height and width (sizes taken
    with Shape): at odd sizes the scale is not 2, which padding cannot follow."""
    rng = np.random.default_rng(17)
    inits = {"w1": _w(rng, 4, 3, 3, 3), "s": np.array([2], np.int64),
             "e": np.array([4], np.int64), "nc": np.array([1, 4], np.int64)}
    nodes = [h.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
             h.make_node("Shape", ["x"], ["xs"]),
             h.make_node("Slice", ["xs", "s", "e"], ["hw"]),
             h.make_node("Concat", ["nc", "hw"], ["sizes"], axis=0),
             h.make_node("Resize", ["c1", "", "", "sizes"], ["y"], mode="nearest")]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [1, 3, "h", "w"])],
                  [h.make_tensor_value_info("y", T.FLOAT, [1, 4, "h", "w"])], inits)
