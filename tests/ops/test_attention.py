"""Attention (opset 23/24/25): compiled C vs onnxruntime (onnx.reference where onnxruntime
lacks the case, or where it deliberately differs: the mode-2 qk output with a causal mask,
where onnxruntime writes -FLT_MAX instead of -inf)."""
import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from tests.oracle import assert_close, check, compile_and_run, make_model, reference, rng

IN_SLOTS = ["Q", "K", "V", "attn_mask", "past_key", "past_value", "nonpad_kv_seqlen"]
OUT_SLOTS = ["Y", "present_key", "present_value", "qk"]


def _model(feeds, attrs, outs, opset, inits=None, output_types=None):
    inits = inits or {}
    names = [s if s in feeds or s in inits else "" for s in IN_SLOTS]
    while names and not names[-1]:
        names.pop()
    onames = [s if s in outs else "" for s in OUT_SLOTS]
    while onames and not onames[-1]:
        onames.pop()
    node = helper.make_node("Attention", names, onames, **attrs)
    return make_model([node], feeds, [o for o in onames if o], inits, opset=opset,
                      output_types=output_types)


def _run(tmp_path, feeds, attrs=None, outs=("Y",), opset=23, oracle="ort", inits=None,
         rtol=1e-4, atol=1e-5, oracle_feeds=None, output_types=None):
    """oracle_feeds: equivalent inputs for the oracle (e.g. an explicitly broadcast mask)."""
    model = _model(feeds, attrs or {}, outs, opset, inits, output_types)
    if oracle == "ort" and oracle_feeds is None:
        return check(model, feeds, tmp_path, rtol=rtol, atol=atol)
    if oracle_feeds is not None:
        omodel = _model(oracle_feeds, attrs or {}, outs, opset, inits)
        want = reference(omodel, oracle_feeds)
    else:
        names = [o.name for o in model.graph.output]
        want = dict(zip(names, ReferenceEvaluator(model).run(None, feeds)))
    got = compile_and_run(model, feeds, tmp_path)
    assert_close(got, want, rtol=rtol, atol=atol)
    return got, want


def _qkv4(r, b, hq, hkv, sq, skv, dk, dv, dt=np.float32):
    return {"Q": r.normal(size=(b, hq, sq, dk)).astype(dt),
            "K": r.normal(size=(b, hkv, skv, dk)).astype(dt),
            "V": r.normal(size=(b, hkv, skv, dv)).astype(dt)}


def _qkv3(r, b, hq, hkv, sq, skv, dk, dv, dt=np.float32):
    return {"Q": r.normal(size=(b, sq, hq * dk)).astype(dt),
            "K": r.normal(size=(b, skv, hkv * dk)).astype(dt),
            "V": r.normal(size=(b, skv, hkv * dv)).astype(dt)}


