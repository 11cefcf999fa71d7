"""DeformConv: compiled C vs onnxruntime (onnx.reference where onnxruntime lacks it) over
groups, offset groups, strides, dilations, pads, bias and mask, offsets reaching outside the
input; all inputs fed at run time."""
import numpy as np
import pytest

from tests.oracle import check_node, rng

CASES = {   # x shape, w shape, attrs
    "basic": ((1, 2, 5, 6), (3, 2, 3, 3), {}),
    "pads_strides": ((2, 3, 7, 6), (4, 3, 3, 2), {"pads": [1, 0, 2, 1], "strides": [2, 1]}),
    "dilations": ((1, 2, 8, 8), (2, 2, 2, 3), {"dilations": [2, 1], "pads": [1, 1, 1, 1]}),
    "groups": ((1, 4, 6, 5), (6, 2, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    "offset_groups": ((1, 4, 6, 6), (2, 4, 2, 2), {"offset_group": 2}),
    "groups_offset_groups": ((1, 6, 5, 5), (4, 3, 3, 3), {"group": 2, "offset_group": 3,
                                                          "pads": [1, 1, 1, 1]}),
}


def _out(x, w, a):
    p = a.get("pads", [0, 0, 0, 0])
    s = a.get("strides", [1, 1])
    d = a.get("dilations", [1, 1])
    return [(x[2 + i] + p[i] + p[i + 2] - (w[2 + i] - 1) * d[i] - 1) // s[i] + 1
            for i in range(2)]


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("mask", [False, True])
@pytest.mark.parametrize("case", sorted(CASES))
def test_deform_conv(case, bias, mask, tmp_path):
    xs, ws, attrs = CASES[case]
    r = rng(len(case))
    oh, ow = _out(xs, ws, attrs)
    og = attrs.get("offset_group", 1)
    kk = ws[2] * ws[3]
    feeds = {"x": r.normal(size=xs).astype(np.float32),
             "w": r.normal(size=ws).astype(np.float32),
             "offset": (r.normal(size=(xs[0], og * 2 * kk, oh, ow)) * 1.5).astype(np.float32)}
    order = ["x", "w", "offset"]
    if bias:
        feeds["b"] = r.normal(size=(ws[0],)).astype(np.float32)
    if bias or mask:
        order.append("b" if bias else "")
    if mask:
        feeds["mask"] = r.uniform(0, 1, size=(xs[0], og * kk, oh, ow)).astype(np.float32)
        order.append("mask")
    check_node("DeformConv", feeds, tmp_path, attrs={"kernel_shape": list(ws[2:]), **attrs},
               opset=19, input_order=order)


def test_deform_conv_float64(tmp_path):
    r = rng(9)
    feeds = {"x": r.normal(size=(1, 2, 4, 5)), "w": r.normal(size=(2, 2, 2, 2)),
             "offset": r.normal(size=(1, 8, 3, 4))}
    check_node("DeformConv", feeds, tmp_path, opset=19)
