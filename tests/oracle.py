"""Test helpers: build small ONNX models and compare aicc's compiled C with onnxruntime
(falling back to onnx.reference where onnxruntime lacks the op/dtype)."""
from __future__ import annotations

import itertools
import os
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

import aicc
from aicc.runner import open_bundle
from aicc.targets import host_flags

_counter = itertools.count()

# every bundle built by the tests must compile warning-free with these
PLAIN_CFLAGS = "-O2 -std=c99 -Wall -Wextra -pedantic -Wshadow -Werror"
STRICT_CFLAGS = PLAIN_CFLAGS
# `make sanitize` sets AICC_SANITIZE=1 (and preloads libasan): every bundle is then built with
# AddressSanitizer + UndefinedBehaviorSanitizer, and any report aborts the test run
if os.environ.get("AICC_SANITIZE") == "1":
    STRICT_CFLAGS = ("-O1 -g -std=c99 -Wall -Wextra -pedantic -Wshadow -Werror "
                     "-fsanitize=address,undefined -fno-sanitize-recover=all "
                     "-fno-omit-frame-pointer")


# `make checked` sets AICC_CHECKED=1: every bundle is built in checked mode (redzones after
# every arena buffer, live buffers and inputs summed around every step; a stray write fails
# the run naming the step)
CHECKED = os.environ.get("AICC_CHECKED") == "1"


def make_model(nodes, inputs: dict, outputs: list, initializers: dict | None = None,
               opset: int = 17, output_types: dict | None = None) -> onnx.ModelProto:
    """nodes: NodeProtos; inputs: {name: ndarray} (graph inputs, typed from the arrays);
    outputs: names (types from shape inference unless output_types {name: (np dtype, shape)});
    initializers: {name: ndarray}."""
    ins = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape))
           for k, v in inputs.items()]
    outs = []
    for o in outputs:
        if output_types and o in output_types:
            dt, shape = output_types[o]
            outs.append(helper.make_tensor_value_info(o, helper.np_dtype_to_tensor_dtype(np.dtype(dt)),
                                                      shape))
        else:
            outs.append(helper.make_value_info(o, helper.TypeProto()))
    inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in (initializers or {}).items()]
    graph = helper.make_graph(nodes, "test", ins, outs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 10)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    # give graph outputs their inferred types so the model is self-describing
    types = {vi.name: vi for vi in inferred.graph.value_info}
    for o in inferred.graph.output:
        if not o.type.HasField("tensor_type") and o.name in types:
            o.CopyFrom(types[o.name])
    return inferred


def _x86_without_vnni() -> bool:
    import platform
    flags = host_flags()
    return (platform.machine() in ("x86_64", "AMD64", "i686") and bool(flags)
            and not flags & {"avx512_vnni", "avx_vnni"})


def ort_exact(model: onnx.ModelProto) -> bool:
    """Whether onnxruntime's outputs of ``model`` are an oracle on this CPU. On x86 CPUs
    without VNNI its 8-bit integer GEMMs (QLinearConv, QLinearMatMul, MatMulInteger,
    ConvInteger and the QDQ patterns it fuses into them; int8 activations are moved to uint8)
    add pairs of uint8 x int8 products in int16 (vpmaddubsw), which saturates (onnxruntime's
    quantization docs: reduce_range). On an AMD EPYC of Zen 3: one output of a MatMulInteger
    2876 off; the DS-CNN quantized by its own quantizer 7 output steps from onnx.reference's
    values, which aicc's equal. With VNNI, on other CPUs and for models without those ops it
    is exact. Tests compare such models with onnx.reference (or their own float64
    form) only, where this is False."""
    g = model.graph
    ops = {n.op_type for n in g.node}
    integer = ops & {"QLinearConv", "QLinearMatMul", "MatMulInteger", "ConvInteger"} or (
        "DequantizeLinear" in ops and ops & {"Conv", "MatMul", "Gemm"})
    return not (integer and _x86_without_vnni())


def _onnx_reference(model: onnx.ModelProto, feeds: dict) -> list:
    """onnx.reference's outputs; a model of an opset whose versions of an op it lacks (e.g.
    DequantizeLinear 13: it has 19 on) is converted to opset 21 first."""
    from onnx.reference import ReferenceEvaluator
    try:
        return ReferenceEvaluator(model).run(None, feeds)
    except RuntimeError as e:
        if "No implementation for operator" not in str(e):
            raise
    from onnx import version_converter
    return ReferenceEvaluator(version_converter.convert_version(model, 21)).run(None, feeds)


def reference(model: onnx.ModelProto, feeds: dict) -> dict:
    """onnxruntime's outputs (one thread), or onnx.reference's where onnxruntime lacks the
    op or dtype or is not exact on this CPU (ort_exact)."""
    names = [o.name for o in model.graph.output]
    if not ort_exact(model):
        return dict(zip(names, _onnx_reference(model, feeds)))
    try:
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        sess = ort.InferenceSession(model.SerializeToString(), so,
                                    providers=["CPUExecutionProvider"])
        return dict(zip(names, sess.run(None, feeds)))
    except Exception:  # noqa: BLE001 - onnxruntime lacks this op/dtype: use onnx.reference
        from onnx.reference import ReferenceEvaluator
        return dict(zip(names, ReferenceEvaluator(model).run(None, feeds)))


