"""Dynamic dims: one plan per bucket, padding where safe, actual sizes where not.

Every model is compared with onnxruntime (rtol 1e-4, atol 1e-5) at every size from 1 to the
largest bucket (so at each bucket boundary and one past it), on generic and on the host's
SIMD target. Bundles compile with the strict flags.
"""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import aicc
from aicc.errors import ConfigError, InputError, UnsupportedError
from aicc.targets import runnable_targets

from . import dynamic_models as dm
from .oracle import STRICT_CFLAGS

TARGETS = ["generic"] + [t for t in ("x86-avx2",) if t in runnable_targets()]


def _ort(path):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def _build(tmp_path, model, buckets, target="generic", **kw):
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    out = aicc.build(path, target=target, out=tmp_path / "b", buckets=buckets, **kw)
    return path, aicc.load(out, cflags=STRICT_CFLAGS)


def _check(sess, bundle, feeds, where):
    want = sess.run(None, feeds)
    got = bundle.run(feeds)
    for w, o in zip(want, sess.get_outputs()):
        g = got[o.name]
        assert g.shape == w.shape, f"{o.name} at {where}: shape {g.shape} != {w.shape}"
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=f"{o.name} at {where}")


def _token_feeds(rng, n, vocab=50):
    ids = rng.integers(0, vocab, (1, n)).astype(np.int64)
    mask = np.ones((1, n), np.int64)
    k = rng.integers(0, n)                        # trailing user padding in the real region
    mask[0, n - k:] = 0 if k < n else 1
    return {"ids": ids, "mask": mask}


@pytest.mark.parametrize("target", TARGETS)
def test_transformer_every_length(tmp_path, target):
    path, b = _build(tmp_path, dm.transformer(), {"seq": [8, 16, 32]}, target)
    sess, rng = _ort(path), np.random.default_rng(0)
    for n in range(1, 33):
        _check(sess, b, _token_feeds(rng, n), f"seq={n}")
    m = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert [p["dims"]["seq"] for p in m["dynamic"]["plans"]] == [8, 16, 32]
    assert m["arena_bytes"] == max(p["arena_bytes"] for p in m["dynamic"]["plans"])
    assert m["inputs"][0]["shape"] == [1, "seq"] and m["inputs"][0]["buckets"] == {"seq": [8, 16, 32]}
    ops = {s["op"] for s in m["steps"]}
    assert "PadFill" in ops and "ExtentScale" in ops      # softmax/contraction fills, the mean


@pytest.mark.parametrize("target", TARGETS)
def test_lstm_last_state_every_length(tmp_path, target):
    path, b = _build(tmp_path, dm.lstm(), {"frames": "max:20"}, target)
    sess, rng = _ort(path), np.random.default_rng(1)
    for n in range(1, 21):
        _check(sess, b, {"x": rng.standard_normal((n, 1, 6)).astype(np.float32)}, f"frames={n}")
    assert b.dynamic["dims"][0]["buckets"] == [8, 16, 20]     # ladder: powers of two, then max


def test_bidirectional_gru_batch_first(tmp_path):
    path, b = _build(tmp_path, dm.gru_batch_first(), {"frames": [4, 16]})
    sess, rng = _ort(path), np.random.default_rng(2)
    for n in range(1, 17):
        _check(sess, b, {"x": rng.standard_normal((1, n, 5)).astype(np.float32)}, f"frames={n}")


@pytest.mark.parametrize("target", TARGETS)
def test_cnn_dynamic_batch(tmp_path, target):
    path, b = _build(tmp_path, dm.cnn(), {"batch": [1, 2, 4, 8]}, target)
    sess, rng = _ort(path), np.random.default_rng(3)
    for n in range(1, 9):
        _check(sess, b, {"x": rng.standard_normal((n, 3, 12, 12)).astype(np.float32)}, f"batch={n}")


