"""aicc.PwDwNHWC (ops/pwdw_nhwc.py), the pointwise + depthwise pair by bands of rows, on every
runnable target: the same bits as the two unfused steps (fuse-pw-dw off) and onnxruntime's
values, over strides, kernels, pads, channel tails, batch, biases, activations and band sizes
from one row per band to one band."""
import numpy as np
import onnx
import pytest
from onnx import helper

import aicc
from aicc.targets import runnable_targets
from tests.oracle import (STRICT_CFLAGS, assert_close, make_model, pipeline_yaml,
                          reference, rng)

TARGETS = runnable_targets(derived=False)

# (cin, c, h, w, kernel, strides, pads, batch)
GEOS = [
    (5, 24, 13, 11, (3, 3), (2, 2), (1, 1, 1, 1), 1),
    (8, 20, 12, 9, (3, 3), (1, 1), (1, 1, 1, 1), 2),     # channel tail on both ISAs
    (3, 40, 17, 6, (5, 5), (2, 2), (2, 2, 2, 2), 1),
    (6, 16, 10, 10, (3, 5), (2, 1), (0, 2, 2, 1), 1),    # asymmetric pads, no top pad
    (4, 33, 9, 15, (3, 3), (3, 3), (1, 0, 0, 1), 1),     # stride past the kernel overlap
    (16, 96, 14, 14, (3, 3), (1, 1), (0, 0, 0, 0), 1),
]
BANDS = {"one row": 1, "a few rows": 3, "one band": 4096}     # pwdw_kb


def model(i, pw_act="Clip", dw_act="Clip", pw_bias=True, dw_bias=True):
    cin, c, h, w, k, s, pads, n = GEOS[i]
    r = rng(70 + i)
    x = r.normal(size=(n, cin, h, w)).astype(np.float32)
    inits = {"w0": (r.normal(size=(c, cin, 1, 1)) / np.sqrt(cin)).astype(np.float32),
             "w1": (r.normal(size=(c, 1, *k)) / 3).astype(np.float32),
             "w2": (r.normal(size=(8, c, 1, 1)) / np.sqrt(c)).astype(np.float32),
             "lo": np.array(0.0, np.float32), "hi": np.array(6.0, np.float32)}
    ins0, ins1 = ["x", "w0"], ["e", "w1"]
    if pw_bias:
        inits["b0"] = r.normal(size=c).astype(np.float32)
        ins0.append("b0")
    if dw_bias:
        inits["b1"] = r.normal(size=c).astype(np.float32)
        ins1.append("b1")

    def act(name, src, dst):
        if name == "Clip":
            return [helper.make_node("Clip", [src, "lo", "hi"], [dst])]
        return [helper.make_node(name, [src], [dst])] if name else []
    nodes = [helper.make_node("Conv", ins0, ["e0" if pw_act else "e"])] + act(pw_act, "e0", "e")
    nodes += [helper.make_node("Conv", ins1, ["d0" if dw_act else "d"], group=c,
                               strides=list(s), pads=list(pads), kernel_shape=list(k))]
    nodes += act(dw_act, "d0", "d") + [helper.make_node("Conv", ["d", "w2"], ["y"])]
    return make_model(nodes, {"x": x}, ["y"], inits), {"x": x}


def config(tmp_path, fuse: bool, band_kb: int):
    opts = {"layout-nhwc": {"mode": "all"},
            "fuse-pw-dw": {"mode": "auto" if fuse else "off", "min_kb": 0}}
    return pipeline_yaml(tmp_path / f"c_{int(fuse)}_{band_kb}.yaml", opts,
                         {"schedule": {"conv": {"pwdw_kb": band_kb}}})


def run(m, feeds, tmp_path, target, fuse, band_kb, tag):
    path = tmp_path / f"{tag}.onnx"
    onnx.save(m, str(path))
    out = aicc.build(path, target=target, out=tmp_path / f"b_{tag}_{int(fuse)}",
                     config=config(tmp_path, fuse, band_kb))
    b = aicc.load(out, cflags=STRICT_CFLAGS)
    ops = [s["op"] for s in b.manifest["steps"]]
    assert ("PwDwNHWC" in ops) == fuse, ops
    return b.run(feeds)


def same_bits_and_close(m, feeds, tmp_path, target, band_kb=3, tag="m"):
    got = run(m, feeds, tmp_path, target, True, band_kb, tag)
    want = run(m, feeds, tmp_path, target, False, band_kb, tag)
    for k in want:
        assert got[k].tobytes() == want[k].tobytes(), k
    assert_close(got, reference(m, feeds), rtol=1e-4, atol=3e-5)


@pytest.mark.sweep
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("i", range(len(GEOS)))
@pytest.mark.parametrize("bands", sorted(BANDS))
def test_geometries(bands, i, target, tmp_path):
    m, feeds = model(i)
    same_bits_and_close(m, feeds, tmp_path, target, BANDS[bands])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("acts", [(None, None), ("Relu", "Sigmoid"), ("Sigmoid", None),
                                  ("HardSwish", "Relu")])
@pytest.mark.parametrize("biases", [(False, False), (False, True)])
def test_activations_and_biases(biases, acts, target, tmp_path):
    m, feeds = model(0, pw_act=acts[0], dw_act=acts[1], pw_bias=biases[0], dw_bias=biases[1])
    same_bits_and_close(m, feeds, tmp_path, target)


@pytest.mark.parametrize("target", TARGETS)
def test_nan_inf_inputs(target, tmp_path):
    """NaN and +-Inf inputs: the fused step gives the unfused steps' bits (NaN where they
    give NaN)."""
    m, feeds = model(1)
    x = feeds["x"].copy()
    x[0, 0, 2, 3], x[1, 2, 5, 1], x[0, 3, 11, 8] = np.nan, np.inf, -np.inf
    feeds = {"x": x}
    got = run(m, feeds, tmp_path, target, True, 3, "nan")
    want = run(m, feeds, tmp_path, target, False, 3, "nan")
    assert got["y"].tobytes() == want["y"].tobytes()
    assert np.isnan(got["y"]).any()
