"""FlexAttention (ai.onnx.preview 1): compiled C vs onnx.reference (onnxruntime lacks it),
including score_mod/prob_mod subgraphs compiled element by element."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.oracle import check, rng

import aicc
from aicc.errors import UnsupportedError


def _model(feeds, attrs, opset=26):
    node = helper.make_node("FlexAttention", ["Q", "K", "V"], ["Y"], domain="ai.onnx.preview",
                            **attrs)
    ins = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype),
                                         list(v.shape)) for k, v in feeds.items()]
    q, v = feeds["Q"].shape, feeds["V"].shape
    out = helper.make_tensor_value_info("Y", helper.np_dtype_to_tensor_dtype(feeds["Q"].dtype),
                                        [q[0], q[1], q[2], v[3]])
    m = helper.make_model(helper.make_graph([node], "t", ins, [out]),
                          opset_imports=[helper.make_opsetid("", opset),
                                         helper.make_opsetid("ai.onnx.preview", 1)])
    m.ir_version = 10
    return m


def _qkv(r, b, hq, hkv, L, S, e, ev, dt=np.float32):
    return {"Q": r.normal(size=(b, hq, L, e)).astype(dt),
            "K": r.normal(size=(b, hkv, S, e)).astype(dt),
            "V": r.normal(size=(b, hkv, S, ev)).astype(dt)}


def _mod(name, nodes, inits=(), dt=TensorProto.FLOAT):
    x = helper.make_tensor_value_info("x", dt, None)
    y = helper.make_tensor_value_info("y", dt, None)
    return helper.make_graph(nodes, name, [x], [y], initializer=list(inits))


def _c(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


@pytest.mark.parametrize("dims", [(2, 4, 4, 8, 6, 16, 16), (1, 6, 2, 3, 5, 7, 4),
                                  (2, 3, 1, 1, 9, 4, 5), (1, 1, 1, 17, 17, 3, 3)])
@pytest.mark.parametrize("scale", [None, 0.1])
def test_flex_plain(dims, scale, tmp_path):
    r = rng(sum(dims))
    attrs = {} if scale is None else {"scale": scale}
    feeds = _qkv(r, *dims)
    check(_model(feeds, attrs), feeds, tmp_path)


def test_flex_float64(tmp_path):
    feeds = _qkv(rng(1), 2, 4, 2, 5, 6, 8, 8, dt=np.float64)
    check(_model(feeds, {}), feeds, tmp_path, rtol=1e-10, atol=1e-12)


CAUSAL = _mod("causal", [
    helper.make_node("Shape", ["x"], ["s"]),
    helper.make_node("Gather", ["s", "i2"], ["L"], axis=0),
    helper.make_node("Gather", ["s", "i3"], ["S"], axis=0),
    helper.make_node("Range", ["zero", "L", "one"], ["qr"]),
    helper.make_node("Reshape", ["qr", "qs"], ["qi"]),
    helper.make_node("Range", ["zero", "S", "one"], ["kr"]),
    helper.make_node("Reshape", ["kr", "ks"], ["ki"]),
    helper.make_node("GreaterOrEqual", ["qi", "ki"], ["m"]),
    helper.make_node("Where", ["m", "x", "ninf"], ["y"])],
    [_c("zero", np.int64(0)), _c("one", np.int64(1)), _c("i2", np.int64(2)),
     _c("i3", np.int64(3)), _c("qs", np.array([1, 1, -1, 1], np.int64)),
     _c("ks", np.array([1, 1, 1, -1], np.int64)), _c("ninf", np.float32(-np.inf))])

MODS = {
    "bias_add": ("score_mod", _mod("b", [helper.make_node("Add", ["x", "c"], ["y"])],
                                   [_c("c", np.float32(0.5))])),
    "causal": ("score_mod", CAUSAL),
    "softcap": ("score_mod", _mod("sc", [helper.make_node("Div", ["x", "c"], ["t"]),
                                         helper.make_node("Tanh", ["t"], ["u"]),
                                         helper.make_node("Mul", ["u", "c"], ["y"])],
                                  [_c("c", np.float32(1.5))])),
    "per_head_bias": ("score_mod", _mod("hb", [helper.make_node("Add", ["x", "c"], ["y"])],
                                        [_c("c", np.arange(4, dtype=np.float32)
                                            .reshape(1, 4, 1, 1))])),
    "key_bias_clip": ("score_mod", _mod("kb", [
        helper.make_node("Sub", ["x", "c"], ["t"]),
        helper.make_node("Clip", ["t", "lo", "hi"], ["u"]),
        helper.make_node("Max", ["u", "x"], ["y"])],
        [_c("c", np.linspace(0, 2, 6).astype(np.float32)), _c("lo", np.float32(-1)),
         _c("hi", np.float32(1))])),
    "prob_scale": ("prob_mod", _mod("p", [helper.make_node("Mul", ["x", "c"], ["y"])],
                                    [_c("c", np.float32(0.5))])),
    "prob_threshold": ("prob_mod", _mod("pt", [
        helper.make_node("Greater", ["x", "c"], ["m"]),
        helper.make_node("Cast", ["m"], ["f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["x", "f"], ["y"])], [_c("c", np.float32(0.1))])),
}


@pytest.mark.parametrize("which", sorted(MODS))
def test_flex_mods(which, tmp_path):
    key, graph = MODS[which]
    feeds = _qkv(rng(len(which)), 2, 4, 2, 6, 6, 8, 5)
    check(_model(feeds, {key: graph}), feeds, tmp_path)


def test_flex_both_mods(tmp_path):
    feeds = _qkv(rng(3), 1, 2, 2, 4, 4, 8, 8)
    m = _model(feeds, {"score_mod": CAUSAL, "prob_mod": MODS["prob_scale"][1]})
    check(m, feeds, tmp_path)


def test_flex_unsupported_mod(tmp_path):
    """A modifier with a non-elementwise op on the scores is reported, not miscompiled."""
    feeds = _qkv(rng(4), 1, 2, 2, 4, 4, 8, 8)
    g = _mod("bad", [helper.make_node("Softmax", ["x"], ["y"])])
    import onnx
    path = tmp_path / "m.onnx"
    onnx.save(_model(feeds, {"score_mod": g}), str(path))
    with pytest.raises(UnsupportedError, match="Softmax on the scores"):
        aicc.build(path, target="generic", out=tmp_path / "b")