def test_output_arrays_kept_through_other_sizes(tmp_path):
    """The dynamic fast path gives an output array again only when nothing else holds it and
    its shape is the same: results the caller keeps stay as they were."""
    path, b = _build(tmp_path, dm.cnn(), {"batch": [1, 2, 4, 8]})
    sess, rng = _ort(path), np.random.default_rng(4)
    feeds = [{"x": rng.standard_normal((n, 3, 12, 12)).astype(np.float32)}
             for n in (3, 3, 5, 3, 8, 3)]
    kept = [b.run(f) for f in feeds[:3]]
    for f in feeds[3:] * 2:
        _check(sess, b, f, f"batch={f['x'].shape[0]}")
    for f, got in zip(feeds, kept):
        for o, e in zip(sess.get_outputs(), sess.run(None, f)):
            np.testing.assert_allclose(got[o.name], e, rtol=1e-4, atol=1e-5, err_msg=o.name)


@pytest.mark.parametrize("target", TARGETS)
def test_fcn_dynamic_height_width(tmp_path, target):
    path, b = _build(tmp_path, dm.fcn(), {"h": [8, 16], "w": [8, 16]}, target)
    sess, rng = _ort(path), np.random.default_rng(4)
    for hh in range(1, 17):
        for ww in sorted({1, 2, 7, 8, 9, 15, 16, hh}):
            _check(sess, b, {"x": rng.standard_normal((1, 3, hh, ww)).astype(np.float32)},
                   f"h={hh}, w={ww}")


@pytest.mark.parametrize("target", ["generic"] + [t for t in ("x86-avx2", "x86-avx512")
                                                  if t in runnable_targets()])
def test_channel_last_chain_dynamic_hw(tmp_path, target):
    """layout-nhwc under dynamic batch / height / width: the channel-last convs (ConvNHWC,
    MatMul) get zero fills on their NHWC spatial axes, the mean its real-count scale; the
    output's batch axis is padded in the batch-2 buckets only (a bucket of 1 is exact)."""
    path, b = _build(tmp_path, dm.mobilenet_block(), {"batch": [1, 2], "h": [8, 16],
                                                      "w": [8, 16]}, target)
    if target != "generic":
        man = json.loads((tmp_path / "b" / "manifest.json").read_text())
        assert {"ConvNHWC", "MatMul"} <= {s["op"] for s in man["steps"]}
    sess, rng = _ort(path), np.random.default_rng(5)
    for n, hh, ww in [(1, 3, 5), (2, 8, 8), (1, 9, 16), (2, 16, 13), (1, 1, 1), (2, 5, 11),
                      (1, 16, 16), (2, 16, 16)]:
        _check(sess, b, {"x": rng.standard_normal((n, 3, hh, ww)).astype(np.float32)},
               f"batch={n}, h={hh}, w={ww}")


def test_out_of_range_dims(tmp_path):
    _, b = _build(tmp_path, dm.lstm(), {"frames": [4, 8]})
    with pytest.raises(InputError, match="'frames' = 9 is outside 1..8"):
        b.run({"x": np.zeros((9, 1, 6), np.float32)})
    with pytest.raises(InputError, match="shape"):
        b.run({"x": np.zeros((3, 2, 6), np.float32)})
    # the C API itself: AICC_ERR_DIMS (6) and nothing written
    ffi = b.ffi
    x = np.zeros((8, 1, 6), np.float32)
    y = np.full((1, 4), 7.0, np.float32)
    for bad in (0, 9, -1):
        dv = ffi.new("int64_t[]", [bad])
        st = b._run_dims(ffi.NULL, ffi.cast("void *", b.arena.ctypes.data), b.arena.nbytes, dv,
                         ffi.new("void *[]", [ffi.cast("void *", x.ctypes.data)]),
                         ffi.new("void *[]", [ffi.cast("void *", y.ctypes.data)]), ffi.NULL,
                         ffi.NULL)
        assert st == 6
        assert (y == 7.0).all()


def test_inputs_must_agree_on_a_dim(tmp_path):
    _, b = _build(tmp_path, dm.transformer(layers=1), {"seq": [8]})
    with pytest.raises(InputError, match="input 'mask'"):
        b.run({"ids": np.zeros((1, 5), np.int64), "mask": np.ones((1, 6), np.int64)})


