"""Benchmark models: small committed PyTorch exports (tests/models) and builders
(onnx.helper + numpy, seeded) for the transformer encoder and plain GEMMs."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent


def _save(nodes, inputs, outputs, inits, path, opset=17):
    import onnx
    g = helper.make_graph(nodes, path.stem, inputs, outputs,
                          initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return path


def gemm(path, m, n, k):
    """y[m,n] = x[m,k] @ w[k,n] (w constant)."""
    r = np.random.default_rng(0)
    w = (r.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    return _save([helper.make_node("MatMul", ["x", "w"], ["y"])],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])], {"w": w}, path)


def transformer(path, layers=2, seq=128, width=128, heads=2, ffn=512):
    """Encoder: per layer multi-head self-attention + residual + LayerNorm, FFN with exact
    GELU + residual + LayerNorm. Input [1, seq, width]."""
    r = np.random.default_rng(1)
    hd = width // heads
    nodes, inits = [], {}

    def w(name, *shape):
        inits[name] = (r.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)
        return name

    def b(name, n):
        inits[name] = (r.standard_normal(n) * 0.02).astype(np.float32)
        return name

    inits["shape_heads"] = np.array([1, seq, heads, hd], np.int64)
    inits["shape_back"] = np.array([1, seq, width], np.int64)
    inits["scale"] = np.array(1.0 / np.sqrt(hd), np.float32)
    inits["half"] = np.array(0.5, np.float32)
    inits["one"] = np.array(1.0, np.float32)
    inits["rsqrt2"] = np.array(1 / np.sqrt(2), np.float32)
    x = "x"
    for L in range(layers):
        p = f"l{L}_"
        qkv = []
        for t in "qkv":
            nodes.append(helper.make_node("MatMul", [x, w(p + t + "w", width, width)], [p + t + "m"]))
            nodes.append(helper.make_node("Add", [p + t + "m", b(p + t + "b", width)], [p + t]))
            nodes.append(helper.make_node("Reshape", [p + t, "shape_heads"], [p + t + "r"]))
            perm = [0, 2, 3, 1] if t == "k" else [0, 2, 1, 3]
            nodes.append(helper.make_node("Transpose", [p + t + "r"], [p + t + "t"], perm=perm))
            qkv.append(p + t + "t")
        q, k, v = qkv
        nodes += [helper.make_node("MatMul", [q, k], [p + "s"]),
                  helper.make_node("Mul", [p + "s", "scale"], [p + "ss"]),
                  helper.make_node("Softmax", [p + "ss"], [p + "a"], axis=-1),
                  helper.make_node("MatMul", [p + "a", v], [p + "o"]),
                  helper.make_node("Transpose", [p + "o"], [p + "ot"], perm=[0, 2, 1, 3]),
                  helper.make_node("Reshape", [p + "ot", "shape_back"], [p + "or"]),
                  helper.make_node("MatMul", [p + "or", w(p + "ow", width, width)], [p + "om"]),
                  helper.make_node("Add", [p + "om", b(p + "ob", width)], [p + "proj"]),
                  helper.make_node("Add", [p + "proj", x], [p + "res1"]),
                  helper.make_node("LayerNormalization", [p + "res1", b(p + "g1", width),
                                                          b(p + "be1", width)], [p + "n1"],
                                   axis=-1),
                  helper.make_node("MatMul", [p + "n1", w(p + "f1", width, ffn)], [p + "h"]),
                  helper.make_node("Add", [p + "h", b(p + "fb1", ffn)], [p + "hb"]),
                  helper.make_node("Mul", [p + "hb", "rsqrt2"], [p + "hs"]),
                  helper.make_node("Erf", [p + "hs"], [p + "he"]),
                  helper.make_node("Add", [p + "he", "one"], [p + "h1"]),
                  helper.make_node("Mul", [p + "hb", p + "h1"], [p + "hm"]),
                  helper.make_node("Mul", [p + "hm", "half"], [p + "gelu"]),
                  helper.make_node("MatMul", [p + "gelu", w(p + "f2", ffn, width)], [p + "f"]),
                  helper.make_node("Add", [p + "f", b(p + "fb2", width)], [p + "fo"]),
                  helper.make_node("Add", [p + "fo", p + "n1"], [p + "res2"]),
                  helper.make_node("LayerNormalization", [p + "res2", b(p + "g2", width),
                                                          b(p + "be2", width)],
                                   [p + "n2" if L < layers - 1 else "y"], axis=-1)]
        for g in ("g1", "g2"):
            inits[p + g] = (1 + inits[p + g]).astype(np.float32)
        x = p + "n2"
    return _save(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, width])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq, width])], inits,
                 path)


def fixture(name, exporter, out_dir):
    sys.path.insert(0, str(ROOT))
    from tests.models.fixtures import load_fixture
    return load_fixture(name, exporter, out_dir=out_dir)


def quantized_qdq(src: Path, path: Path, per_channel: bool = False,
                  activations: str = "uint8") -> Path:
    """``src`` quantized by onnxruntime's static quantizer in the QDQ format (uint8 or int8
    activations, int8 weights per tensor or per output channel), calibrated on 8 seeded
    random inputs."""
    import onnx
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)
    m = onnx.load(str(src))
    inp = m.graph.input[0]
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]

    class Reader(CalibrationDataReader):
        def __init__(self):
            r = np.random.default_rng(0)
            self.data = iter([{inp.name: r.standard_normal(shape).astype(np.float32)}
                              for _ in range(8)])

        def get_next(self):
            return next(self.data, None)

    quantize_static(str(src), str(path), Reader(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QInt8 if activations == "int8" else QuantType.QUInt8,
                    weight_type=QuantType.QInt8,
                    per_channel=per_channel)
    return path


def float16(src: Path, path: Path) -> Path:
    """``src`` with every float32 initializer, Constant and graph input / output in float16
    (what a model converted to half precision looks like; both engines compute each op in
    float32 and round its result)."""
    import onnx
    from onnx import TensorProto, numpy_helper
    m = onnx.load(str(src))
    g = m.graph
    for k, t in enumerate(g.initializer):
        if t.data_type == TensorProto.FLOAT:
            a = numpy_helper.to_array(t).astype(np.float16)
            g.initializer[k].CopyFrom(numpy_helper.from_array(a, t.name))
    for v in list(g.input) + list(g.output):
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            v.type.tensor_type.elem_type = TensorProto.FLOAT16
    del g.value_info[:]
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == TensorProto.FLOAT:
                a.t.CopyFrom(numpy_helper.from_array(
                    numpy_helper.to_array(a.t).astype(np.float16), a.t.name))
    onnx.checker.check_model(m)
    onnx.save(onnx.shape_inference.infer_shapes(m), str(path))
    return path


def all_models(out_dir):
    """[(label, path, flops or None)]"""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    res = [
        ("DS-CNN KWS 49x10", fixture("dscnn", "dynamo", out_dir)),
        ("ResNet-8 32x32", fixture("resnet8", "dynamo", out_dir)),
        ("MobileNetV1-0.25 96x96", fixture("mobilenetv1_025", "dynamo", out_dir)),
        ("FC autoencoder 640", fixture("fc_autoencoder", "dynamo", out_dir)),
        ("MobileNetV2 224x224", fixture("mobilenetv2", "dynamo", out_dir)),
        ("ResNet-18 224x224", fixture("resnet18", "dynamo", out_dir)),
        ("Transformer enc 2x(128,128,h2,ffn512)", transformer(out_dir / "transformer.onnx")),
        ("GEMM 512x512x512", gemm(out_dir / "gemm512.onnx", 512, 512, 512)),
        ("GEMM 1x512x512", gemm(out_dir / "gemm1.onnx", 1, 512, 512)),
        ("GEMM 4x512x512", gemm(out_dir / "gemm4.onnx", 4, 512, 512)),
        ("GEMM 8x512x512", gemm(out_dir / "gemm8.onnx", 8, 512, 512)),
        ("GEMM 16x512x512", gemm(out_dir / "gemm16.onnx", 16, 512, 512)),
    ]
    # float16 (no issue target): each op in float32 between the roundings (upcast-half)
    res.append(("DS-CNN KWS float16", float16(res[0][1], out_dir / "dscnn_f16.onnx")))
    res.append(("MobileNetV2 float16", float16(res[4][1], out_dir / "mobilenetv2_f16.onnx")))
    # int8 (no issue target; fuse-qdq runs it on the integer kernels on x86-avx512-vnni / -amx)
    res.append(("ResNet-8 int8 (QDQ)", quantized_qdq(res[1][1], out_dir / "resnet8_qdq.onnx")))
    res.append(("MobileNetV2 int8 (QDQ)",
                quantized_qdq(res[4][1], out_dir / "mobilenetv2_qdq.onnx")))
    res.append(("MobileNetV2 int8 per-channel (QDQ)",
                quantized_qdq(res[4][1], out_dir / "mobilenetv2_qdq_pc.onnx", per_channel=True)))
    return res
