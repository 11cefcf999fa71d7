"""aicc.QConvNHWC: a 2-D QLinearConv on channel-last tensors, made by the layout-nhwc pass
(passes/layout_nhwc.py) for pointwise and depthwise convs with constant weights and bias.

Inputs: QLinearConv's nine (x ``[N, H, W, Cin]`` uint8 / int8, x_scale, x_zero_point, w in
the ONNX layout ``[Cout, Cin / group, kh, kw]``, w_scale and w_zero_point per tensor or per
output channel, y_scale, y_zero_point, optional int32 bias), all but x compile-time
constants; output y ``[N, OH, OW, Cout]``. Attributes: Conv's (``kernel_shape``, ``strides``,
``dilations``, explicit ``pads``, ``group``). The result is QLinearConv's on the transposed
tensors, value for value: ``saturate(rint((acc + bias) * (x_scale * w_scale / y_scale)) +
yzp)`` with acc the exact integer sum (modulo 2^32) and the product in float64, as
qlinear.py's loops (kernels/qgemm/requant.py's helpers on the SIMD targets).

Kernels (x86 SIMD targets):

* pointwise (1x1, stride 1, no padding, group 1): one integer GEMM (qgemm_simd.emit_rows)
  with the positions as rows, read in place when they are whole 4-byte groups of uint8
  (the quad form of VNNI), and the weights ``w - wzp`` packed at build time as ``[Cin,
  Cout]`` panels; on AMX targets AMX tiles. Against the NCHW kernel (positions as vector
  lanes, kernels/qgemm/conv.py) the 49 positions of a 7 x 7 layer no longer pad 64 lanes and no
  input plane is copied.
* depthwise (kernels/qgemm/nhwc_dw.py): kernels/conv/nhwc_dw.py's register-blocked
  channel-last kernel (the float32 one's blocks, taps and borders) on the bytes: each input
  vector is widened to int32, converted to float and its zero point subtracted; the taps'
  products and sums are integers below 2^24 in magnitude, so float32 computes them exactly
  in any order; each output row's sums are converted to int32 into a row buffer and
  requantized with the bias as the per-channel add.

Elsewhere (generic, or a depthwise conv of more taps): portable loops per output position
and channel, the wrapping int32 sum over taps and channels, then the scalar requantization.
"""
from __future__ import annotations

from copy import copy

import numpy as np

from ..emit_c.cwriter import ctype
from ..emit_c.loops import numel
from ..kernels.qgemm import nhwc_dw as qconv_nhwc_dw
from ..kernels.qgemm import simd as qgemm_simd
from ..kernels.qgemm.requant import Requant, WRAP, irange
from ..kernels.qgemm.round import multipliers
from ..kernels.qgemm.simd import conv_weights, isa_for, zp_expr
from .base import Op, register
from .conv_nhwc import Geo
from .qlinear import INT8, _requant_prelude
from .quantize import round_helper
from .reference import run_onnx_reference


def _bias(node) -> bool:
    return len(node.inputs) > 8 and bool(node.inputs[8])


def pointwise(geo) -> bool:
    return ((geo.kh, geo.kw, geo.sy, geo.sx) == (1, 1, 1, 1) and geo.group == 1
            and not any((geo.pt, geo.pl, geo.pb, geo.pr)))