def test_dim_without_bucket_names_dim_and_inputs(tmp_path):
    p = tmp_path / "m.onnx"
    onnx.save(dm.transformer(layers=1), p)
    with pytest.raises(ConfigError, match=r"'seq' \(inputs 'ids' axis 1, 'mask' axis 1\)"):
        aicc.build(p, out=tmp_path / "b")
    assert not (tmp_path / "b").exists()
    # pinned instead: a static bundle
    out = aicc.build(p, out=tmp_path / "b2", input_shapes={"ids": [1, 5], "mask": [1, 5]})
    assert "dynamic" not in json.loads((out / "manifest.json").read_text())


def test_unsafe_nodes_are_named(tmp_path):
    # normalization across the padded axis and Concat along it: no fill makes them exact
    nodes = [h.make_node("LayerNormalization", ["x", "s", "b"], ["n"], axis=1),
             h.make_node("Concat", ["x", "x"], ["c"], axis=1),
             h.make_node("Relu", ["n"], ["y"]), h.make_node("Relu", ["c"], ["z"])]
    g = h.make_graph(nodes, "u", [h.make_tensor_value_info("x", T.FLOAT, [1, "seq", 4])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, "seq", 4]),
                      h.make_tensor_value_info("z", T.FLOAT, [1, None, 4])],
                     [onnx.numpy_helper.from_array(np.ones((8, 4), np.float32), "s"),
                      onnx.numpy_helper.from_array(np.zeros((8, 4), np.float32), "b")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 9
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    with pytest.raises(UnsupportedError) as e:
        aicc.build(p, out=tmp_path / "b", buckets={"seq": [8]})
    msg = str(e.value)
    assert "LayerNormalization" in msg and "normalizes across the padded axis" in msg
    assert "Concat" in msg and "along the padded axis" in msg and "dim seq" in msg


def test_cli_build_run_validate(tmp_path):
    p = tmp_path / "m.onnx"
    onnx.save(dm.fcn(), p)
    cli = [sys.executable, "-m", "aicc.cli"]
    r = subprocess.run(cli + ["build", str(p), "-o", str(tmp_path / "b"), "--buckets", "h=max:16",
                              "--buckets", "w=8,12"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(cli + ["validate", str(p), str(tmp_path / "b")], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "@ h=1,w=1" in r.stdout and "@ h=16,w=12" in r.stdout
    x = np.random.default_rng(5).standard_normal((1, 3, 5, 11)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    r = subprocess.run(cli + ["run", str(tmp_path / "b"), "-i", str(tmp_path / "in.npz"), "-o",
                              str(tmp_path / "out.npz")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    want = _ort(p).run(None, {"x": x})[0]
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["y"], want, rtol=1e-4, atol=1e-5)
    r = subprocess.run(cli + ["build", str(p), "-o", str(tmp_path / "c"), "--buckets", "h=0,4"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "positive" in r.stderr


# -- PyTorch exports (tests/models/export_dynamic.py; TorchScript and dynamo exporters) ------
MODELS = __import__("pathlib").Path(__file__).parent / "models"


def _torch_feeds(name, rng, n):
    if name == "dyn_encoder":
        f = _token_feeds(rng, n, vocab=60)
        return f
    if name == "dyn_lstm":
        return {"frames": rng.standard_normal((1, n, 10)).astype(np.float32)}
    if name in ("dyn_sdpa", "dyn_tel"):            # batch and seq both change
        bs = 1 + n % 4
        mask = np.ones((bs, n), np.int64)
        mask[0, n // 2 + 1:] = 0
        d = 16 if name == "dyn_sdpa" else 32
        return {"x": rng.standard_normal((bs, n, d)).astype(np.float32), "mask": mask}
    if name == "dyn_cnn":
        return {"images": rng.standard_normal((n, 3, 16, 16)).astype(np.float32)}
    return {"image": rng.standard_normal((1, 3, n, 2 + (3 * n) % 15)).astype(np.float32)}


TORCH_CASES = {   # buckets, sizes tried (the FCN's 2x2 max pool needs h, w >= 2)
    "dyn_encoder": ({"seq": [8, 16, 32]}, range(1, 33)),
    "dyn_lstm": ({"frames": "max:24"}, range(1, 25)),
    "dyn_sdpa": ({"batch": [2, 4], "seq": [8, 16]}, range(1, 17)),
    "dyn_tel": ({"batch": [2, 4], "seq": [8, 16]}, range(1, 17)),
    "dyn_cnn": ({"batch": [2, 4, 8]}, range(1, 9)),
    "dyn_fcn": ({"h": [8, 16], "w": [8, 16]}, range(2, 17)),
}


@pytest.mark.parametrize("name,exporter", [(n, e) for n in sorted(TORCH_CASES)
                                           for e in ("ts", "dynamo")
                                           if (MODELS / f"{n}_{e}.onnx").exists()])
def test_torch_exports(tmp_path, name, exporter):
    path = MODELS / f"{name}_{exporter}.onnx"
    buckets, sizes = TORCH_CASES[name]
    b = aicc.load(aicc.build(path, target=TARGETS[-1], out=tmp_path / "b", buckets=buckets),
                  cflags=STRICT_CFLAGS)
    sess, rng = _ort(path), np.random.default_rng(7)
    for n in sizes:
        _check(sess, b, _torch_feeds(name, rng, n), f"size {n}")


def test_yaml_buckets_and_ladder(tmp_path):
    p = tmp_path / "m.onnx"
    onnx.save(dm.cnn(), p)
    cfg = tmp_path / "c.yaml"
    cfg.write_text("dynamic:\n  max: {batch: 6}\n  ladder_start: 2\n")
    out = aicc.build(p, out=tmp_path / "b", config=cfg)
    m = json.loads((out / "manifest.json").read_text())
    assert m["dynamic"]["dims"] == [{"name": "batch", "buckets": [2, 4, 6], "max": 6}]
    assert [pl["dims"]["batch"] for pl in m["dynamic"]["plans"]] == [2, 4, 6]
    b = aicc.load(out)
    sess, rng = _ort(p), np.random.default_rng(9)
    for n in (1, 3, 5, 6):
        _check(sess, b, {"x": rng.standard_normal((n, 3, 12, 12)).astype(np.float32)}, f"batch={n}")
    # explicit CLI-style buckets override the YAML's max
    out2 = aicc.build(p, out=tmp_path / "b2", config=cfg, buckets={"batch": [3]})
    assert json.loads((out2 / "manifest.json").read_text())["dynamic"]["dims"][0]["buckets"] == [3]


def test_bilinear_upsample_edge_fill(tmp_path):
    path, b = _build(tmp_path, dm.fcn_bilinear(), {"h": [8, 16], "w": [8, 16]})
    sess, rng = _ort(path), np.random.default_rng(10)
    for hh in range(1, 17):
        for ww in sorted({1, 3, 8, 9, 16, hh}):
            _check(sess, b, {"x": rng.standard_normal((1, 3, hh, ww)).astype(np.float32)},
                   f"h={hh}, w={ww}")


def test_size_taken_from_a_shape_is_refused(tmp_path):
    # the bucket's graph resizes 2x, the real model to the input's odd size: the probe at one
    # below the bucket catches it and names the node
    p = tmp_path / "m.onnx"
    onnx.save(dm.resize_to_input_size(), p)
    with pytest.raises(UnsupportedError, match=r"node 'Resize_4' \(Resize\): axis 2 is 7 at h=7"):
        aicc.build(p, out=tmp_path / "b", buckets={"h": [8], "w": [8]})


def test_hostile_dim_names_stay_out_of_c(tmp_path):
    name = '*/ #include "evil.h" /* ??/\n$(shell rm -rf /) \\'
    m = dm.cnn()
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_param = name
    m.graph.output[0].type.tensor_type.shape.dim[0].dim_param = name
    path, b = _build(tmp_path, m, {name: [2, 4]})
    for f in ("model.c", "model.h", "model.mk", "Makefile"):
        text = (tmp_path / "b" / f).read_text()
        for bad in ('#include "evil.h"', "$(shell", "??/", "rm -rf"):
            assert bad not in text, (f, bad)      # only a sanitized hint reaches C comments
    man = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert man["dynamic"]["dims"][0]["name"] == name          # names live in the manifest
    sess, rng = _ort(path), np.random.default_rng(11)
    for n in (1, 3):
        _check(sess, b, {"x": rng.standard_normal((n, 3, 12, 12)).astype(np.float32)}, f"n={n}")


def test_pixel_shuffle_fcn(tmp_path):
    rng = np.random.default_rng(12)
    w1 = (rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32)
    w2 = (rng.standard_normal((2, 2, 3, 3)) * 0.3).astype(np.float32)
    nodes = [h.make_node("Conv", ["x", "w1"], ["c"], pads=[1, 1, 1, 1]),
             h.make_node("DepthToSpace", ["c"], ["d"], blocksize=2, mode="CRD"),
             h.make_node("Conv", ["d", "w2"], ["e"], pads=[1, 1, 1, 1]),
             h.make_node("SpaceToDepth", ["e"], ["y"], blocksize=2)]
    g = h.make_graph(nodes, "ps", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, "h", "w"])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 8, "h", "w"])],
                     [onnx.numpy_helper.from_array(w1, "w1"), onnx.numpy_helper.from_array(w2, "w2")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 9
    path, b = _build(tmp_path, m, {"h": [4, 8], "w": [8]})
    sess = _ort(path)
    for hh in range(1, 9):
        for ww in (1, 5, 8):
            _check(sess, b, {"x": rng.standard_normal((1, 3, hh, ww)).astype(np.float32)},
                   f"h={hh}, w={ww}")


@pytest.mark.parametrize("norm", ["InstanceNormalization", "GroupNormalization"])
def test_normalization_across_padded_axes(tmp_path, norm):
    # statistics over the real elements only (aicc.NormDyn with run-time extents)
    rng = np.random.default_rng(13)
    c = 6
    w1 = (rng.standard_normal((c, 3, 3, 3)) * 0.5).astype(np.float32)
    inits = {"w1": w1, "s": (1 + 0.2 * rng.standard_normal(c)).astype(np.float32),
             "b": (0.2 * rng.standard_normal(c)).astype(np.float32)}
    if norm == "InstanceNormalization":
        nn_ = h.make_node(norm, ["c", "s", "b"], ["n"], epsilon=1e-5)
    else:
        nn_ = h.make_node(norm, ["c", "s", "b"], ["n"], num_groups=3, epsilon=1e-5)
    w_dim = "w"
    nodes = [h.make_node("Conv", ["x", "w1"], ["c"], pads=[1, 1, 1, 1]), nn_,
             h.make_node("Relu", ["n"], ["y"])]
    g = h.make_graph(nodes, "nd", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, "h", w_dim])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, c, "h", w_dim])],
                     [onnx.numpy_helper.from_array(v, k) for k, v in inits.items()],
                     # onnx does not type GroupNormalization's output (a function op): the
                     # model says it, symbolically
                     value_info=[h.make_tensor_value_info("n", T.FLOAT, [1, c, "h", w_dim])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 21)])
    m.ir_version = 10
    path, b = _build(tmp_path, m, {"h": [4, 8], "w": [8]})
    assert "NormDyn" in {s["op"] for s in json.loads((tmp_path / "b" / "manifest.json").read_text())["steps"]}
    sess = _ort(path)
    for hh in range(1, 9):
        for ww in (1, 3, 8):
            _check(sess, b, {"x": rng.standard_normal((1, 3, hh, ww)).astype(np.float32)},
                   f"h={hh}, w={ww}")


