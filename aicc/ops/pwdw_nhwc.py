"""aicc.PwDwNHWC: a channel-last pointwise conv followed by a depthwise conv, made by the
fuse-pw-dw pass (passes/fuse_pw_dw.py) from layout-nhwc's MatMul and ConvNHWC.

Inputs: X ``[N, H, W, Cin]``, B ``[Cin, C]`` and its bias ``[C]`` (optional) of the
pointwise conv, the depthwise weights ``[C, 1, kh, kw]`` and bias ``[C]`` (optional); all
but X compile-time constants. Attributes: the depthwise ConvNHWC's (``kernel_shape``,
``strides``, ``pads``, ``group`` = C; dilation 1) and fused ``aicc_act``; the pointwise
activation as ``aicc_pw_act`` / ``aicc_pw_act_params``. Output ``[N, OH, OW, C]``: the
ConvNHWC's of ``act_pw(X @ B + bias)``.

Kernel: the output rows are cut into bands of ``ob`` rows; the expanded rows a band reads
(``(ob - 1) * stride + kh``, clipped to the image) are in a scratch buffer of about
``pwdw_kb`` KiB (conv schedule): the rows it shares with the previous band are moved to the
top of the buffer, the new ones computed by the pointwise GEMM (gemm.py's driver, bias and
activation in its epilogue, as the MatMul step), then the depthwise kernel runs on the band
as on a small image whose top / bottom padding is the image's at its first / last band
(kernels/conv/nhwc_dw.py on x86; conv_nhwc's portable loops elsewhere). No expanded row is computed
twice.

Rounding, NaN and Inf: those of the two steps it replaces, bit for bit (the same GEMM chain
per element and the same depthwise FMA chain per output).
"""
from __future__ import annotations

import copy
from contextlib import contextmanager

import numpy as np

from . import conv_nhwc
from ..ir import Node
from ..kernels.conv import nhwc_dw as conv_nhwc_dw
from ..kernels.conv.base_c import act_check, epilogue
from ..kernels.conv.simd_gemm import clamp_of
from ..kernels.gemm.call import emit_epilogue, gemm_call, gemm_plan
from ..kernels.gemm.portable import pack_b
from ..kernels.gemm.simd import flit
from ..kernels.vmath.act import apply_epilogue
from .base import Op, register
from .conv_nhwc import ConvNHWC, Geo

PW_ACT, PW_PARAMS = "aicc_pw_act", "aicc_pw_act_params"
BAND_KB = 384       # default band buffer (conv schedule pwdw_kb): well inside L2


def _pointwise_node(node) -> Node:
    """The MatMul the pointwise part was (its fused activation), for the GEMM emitter."""
    attrs = {}
    if PW_ACT in node.attrs:
        attrs = {"aicc_act": node.attrs[PW_ACT],
                 "aicc_act_params": dict(node.attrs.get(PW_PARAMS) or {})}
    return Node("MatMul", list(node.inputs[:3]), [node.outputs[0] + "_pw"], attrs,
                node.name + "_pw", "")


def _depthwise_node(node) -> Node:
    """The ConvNHWC the depthwise part was (its attributes and fused activation)."""
    attrs = {k: v for k, v in node.attrs.items() if k not in (PW_ACT, PW_PARAMS)}
    return Node("ConvNHWC", [node.outputs[0] + "_e", *node.inputs[3:5]], list(node.outputs),
                attrs, node.name, "aicc")


@contextmanager
def _emitting_as(ctx, node):
    """ctx.node is ``node`` inside (the GEMM emitter reads the fused activation from it)."""
    saved, ctx.node = ctx.node, node
    try:
        yield
    finally:
        ctx.node = saved


def _geo(node, xs, bs, ws) -> Geo:
    n, h, w, _ = (int(d) for d in xs)
    return Geo(node, (n, h, w, int(bs[1])), ws)


