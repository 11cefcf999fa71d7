"""Embedded pipelines (docs/EMBEDDED.md): examples/embedded built with Make (include model.mk)
and CMake (aicc.cmake), the arm-neon target under qemu-aarch64 and cortex-m4 under
qemu-system-arm (MPS2 AN386, semihosting), on the four MLPerf-Tiny-class models; outputs must
match the host build and onnxruntime (rtol 1e-4, atol 1e-5). cortex-m7 (MPS2 AN500) and
cortex-m55 (MPS3 AN547) run a float conv net, a float MatMul net and two int8 conv nets
through aicc's runner on their boards, and the example app. Sizes from the target's `size`.

Cross tests skip only when the target's toolchain or emulator is missing (`make test` and
`make embedded-check` install them first: make cross-toolchain)."""
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import onnx
import pytest

import aicc
from aicc.errors import ConfigError
from aicc.size import measure
from aicc.targets import list_targets, load_target, runnable_targets
from tests.models.fixtures import load_fixture
from tests.oracle import STRICT_CFLAGS, assert_close, ort_exact, reference

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EMB = os.path.join(ROOT, "examples", "embedded")
CROSS = ("arm-neon", "cortex-m4")
# run by aicc's runner (the harness linked with the target YAML's board), not the example app
CORTEX_M = ("cortex-m7", "cortex-m55")
# MLPerf Tiny: keyword spotting, image classification, anomaly detection, visual wake words
MODELS = {"dscnn": None, "resnet8": ("resnet8", "ts"),
          "fc_autoencoder": ("fc_autoencoder", "dynamo"),
          "mobilenetv1_025": ("mobilenetv1_025", "ts"),
          "qcnn": "int8",      # QLinearConv chain (_qcnn): the integer kernels
          "dscnn_qdq": "qdq"}  # DS-CNN quantized by onnxruntime (_qdq): fuse-qdq's integer kernels
OUT_RE = re.compile(r"^out (\d+) (\d+) 0x([0-9a-f]{8})$", re.M)


def _needs(target):
    missing = load_target(target).missing_tools()
    return pytest.mark.skipif(bool(missing), reason=f"{target}: {', '.join(missing)} not installed "
                              "(make cross-toolchain)")


def _qcnn(path):
    """float -> QuantizeLinear -> QLinearConv 3x3 8 -> 12 (kernels/qgemm/portable.py's dot kernel),
    depthwise 3x3 stride 2 (qlinear.py's plane loops), 1x1 12 -> 16 (the dot kernel),
    DequantizeLinear -> float; seeded weights, per-channel scales, int32 biases."""
    from onnx import TensorProto, helper, numpy_helper
    r = np.random.default_rng(8)
    f32 = np.float32
    inits = {"s_in": f32(0.02), "z_in": np.uint8(128), "s1": f32(0.04), "z1": np.uint8(100),
             "s2": f32(0.05), "z2": np.uint8(110), "s3": f32(0.03), "z3": np.uint8(120)}
    nodes = [helper.make_node("QuantizeLinear", ["x", "s_in", "z_in"], ["q0"])]
    prev, shapes = ("q0", "s_in", "z_in"), [(12, 8, 3, 3, 1), (12, 1, 3, 3, 12), (16, 12, 1, 1, 1)]
    for i, (co, ci, kh, kw, g) in enumerate(shapes, 1):
        inits[f"w{i}"] = r.integers(-127, 128, size=(co, ci, kh, kw)).astype(np.int8)
        inits[f"ws{i}"] = r.uniform(0.002, 0.006, size=co).astype(f32)
        inits[f"wz{i}"] = np.zeros(co, np.int8)
        inits[f"b{i}"] = r.integers(-3000, 3000, size=co).astype(np.int32)
        attrs = {"group": g, "pads": [kh // 2] * 4, "strides": [2, 2] if g > 1 else [1, 1]}
        nodes.append(helper.make_node("QLinearConv", [*prev, f"w{i}", f"ws{i}", f"wz{i}",
                                                      f"s{i}", f"z{i}", f"b{i}"], [f"q{i}"],
                                      **attrs))
        prev = (f"q{i}", f"s{i}", f"z{i}")
    nodes.append(helper.make_node("DequantizeLinear", list(prev), ["y"]))
    g = helper.make_graph(nodes, "qcnn", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 8, 12, 12])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 16, 6, 6])],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return str(path)


