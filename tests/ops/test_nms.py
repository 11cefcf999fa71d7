"""NonMaxSuppression with a declared output count, compared with onnxruntime."""
import numpy as np
import pytest
from onnx import helper

from aicc.errors import UnsupportedError
from tests.oracle import assert_close, compile_and_run, make_model, reference, rng


def _boxes(b, n, center, seed=0):
    r = rng(seed)
    p = r.uniform(0, 10, (b, n, 2)).astype(np.float32)
    s = r.uniform(0.5, 4, (b, n, 2)).astype(np.float32)
    if center:
        return np.concatenate([p, s], -1)
    box = np.concatenate([p, p + s], -1)
    flip = r.random((b, n)) < 0.3
    box[flip] = box[flip][:, [2, 3, 0, 1]]           # flipped corners are allowed
    return box


def _model(feeds, order, attrs, rows):
    node = helper.make_node("NonMaxSuppression", order, ["y"], **attrs)
    return make_model([node], feeds, ["y"], opset=11, output_types={"y": (np.int64, [rows, 3])})


def _run(feeds, order, attrs, tmp_path, extra=0):
    free = make_model([helper.make_node("NonMaxSuppression", order, ["y"], **attrs)], feeds,
                      ["y"], opset=11, output_types={"y": (np.int64, ["n", 3])})
    want = reference(free, feeds)["y"]
    rows = max(0, len(want) + extra)
    got = compile_and_run(_model(feeds, order, attrs, rows), feeds, tmp_path)["y"]
    if extra <= 0:
        assert_close({"y": got}, {"y": want[:rows]})
    else:
        assert_close({"y": got[:len(want)]}, {"y": want})
        assert (got[len(want):] == -1).all()


@pytest.mark.parametrize("b,c,n", [(1, 1, 6), (2, 3, 17), (3, 2, 40)])
@pytest.mark.parametrize("center", [0, 1])
@pytest.mark.parametrize("mo,iou,st", [(3, 0.5, 0.0), (100, 0.3, 0.4), (5, 0.0, -1.0),
                                       (0, 0.5, 0.0), (-2, 0.5, 0.0)])
def test_nms(b, c, n, center, mo, iou, st, tmp_path):
    r = rng(b * 7 + n)
    feeds = {"boxes": _boxes(b, n, center, seed=n), "scores": r.random((b, c, n)).astype(
        np.float32), "mo": np.array([mo], np.int64), "iou": np.array([iou], np.float32),
        "st": np.array([st], np.float32)}
    _run(feeds, list(feeds), {"center_point_box": center}, tmp_path)


@pytest.mark.parametrize("extra", [-2, 3])
def test_nms_declared_count_differs(extra, tmp_path):
    r = rng(9)
    feeds = {"boxes": _boxes(2, 12, 0), "scores": r.random((2, 2, 12)).astype(np.float32),
             "mo": np.array([4], np.int64), "iou": np.array([0.4], np.float32)}
    _run(feeds, list(feeds), {}, tmp_path, extra=extra)


def test_nms_tied_scores_and_optional_inputs(tmp_path):
    feeds = {"boxes": _boxes(1, 10, 0), "scores": np.full((1, 1, 10), 0.5, np.float32),
             "mo": np.array([10], np.int64)}
    _run(feeds, list(feeds), {}, tmp_path)


def test_nms_float64(tmp_path):
    r = rng(3)
    feeds = {"boxes": _boxes(1, 15, 0).astype(np.float64),
             "scores": r.random((1, 2, 15)), "mo": np.array([6], np.int64),
             "iou": np.array([0.2]), "st": np.array([0.1])}
    node = helper.make_node("NonMaxSuppression", list(feeds), ["y"])
    free = make_model([node], feeds, ["y"], opset=11, output_types={"y": (np.int64, ["n", 3])})
    from onnx.reference import ReferenceEvaluator
    want = ReferenceEvaluator(free).run(None, feeds)[0]
    got = compile_and_run(_model(feeds, list(feeds), {}, len(want)), feeds, tmp_path)["y"]
    assert_close({"y": got}, {"y": want})


def test_nms_dynamic_refused(tmp_path):
    feeds = {"boxes": _boxes(1, 4, 0), "scores": rng(1).random((1, 1, 4)).astype(np.float32),
             "mo": np.array([2], np.int64)}
    node = helper.make_node("NonMaxSuppression", list(feeds), ["y"])
    model = make_model([node], feeds, ["y"], opset=11)
    with pytest.raises(UnsupportedError, match="depends on the input values"):
        compile_and_run(model, feeds, tmp_path)
