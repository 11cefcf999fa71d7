"""Seeded builders of the golden-test models (onnx.helper + numpy). Each returns
(ModelProto, feeds). Regenerate the committed files with `make golden`."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def _model(nodes, inputs, outputs, inits, name):
    g = helper.make_graph(nodes, name, inputs, outputs,
                          initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)],
                          producer_name="aicc-tests")
    m.ir_version = 8
    return m


def _w(rng, *shape, fan_in=None):
    fan_in = fan_in or int(np.prod(shape[1:]))
    return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)


def tiny_cnn():
    """Conv-BN-Relu-MaxPool-depthwise Conv-Clip-Conv(1x1)-residual Add-GAP-Flatten-Gemm-Softmax."""
    rng = np.random.default_rng(10)
    C = 8
    inits = {
        "w1": _w(rng, C, 3, 3, 3), "b1": np.zeros(C, np.float32),
        "bn_s": rng.uniform(0.5, 1.5, C).astype(np.float32),
        "bn_b": (rng.standard_normal(C) * 0.1).astype(np.float32),
        "bn_m": (rng.standard_normal(C) * 0.1).astype(np.float32),
        "bn_v": rng.uniform(0.5, 1.5, C).astype(np.float32),
        "wd": _w(rng, C, 1, 3, 3), "bd": (rng.standard_normal(C) * 0.1).astype(np.float32),
        "w2": _w(rng, C, C, 1, 1), "b2": (rng.standard_normal(C) * 0.1).astype(np.float32),
        "lo": np.array(0, np.float32), "hi": np.array(6, np.float32),
        "fc_w": _w(rng, 10, C), "fc_b": (rng.standard_normal(10) * 0.1).astype(np.float32),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "bn_s", "bn_b", "bn_m", "bn_v"], ["n1"]),
        helper.make_node("Relu", ["n1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "wd", "bd"], ["d1"], group=C, pads=[1, 1, 1, 1]),
        helper.make_node("Clip", ["d1", "lo", "hi"], ["d2"]),
        helper.make_node("Conv", ["d2", "w2", "b2"], ["c2"]),
        helper.make_node("Add", ["c2", "p1"], ["s"]),
        helper.make_node("GlobalAveragePool", ["s"], ["gap"]),
        helper.make_node("Flatten", ["gap"], ["f"]),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=-1),
    ]
    m = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
               [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 10])], inits,
               "tiny_cnn")
    feeds = {"x": rng.standard_normal((1, 3, 16, 16)).astype(np.float32)}
    return m, feeds


def mlp():
    """MatMul-Add-Relu-MatMul-Add-Sigmoid on a batch of 4."""
    rng = np.random.default_rng(11)
    inits = {"w1": _w(rng, 20, 32, fan_in=20), "b1": (rng.standard_normal(32) * 0.1).astype(np.float32),
             "w2": _w(rng, 32, 5, fan_in=32), "b2": (rng.standard_normal(5) * 0.1).astype(np.float32)}
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]),
             helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["hr"]),
             helper.make_node("MatMul", ["hr", "w2"], ["o"]),
             helper.make_node("Add", ["o", "b2"], ["ob"]),
             helper.make_node("Sigmoid", ["ob"], ["y"])]
    m = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 20])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 5])], inits, "mlp")
    return m, {"x": rng.standard_normal((4, 20)).astype(np.float32)}


def seg_head():
    """Segmentation-style decoder: Conv, ConvTranspose, Resize (linear), Concat, Sigmoid,
    with a Shape->Gather->Concat->Reshape chain that folds at compile time."""
    rng = np.random.default_rng(12)
    inits = {
        "w1": _w(rng, 4, 3, 3, 3), "wt": _w(rng, 4, 4, 2, 2), "bt": np.zeros(4, np.float32),
        "w2": _w(rng, 2, 11, 3, 3), "roi": np.array([], np.float32),
        "scales": np.array([1, 1, 2, 2], np.float32), "idx": np.array([0, 1], np.int64),
        "tail": np.array([-1], np.int64),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("ConvTranspose", ["r1", "wt", "bt"], ["up1"], strides=[2, 2]),
        helper.make_node("Resize", ["r1", "roi", "scales"], ["up2"], mode="linear"),
        helper.make_node("Concat", ["up1", "up2", "x"], ["cat"], axis=1),
        helper.make_node("Conv", ["cat", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Sigmoid", ["c2"], ["s"]),
        helper.make_node("Shape", ["s"], ["shp"]),
        helper.make_node("Gather", ["shp", "idx"], ["nc"]),
        helper.make_node("Concat", ["nc", "tail"], ["newshape"], axis=0),
        helper.make_node("Reshape", ["s", "newshape"], ["y"]),
    ]
    m = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 12, 12])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 144])], inits,
               "seg_head")
    return m, {"x": rng.standard_normal((1, 3, 12, 12)).astype(np.float32)}


def transformer_block():
    """One encoder layer on [1, 16, 32]: Q/K/V MatMul+Add, Reshape/Transpose to 2 heads,
    scaled MatMul, Softmax, MatMul, back, output projection, residual Add, LayerNorm, FFN (64)
    with exact GELU in the Erf form, residual Add, LayerNorm."""
    rng = np.random.default_rng(13)
    S, D, H, F = 16, 32, 2, 64
    hd = D // H
    inits = {"shape_heads": np.array([1, S, H, hd], np.int64),
             "shape_back": np.array([1, S, D], np.int64),
             "scale": np.array(1 / np.sqrt(hd), np.float32), "half": np.array(0.5, np.float32),
             "one": np.array(1, np.float32), "rsqrt2": np.array(1 / np.sqrt(2), np.float32)}

    def w(name, n_in, n_out):
        inits[name] = (rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(np.float32)
        return name

    def b(name, n, base=0.0):
        inits[name] = (base + rng.standard_normal(n) * 0.02).astype(np.float32)
        return name

    def node(op, ins, out, **kw):
        return helper.make_node(op, ins, [out], **kw)

    nodes = []
    for t in "qkv":
        perm = [0, 2, 3, 1] if t == "k" else [0, 2, 1, 3]
        nodes += [node("MatMul", ["x", w(t + "w", D, D)], t + "m"),
                  node("Add", [t + "m", b(t + "b", D)], t),
                  node("Reshape", [t, "shape_heads"], t + "r"),
                  node("Transpose", [t + "r"], t + "t", perm=perm)]
    nodes += [node("MatMul", ["qt", "kt"], "s"), node("Mul", ["s", "scale"], "ss"),
              node("Softmax", ["ss"], "a", axis=-1), node("MatMul", ["a", "vt"], "o"),
              node("Transpose", ["o"], "ot", perm=[0, 2, 1, 3]),
              node("Reshape", ["ot", "shape_back"], "or"),
              node("MatMul", ["or", w("ow", D, D)], "om"),
              node("Add", ["om", b("ob", D)], "proj"), node("Add", ["proj", "x"], "res1"),
              node("LayerNormalization", ["res1", b("g1", D, 1), b("be1", D)], "n1", axis=-1),
              node("MatMul", ["n1", w("f1", D, F)], "h"), node("Add", ["h", b("fb1", F)], "hb"),
              node("Mul", ["hb", "rsqrt2"], "hs"), node("Erf", ["hs"], "he"),
              node("Add", ["he", "one"], "h1"), node("Mul", ["hb", "h1"], "hm"),
              node("Mul", ["hm", "half"], "gelu"),
              node("MatMul", ["gelu", w("f2", F, D)], "f"), node("Add", ["f", b("fb2", D)], "fo"),
              node("Add", ["fo", "n1"], "res2"),
              node("LayerNormalization", ["res2", b("g2", D, 1), b("be2", D)], "y", axis=-1)]
    m = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, S, D])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, S, D])], inits,
               "transformer_block")
    return m, {"x": rng.standard_normal((1, S, D)).astype(np.float32)}


BUILDERS = {"tiny_cnn": tiny_cnn, "mlp": mlp, "seg_head": seg_head,
            "transformer_block": transformer_block}
