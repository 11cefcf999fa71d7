"""Col2Im: compiled C vs onnxruntime over block shapes, strides, pads, dilations, 1-D to 3-D,
constant and run-time block_shape, and the all-zero rule for a block_shape that does not fit
(aicc/ops/col2im.py)."""
import numpy as np
import pytest
from onnx import helper

from tests.oracle import check, compile_and_run, make_model, rng


def _cols(img, blk, dil, st, pads):
    r = len(img)
    nb = [(i + pads[d] + pads[d + r] - dil[d] * (b - 1) - 1) // st[d] + 1
          for d, (i, b) in enumerate(zip(img, blk))]
    return int(np.prod(blk)), int(np.prod(nb))


def _model(n, c, img, blk, attrs, runtime_blk, dtype=np.float32, seed=0):
    r = len(img)
    dil = attrs.get("dilations", [1] * r)
    st = attrs.get("strides", [1] * r)
    pads = attrs.get("pads", [0] * 2 * r)
    k, L = _cols(img, blk, dil, st, pads)
    x = rng(seed).normal(size=(n, c * k, L)).astype(dtype)
    node = helper.make_node("Col2Im", ["x", "img", "blk"], ["y"], **attrs)
    feeds = {"x": x}
    inits = {"img": np.array(img, np.int64)}
    if runtime_blk:
        feeds["blk"] = np.array(blk, np.int64)
    else:
        inits["blk"] = np.array(blk, np.int64)
    model = make_model([node], feeds, ["y"], inits, opset=18,
                       output_types={"y": (dtype, [n, c, *img])})
    return model, feeds


CASES = {
    "basic": ((1, 1, [5, 5], [2, 2], {})),
    "channels_batch": ((2, 3, [6, 7], [3, 2], {})),
    "strides": ((1, 2, [7, 9], [3, 3], {"strides": [2, 2]})),
    "pads": ((1, 1, [5, 6], [2, 3], {"pads": [0, 1, 2, 1]})),
    "dilations": ((1, 2, [8, 9], [2, 3], {"dilations": [2, 3]})),
    "all": ((1, 2, [9, 8], [3, 2], {"dilations": [2, 1], "strides": [2, 3],
                                    "pads": [1, 2, 1, 0]})),
    "1d": ((2, 2, [11], [3], {"strides": [2], "pads": [1, 1]})),
    "3d": ((1, 1, [3, 4, 5], [2, 2, 3], {"strides": [1, 2, 1]})),
}


@pytest.mark.parametrize("runtime_blk", [False, True])
@pytest.mark.parametrize("case", sorted(CASES))
def test_col2im(case, runtime_blk, tmp_path):
    n, c, img, blk, attrs = CASES[case]
    model, feeds = _model(n, c, img, blk, attrs, runtime_blk)
    check(model, feeds, tmp_path)


def test_col2im_float64(tmp_path):
    model, feeds = _model(1, 2, [6, 5], [2, 2], {"strides": [2, 1]}, True, dtype=np.float64)
    check(model, feeds, tmp_path)


def test_col2im_runtime_block_mismatch_gives_zeros(tmp_path):
    model, feeds = _model(1, 1, [5, 5], [2, 2], {}, True)
    feeds["blk"] = np.array([4, 1], np.int64)          # same product, wrong column count
    got = compile_and_run(model, feeds, tmp_path)["y"]
    assert got.shape == (1, 1, 5, 5) and not got.any()
    feeds["blk"] = np.array([-2, -2], np.int64)
    assert not compile_and_run(model, feeds, tmp_path)["y"].any()
