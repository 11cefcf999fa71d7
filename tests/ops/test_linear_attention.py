"""LinearAttention (opset 27): compiled C vs onnxruntime."""
import numpy as np
import pytest
from onnx import helper

from tests.oracle import check, make_model, rng

SLOTS = ["q", "k", "v", "past", "decay", "beta"]


def _run(tmp_path, feeds, attrs, inits=None, rtol=1e-4, atol=1e-5):
    inits = inits or {}
    names = [n if n in feeds or n in inits else "" for n in SLOTS]
    while not names[-1]:
        names.pop()
    node = helper.make_node("LinearAttention", names, ["y", "state"], **attrs)
    model = make_model([node], feeds, ["y", "state"], inits, opset=27)
    check(model, feeds, tmp_path, rtol=rtol, atol=atol)


def _feeds(r, b, t, hq, hkv, dk, dv, rule, per_head_decay=False, beta1=False, past=False,
           dt=np.float32):
    k = r.normal(size=(b, t, hkv, dk))
    k /= np.linalg.norm(k, axis=-1, keepdims=True)        # delta rules expect unit keys
    f = {"q": r.normal(size=(b, t, hq * dk)).astype(dt),
         "k": k.reshape(b, t, hkv * dk).astype(dt),
         "v": r.normal(size=(b, t, hkv * dv)).astype(dt)}
    if past:
        f["past"] = (r.normal(size=(b, hkv, dk, dv)) * 0.3).astype(dt)
    if rule in ("gated", "gated_delta"):
        f["decay"] = -r.uniform(0.01, 0.5, size=(b, t, hkv if per_head_decay else hkv * dk)
                                ).astype(dt)
    if rule in ("delta", "gated_delta"):
        f["beta"] = r.uniform(0.1, 0.9, size=(b, t, 1 if beta1 else hkv)).astype(dt)
    return f


@pytest.mark.parametrize("rule", ["linear", "gated", "delta", "gated_delta"])
@pytest.mark.parametrize("dims", [(2, 4, 4, 4, 8, 8), (1, 1, 2, 2, 3, 5), (2, 7, 6, 2, 4, 6),
                                  (1, 5, 3, 1, 16, 2)])
@pytest.mark.parametrize("past", [False, True])
def test_linear_attention(rule, dims, past, tmp_path):
    b, t, hq, hkv, dk, dv = dims
    r = rng(sum(dims) + len(rule) + past)
    feeds = _feeds(r, *dims, rule, past=past)
    _run(tmp_path, feeds, {"q_num_heads": hq, "kv_num_heads": hkv, "update_rule": rule})


@pytest.mark.parametrize("rule", ["gated", "gated_delta"])
def test_linear_attention_per_head_decay(rule, tmp_path):
    r = rng(11)
    feeds = _feeds(r, 2, 4, 4, 2, 8, 4, rule, per_head_decay=True, beta1=True, past=True)
    _run(tmp_path, feeds, {"q_num_heads": 4, "kv_num_heads": 2, "update_rule": rule,
                           "scale": 0.3})


def test_linear_attention_default_rule_const_past(tmp_path):
    """Default update_rule (gated_delta); past_state as an initializer."""
    r = rng(12)
    feeds = _feeds(r, 1, 3, 2, 2, 4, 4, "gated_delta", past=True)
    past = feeds.pop("past")
    _run(tmp_path, feeds, {"q_num_heads": 2, "kv_num_heads": 2}, inits={"past": past})


def test_linear_attention_float16(tmp_path):
    r = rng(13)
    feeds = _feeds(r, 1, 4, 4, 2, 8, 8, "gated_delta", dt=np.float16)
    _run(tmp_path, feeds, {"q_num_heads": 4, "kv_num_heads": 2}, rtol=5e-3, atol=5e-3)
