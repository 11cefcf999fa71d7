"""CausalConvWithState (opset 27): compiled C vs onnxruntime."""
import numpy as np
import pytest
from onnx import helper

from tests.oracle import check, make_model, rng


def _run(tmp_path, feeds, inits=None, activation=None, rtol=1e-4, atol=1e-5):
    inits = inits or {}
    names = [n if n in feeds or n in inits else "" for n in ("x", "w", "bias", "past")]
    while not names[-1]:
        names.pop()
    attrs = {} if activation is None else {"activation": activation}
    node = helper.make_node("CausalConvWithState", names, ["y", "state"], **attrs)
    model = make_model([node], feeds, ["y", "state"], inits, opset=27)
    check(model, feeds, tmp_path, rtol=rtol, atol=atol)


@pytest.mark.parametrize("b,c,length,k", [(2, 4, 8, 4), (1, 1, 6, 4), (2, 3, 2, 5), (1, 5, 1, 4),
                                          (2, 4, 8, 1), (3, 17, 33, 3), (1, 2, 3, 3)])
@pytest.mark.parametrize("bias,past", [(False, False), (True, False), (False, True),
                                       (True, True)])
@pytest.mark.parametrize("act", [None, "silu"])
def test_causal_conv(b, c, length, k, bias, past, act, tmp_path):
    r = rng(b + c + length + k + 2 * bias + past)
    feeds = {"x": r.normal(size=(b, c, length)).astype(np.float32),
             "w": r.normal(size=(c, 1, k)).astype(np.float32)}
    if bias:
        feeds["bias"] = r.normal(size=(c,)).astype(np.float32)
    if past:
        feeds["past"] = r.normal(size=(b, c, k - 1)).astype(np.float32)
    _run(tmp_path, feeds, activation=act)


def test_causal_conv_const_weights_swish(tmp_path):
    r = rng(3)
    _run(tmp_path, {"x": r.normal(size=(2, 6, 9)).astype(np.float32),
                    "past": r.normal(size=(2, 6, 3)).astype(np.float32)},
         inits={"w": r.normal(size=(6, 1, 4)).astype(np.float32),
                "bias": r.normal(size=(6,)).astype(np.float32)}, activation="swish")


def test_causal_conv_float16(tmp_path):
    r = rng(4)
    _run(tmp_path, {"x": r.normal(size=(1, 4, 8)).astype(np.float16),
                    "w": r.normal(size=(4, 1, 3)).astype(np.float16)}, activation="silu",
         rtol=3e-3, atol=3e-3)