def _qdq(path):
    """examples/kws_dscnn.onnx quantized by onnxruntime's static quantizer in the QDQ format:
    int8 activations, per-channel int8 weights (as the MLPerf Tiny int8 models), calibrated on 8
    seeded standard normal inputs."""
    import logging

    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)
    src = os.path.join(ROOT, "examples", "kws_dscnn.onnx")
    inp = onnx.load(src).graph.input[0]
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]

    class Reader(CalibrationDataReader):
        def __init__(self):
            r = np.random.default_rng(3)
            self.data = iter([{inp.name: r.standard_normal(shape).astype(np.float32)}
                              for _ in range(8)])

        def get_next(self):
            return next(self.data, None)

    level = logging.getLogger().level
    logging.getLogger().setLevel(logging.ERROR)      # the quantizer's advice
    try:
        quantize_static(src, str(path), Reader(), quant_format=QuantFormat.QDQ,
                        activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                        per_channel=True)
    finally:
        logging.getLogger().setLevel(level)
    return str(path)


def _model(name, tmp):
    spec = MODELS[name]
    if spec is None:
        return os.path.join(ROOT, "examples", "kws_dscnn.onnx")
    if spec == "int8":
        return _qcnn(tmp / f"{name}.onnx")
    if spec == "qdq":
        return _qdq(tmp / f"{name}.onnx")
    return str(load_fixture(*spec, out_dir=tmp))


def _ort_tol(name, path):
    """(rtol, atol) against onnxruntime: one output quantization step for the int8 models
    (onnxruntime requantizes in float32, aicc as onnx.reference in float64)."""
    if MODELS[name] == "int8":
        return (0, 0.03 + 1e-6)
    if MODELS[name] == "qdq":           # the scale of the DequantizeLinear giving the output
        g = onnx.load(path).graph
        dq = next(n for n in g.node if n.output[0] == g.output[0].name)
        scale = next(t for t in g.initializer if t.name == dq.input[1])
        return (0, float(onnx.numpy_helper.to_array(scale)) * 1.001)
    return (1e-4, 1e-5)


