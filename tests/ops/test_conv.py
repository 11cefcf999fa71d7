"""Conv and ConvTranspose: compiled C vs onnxruntime over shapes and attribute combinations
(both kernel paths: im2col + GEMM and the direct depthwise/one-output-channel kernel), fused
activation epilogues, and the support checks."""
import zlib

import numpy as np
import pytest
from onnx import helper

import aicc
from aicc.bundle.writer import write_bundle
from aicc.compiler import compile_graph
from aicc.config import Options
from aicc.errors import UnsupportedError
from aicc.frontend import import_model
from aicc.ops import load_all, lookup
from aicc.kernels.conv.gemm_c import COL_BUDGET, gemm_tiles
from tests.oracle import (STRICT_CFLAGS, assert_close, check_node, compile_and_run, make_model,
                          reference, rng)


def _conv(x_shape, w_shape, attrs, tmp_path, bias=True, seed=0, dtype=np.float32, op="Conv"):
    r = rng(seed)
    x = r.normal(size=x_shape).astype(dtype)
    w = (r.normal(size=w_shape) / np.sqrt(np.prod(w_shape[1:]))).astype(dtype)
    inits = {"w": w}
    if bias:
        m = w_shape[0] if op == "Conv" else w_shape[1] * attrs.get("group", 1)
        inits["b"] = r.normal(size=(m,)).astype(dtype)
    return check_node(op, {"x": x}, tmp_path, attrs=attrs, initializers=inits)