def test_c_api_run_dims(tmp_path):
    # a C program: model_output_shape + model_run_dims at two lengths, and a length past the
    # largest bucket (AICC_ERR_DIMS, output untouched); outputs compared with onnxruntime
    path, b = _build(tmp_path, dm.lstm(), {"frames": [4, 8]})
    rng = np.random.default_rng(14)
    xs = {n: rng.standard_normal((n, 1, 6)).astype(np.float32) for n in (3, 7)}
    lines = ['#include <stdio.h>', '#include "model.h"',
             "static unsigned char arena[MODEL_ARENA_STORAGE_BYTES] MODEL_ARENA_ATTR;"]
    for n, x in xs.items():
        lines.append(f"static const float x{n}[{x.size}] = {{ "
                     + ", ".join(float(v).hex() for v in x.reshape(-1)) + " };")
    lines += ["int main(void)", "{", "    float y[MODEL_OUTPUT0_ELEMS];", "    int64_t shape[2];",
              "    int64_t d;", "    int st;"]
    for n in xs:
        lines += [f"    d = {n};",
                  "    if (model_output_shape(&d, 0, shape) != AICC_OK) return 1;",
                  f"    {{ const void *in[1] = {{ x{n} }}; void *out[1] = {{ y }};",
                  "      st = model_run_dims(NULL, MODEL_ARENA_PTR(arena), MODEL_ARENA_BYTES, &d, in, out); }",
                  "    if (st != AICC_OK) return 2;",
                  "    printf(\"%lld %lld\", (long long)shape[0], (long long)shape[1]);",
                  "    for (int i = 0; i < (int)(shape[0] * shape[1]); ++i) printf(\" %a\", (double)y[i]);",
                  "    printf(\"\\n\");"]
    lines += ["    d = 9; y[0] = 42.0f;",
              "    { const void *in[1] = { x7 }; void *out[1] = { y };",
              "      st = model_run_dims(NULL, MODEL_ARENA_PTR(arena), MODEL_ARENA_BYTES, &d, in, out); }",
              "    printf(\"%d %g\\n\", st, (double)y[0]);", "    return 0;", "}"]
    bdir = tmp_path / "b"
    (tmp_path / "main.c").write_text("\n".join(lines) + "\n")
    subprocess.run(["make", "-s", "-C", str(bdir), "libmodel.a", f"CFLAGS={STRICT_CFLAGS}"],
                   check=True, capture_output=True)
    exe = tmp_path / "app"
    subprocess.run(["cc", *STRICT_CFLAGS.split(), f"-I{bdir}", str(tmp_path / "main.c"),
                    str(bdir / "libmodel.a"), "-lm", "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split("\n")
    sess = _ort(path)
    for line, (n, x) in zip(out, xs.items()):
        vals = line.split()
        assert [int(vals[0]), int(vals[1])] == [1, 4]
        got = np.array([float.fromhex(v) for v in vals[2:]], np.float32).reshape(1, 4)
        np.testing.assert_allclose(got, sess.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5)
    assert out[2].split() == ["6", "42"]          # AICC_ERR_DIMS, nothing written


@pytest.mark.parametrize("target", TARGETS)
def test_fused_binary_activation_on_padded_axes(tmp_path, target):
    """Add -> Clip(min 0.5) and Mul -> Sigmoid (fuse-binary-activation: f(0) != 0) on padded
    H/W, then ops that read the padding (MaxPool, Conv with a zero border, GlobalAveragePool):
    their PadFills overwrite whatever the fused activation left in the padding."""
    rng = np.random.default_rng(9)
    x = h.make_tensor_value_info("x", T.FLOAT, [1, 2, "hh", "ww"])
    outs = [h.make_tensor_value_info("mp", T.FLOAT, [1, 2, "a", "b"]),
            h.make_tensor_value_info("cv", T.FLOAT, [1, 3, "hh", "ww"]),
            h.make_tensor_value_info("gap", T.FLOAT, [1, 2, 1, 1])]
    nodes = [h.make_node("Add", ["x", "bias"], ["s"]), h.make_node("Clip", ["s", "lo", "hi"], ["c"]),
             h.make_node("Mul", ["x", "c"], ["m"]), h.make_node("Sigmoid", ["m"], ["sg"]),
             h.make_node("MaxPool", ["c"], ["mp"], kernel_shape=[3, 3], strides=[2, 2],
                         pads=[1, 1, 1, 1]),
             h.make_node("Conv", ["sg", "w"], ["cv"], pads=[1, 1, 1, 1]),
             h.make_node("GlobalAveragePool", ["sg"], ["gap"])]
    inits = {"bias": rng.standard_normal((2, 1, 1)).astype(np.float32),
             "lo": np.array(0.5, np.float32), "hi": np.array(2.0, np.float32),
             "w": rng.standard_normal((3, 2, 3, 3)).astype(np.float32)}
    path, b = _build(tmp_path, dm._model(nodes, [x], outs, inits), {"hh": [8], "ww": [4, 16]},
                     target)
    steps = b.manifest["steps"]
    assert {s["op"] for s in steps if s.get("fused", {}).get("act")} >= {"Add", "Mul"}
    sess = _ort(path)
    for hh in (1, 3, 8):
        for ww in (1, 4, 5, 13, 16):
            _check(sess, b, {"x": rng.standard_normal((1, 2, hh, ww)).astype(np.float32)},
                   f"hh={hh}, ww={ww}")


@pytest.mark.parametrize("target", [t for t in ("x86-avx2", "x86-avx512", "generic")
                                    if t in runnable_targets(derived=False)])
def test_dynamic_batch_through_fused_channel_last_convs(tmp_path, target):
    """A pointwise + depthwise pair fused into aicc.PwDwNHWC with a dynamic batch: each
    sample is computed on its own, so the padded batch passes through (it was refused:
    no padding rule for aicc's fused op)."""
    from .ops.test_pwdw_nhwc import config, model
    from .oracle import reference
    m, feeds = model(1)
    for vi in (m.graph.input[0], m.graph.output[0]):
        vi.type.tensor_type.shape.dim[0].dim_param = "n"
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    out = aicc.build(p, target=target, out=tmp_path / "b", config=config(tmp_path, True, 4096),
                     buckets={"n": [1, 2, 4]})
    ops = [s["op"] for s in json.loads((out / "manifest.json").read_text())["steps"]]
    assert target == "generic" or "PwDwNHWC" in ops, ops
    b = aicc.load(out, cflags=STRICT_CFLAGS)
    for n in (1, 3, 4):
        x = np.random.default_rng(n).normal(size=(n,) + feeds["x"].shape[1:]).astype(np.float32)
        np.testing.assert_allclose(b.run({"x": x})["y"], reference(m, {"x": x})["y"],
                                   rtol=1e-4, atol=1e-5)


def _gather_nd_arange(path, shifted=False):
    """y = x[0, arange(s)] + 1 written as exporters do: GatherND of x [1, s, 4] at the
    indices (0, i) built from Range(0, s) (shifted: (0, i + 1) % s, which reads another
    position of the padded axis)."""
    c = lambda n, v: onnx.numpy_helper.from_array(np.array(v, np.int64), n)  # noqa: E731
    nodes = [h.make_node("Shape", ["x"], ["sh"]), h.make_node("Gather", ["sh", "one"], ["s"]),
             h.make_node("Range", ["zero", "s", "one"], ["r0"])]
    if shifted:
        nodes += [h.make_node("Add", ["r0", "one"], ["r1"]), h.make_node("Mod", ["r1", "s"], ["r"])]
    else:
        nodes += [h.make_node("Identity", ["r0"], ["r"])]
    nodes += [h.make_node("Unsqueeze", ["r", "ax01"], ["si"]),          # [1, s, 1]
              h.make_node("Mul", ["si", "zero"], ["bi"]),                # batch index 0
              h.make_node("Concat", ["bi", "si"], ["idx"], axis=-1),     # [1, s, 2]
              h.make_node("GatherND", ["x", "idx"], ["gx"]),             # [1, s, 4]
              h.make_node("Add", ["gx", "onef"], ["y"])]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, "s", 4])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, "s", 4])],
                     [c("one", 1), c("zero", 0), c("ax01", [0, 2]),
                      onnx.numpy_helper.from_array(np.array(1.0, np.float32), "onef")])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), path)


def test_gather_nd_at_its_own_position_along_a_padded_axis(tmp_path):
    """GatherND reading the padded axis at the output's own position (x[b, arange], as in
    DistilBERT's exported mask) carries the padding through; reading another position of it
    is refused."""
    from .oracle import reference
    _gather_nd_arange(tmp_path / "m.onnx")
    out = aicc.build(tmp_path / "m.onnx", out=tmp_path / "b", buckets={"s": [4, 8]})
    b = aicc.load(out, cflags=STRICT_CFLAGS)
    m = onnx.load(tmp_path / "m.onnx")
    for n in (1, 3, 5, 8):
        x = np.random.default_rng(n).normal(size=(1, n, 4)).astype(np.float32)
        np.testing.assert_allclose(b.run({"x": x})["y"], reference(m, {"x": x})["y"],
                                   rtol=1e-6, atol=1e-6)
    _gather_nd_arange(tmp_path / "s.onnx", shifted=True)
    with pytest.raises(UnsupportedError, match="GatherND"):
        aicc.build(tmp_path / "s.onnx", out=tmp_path / "s", buckets={"s": [4, 8]})