def _make(*args):
    # CC/AR/CFLAGS from the environment would override the cross defaults of model.mk
    env = {k: v for k, v in os.environ.items() if k not in ("CC", "AR", "CFLAGS", "MAKEFLAGS")}
    r = subprocess.run(["make", "--no-print-directory", "-C", EMB, *args], capture_output=True,
                       text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout


def _outputs(text, model):
    """The app's `out K I 0xBITS` lines -> arrays shaped like the model's outputs."""
    vals = {}
    for k, i, bits in OUT_RE.findall(text):
        vals.setdefault(int(k), {})[int(i)] = int(bits, 16)
    outs = []
    for k, o in enumerate(model.graph.output):
        shape = [d.dim_value for d in o.type.tensor_type.shape.dim]
        n = int(np.prod(shape))
        assert sorted(vals.get(k, {})) == list(range(n)), f"output {k}: missing values"
        bits = np.array([vals[k][i] for i in range(n)], dtype=np.uint32)
        outs.append(bits.view(np.float32).reshape(shape))
    return outs


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """name -> (path, data header, feeds, onnxruntime outputs (onnx.reference's where
    onnxruntime is not exact on this CPU: oracle.ort_exact), host-build outputs)."""
    sys.path.insert(0, EMB)
    try:
        import gen_data
    finally:
        sys.path.remove(EMB)
    tmp = tmp_path_factory.mktemp("emb_models")
    out = {}
    for name in MODELS:
        path = _model(name, tmp)
        model = onnx.load(path)
        feeds = gen_data.model_inputs(model)
        want = reference(model, feeds)
        hdr = tmp / f"{name}_data.h"     # the app's expected outputs: the same oracle's
        hdr.write_text(gen_data.header_text(path, outs=list(want.values()), source=(
            "onnxruntime" if ort_exact(model) else "onnx.reference")))
        host = aicc.load(aicc.build(path, target="generic", out=tmp / f"{name}_host"),
                         cflags=STRICT_CFLAGS).run(feeds)
        rtol, atol = _ort_tol(name, path)
        assert_close(host, want, rtol=rtol, atol=atol)
        out[name] = (path, hdr, feeds, want, host)
    return out


def test_cross_targets_are_data_and_not_runnable_here():
    names = list_targets()
    assert set(CROSS) <= set(names)
    neon, m4 = load_target("arm-neon"), load_target("cortex-m4")
    assert neon.cc == "aarch64-linux-gnu-gcc" and neon.run[0] == "qemu-aarch64"
    assert m4.cc == "arm-none-eabi-gcc" and not m4.hosted and m4.machines == ()
    assert "-mfloat-abi=hard" in m4.cflags and "-mcpu=cortex-m4" in m4.cflags
    assert m4.run_command("x.elf")[-1] == "x.elf" and "mps2-an386" in m4.run_command("x.elf")
    import platform
    assert "cortex-m4" not in runnable_targets()
    if platform.machine() not in ("aarch64", "arm64"):
        assert "arm-neon" not in runnable_targets()
    r = subprocess.run([sys.executable, "-m", "aicc.cli", "targets"], capture_output=True,
                       text=True)
    assert r.returncode == 0 and all(t in r.stdout for t in CROSS + CORTEX_M)
    m7, m55 = load_target("cortex-m7"), load_target("cortex-m55")
    for t, cpu, board in ((m7, "cortex-m7", "mps2-an500"), (m55, "cortex-m55", "mps3-an547")):
        assert t.base == "cortex-m4" and t.cc == m4.cc
        assert t.kernels == (m4.kernels if t is m7 else ("dsp", "helium", "generic"))
        assert f"-mcpu={cpu}" in t.cflags and "-mfloat-abi=hard" in t.cflags
        assert t.double_fpu and t.requant == "integer" and not t.hosted
        assert t.run[t.run.index("-M") + 1] == board and t.run[t.run.index("-cpu") + 1] == cpu
        assert any(board in f for f in t.board["ldflags"]) and cpu not in runnable_targets()
    assert "-mfpu=fpv5-d16" in m7.cflags and m4.requant == "integer" and not m4.double_fpu


def test_host_app_with_make_and_cmake(tmp_path):
    """make -C examples/embedded: bundle built by aicc, app linked through model.mk, runs on
    the committed input and matches the committed onnxruntime outputs; then the same through
    CMake's aicc_add_bundle."""
    out = _make(f"OUT={tmp_path}")
    assert "PASS: 12 of 12" in out, out
    got = _outputs(out, onnx.load(os.path.join(ROOT, "examples", "kws_dscnn.onnx")))[0]
    # the committed data header is what onnxruntime computes now (regenerate: make data)
    sys.path.insert(0, EMB)
    try:
        import gen_data
    finally:
        sys.path.remove(EMB)
    path = os.path.join(ROOT, "examples", "kws_dscnn.onnx")
    with open(os.path.join(EMB, "kws_dscnn_data.h")) as f:
        committed = f.read()
    want = gen_data.reference(path, gen_data.model_inputs(onnx.load(path)))[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    fresh = gen_data.header_text(path)
    inputs = lambda t: t[t.index("#ifndef"):t.index("static const float app_want0")]  # noqa: E731
    assert inputs(committed) == inputs(fresh), "stale input: make -C examples/embedded data"
    block = committed[committed.index("app_want0["):]
    block = block[block.index("{") + 1:block.index("}")]
    stored = np.array([float.fromhex(v.strip().rstrip("f")) for v in block.split(",")],
                      dtype=np.float32)
    np.testing.assert_allclose(stored, want.ravel(), rtol=1e-5, atol=1e-6)
    if shutil.which("cmake") is None:
        pytest.skip("cmake not installed (make cross-toolchain)")
    out = _make(f"OUT={tmp_path}", "cmake")
    assert "PASS: 12 of 12" in out, out


def _cross_outputs(target, path, hdr, want, out_dir, *make_args) -> dict:
    """Build examples/embedded's app for target (make_args: more make variables), run it
    under its emulator (it must print PASS) and return its outputs by name."""
    _make("app", f"PLATFORM={target}", f"MODEL={path}", f"DATA={hdr}", f"OUT={out_dir}",
          *make_args)
    exe = out_dir / ("app.elf" if target.startswith("cortex-m") else "app")
    r = subprocess.run(load_target(target).run_command(exe), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and "PASS" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
    return dict(zip(want, _outputs(r.stdout, onnx.load(path))))


@pytest.mark.parametrize("target", [pytest.param(t, marks=_needs(t)) for t in CROSS])
@pytest.mark.parametrize("name", list(MODELS))
def test_cross_matches_host_under_qemu(models, name, target, tmp_path):
    path, hdr, feeds, want, host = models[name]
    got = _cross_outputs(target, path, hdr, want, tmp_path)
    assert_close(got, host, rtol=1e-4, atol=1e-5)       # the host build of the same model
    rtol, atol = _ort_tol(name, path)
    assert_close(got, want, rtol=rtol, atol=atol)       # onnxruntime


@pytest.mark.parametrize("target", [pytest.param(t, marks=_needs(t)) for t in CORTEX_M])
@pytest.mark.parametrize("name", ["dscnn", "fc_autoencoder", "qcnn", "dscnn_qdq"])
def test_cortex_m7_m55_match_onnxruntime_under_qemu(models, name, target, tmp_path):
    """cortex-m7 on QEMU's MPS2 AN500 and cortex-m55 on its MPS3 AN547 (the boards of the
    target YAMLs: runtime_c/boards/mps2-an500/, mps3-an547/): a float conv net (DS-CNN), a
    float MatMul net (the FC autoencoder), two int8 conv nets on the DSP pair kernels (on
    cortex-m55 the Helium dot and depthwise kernels) with the integer requantization; outputs
    as the host build's and onnxruntime's."""
    from aicc.runner import open_bundle
    path, hdr, feeds, want, host = models[name]
    b = aicc.build(path, target=target, out=tmp_path / "b")
    got = open_bundle(b).run(feeds)
    assert sorted(got) == sorted(want)
    assert_close(got, host, rtol=1e-4, atol=1e-5)
    rtol, atol = _ort_tol(name, path)
    assert_close(got, want, rtol=rtol, atol=atol)
    if MODELS[name] in ("int8", "qdq"):
        steps = json.loads((b / "manifest.json").read_text())["steps"]
        m55 = target == "cortex-m55"
        want = {"helium qvdot2", "helium qvdw"} if m55 else {"dsp qpdot2", "dsp qpdw"}
        assert want <= {s.get("kernel") for s in steps}
        assert "aicc_rqrowi_" in (b / "model.c").read_text()      # requant: integer


@pytest.mark.parametrize("target", [pytest.param(t, marks=_needs(t)) for t in CROSS])
def test_cross_portable_winograd_opt_in(models, target, tmp_path):
    """The portable Winograd (kernels/winograd/portable.py) that arm-neon and cortex-m4 leave off by
    default, opted in by the build YAML: ResNet-8's 3x3 convs take it (on arm-neon, whose convs
    run the NEON GEMM paths, the convs are also given the portable kernels), compile with the
    strict flags for the cross target and match onnxruntime under qemu."""
    path, hdr, feeds, want, _ = models["resnet8"]
    cfg = tmp_path / "wino.yaml"
    base = os.path.join(EMB, "cortex-m4", "sections.yaml") if target == "cortex-m4" else None
    nodes = "" if target == "cortex-m4" else "nodes:\n" + "".join(
        f"  {n.name!r}: {{kernel: generic}}\n" for n in onnx.load(path).graph.node
        if n.op_type == "Conv")
    cfg.write_text((open(base).read() if base else "") +
                   "schedule:\n  conv_c: {algo: auto}\n" + nodes)
    got = _cross_outputs(target, path, hdr, want, tmp_path, f"AICC_CONFIG={cfg}")
    assert "portable Winograd F(2x2, 3x3)" in (tmp_path / "bundle" / "model.c").read_text()
    assert_close(got, want, rtol=1e-4, atol=1e-5)


def _symbols(elf) -> dict:
    """name -> (address, section) of the ELF's symbols."""
    syms = subprocess.run(["arm-none-eabi-objdump", "-t", str(elf)], capture_output=True,
                          text=True, check=True).stdout
    place = {}
    for ln in syms.splitlines():
        parts = ln.split()
        if len(parts) >= 4 and re.fullmatch(r"[0-9a-f]{8}", parts[0]):
            place[parts[-1]] = (int(parts[0], 16), parts[-3])
    return place


# the boards' memory maps (runtime_c/boards/*/*.ld): [start, end) of code, weights, arena, stack
BOARD_MAP = {"cortex-m7": {"code": (0, 0x400000), "weights": (0, 0x400000),
                           "arena": (0x20000000, 0x20400000), "stack": (0x20000000, 0x20400001)},
             "cortex-m55": {"code": (0, 0x80000), "weights": (0x28000000, 0x28800000),
                            "arena": (0x21000000, 0x21400000), "stack": (0x20000000, 0x20080001)}}


@pytest.mark.parametrize("target", [pytest.param(t, marks=_needs(t)) for t in CORTEX_M])
def test_cortex_m7_m55_example_app_and_placement(models, target, tmp_path):
    """The example app (make PLATFORM=cortex-m7 / cortex-m55, the weights and arena sections of
    cortex-m4/sections.yaml) passes on its board, matches the host build, and its code,
    weights, arena and stack sit where the board's linker script says (the M55: code in the
    ITCM, weights in the QSPI flash, arena in the ISRAM, stack in the DTCM)."""
    path, hdr, feeds, want, host = models["dscnn"]
    got = _cross_outputs(target, path, hdr, want, tmp_path)
    assert_close(got, host, rtol=1e-4, atol=1e-5)
    place = _symbols(tmp_path / "app.elf")
    where = {"code": place["Reset_Handler"][0], "weights": place["model_weights"][0],
             "arena": place["arena"][0], "stack": place["_estack"][0]}
    for k, (lo, hi) in BOARD_MAP[target].items():
        assert lo <= where[k] < hi, (k, hex(where[k]))
    assert place["vectors"][0] == 0 and place["arena"][1] == ".aicc_arena"
    assert place["model_weights"][1] == ".aicc_weights"


@_needs("cortex-m4")
def test_cortex_m4_sections_sizes_and_cmake(models, tmp_path):
    """Weights in their own flash section, arena in its own RAM section (YAML options), the
    runtime under 2 KB, aicc inspect --size in the manifest, and the CMake cross build."""
    path, hdr, *_ = models["dscnn"]
    _make("app", "PLATFORM=cortex-m4", f"MODEL={path}", f"DATA={hdr}", f"OUT={tmp_path}")
    place = _symbols(tmp_path / "app.elf")
    assert place["model_weights"][1] == ".aicc_weights" and place["model_weights"][0] < 0x400000
    assert place["arena"][1] == ".aicc_arena" and 0x20000000 <= place["arena"][0] < 0x20400000
    assert place["arena"][0] % 64 == 0
    bundle = tmp_path / "bundle"
    assert '.section .aicc_weights,"a",%progbits' in (bundle / "model_weights.S").read_text()
    assert '#define MODEL_ARENA_SECTION ".bss.aicc_arena"' in (bundle / "model.h").read_text()

    r = subprocess.run([sys.executable, "-m", "aicc.cli", "inspect", str(bundle), "--size"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "arm-none-eabi-size" in r.stdout and "runtime (aicc_rt.o) code" in r.stdout
    m = json.loads((bundle / "manifest.json").read_text())
    size = m["size"]
    assert size["runtime_code_bytes"] < 2048, size["objects"]["aicc_rt.o"]
    assert size["objects"]["model_weights.o"]["rodata"] == m["weights_bytes"]
    assert size["total"]["data"] == 0 and size["total"]["bss"] == 0     # weights const, no globals
    assert size["ram_bytes"] == m["arena_bytes"] and size["flash_bytes"] < 4 << 20
    assert size["objects"]["model.o"]["code"] > 0

    if shutil.which("cmake") is None:
        pytest.skip("cmake not installed (make cross-toolchain)")
    out = _make("cmake", "PLATFORM=cortex-m4", f"MODEL={path}", f"DATA={hdr}", f"OUT={tmp_path}")
    assert "PASS: 12 of 12" in out, out


def test_size_report_host_and_section_names(tmp_path):
    """--size works for any target with its toolchain; bad section names are refused."""
    path = os.path.join(ROOT, "examples", "kws_dscnn.onnx")
    b = aicc.build(path, target="generic", out=tmp_path / "g")
    r = measure(b)
    assert r["objects"]["model_weights.o"]["rodata"] == r["total"]["rodata"] - sum(
        r["objects"][o]["rodata"] for o in ("model.o", "aicc_rt.o"))
    assert r["flash_bytes"] >= r["total"]["rodata"] and r["arena_bytes"] > 0
    h = (b / "model.h").read_text()
    assert "#define MODEL_ARENA_ATTR MODEL_ALIGNED(64)\n" in h
    assert "#define MODEL_ARENA_SECTION" not in h and ".section .rodata\n" in (
        b / "model_weights.S").read_text()
    for bad in ('.x"; rm -rf', "a b", ".bss\n"):
        with pytest.raises(ConfigError, match="linker section"):
            aicc.build(path, out=tmp_path / "bad", overrides={"weights": {"section": bad}})
        with pytest.raises(ConfigError, match="linker section"):
            aicc.build(path, out=tmp_path / "bad", overrides={"memory": {"arena_section": bad}})
    assert not (tmp_path / "bad").exists()


def test_headers_link_from_cpp(tmp_path):
    """model.h and aicc_rt.h carry extern "C" guards: a C++ program links the C library."""
    if shutil.which("g++") is None:
        pytest.skip("g++ not installed")
    path = os.path.join(ROOT, "examples", "kws_dscnn.onnx")
    b = aicc.build(path, target="generic", out=tmp_path / "b")
    subprocess.run(["make", "-C", str(b), "libmodel.a", f"CFLAGS={STRICT_CFLAGS}"], check=True,
                   capture_output=True)
    src = tmp_path / "app.cpp"
    src.write_text('#include "model.h"\n#include <vector>\n'
                   "static unsigned char arena[MODEL_ARENA_STORAGE_BYTES] MODEL_ARENA_ATTR;\n"
                   "int main() {\n  std::vector<float> in(MODEL_INPUT0_ELEMS, 0.5f), "
                   "out(MODEL_OUTPUT0_ELEMS);\n  const void *ins[1] = { in.data() };\n"
                   "  void *outs[1] = { out.data() };\n  return model_run(0, MODEL_ARENA_PTR(arena), "
                   "MODEL_ARENA_BYTES, ins, outs) == AICC_OK ? 0 : 1;\n}\n")
    exe = tmp_path / "app"
    subprocess.run(["g++", "-std=c++11", "-Wall", "-Wextra", "-Werror", f"-I{b}", str(src),
                    str(b / "libmodel.a"), "-lm", "-o", str(exe)], check=True, capture_output=True)
    assert subprocess.run([str(exe)]).returncode == 0