SHAPES = [  # b, hq, hkv, sq, skv, dk, dv
    (1, 1, 1, 1, 1, 1, 1), (2, 3, 3, 4, 6, 8, 8), (1, 4, 2, 5, 7, 3, 5), (2, 6, 1, 3, 13, 16, 4),
    (1, 2, 2, 17, 9, 7, 11), (3, 1, 1, 65, 65, 5, 2)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("rank", [3, 4])
def test_attention_shapes(shape, rank, tmp_path):
    r = rng(sum(shape) + rank)
    b, hq, hkv, sq, skv, dk, dv = shape
    if rank == 4:
        _run(tmp_path, _qkv4(r, *shape))
    else:
        _run(tmp_path, _qkv3(r, *shape), {"q_num_heads": hq, "kv_num_heads": hkv})


@pytest.mark.parametrize("attrs", [{"scale": 0.3}, {"softcap": 1.5}, {"is_causal": 1},
                                   {"is_causal": 1, "softcap": 2.0, "scale": 0.7}])
@pytest.mark.parametrize("sq,skv", [(4, 6), (6, 4), (5, 5)])
def test_attention_attrs(attrs, sq, skv, tmp_path):
    r = rng(sq * 10 + skv)
    feeds = _qkv4(r, 2, 4, 2, sq, skv, 8, 6)
    feeds["Q"] *= 3
    _run(tmp_path, feeds, attrs)


@pytest.mark.parametrize("mshape", [(4, 6), (1, 6), (2, 1, 4, 6), (2, 3, 4, 6), (3, 4, 6),
                                    (1, 1, 1, 6)])
@pytest.mark.parametrize("kind", ["float", "bool"])
@pytest.mark.parametrize("causal", [0, 1])
def test_attention_masks(mshape, kind, causal, tmp_path):
    r = rng(len(mshape) * 7 + causal)
    feeds = _qkv4(r, 2, 3, 3, 4, 6, 8, 8)
    if kind == "float":
        m = r.normal(size=mshape).astype(np.float32)
        m[r.random(size=mshape) < 0.2] = -np.inf
    else:
        m = r.random(size=mshape) < 0.7
        m[..., 0] = True          # no fully masked row: onnxruntime agrees there
    feeds["attn_mask"] = m
    # a mask broadcast over the queries: onnxruntime rejects it and onnx.reference builds
    # its causal mask from the mask's shape, so the oracle gets the mask broadcast
    ofeeds = None
    if mshape[-2] == 1:
        ofeeds = dict(feeds, attn_mask=np.broadcast_to(m, mshape[:-2] + (4, 6)).copy())
    _run(tmp_path, feeds, {"is_causal": causal}, oracle_feeds=ofeeds)


@pytest.mark.parametrize("causal", [0, 1])
def test_attention_fully_masked_rows(causal, tmp_path):
    """All-False rows give zero output rows (spec errata); decided on the mask, not the
    scores."""
    r = rng(5)
    feeds = _qkv4(r, 1, 2, 2, 4, 5, 8, 8)
    m = r.random(size=(4, 5)) < 0.5
    m[1] = False
    m[3] = False
    m[0, 0] = True
    feeds["attn_mask"] = m
    _run(tmp_path, feeds, {"is_causal": causal, "qk_matmul_output_mode": 3}, outs=("Y", "qk"),
         oracle="ref")


def test_attention_short_mask(tmp_path):
    """A mask shorter than the keys is padded with -inf (onnxruntime rejects it)."""
    r = rng(6)
    feeds = _qkv4(r, 2, 2, 2, 3, 7, 4, 4)
    feeds["attn_mask"] = r.normal(size=(2, 1, 3, 5)).astype(np.float32)
    _run(tmp_path, feeds, {"is_causal": 1}, oracle="ref")


@pytest.mark.parametrize("rank", [3, 4])
@pytest.mark.parametrize("hkv", [4, 2])
@pytest.mark.parametrize("causal", [0, 1])
def test_attention_past_present(rank, hkv, causal, tmp_path):
    r = rng(rank * 10 + hkv + causal)
    b, hq, sq, lk, p, dk, dv = 2, 4, 3, 3, 5, 8, 6
    feeds = _qkv4(r, b, hq, hkv, sq, lk, dk, dv) if rank == 4 else \
        _qkv3(r, b, hq, hkv, sq, lk, dk, dv)
    feeds["past_key"] = r.normal(size=(b, hkv, p, dk)).astype(np.float32)
    feeds["past_value"] = r.normal(size=(b, hkv, p, dv)).astype(np.float32)
    attrs = {"is_causal": causal}
    if rank == 3:
        attrs.update(q_num_heads=hq, kv_num_heads=hkv)
    _run(tmp_path, feeds, attrs, outs=("Y", "present_key", "present_value"))


def test_attention_past_mask_qk(tmp_path):
    r = rng(8)
    feeds = _qkv4(r, 2, 3, 3, 4, 6, 8, 8)
    feeds["attn_mask"] = r.normal(size=(4, 18)).astype(np.float32)
    feeds["past_key"] = r.normal(size=(2, 3, 12, 8)).astype(np.float32)
    feeds["past_value"] = r.normal(size=(2, 3, 12, 8)).astype(np.float32)
    _run(tmp_path, feeds, {"qk_matmul_output_mode": 2},
         outs=("Y", "present_key", "present_value", "qk"))


def test_attention_present_without_past(tmp_path):
    """present_key/present_value without a past: K and V in 4-D layout."""
    r = rng(9)
    feeds = _qkv3(r, 2, 4, 2, 3, 5, 4, 6)
    # onnx shape inference leaves these outputs untyped without a past
    types = {"present_key": (np.float32, [2, 2, 5, 4]), "present_value": (np.float32, [2, 2, 5, 6])}
    _run(tmp_path, feeds, {"q_num_heads": 4, "kv_num_heads": 2},
         outs=("Y", "present_key", "present_value"), oracle="ref", output_types=types)


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
@pytest.mark.parametrize("softcap", [0.0, 1.5])
def test_attention_qk_output(mode, softcap, tmp_path):
    r = rng(mode + 10)
    feeds = _qkv4(r, 1, 2, 1, 3, 5, 4, 4)
    feeds["Q"] *= 2
    feeds["attn_mask"] = r.normal(size=(3, 5)).astype(np.float32)
    # mode 0 with softcap: the raw product (spec, onnxruntime; onnx.reference caps it)
    _run(tmp_path, feeds, {"qk_matmul_output_mode": mode, "softcap": softcap},
         outs=("Y", "qk"))


@pytest.mark.parametrize("mode", [2, 3])
def test_attention_qk_output_causal(mode, tmp_path):
    """Mode 2 with a causal mask holds -inf at masked keys (onnx.reference; onnxruntime
    writes -FLT_MAX)."""
    r = rng(mode + 20)
    feeds = _qkv4(r, 2, 2, 2, 4, 6, 4, 4)
    _run(tmp_path, feeds, {"qk_matmul_output_mode": mode, "is_causal": 1}, outs=("Y", "qk"),
         oracle="ref")


@pytest.mark.parametrize("causal", [0, 1])
@pytest.mark.parametrize("mask", [None, "bool", "float"])
def test_attention_nonpad(causal, mask, tmp_path):
    """Opset 24 external cache: keys >= nonpad_kv_seqlen[b] are padding; the causal mask is
    aligned bottom-right (offset nonpad - Sq), including out-of-range lengths."""
    r = rng(30 + causal)
    feeds = _qkv4(r, 4, 4, 2, 3, 8, 8, 8)
    if mask == "bool":
        feeds["attn_mask"] = r.random(size=(4, 1, 3, 8)) < 0.8
    elif mask == "float":
        feeds["attn_mask"] = r.normal(size=(3, 8)).astype(np.float32)
    feeds["nonpad_kv_seqlen"] = np.array([8, 5, 1, 3], dtype=np.int64)
    _run(tmp_path, feeds, {"is_causal": causal}, opset=24, oracle="ref")
    feeds["nonpad_kv_seqlen"] = np.array([-4, 100, 0, 11], dtype=np.int64)
    _run(tmp_path, feeds, {"is_causal": causal}, opset=24, oracle="ref")


@pytest.mark.parametrize("left,right,causal", [(2, -1, 1), (1, 2, 0), (0, 0, 0), (-1, 1, 0),
                                               (3, -1, 0)])
def test_attention_window(left, right, causal, tmp_path):
    r = rng(left * 5 + right + 40)
    feeds = _qkv4(r, 2, 2, 2, 5, 7, 4, 4)
    _run(tmp_path, feeds, {"is_causal": causal, "left_window_size": left,
                           "right_window_size": right}, opset=25, oracle="ref")


def test_attention_window_past(tmp_path):
    r = rng(45)
    feeds = _qkv4(r, 2, 2, 2, 4, 2, 8, 8)
    feeds["past_key"] = r.normal(size=(2, 2, 6, 8)).astype(np.float32)
    feeds["past_value"] = r.normal(size=(2, 2, 6, 8)).astype(np.float32)
    _run(tmp_path, feeds, {"is_causal": 1, "left_window_size": 2}, opset=25, oracle="ref",
         outs=("Y", "present_key", "present_value"))


@pytest.mark.parametrize("rank", [3, 4])
def test_attention_float64(rank, tmp_path):
    r = rng(50 + rank)
    shape = (2, 4, 2, 3, 5, 6, 4)
    feeds = (_qkv4 if rank == 4 else _qkv3)(r, *shape, dt=np.float64)
    feeds["attn_mask"] = r.normal(size=(3, 5))
    attrs = {"is_causal": 1, "softcap": 2.0}
    if rank == 3:
        attrs.update(q_num_heads=4, kv_num_heads=2)
    _run(tmp_path, feeds, attrs, oracle="ref", rtol=1e-10, atol=1e-12)


def test_attention_const_kv(tmp_path):
    """K and V as initializers (weights in the image)."""
    r = rng(60)
    f = _qkv4(r, 1, 2, 2, 3, 4, 5, 5)
    _run(tmp_path, {"Q": f["Q"]}, inits={"K": f["K"], "V": f["V"]})


def test_attention_float16(tmp_path):
    """float16 runs in float32 through the upcast-half pass."""
    r = rng(70)
    feeds = _qkv4(r, 1, 2, 2, 3, 4, 8, 8, dt=np.float16)
    _run(tmp_path, feeds, {"is_causal": 1}, rtol=2e-3, atol=2e-3)


def test_attention_nan_poison(tmp_path):
    """Masked keys with huge values in V do not leak; a NaN in Q makes its row NaN."""
    r = rng(80)
    feeds = _qkv4(r, 1, 1, 1, 3, 5, 4, 4)
    feeds["V"][..., 3:, :] = 1e30
    feeds["Q"][0, 0, 2, 1] = np.nan
    m = np.zeros((3, 5), dtype=np.float32)
    m[:, 3:] = -np.inf
    feeds["attn_mask"] = m
    _run(tmp_path, feeds, {"softcap": 0.5}, oracle="ref")


def test_attention_empty_query_with_present(tmp_path):
    """No query rows: Y is empty, the caches are still concatenated."""
    r = rng(90)
    feeds = _qkv4(r, 1, 2, 2, 0, 3, 4, 4)
    feeds["past_key"] = r.normal(size=(1, 2, 2, 4)).astype(np.float32)
    feeds["past_value"] = r.normal(size=(1, 2, 2, 4)).astype(np.float32)
    _run(tmp_path, feeds, outs=("Y", "present_key", "present_value"), oracle="ref")
