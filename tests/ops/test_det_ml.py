"""Det, and the ai.onnx.ml ops (Binarizer, ArrayFeatureExtractor, numeric LabelEncoder,
TreeEnsemble, TreeEnsembleRegressor): compiled C vs onnxruntime (onnx.reference where
onnxruntime lacks the op)."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.oracle import assert_close, check, check_node, compile_and_run, reference, rng


@pytest.mark.parametrize("shape", [(2, 2), (3, 3), (4, 5, 5), (2, 3, 1, 1), (7, 7), (3, 0, 0)])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_det(shape, dt, tmp_path):
    x = rng(len(shape)).normal(size=shape).astype(dt)
    check_node("Det", {"x": x}, tmp_path, opset=11, rtol=1e-4, atol=1e-5)


def test_det_singular_and_pivoting(tmp_path):
    x = np.array([[[1, 2], [2, 4]], [[0, 1], [1, 0]], [[0, 0], [0, 0]],
                  [[1e-8, 1], [1, 1]]], np.float32)
    check_node("Det", {"x": x}, tmp_path, opset=11)


def _ml_model(node, feeds, out_type, ml_opset=3, opset=17):
    ins = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype),
                                         list(v.shape)) for k, v in feeds.items()]
    dt, shape = out_type
    out = helper.make_tensor_value_info(node.output[0], helper.np_dtype_to_tensor_dtype(np.dtype(dt)),
                                        shape)
    g = helper.make_graph([node], "g", ins, [out])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset),
                                            helper.make_opsetid("ai.onnx.ml", ml_opset)])
    m.ir_version = 10
    return m


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int64, np.int32])
def test_binarizer(dt, tmp_path):
    x = (rng(1).normal(size=(3, 4, 5)) * 3).astype(dt)
    node = helper.make_node("Binarizer", ["x"], ["y"], domain="ai.onnx.ml", threshold=0.5)
    check(_ml_model(node, {"x": x}, (dt, [3, 4, 5])), {"x": x}, tmp_path)


@pytest.mark.parametrize("xshape,idx", [((3, 4), [0, 2]), ((5,), [4, 1, 1]),
                                        ((2, 3, 6), [5, 0, 3, 3]), ((2, 6), [-1, 7])])
def test_array_feature_extractor(xshape, idx, tmp_path):
    x = rng(2).normal(size=xshape).astype(np.float32)
    y = np.array(idx, np.int64)
    out = [1, len(idx)] if len(xshape) == 1 else list(xshape[:-1]) + [len(idx)]
    node = helper.make_node("ArrayFeatureExtractor", ["x", "y"], ["z"], domain="ai.onnx.ml")
    model = _ml_model(node, {"x": x, "y": y}, (np.float32, out), ml_opset=1)
    got = compile_and_run(model, {"x": x, "y": y}, tmp_path)["z"]
    flat = x.reshape(-1, xshape[-1])
    want = np.stack([flat[:, j] if -xshape[-1] <= j < xshape[-1] else np.zeros(len(flat))
                     for j in idx], axis=-1).reshape(out).astype(np.float32)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kind", ["int_to_float", "float_to_int", "tensor_int32", "no_keys_hit"])
def test_label_encoder(kind, tmp_path):
    if kind == "int_to_float":
        x = np.array([1, 5, 3, 7, -2, 5, 100], np.int64)
        attrs = {"keys_int64s": [5, 3, 7, 1, 5], "values_floats": [0.5, 1.5, 2.5, 3.5, 9.0],
                 "default_float": -7.0}
        out = np.float32
    elif kind == "float_to_int":
        x = np.array([0.5, 2.0, np.nan, -1.0, 3.25, 0.0], np.float32)
        attrs = {"keys_floats": [3.25, 0.5, -1.0], "values_int64s": [10, 20, 30]}
        out = np.int64
    elif kind == "tensor_int32":
        x = np.array([[4, 8], [15, 16]], np.int32)
        attrs = {"keys_tensor": numpy_helper.from_array(np.array([16, 4, 23], np.int32)),
                 "values_tensor": numpy_helper.from_array(np.array([1, 2, 3], np.int16)),
                 "default_tensor": numpy_helper.from_array(np.array([-5], np.int16))}
        out = np.int16
    else:
        x = np.array([1, 2], np.int64)
        attrs = {"keys_int64s": [9], "values_int64s": [1], "default_int64": 42}
        out = np.int64
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain="ai.onnx.ml", **attrs)
    check(_ml_model(node, {"x": x}, (out, list(x.shape)), ml_opset=4), {"x": x}, tmp_path)


def _tree_v5_attrs(dt):
    # tree 0: x0 <= 1.5 ? (x1 < 0 ? L0 : L1) : L2 ; tree 1: x1 in {1, 2} ? L3 : (NaN-tracking GT)
    return dict(
        nodes_featureids=[0, 1, 1, 0], nodes_modes=numpy_helper.from_array(
            np.array([0, 1, 6, 3], np.uint8), "m"),
        nodes_splits=numpy_helper.from_array(np.array([1.5, 0.0, 0.0, -0.5], dt), "s"),
        nodes_truenodeids=[1, 0, 3, 4], nodes_trueleafs=[0, 1, 1, 1],
        nodes_falsenodeids=[2, 1, 3, 5], nodes_falseleafs=[1, 1, 0, 1],
        nodes_missing_value_tracks_true=[0, 0, 0, 1],
        membership_values=numpy_helper.from_array(np.array([1.0, 2.0, np.nan], dt), "mv"),
        leaf_targetids=[0, 1, 0, 1, 0, 1],
        leaf_weights=numpy_helper.from_array(np.array([1, 10, 100, 1000, 0.25, -3], dt), "w"),
        tree_roots=[0, 2], n_targets=2)


@pytest.mark.parametrize("agg", [0, 1, 2, 3])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_tree_ensemble(agg, dt, tmp_path):
    x = np.array([[0, -1], [0, 1], [2, 2], [-1, np.nan], [np.nan, 5], [3, 1], [1.5, 0]], dt)
    node = helper.make_node("TreeEnsemble", ["x"], ["y"], domain="ai.onnx.ml",
                            aggregate_function=agg, **_tree_v5_attrs(dt))
    model = _ml_model(node, {"x": x}, (dt, [7, 2]), ml_opset=5)
    from onnx.reference import ReferenceEvaluator
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    assert_close(compile_and_run(model, {"x": x}, tmp_path), {"y": want})


def _regressor(agg, base=None):
    a = dict(
        nodes_treeids=[0, 0, 0, 0, 0, 1, 1, 1], nodes_nodeids=[0, 1, 2, 3, 4, 0, 1, 2],
        nodes_featureids=[0, 1, 0, 0, 0, 2, 0, 0],
        nodes_modes=["BRANCH_LEQ", "BRANCH_GT", "LEAF", "LEAF", "LEAF", "BRANCH_LT", "LEAF",
                     "LEAF"],
        nodes_values=[0.5, -0.25, 0, 0, 0, 1.0, 0, 0],
        nodes_truenodeids=[1, 2, 0, 0, 0, 1, 0, 0], nodes_falsenodeids=[4, 3, 0, 0, 0, 2, 0, 0],
        nodes_missing_value_tracks_true=[1, 0, 0, 0, 0, 0, 0, 0],
        # every leaf feeds every target (onnxruntime skips base_values of untouched targets)
        target_treeids=[0, 0, 0, 0, 0, 0, 1, 1, 1, 1],
        target_nodeids=[2, 2, 3, 3, 4, 4, 1, 1, 2, 2],
        target_ids=[0, 1] * 5,
        target_weights=[1.5, 0.5, -2.0, 4.0, 0.25, 7.0, 3.0, 0.125, -1.0, 2.5],
        aggregate_function=agg, n_targets=2)
    if base is not None:
        a["base_values"] = base
    return a


@pytest.mark.parametrize("agg", ["SUM", "AVERAGE", "MIN", "MAX"])
def test_tree_ensemble_regressor(agg, tmp_path):
    x = rng(3).normal(size=(20, 3)).astype(np.float32)
    x[3, 0] = np.nan
    base = [0.5, -1.0] if agg in ("SUM", "AVERAGE") else None
    node = helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], domain="ai.onnx.ml",
                            **_regressor(agg, base=base))
    model = _ml_model(node, {"x": x}, (np.float32, [20, 2]), ml_opset=3)
    want = reference(model, {"x": x})
    if agg in ("MIN", "MAX"):   # onnxruntime and onnx.reference differ on untouched targets
        from onnx.reference import ReferenceEvaluator
        want = {"y": ReferenceEvaluator(model).run(None, {"x": x})[0]}
    assert_close(compile_and_run(model, {"x": x}, tmp_path), want)


def test_tree_cycle_is_refused(tmp_path):
    from aicc.errors import UnsupportedError
    a = _tree_v5_attrs(np.float32)
    a["nodes_truenodeids"] = [1, 0, 3, 2]
    a["nodes_trueleafs"] = [0, 1, 1, 0]
    node = helper.make_node("TreeEnsemble", ["x"], ["y"], domain="ai.onnx.ml", **a)
    x = np.zeros((1, 2), np.float32)
    model = _ml_model(node, {"x": x}, (np.float32, [1, 2]), ml_opset=5)
    with pytest.raises(UnsupportedError, match="cycle"):
        compile_and_run(model, {"x": x}, tmp_path)


def test_string_label_encoder_reason(tmp_path):
    from aicc.errors import UnsupportedError
    x = np.array(["a"], object)
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain="ai.onnx.ml",
                            keys_strings=["a"], values_int64s=[1])
    ins = [helper.make_tensor_value_info("x", TensorProto.STRING, [1])]
    outs = [helper.make_tensor_value_info("y", TensorProto.INT64, [1])]
    m = helper.make_model(helper.make_graph([node], "g", ins, outs),
                          opset_imports=[helper.make_opsetid("ai.onnx.ml", 4)])
    m.ir_version = 10
    with pytest.raises(UnsupportedError, match="string"):
        compile_and_run(m, {"x": x}, tmp_path)
