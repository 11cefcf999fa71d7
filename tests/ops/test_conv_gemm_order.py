"""The conv tile GEMM's K blocks are summed in one order whatever the loop order around them
(kernels/conv/simd_gemm.py tile_gemm; the transposed GEMM runs its column blocks outside the K
blocks): with several K blocks (kc) and column blocks (jb), the transposed variant gives the
im2col variant's bits (both: each block's FMA chain from +0, added in k order, then + bias,
then the clamp), and onnxruntime's values."""
import numpy as np
import onnx
import pytest
from onnx import helper

import aicc
from tests.oracle import STRICT_CFLAGS, assert_close, make_model, reference, rng
from tests.ops.test_conv_simd import TARGETS

pytestmark = pytest.mark.skipif(not TARGETS, reason="host runs no x86 SIMD target")

# (x shape, w shape, attrs): K = 300 (3 blocks of 128), 150 output channels (3 blocks of
# 64); 3x3 on 7x7 (K = 576); 1x1 on 5x9 with 70 channels (a partial last panel)
CASES = [((1, 300, 7, 7), (150, 300, 1, 1), {}),
         ((2, 64, 7, 7), (96, 64, 3, 3), {"pads": [1, 1, 1, 1]}),
         ((1, 200, 5, 9), (70, 200, 1, 1), {})]


@pytest.mark.parametrize("target", TARGETS)
def test_transposed_equals_im2col_bitwise(target, tmp_path):
    feeds, inits, nodes, outs = {}, {}, [], []
    for i, (xs, ws, attrs) in enumerate(CASES):
        r = rng(i)
        feeds[f"x{i}"] = r.normal(size=xs).astype(np.float32)
        inits[f"w{i}"] = (r.normal(size=ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
        inits[f"b{i}"] = r.normal(size=ws[0]).astype(np.float32)
        nodes += [helper.make_node("Conv", [f"x{i}", f"w{i}", f"b{i}"], [f"c{i}"],
                                   name=f"conv{i}", **attrs),
                  helper.make_node("Relu", [f"c{i}"], [f"y{i}"])]
        outs.append(f"y{i}")
    m = make_model(nodes, feeds, outs, inits)
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    got = {}
    for algo in ("transposed", "im2col"):
        over = {"nodes": {f"conv{i}": {"schedule": {"algo": algo, "kc": 128, "jb": 64}}
                          for i in range(len(CASES))}}
        out = aicc.build(path, target=target, out=tmp_path / algo, overrides=over)
        b = aicc.load(out, cflags=STRICT_CFLAGS)
        assert all(algo in s["kernel"] for s in b.manifest["steps"]), b.manifest["steps"]
        got[algo] = b.run(feeds)
    for k in got["im2col"]:
        assert got["transposed"][k].tobytes() == got["im2col"][k].tobytes(), k
    assert_close(got["transposed"], reference(m, feeds), rtol=1e-4, atol=2e-5)