def pipeline_yaml(path, options: dict, extra: dict | None = None, target: str = "generic"):
    """Write a build YAML at ``path``: the default pipeline of ``target`` with the passes named
    in ``options`` given those options (the others keep theirs), plus the ``extra`` sections;
    returns the path."""
    import yaml
    from aicc.config import Options
    pipe = []
    for name, opts in Options.load(target).pipeline:
        opts = options.get(name, opts)
        pipe.append({name: opts} if opts else name)
    path = Path(path)
    path.write_text(yaml.safe_dump({"pipeline": pipe, **(extra or {})}))
    return path


def build_node_forced(path, target: str, out, op: str = "Conv", sched=None, act=None,
                      params=None, inputs: dict | None = None):
    """Import the model at ``path``, give its one ``op`` node an ``aicc_schedule`` (sched) and
    a fused activation (act, params), compile for ``target`` and write the bundle at ``out``:
    (program, bundle path). inputs: {name: array} for the manifest's input shapes."""
    from aicc.bundle.writer import write_bundle
    from aicc.compiler import compile_graph
    from aicc.config import Options
    from aicc.frontend import import_model
    g = import_model(path)
    (node,) = [n for n in g.nodes if n.op_type == op]
    if sched:
        node.attrs["aicc_schedule"] = dict(sched)
    if act:
        node.attrs["aicc_act"] = act
        node.attrs["aicc_act_params"] = dict(params or {})
    opts = Options.load(target)
    _, prog = compile_graph(g, opts)
    bundle = write_bundle(prog, out, name=opts.name, target=opts.target, opts=opts,
                          model_sha="0" * 64,
                          original_inputs=[{"name": k, "shape": list(v.shape)}
                                           for k, v in (inputs or {}).items()])
    return prog, bundle


def compile_and_run(model: onnx.ModelProto, feeds: dict, tmp_path, target: str = "generic",
                    config=None, **kw) -> dict:
    tmp_path = Path(tmp_path)
    k = next(_counter)
    mpath = tmp_path / f"m{k}.onnx"
    onnx.save(model, str(mpath))
    if CHECKED:
        over = dict(kw.pop("overrides", None) or {})
        over["memory"] = {**over.get("memory", {}), "checked": True}
        kw["overrides"] = over
    out = aicc.build(mpath, target=target, out=tmp_path / f"b{k}", config=config, **kw)
    # a cross target's bundle runs under its emulator (aicc/runner)
    return open_bundle(out, cflags=STRICT_CFLAGS).run(feeds)


def assert_close(got: dict, want: dict, rtol=1e-4, atol=1e-5) -> None:
    assert set(got) == set(want), (sorted(got), sorted(want))
    for k in want:
        g, w = np.asarray(got[k]), np.asarray(want[k])
        assert g.shape == w.shape, f"{k}: shape {g.shape} != {w.shape}"
        assert g.dtype == w.dtype, f"{k}: dtype {g.dtype} != {w.dtype}"
        if "float" in w.dtype.name and w.dtype.kind not in "fc":   # ml_dtypes: bfloat16, ...
            g, w = g.astype(np.float32), w.astype(np.float32)
        if w.dtype.kind in "fc":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True, err_msg=k)
        else:
            np.testing.assert_array_equal(g, w, err_msg=k)


def check(model, feeds, tmp_path, target="generic", rtol=1e-4, atol=1e-5, config=None, **kw):
    """Compile ``model`` with aicc, run it on ``feeds`` and compare with the reference.
    Returns (aicc outputs, reference outputs)."""
    want = reference(model, feeds)
    got = compile_and_run(model, feeds, tmp_path, target=target, config=config, **kw)
    assert_close(got, want, rtol=rtol, atol=atol)
    return got, want


def check_node(op_type, inputs: dict, tmp_path, attrs: dict | None = None,
               initializers: dict | None = None, n_outputs: int = 1, opset: int = 17,
               target="generic", rtol=1e-4, atol=1e-5, input_order=None):
    """One-node model: ``inputs`` are graph inputs (fed at run time), ``initializers``
    constants; ``input_order`` lists the node's input names ('' for omitted) if not
    inputs followed by initializers."""
    names = input_order or (list(inputs) + list(initializers or {}))
    outs = [f"y{i}" for i in range(n_outputs)]
    node = helper.make_node(op_type, names, outs, **(attrs or {}))
    model = make_model([node], inputs, outs, initializers, opset=opset)
    return check(model, inputs, tmp_path, target=target, rtol=rtol, atol=atol)


def conv2d_f64(x, w, b, pads, strides) -> np.ndarray:
    """The 2-D conv (NCHW, group 1; pads [top, left, bottom, right], strides [sy, sx]) in
    float64, by summing shifted input planes onto the bias: an accuracy reference."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    co, _ci, kh, kw = w.shape
    ho = (xp.shape[2] - kh) // strides[0] + 1
    wo = (xp.shape[3] - kw) // strides[1] + 1
    y = np.zeros((x.shape[0], co, ho, wo)) + b.astype(np.float64)[None, :, None, None]
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + strides[0] * ho:strides[0], j:j + strides[1] * wo:strides[1]]
            y += np.einsum("nchw,kc->nkhw", patch, w[:, :, i, j].astype(np.float64))
    return y


def rng(seed=0):
    return np.random.default_rng(seed)