@register("QConvNHWC", domain="aicc")
class QConvNHWC(Op):
    attrs = {"group": 1, "strides": None, "dilations": None, "pads": None,
             "kernel_shape": None}
    X, XZ, W, WZ = 0, 2, 3, 5        # input positions (qgemm_simd.conv_weights)

    def check(self, node, g):
        if len(node.inputs) < 8:
            return "QConvNHWC takes QLinearConv's inputs"
        if g.dtype(node.inputs[0]).name not in INT8 or g.dtype(node.outputs[0]).name not in INT8:
            return "x and y must be uint8 or int8"
        for k in range(1, len(node.inputs)):
            if node.inputs[k] and g.const(node.inputs[k]) is None:
                return f"input {k} must be a compile-time constant"
        try:
            geo = Geo(node, g.shape(node.inputs[0]), g.shape(node.inputs[3]))
        except ValueError as e:
            return str(e)
        if not (geo.depthwise or pointwise(geo)):
            return "pointwise or depthwise convs only"
        for k, what in ((1, "x scale"), (2, "x zero point"), (6, "y scale"),
                        (7, "y zero point")):
            if node.inputs[k] and g.const(node.inputs[k]).size != 1:
                return f"{what} must be per tensor"
        for k in (4, 5):
            if node.inputs[k] and g.const(node.inputs[k]).size not in (1, geo.cout):
                return f"w scale / zero point: per tensor or per output channel [{geo.cout}]"
        if tuple(g.shape(node.outputs[0])) != geo.out_shape:
            return f"output shape {list(g.shape(node.outputs[0]))}, expected {list(geo.out_shape)}"
        return None

    def reference(self, node, g, inputs):
        conv = copy(node)
        conv.op_type, conv.domain = "QLinearConv", ""
        ins = [np.ascontiguousarray(np.transpose(inputs[0], (0, 3, 1, 2))), *inputs[1:]]
        y = run_onnx_reference(conv, g, ins)[0]
        return [np.ascontiguousarray(np.transpose(y, (0, 2, 3, 1)))]

    def emit(self, node, ctx):
        geo = Geo(node, ctx.in_shape(0), ctx.in_shape(3))
        rnd = round_helper(ctx, np.dtype(np.float64))
        ctx(f"/* QConvNHWC {geo.describe()}: y = saturate(rint((acc + bias) * (x_scale * "
            "w_scale / y_scale)) + yzp), acc = conv(x - xzp, w - wzp) in int32 */")
        _requant_prelude(ctx, 1, 6, 7)
        isa = isa_for(ctx)
        if numel(geo.out_shape) == 0:
            ctx("(void)sa; (void)ys; (void)yzp;")
            return
        wsn = int(np.asarray(ctx.in_const(4)).size)
        w = conv_weights(ctx, self, geo.cg)          # w - wzp, int64 [cout, cin_g, taps]
        bias = (np.asarray(ctx.in_const(8)).astype(np.int64).reshape(-1) if _bias(node)
                else None)
        if isa is not None and pointwise(geo):
            mc, nt, mcol = multipliers(ctx, wsn > 1, geo.cout)
            qgemm_simd.emit_rows(ctx, 0, 2, geo.n * geo.h * geo.w,
                                 w.reshape(geo.cout, geo.cin).T,
                                 Requant(rnd, mc, per_col=wsn > 1, rform=nt, mcol=mcol), bias)
        elif qconv_nhwc_dw.usable(geo, isa):
            qconv_nhwc_dw.emit(ctx, geo, isa, w, bias, rnd, wsn)
        else:
            _emit_loops(ctx, geo, node, rnd)


def _emit_loops(ctx, geo, node, rnd) -> None:
    ctx.kernel = "generic"
    ta, ydt = ctx.in_dtype(0), ctx.out_dtype(0)
    lo, hi = irange(ydt.name)
    ctx.helper("qlinear.0.wrap", WRAP)
    wsn = int(np.asarray(ctx.in_const(4)).size)
    wzn = int(np.asarray(ctx.in_const(5)).size) if ctx.has_input(5) else 0
    cg, K = geo.cin // geo.group, geo.kh * geo.kw
    cog = geo.cout // geo.group
    wz = f"(int32_t){ctx.inp[5]}[{'oc' if wzn > 1 else '0'}]" if wzn else "0"
    ctx(f"/* portable loops: per output position and channel the wrapping sum over taps "
        f"inside the input and the {cg} channel(s) of its group */")
    ctx(f"const int32_t xzp = {zp_expr(ctx, 2)};")
    with ctx.block(f"for (size_t p = 0; p < {geo.n * geo.oh * geo.ow}u; ++p)"):
        ctx(f"const size_t nb = p / {geo.oh * geo.ow}u, oy = p / {geo.ow}u % {geo.oh}u, "
            f"ox = p % {geo.ow}u;")
        with ctx.block(f"for (size_t oc = 0; oc < {geo.cout}u; ++oc)"):
            ctx(f"const size_t c0 = oc / {cog}u * {cg}u;")
            ctx(f"const int32_t wzp = {wz};")
            ctx("uint32_t acc = 0u;")
            with ctx.block(f"for (size_t t = 0; t < {K}u; ++t)"):
                ctx(f"const long iy = (long)(oy * {geo.sy}u + t / {geo.kw}u * {geo.dy}u) - "
                    f"{geo.pt}L, ix = (long)(ox * {geo.sx}u + t % {geo.kw}u * {geo.dx}u) - "
                    f"{geo.pl}L;")
                ctx(f"if (iy < 0 || iy >= {geo.h}L || ix < 0 || ix >= {geo.w}L) continue;")
                ctx(f"const {ctype(ta)} *xp = {ctx.inp[0]} + ((nb * {geo.h}u + (size_t)iy) * "
                    f"{geo.w}u + (size_t)ix) * {geo.cin}u + c0;")
                with ctx.block(f"for (size_t c = 0; c < {cg}u; ++c)"):
                    ctx(f"acc += (uint32_t)(((int32_t)xp[c] - xzp) * ((int32_t){ctx.inp[3]}"
                        f"[(oc * {cg}u + c) * {K}u + t] - wzp));")
            if _bias(node):
                ctx(f"acc += (uint32_t){ctx.inp[8]}[oc];")
            ctx(f"const float mlt = sa * {ctx.inp[4]}[{'oc' if wsn > 1 else '0'}] / ys;")
            ctx(f"{ctx.out[0]}[p * {geo.cout}u + oc] = ({ctype(ydt)}){rnd}((double)"
                f"aicc_u32_i32(acc) * (double)mlt, yzp, {lo}, {hi});")