# (input shape, weight shape, attributes): 2-D unless noted
CONV_CASES = {
    "3x3_pad1": ((1, 3, 8, 8), (4, 3, 3, 3), {"pads": [1, 1, 1, 1]}),
    "odd_nopad": ((1, 5, 7, 9), (6, 5, 3, 3), {}),
    "stride2_odd": ((1, 3, 9, 11), (8, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "stride3": ((1, 4, 10, 13), (5, 4, 3, 3), {"strides": [3, 3]}),
    "stride_2x3": ((1, 4, 11, 13), (5, 4, 3, 2), {"strides": [2, 3], "pads": [0, 1, 1, 0]}),
    "dilation2": ((1, 3, 11, 12), (4, 3, 3, 3), {"dilations": [2, 2], "pads": [2, 2, 2, 2]}),
    "dilation_stride": ((1, 3, 13, 12), (6, 3, 3, 3), {"dilations": [2, 3], "strides": [2, 2],
                                                       "pads": [1, 2, 0, 1]}),
    "asym_pads": ((1, 3, 8, 9), (5, 3, 3, 3), {"pads": [0, 1, 2, 3]}),
    "pads_ge_kernel": ((1, 2, 5, 5), (5, 2, 2, 2), {"pads": [3, 2, 2, 3]}),
    "group2": ((1, 6, 8, 8), (10, 3, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    "group3_odd": ((1, 9, 7, 6), (6, 3, 3, 3), {"group": 3, "strides": [2, 1]}),
    "depthwise": ((1, 7, 9, 9), (7, 1, 3, 3), {"group": 7, "pads": [1, 1, 1, 1]}),
    "depthwise_s2": ((1, 10, 11, 12), (10, 1, 3, 3), {"group": 10, "strides": [2, 2],
                                                       "pads": [1, 1, 1, 1]}),
    "depthwise_wide_s2": ((1, 4, 7, 40), (4, 1, 3, 3), {"group": 4, "strides": [2, 2],
                                                         "pads": [1, 1, 1, 1]}),
    "depthwise_mult2": ((1, 5, 8, 7), (10, 1, 3, 3), {"group": 5, "pads": [1, 0, 1, 2]}),
    "depthwise_5x5_d2": ((1, 6, 12, 11), (6, 1, 5, 5), {"group": 6, "dilations": [2, 2],
                                                         "pads": [4, 4, 4, 4]}),
    # the phase-plane kernel (kernels/conv/planes_c.py): strides, dilations, unread input rows/columns
    "depthwise_s23_d21": ((1, 3, 13, 17), (3, 1, 3, 3), {"group": 3, "strides": [2, 3],
                                                         "dilations": [2, 1],
                                                         "pads": [2, 1, 0, 2]}),
    "depthwise_s3_k2": ((1, 3, 10, 11), (3, 1, 2, 2), {"group": 3, "strides": [3, 3]}),
    "depthwise_s2_unread": ((1, 2, 8, 8), (2, 1, 3, 3), {"group": 2, "strides": [2, 2]}),
    "depthwise_wide_rows": ((1, 2, 5, 37), (2, 1, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    "one_in_channel_s2": ((1, 1, 13, 10), (8, 1, 5, 4), {"strides": [2, 2],
                                                         "pads": [2, 1, 2, 1]}),
    "1d_depthwise_s3": ((1, 4, 23), (4, 1, 5), {"group": 4, "strides": [3], "pads": [2, 2]}),
    "depthwise_s3_pad4": ((1, 2, 9, 20), (2, 1, 3, 5), {"group": 2, "strides": [1, 3],
                                                         "pads": [1, 4, 1, 4]}),
    "group_one_out": ((1, 6, 8, 8), (2, 3, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    "one_out_channel": ((1, 16, 9, 10), (1, 16, 1, 1), {}),
    "pointwise": ((1, 13, 7, 7), (9, 13, 1, 1), {}),
    "pointwise_wide": ((1, 64, 9, 9), (20, 64, 1, 1), {}),
    "pointwise_s2": ((1, 8, 9, 9), (12, 8, 1, 1), {"strides": [2, 2]}),
    "pointwise_pad": ((1, 8, 5, 6), (6, 8, 1, 1), {"pads": [1, 0, 0, 1]}),
    "pointwise_pad_end": ((1, 8, 5, 6), (6, 8, 1, 1), {"pads": [0, 0, 1, 1]}),
    "k5_s2": ((1, 3, 15, 16), (6, 3, 5, 5), {"strides": [2, 2], "pads": [2, 2, 2, 2]}),
    "stem_7x7": ((1, 3, 32, 30), (8, 3, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}),
    "rect_3x1": ((1, 4, 9, 8), (6, 4, 3, 1), {"pads": [1, 0, 1, 0]}),
    "rect_1x5": ((1, 4, 6, 11), (5, 4, 1, 5), {"pads": [0, 2, 0, 2]}),
    "batch2": ((2, 5, 7, 8), (7, 5, 3, 3), {"pads": [1, 1, 1, 1]}),
    "batch2_group": ((2, 4, 6, 7), (6, 2, 3, 3), {"group": 2, "strides": [2, 2]}),
    "channels_11_to_13": ((1, 11, 6, 5), (13, 11, 3, 3), {"pads": [1, 1, 1, 1]}),
    "many_tiles": ((1, 64, 14, 14), (16, 64, 3, 3), {"pads": [1, 1, 1, 1]}),
    "big_k_tiles": ((1, 160, 10, 9), (6, 160, 3, 3), {"pads": [1, 1, 1, 1], "strides": [1, 2]}),
    # K in blocks (conv_gemm_c.gemm_tiles: long K, few positions; KBLOCK_CASES below)
    "kblocks_3x3": ((1, 160, 6, 7), (6, 160, 3, 3), {"pads": [1, 1, 1, 1]}),
    "kblocks_pos_tiles": ((1, 130, 12, 12), (7, 130, 3, 3), {"pads": [1, 1, 1, 1]}),
    "kblocks_pointwise": ((1, 2100, 5, 5), (9, 2100, 1, 1), {}),
    "kblocks_group_s2": ((2, 480, 9, 11), (6, 240, 3, 3), {"group": 2, "strides": [2, 2],
                                                           "pads": [1, 0, 1, 1]}),
    "kernel_is_input": ((1, 3, 5, 5), (4, 3, 5, 5), {}),
    "one_pixel": ((1, 3, 1, 1), (4, 3, 1, 1), {}),
    "kernel_shape_attr": ((1, 3, 6, 6), (4, 3, 3, 3), {"kernel_shape": [3, 3]}),
    "same_upper_s1": ((1, 3, 8, 8), (4, 3, 3, 3), {"auto_pad": "SAME_UPPER"}),
    "same_upper_s2": ((1, 3, 8, 9), (4, 3, 4, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    "same_lower_s2": ((1, 3, 8, 9), (4, 3, 4, 3), {"auto_pad": "SAME_LOWER", "strides": [2, 2]}),
    "same_lower_d2": ((1, 3, 9, 8), (4, 3, 2, 2), {"auto_pad": "SAME_LOWER", "dilations": [2, 2]}),
    "same_upper_dw": ((1, 6, 7, 10), (6, 1, 3, 3), {"auto_pad": "SAME_UPPER", "group": 6,
                                                    "strides": [2, 2]}),
    "valid_s2": ((1, 3, 9, 8), (5, 3, 3, 3), {"auto_pad": "VALID", "strides": [2, 2]}),
    # 1-D
    "1d": ((2, 4, 17), (6, 4, 5), {"strides": [2], "pads": [2, 1]}),
    "1d_dilated": ((1, 3, 20), (5, 3, 3), {"dilations": [3], "pads": [3, 0]}),
    "1d_depthwise": ((1, 8, 15), (8, 1, 3), {"group": 8, "pads": [1, 1]}),
    "1d_same": ((1, 3, 10), (4, 3, 4), {"auto_pad": "SAME_LOWER", "strides": [3]}),
    # 3-D
    "3d": ((1, 3, 5, 6, 7), (4, 3, 3, 3, 3), {"pads": [1, 1, 1, 1, 1, 1]}),
    "3d_strided": ((2, 2, 6, 7, 5), (5, 2, 3, 2, 3), {"strides": [2, 1, 2],
                                                       "pads": [1, 0, 1, 0, 1, 1]}),
    "3d_depthwise": ((1, 4, 5, 5, 6), (4, 1, 3, 3, 3), {"group": 4, "pads": [1] * 6,
                                                         "dilations": [1, 2, 1]}),
}


KBLOCK_CASES = [c for c in CONV_CASES if c.startswith("kblocks")]


@pytest.mark.parametrize("case", KBLOCK_CASES)
def test_conv_kblock_cases_split_k(case):
    """The kblocks cases run the conv GEMM in several K blocks (and kblocks_pos_tiles in
    several position tiles too), so test_conv checks the accumulation across blocks."""
    (n, c, *sp), (m, cg, *k), attrs = CONV_CASES[case]
    s = attrs.get("strides", [1] * len(sp))
    pads = attrs.get("pads", [0] * 2 * len(sp))
    out = [(i + pads[d] + pads[d + len(sp)] - k[d]) // s[d] + 1 for d, i in enumerate(sp)]
    K, P = cg * int(np.prod(k)), int(np.prod(out))
    nt, kt = gemm_tiles(K, P)
    assert kt < K and kt % 64 == 0 and nt * kt <= COL_BUDGET
    assert (nt < P) == (case == "kblocks_pos_tiles")


@pytest.mark.parametrize("case", sorted(CONV_CASES))
def test_conv(case, tmp_path):
    xs, ws, attrs = CONV_CASES[case]
    _conv(xs, ws, attrs, tmp_path, seed=zlib.crc32(case.encode()) % 1000)


@pytest.mark.parametrize("case", ["3x3_pad1", "depthwise", "pointwise"])
def test_conv_no_bias(case, tmp_path):
    xs, ws, attrs = CONV_CASES[case]
    _conv(xs, ws, attrs, tmp_path, bias=False)


@pytest.mark.parametrize("case", ["stride2_odd", "depthwise_s2", "1d", "3d", "kblocks_3x3"])
def test_conv_float64(case, tmp_path):
    xs, ws, attrs = CONV_CASES[case]
    _conv(xs, ws, attrs, tmp_path, dtype=np.float64)


def test_conv_runtime_bias(tmp_path):
    r = rng(3)
    x = r.normal(size=(1, 4, 6, 6)).astype(np.float32)
    b = r.normal(size=(5,)).astype(np.float32)
    w = r.normal(size=(5, 4, 3, 3)).astype(np.float32)
    check_node("Conv", {"x": x, "b": b}, tmp_path, initializers={"w": w},
               input_order=["x", "w", "b"], attrs={"pads": [1, 1, 1, 1]})


def test_conv_nan_inf(tmp_path):
    r = rng(4)
    x = r.normal(size=(1, 3, 6, 6)).astype(np.float32)
    x[0, 0, 1, 1], x[0, 1, 4, 2], x[0, 2, 5, 5] = np.nan, np.inf, -np.inf
    w = r.normal(size=(4, 3, 3, 3)).astype(np.float32)
    w[0] = 0.0          # 0 * Inf = NaN, as in onnxruntime
    check_node("Conv", {"x": x}, tmp_path, initializers={"w": w}, attrs={"pads": [1, 1, 1, 1]})
    wd = r.normal(size=(3, 1, 3, 3)).astype(np.float32)
    check_node("Conv", {"x": x}, tmp_path, initializers={"w": wd},
               attrs={"pads": [1, 1, 1, 1], "group": 3})


RUNTIME_W = ["3x3_pad1", "group3_odd", "depthwise", "one_out_channel", "channels_11_to_13",
             "big_k_tiles", "1d", "3d_strided"]


def _runtime(op, xs, ws, attrs, tmp_path, bias, dtype=np.float32, seed=7):
    """Weights (and bias) fed at run time: packed into step scratch by the step itself."""
    r = rng(seed)
    feeds = {"x": r.normal(size=xs).astype(dtype),
             "w": (r.normal(size=ws) / np.sqrt(np.prod(ws[1:]))).astype(dtype)}
    if bias:
        m = ws[0] if op == "Conv" else ws[1] * attrs.get("group", 1)
        feeds["b"] = r.normal(size=(m,)).astype(dtype)
    check_node(op, feeds, tmp_path, attrs=attrs)


@pytest.mark.parametrize("case", RUNTIME_W)
def test_conv_runtime_weights(case, tmp_path):
    xs, ws, attrs = CONV_CASES[case]
    _runtime("Conv", xs, ws, attrs, tmp_path, bias=case != "1d")


def test_conv_runtime_weights_float64_const_bias(tmp_path):
    r = rng(8)
    x = r.normal(size=(2, 6, 7, 5))
    w = r.normal(size=(6, 3, 3, 3))
    check_node("Conv", {"x": x, "w": w}, tmp_path, initializers={"b": r.normal(size=(6,))},
               attrs={"group": 2, "pads": [1, 0, 1, 2]})


# -- ConvTranspose ---------------------------------------------------------------------

CONVT_CASES = {      # groups with >= 4 input channels use GEMM + col2im, fewer scatter rows
    "3x3": ((1, 5, 5, 5), (5, 4, 3, 3), {}),
    "3x3_scatter": ((1, 3, 5, 5), (3, 4, 3, 3), {}),
    "s2_k3_pad1_outpad1": ((1, 4, 5, 6), (4, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1],
                                                         "output_padding": [1, 1]}),
    "s2_k2_unet": ((1, 8, 6, 6), (8, 4, 2, 2), {"strides": [2, 2]}),
    "s2_k2_many_tiles": ((1, 40, 24, 23), (40, 6, 2, 2), {"strides": [2, 2]}),
    "s3_k2": ((1, 6, 4, 5), (6, 5, 2, 2), {"strides": [3, 3]}),
    "s3_k2_scatter": ((1, 3, 4, 5), (3, 5, 2, 2), {"strides": [3, 3]}),
    "s2_k4_pads": ((2, 5, 5, 4), (5, 2, 4, 4), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "s2_k4_pads_scatter": ((2, 3, 5, 4), (3, 2, 4, 4), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "group2": ((1, 8, 5, 5), (8, 3, 3, 3), {"group": 2, "strides": [2, 1]}),
    "group2_scatter": ((1, 4, 5, 5), (4, 3, 3, 3), {"group": 2, "strides": [2, 1]}),
    "depthwise": ((1, 6, 5, 7), (6, 1, 3, 3), {"group": 6, "strides": [2, 2],
                                               "pads": [1, 1, 1, 1]}),
    "dilation2": ((1, 5, 6, 5), (5, 4, 3, 3), {"dilations": [2, 2], "pads": [1, 0, 2, 1]}),
    "dilation2_scatter": ((1, 3, 6, 5), (3, 4, 3, 3), {"dilations": [2, 2], "pads": [1, 0, 2, 1]}),
    "asym_pads_stride": ((1, 6, 5, 6), (6, 3, 3, 2), {"strides": [2, 3], "pads": [0, 1, 2, 0]}),
    "output_shape": ((1, 4, 5, 5), (4, 2, 3, 3), {"strides": [2, 2], "output_shape": [10, 10]}),
    "output_shape_bigger": ((1, 4, 4, 4), (4, 2, 3, 3), {"strides": [2, 2],
                                                         "output_shape": [10, 10]}),
    "same_upper": ((1, 5, 5, 5), (5, 2, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    "same_lower": ((1, 5, 5, 5), (5, 2, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    "same_upper_scatter": ((1, 2, 5, 5), (2, 2, 3, 3), {"strides": [2, 2],
                                                        "auto_pad": "SAME_UPPER"}),
    "valid": ((1, 4, 4, 5), (4, 2, 3, 3), {"strides": [2, 2], "auto_pad": "VALID"}),
    "channels_odd": ((1, 7, 4, 4), (7, 5, 3, 3), {"pads": [1, 1, 1, 1]}),
    "1d": ((2, 5, 9), (5, 4, 4), {"strides": [2], "pads": [1, 2]}),
    "1d_scatter": ((2, 3, 9), (3, 4, 4), {"strides": [2], "pads": [1, 2]}),
    "3d": ((1, 4, 3, 4, 3), (4, 3, 3, 2, 2), {"strides": [2, 2, 1], "pads": [1, 0, 0, 1, 1, 0]}),
    "3d_scatter": ((1, 2, 3, 4, 3), (2, 3, 3, 2, 2), {"strides": [2, 2, 1],
                                                       "pads": [1, 0, 0, 1, 1, 0]}),
}


@pytest.mark.parametrize("case", sorted(CONVT_CASES))
def test_conv_transpose(case, tmp_path):
    xs, ws, attrs = CONVT_CASES[case]
    _conv(xs, ws, attrs, tmp_path, seed=zlib.crc32(case.encode()) % 1000, op="ConvTranspose")


def test_conv_transpose_output_shape_unreachable(tmp_path):
    x = np.zeros((1, 3, 4, 4), np.float32)
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2],
                            output_shape=[10, 11])
    model = make_model([node], {"x": x}, ["y"], {"w": np.zeros((3, 2, 3, 3), np.float32)})
    with pytest.raises(UnsupportedError, match="output_shape"):
        compile_and_run(model, {"x": x}, tmp_path)


@pytest.mark.parametrize("case", ["3x3", "3x3_scatter", "group2", "s2_k4_pads", "1d", "3d",
                                  "output_shape", "channels_odd"])
def test_conv_transpose_runtime_weights(case, tmp_path):
    xs, ws, attrs = CONVT_CASES[case]
    _runtime("ConvTranspose", xs, ws, attrs, tmp_path, bias=case != "3d")
    if case == "3x3":   # (onnxruntime has no float64 ConvTranspose: onnx.reference)
        _runtime("ConvTranspose", xs, ws, attrs, tmp_path, bias=True, dtype=np.float64)


def test_conv_transpose_no_bias_float64(tmp_path):
    for case in ("s2_k3_pad1_outpad1", "s3_k2_scatter"):
        xs, ws, attrs = CONVT_CASES[case]
        _conv(xs, ws, attrs, tmp_path, bias=False, op="ConvTranspose")
        _conv(xs, ws, attrs, tmp_path, dtype=np.float64, op="ConvTranspose")


# -- fused epilogues -----------------------------------------------------------------------

ACTS = [("Relu", {}, []), ("Clip", {"min": 0.0, "max": 6.0}, ["lo", "hi"]),
        ("LeakyRelu", {"alpha": 0.1}, []), ("Sigmoid", {}, []), ("HardSwish", {}, []),
        ("Tanh", {}, [])]


def _fused(op, x, w, b, attrs, act, params, tmp_path):
    """Compile a one-node model whose node carries aicc_act; compare with onnxruntime on the
    equivalent node -> activation model. Also checks the op's numpy reference()."""
    name, act_inputs = act, []
    inits = {"w": w, "b": b}
    if act == "Clip":
        inits.update(lo=np.array(params["min"], x.dtype), hi=np.array(params["max"], x.dtype))
        act_inputs = ["lo", "hi"]
    act_attrs = {k: v for k, v in params.items() if act != "Clip"}
    base = make_model([helper.make_node(op, ["x", "w", "b"], ["y"], **attrs)], {"x": x}, ["y"],
                      {"w": w, "b": b}, opset=17)
    ref = make_model([helper.make_node(op, ["x", "w", "b"], ["t"], **attrs),
                      helper.make_node(name, ["t"] + act_inputs, ["y"], **act_attrs)],
                     {"x": x}, ["y"], inits, opset=17)
    want = reference(ref, {"x": x})
    import onnx
    path = tmp_path / f"{op}_{act}.onnx"
    onnx.save(base, str(path))
    g = import_model(path)
    (node,) = [n for n in g.nodes if n.op_type == op]
    node.attrs["aicc_act"] = act
    node.attrs["aicc_act_params"] = dict(params)
    opts = Options.load("generic")
    g2, prog = compile_graph(g, opts)
    assert any(n.attrs.get("aicc_act") == act for n in g2.nodes)
    out = write_bundle(prog, tmp_path / f"b_{op}_{act}", name=opts.name, target=opts.target,
                       opts=opts, model_sha="0" * 64,
                       original_inputs=[{"name": "x", "shape": list(x.shape)}])
    got = aicc.load(out, cflags=STRICT_CFLAGS).run({"x": x})
    assert_close(got, want)
    load_all()
    (ref_y,) = lookup(node, g.opset).reference(node, g, [x, w, b])
    assert_close({"y": ref_y}, want)


@pytest.mark.parametrize("act,params,_", ACTS)
@pytest.mark.parametrize("path", ["gemm", "gemm_kblocks", "direct"])
def test_conv_fused_activation(act, params, _, path, tmp_path):
    r = rng(5)
    x = (r.normal(size=(1, 6, 7, 9)) * 3).astype(np.float32)
    if path == "gemm_kblocks":      # the epilogue after the last of 2 K blocks only
        x = (r.normal(size=(1, 160, 6, 7)) * 3).astype(np.float32)
        w, attrs = (r.normal(size=(10, 160, 3, 3)) * 0.05).astype(np.float32), {"pads": [1] * 4}
    elif path == "gemm":
        w, attrs = r.normal(size=(10, 6, 3, 3)).astype(np.float32), {"pads": [1, 1, 1, 1]}
    else:
        w, attrs = r.normal(size=(6, 1, 3, 3)).astype(np.float32), {"pads": [1, 1, 1, 1],
                                                                     "group": 6}
    b = r.normal(size=(w.shape[0],)).astype(np.float32)
    _fused("Conv", x, w, b, attrs, act, params, tmp_path)


@pytest.mark.parametrize("act,params,_", ACTS[:3])
@pytest.mark.parametrize("cin", [4, 2])
def test_conv_transpose_fused_activation(act, params, _, cin, tmp_path):
    r = rng(6)
    x = (r.normal(size=(1, cin, 5, 5)) * 3).astype(np.float32)
    w = r.normal(size=(cin, 3, 3, 3)).astype(np.float32)
    b = r.normal(size=(3,)).astype(np.float32)
    _fused("ConvTranspose", x, w, b, {"strides": [2, 2], "pads": [1, 1, 1, 1]}, act, params,
           tmp_path)