def bands(geo, budget_bytes: int) -> list:
    """[(o0, o1, i0, i1, pt, pb)]: output rows [o0, o1) read expanded rows [i0, i1), with pt /
    pb rows of zero padding above / below (the band's geometry)."""
    rowb = geo.w * geo.cin * 4
    ob = max(1, min(geo.oh, (budget_bytes // rowb - geo.kh) // geo.sy + 1))
    out = []
    for o0 in range(0, geo.oh, ob):
        o1 = min(geo.oh, o0 + ob)
        lo, hi = o0 * geo.sy - geo.pt, (o1 - 1) * geo.sy - geo.pt + geo.kh
        i0, i1 = max(0, lo), min(geo.h, hi)
        out.append((o0, o1, i0, i1, i0 - lo, hi - i1))
    return out


def band_geo(geo, band):
    """The depthwise geometry of one band: a 1-image slice of i1 - i0 rows."""
    o0, o1, i0, i1, pt, pb = band
    b = copy.copy(geo)
    b.n, b.h, b.pt, b.pb, b.oh = 1, i1 - i0, pt, pb, o1 - o0
    return b


@register("PwDwNHWC", domain="aicc")
class PwDwNHWC(Op):
    attrs = dict(ConvNHWC.attrs)

    def check(self, node, g):
        if len(node.inputs) != 5:
            return "PwDwNHWC takes 5 inputs (X, B, bias, Wd, bd)"
        if g.dtype(node.inputs[0]).name != "float32":
            return f"dtype {g.dtype(node.inputs[0]).name} (float32 only)"
        for k in (1, 3):
            if g.const(node.inputs[k]) is None:
                return f"input {k} must be a compile-time constant"
        ts = [g.type_of(n) for n in (node.inputs[0], node.inputs[1], node.inputs[3],
                                     node.outputs[0])]
        if not all(t.is_static for t in ts):
            return "shapes must be static"
        xs, bs = g.shape(node.inputs[0]), g.shape(node.inputs[1])
        if len(xs) != 4 or len(bs) != 2 or xs[3] != bs[0]:
            return f"X {list(xs)} and B {list(bs)}: expected [N, H, W, Cin] and [Cin, C]"
        try:
            geo = _geo(node, xs, bs, g.shape(node.inputs[3]))
        except ValueError as e:
            return str(e)
        if not geo.depthwise or (geo.dy, geo.dx) != (1, 1):
            return "the second conv must be depthwise with dilation 1"
        if geo.pt >= geo.kh or geo.pb >= geo.kh:
            return "pads at least the kernel height"
        for k, n in ((2, geo.cin), (4, geo.cin)):
            if node.inputs[k] and tuple(g.shape(node.inputs[k])) != (n,):
                return f"bias {k} shape {list(g.shape(node.inputs[k]))}, expected [{n}]"
        if tuple(g.shape(node.outputs[0])) != geo.out_shape:
            return f"output shape {list(g.shape(node.outputs[0]))}, expected {list(geo.out_shape)}"
        return (act_check(_pointwise_node(node), np.dtype(np.float32))
                or act_check(node, np.dtype(np.float32)))

    def reference(self, node, g, inputs):
        x, b = (np.asarray(v, np.float32) for v in inputs[:2])
        bias = np.asarray(inputs[2], np.float32) if node.inputs[2] else None
        e = apply_epilogue(_pointwise_node(node), np.matmul(x, b), bias)
        return ConvNHWC().reference(_depthwise_node(node), g, [e, *inputs[3:5]])

    def emit(self, node, ctx):
        xs, bs = ctx.in_shape(0), ctx.in_shape(1)
        geo = _geo(node, xs, bs, ctx.in_shape(3))
        isa = conv_nhwc_dw.isa_of(ctx)
        dt = np.dtype(np.float32)
        N, H, W, cin = (int(d) for d in xs)
        C = geo.cin
        sched = (ctx.target.schedule or {}).get("conv") or {}
        ctx.schedule["pwdw_kb"] = int(sched.get("pwdw_kb", BAND_KB))
        plan_bands = bands(geo, ctx.schedule["pwdw_kb"] * 1024)
        rows = max(i1 - i0 for _, _, i0, i1, _, _ in plan_bands)
        buf = ctx.scratch(rows * W * C * 4, "float", "band")
        dwn, pwn = _depthwise_node(node), _pointwise_node(node)
        with _emitting_as(ctx, pwn):
            plan = gemm_plan(ctx, dt, C, cin)
            pk = ctx.const(pack_b(np.asarray(ctx.in_const(1), np.float32), plan.nb), "pk")
        if isa is not None:
            wt, bp = conv_nhwc_dw.operands(ctx, geo, isa, 3, 4)
            lo, hi, act = clamp_of(node)
            ep = epilogue(ctx, dwn, "float32") if act else "NULL"
        else:
            wt = conv_nhwc.tap_major(ctx, geo, 3)
        x, y = ctx.inp[0], ctx.out[0]
        bias = ctx.inp[2] if ctx.has_input(2) else None
        ctx(f"/* PwDwNHWC: [{H * W} x {cin}] @ [{cin} x {C}] by bands of rows into a "
            f"{rows}-row buffer, then the depthwise {geo.describe()} on each band */")
        with ctx.block(f"for (size_t item = 0; item < {N}u; ++item)"):   # batch items
            ctx(f"const float *restrict xn = {x} + item * {H * W * cin}u;")
            ctx(f"float *restrict yn = {y} + item * {geo.oh * geo.ow * C}u;")
            prev = None
            for band in plan_bands:
                o0, o1, i0, i1, _, _ = band
                r0 = i0
                if prev is not None and i0 < prev[1]:      # rows shared with the last band
                    ctx(f"memmove({buf}, {buf} + {(i0 - prev[0]) * W * C}u, "
                        f"{(prev[1] - i0) * W * C * 4}u);")
                    r0 = prev[1]
                if r0 < i1:                                  # the band's new rows
                    rows_at = f"{buf} + {(r0 - i0) * W * C}u"
                    with _emitting_as(ctx, pwn):
                        gemm_call(ctx, plan, dt, (i1 - r0) * W, C, cin, f"xn + {r0 * W * cin}u",
                                  cin, 1, pk, rows_at, c=bias, crs=0, ccs=1 if bias else 0)
                    if plan.isa is None:     # the SIMD drivers apply it per tile
                        emit_epilogue(ctx, pwn, (i1 - r0) * W * C, dt, y=f"({rows_at})")
                bg = band_geo(geo, band)
                yo = f"yn + {o0 * geo.ow * C}u"
                if isa is not None:
                    fn = conv_nhwc_dw.driver(ctx, bg, isa)
                    ctx(f"{fn}({buf}, {wt}, {bp}, {yo}, {flit(lo)}, {flit(hi)}, {ep});")
                else:
                    conv_nhwc.depthwise_loops(ctx, dwn, bg, buf, yo, wt,
                                              ctx.inp[4] if ctx.has_input(4) else None)
                prev = (i0, i1)
        ctx.kernel = f"{isa or 'generic'} pw+dw bands"

