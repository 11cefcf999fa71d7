"""aicc.ConvNHWC: a 2-D float32 Conv on channel-last tensors, made by the layout-nhwc pass
(passes/layout_nhwc.py) for depthwise and group-1 convolutions with constant weights.

Inputs: X ``[N, H, W, Cin]``, W in the ONNX layout ``[Cout, Cin / group, kh, kw]`` (a
compile-time constant), optional bias ``[Cout]``; output Y ``[N, OH, OW, Cout]``. Attributes:
Conv's (``kernel_shape``, ``strides``, ``dilations``, explicit ``pads`` [top, left, bottom,
right], ``group``; the pass resolves auto_pad) and the fused ``aicc_act`` epilogue. The
result is Conv's on the transposed tensors. ``aicc_nchw_in: 1`` (group 1; the pass sets it on
first convs of few input channels that read an NCHW tensor): X is ``[N, Cin, H, W]`` as in
Conv, only Y is channel-last (no transpose of the input: the broadcast kernel reads it by its
strides; the other kernels run on a transposed copy in scratch).

Kernels:

* depthwise (group = Cin = Cout): per output position a run over the channels, which are
  contiguous in both tensors: ``y[c] = bias[c]``, then for each tap inside the input
  (ky, kx ascending) ``y[c] += w[ky][kx][c] * x[iy][ix][c]`` with the weights transposed at
  compile time to ``[tap][C]``; taps outside the input are skipped (zero padding), then the
  activation. On x86-avx2 / x86-avx512 kernels/conv/nhwc_dw.py's register-blocked SIMD kernel
  (several output positions x channel vectors per block); elsewhere (or with
  ``aicc_kernel: generic``) portable loops that the C compiler vectorizes over channels.
* group 1, few input channels (x86-avx512; x86-avx2 up to 32 output channels:
  conv_bcast.prefer_nhwc): kernels/conv/bcast.py's direct kernel, each input value broadcast against
  vectors of output channels (DS-CNN's and MobileNetV2's first convs); rounding: k in (c,
  ky, kx) order.
* group 1, at most half of the (position, tap) pairs inside the input (dilated convs on
  small planes: DeepLabV3's ASPP), x86 SIMD: kernels/conv/taps.py, each tap a pointwise GEMM
  over its valid output rectangle read in place from X; taps that never meet the input are
  left out.
* group 1 otherwise: im2col of a tile of output positions into rows of K = kh * kw * Cin entries
  (``(ky, kx, ci)`` order: each (ky, kx) is a contiguous run of Cin floats of X; padding
  taps are zero rows) and one GEMM per tile with the weights packed at compile time as
  ``B[K, Cout]`` (gemm.py: the target's SIMD GEMM or the portable one), bias and
  activation in the GEMM's epilogue.

Post-affine (depthwise only; pass fuse-post-affine, ``aicc_post_affine``): inputs 3 and 4
are constant mul / add [C] and the optional input 5 a residual of the output's shape:
``act(conv) * mul + add + r``, a multiply, an add and the residual add in that order (the
BatchNormalization and Add nodes' roundings); in the SIMD kernels' registers when the
activation is a clamp, else in a pass over the output after the kernel.

Rounding: depthwise sums bias + taps in (ky, kx) order; group 1 is the GEMM's FMA chain over
(ky, kx, ci) then + bias (onnxruntime sums in other orders: results agree to rounding).
NaN/Inf: IEEE; zero padding never multiplies a weight (skipped taps / zero patch entries:
0 * Inf weights would give NaN only in the GEMM form, as in onnxruntime's im2col).
"""
from __future__ import annotations

import numpy as np

from ..kernels.conv import bcast as conv_bcast
from ..kernels.conv import nhwc_dw as conv_nhwc_dw
from ..kernels.conv import taps as conv_taps
from ..kernels.conv.base_c import act_check
from ..kernels.conv.geometry import ConvGeometry
from ..kernels.gemm.call import emit_epilogue, gemm_call, gemm_plan
from ..kernels.gemm.portable import pack_b
from ..kernels.isa.x86 import simd_isa
from ..kernels.vmath.act import ACT_ATTRS, act_expr, apply_epilogue, fused_epilogue, unfused
from .base import Op, register
from .normalization import POST_AFFINE as POST, emit_post_affine, post_affine_ref
from .reference import run_onnx_reference


class Geo:
    """Geometry of a ConvNHWC node: conv.ConvGeometry of its NCHW view (validation and output
    sizes), under the channel-last field names the kernels use."""

    def __init__(self, node, xs, ws):
        if len(xs) != 4 or len(ws) != 4:
            raise ValueError("ConvNHWC takes 4-D X [N, H, W, C] and W [M, C/g, kh, kw]")
        self.nchw_in = bool(node.attrs.get("aicc_nchw_in"))
        if self.nchw_in:
            self.n, self.cin, self.h, self.w = (int(d) for d in xs)
        else:
            self.n, self.h, self.w, self.cin = (int(d) for d in xs)
        cg = ConvGeometry(_ATTRS, node, (self.n, self.cin, self.h, self.w), ws)
        self.cg = cg                   # the NCHW view (conv_bcast takes its field names)
        self.cout, self.group = cg.cout, cg.group
        (self.kh, self.kw), (self.sy, self.sx), (self.dy, self.dx) = cg.k, cg.stride, cg.dil
        (self.pt, self.pl), (self.pb, self.pr), (self.oh, self.ow) = cg.pad, cg.pad_end, cg.out
        self.depthwise = self.group == self.cin == self.cout and self.group > 1
        if self.group != 1 and not self.depthwise:
            raise ValueError(f"group {self.group}: ConvNHWC does group 1 or depthwise only")
        if self.nchw_in and self.group != 1:
            raise ValueError("aicc_nchw_in: group 1 only")

    @property
    def out_shape(self):
        return (self.n, self.oh, self.ow, self.cout)

    def describe(self) -> str:
        parts = [f"{self.kh}x{self.kw} kernel"]
        if (self.sy, self.sx) != (1, 1):
            parts.append(f"stride {self.sy}x{self.sx}")
        if (self.dy, self.dx) != (1, 1):
            parts.append(f"dilation {self.dy}x{self.dx}")
        if any((self.pt, self.pl, self.pb, self.pr)):
            parts.append(f"pads {[self.pt, self.pl, self.pb, self.pr]}")
        parts.append("depthwise" if self.depthwise else f"{self.cin}->{self.cout} channels")
        return ", ".join(parts)


def geometry(node, g) -> Geo:
    return Geo(node, g.shape(node.inputs[0]), g.shape(node.inputs[1]))


def _bias(node) -> bool:
    return len(node.inputs) > 2 and bool(node.inputs[2])


@register("ConvNHWC", domain="aicc")
class ConvNHWC(Op):
    attrs = {"group": 1, "strides": None, "dilations": None, "pads": None,
             "kernel_shape": None}

    def check(self, node, g):
        if g.dtype(node.inputs[0]).name != "float32":
            return f"dtype {g.dtype(node.inputs[0]).name} (float32 only)"
        if g.const(node.inputs[1]) is None:
            return "weights must be a compile-time constant"
        ts = [g.type_of(n) for n in (node.inputs[0], node.inputs[1], node.outputs[0])]
        if not all(t.is_static for t in ts):
            return "shapes must be static"
        try:
            geo = geometry(node, g)
        except ValueError as e:
            return str(e)
        if _bias(node) and tuple(g.shape(node.inputs[2])) != (geo.cout,):
            return f"bias shape {list(g.shape(node.inputs[2]))}, expected [{geo.cout}]"
        if tuple(g.shape(node.outputs[0])) != geo.out_shape:
            return f"output shape {list(g.shape(node.outputs[0]))}, expected {list(geo.out_shape)}"
        if node.attrs.get(POST):
            if not (geo.depthwise and len(node.inputs) >= 5 and node.inputs[3]
                    and node.inputs[4]):
                return "aicc_post_affine: depthwise, with its mul and add inputs"
            if any(tuple(g.shape(i)) != (geo.cout,) or g.const(i) is None
                   for i in node.inputs[3:5]):
                return f"post-affine mul / add not constants of shape [{geo.cout}]"
            if len(node.inputs) > 5 and node.inputs[5] and \
                    tuple(g.shape(node.inputs[5])) != geo.out_shape:
                return f"residual of shape {list(g.shape(node.inputs[5]))}, expected " \
                       f"{list(geo.out_shape)}"
        elif len(node.inputs) > 3:
            return "more than 3 inputs without aicc_post_affine"
        return act_check(node, g.dtype(node.inputs[0]))

    def reference(self, node, g, inputs):
        conv = unfused(node)                # a copy
        conv.op_type, conv.domain = "Conv", ""
        x = inputs[0]
        if not node.attrs.get("aicc_nchw_in"):
            x = np.transpose(x, (0, 3, 1, 2))
        ins = [np.ascontiguousarray(x), *inputs[1:3]]
        conv.inputs = conv.inputs[:3]
        y = np.transpose(apply_epilogue(node, run_onnx_reference(conv, g, ins)[0]), (0, 2, 3, 1))
        if node.attrs.get(POST):
            y = post_affine_ref(y, inputs[3], inputs[4], inputs[5] if len(inputs) > 5 else None)
        return [np.ascontiguousarray(y)]

    def emit(self, node, ctx):
        geo = Geo(node, ctx.in_shape(0), ctx.in_shape(1))
        isa = simd_isa(ctx)
        if geo.depthwise:
            _emit_depthwise(node, ctx, geo, isa)
        elif isa is not None and conv_bcast.prefer_nhwc(ctx, geo.cg, isa):
            conv_bcast.emit(ctx, node, geo.cg, isa, ctx.inp[2] if _bias(node) else "NULL",
                            nhwc=True, nchw_in=geo.nchw_in)
        elif isa is not None and conv_taps.prefer(ctx, geo):
            conv_taps.emit(ctx, node, geo, ctx.inp[2] if _bias(node) else None)
        elif geo.nchw_in:            # the input transposed into scratch, then as NHWC
            xt = ctx.scratch(geo.n * geo.h * geo.w * geo.cin * 4, "float", "xnhwc")
            hw = geo.h * geo.w
            ctx("/* aicc_nchw_in: X [N, C, H, W] -> [N, H, W, C] */")
            with ctx.block(f"for (size_t i = 0; i < {geo.n * hw}u; ++i)"):
                ctx(f"const float *restrict s = {ctx.inp[0]} + i / {hw}u * {hw * geo.cin}u "
                    f"+ i % {hw}u;")
                ctx(f"for (size_t c = 0; c < {geo.cin}u; ++c) {xt}[i * {geo.cin}u + c] = "
                    f"s[c * {hw}u];")
            _emit_gemm(node, ctx, geo, xt)
        else:
            _emit_gemm(node, ctx, geo, ctx.inp[0])


_ATTRS = ConvNHWC()        # attribute defaults for ConvGeometry (Op.attr)


def _emit_depthwise(node, ctx, geo, isa) -> None:
    post = resid = None
    if node.attrs.get(POST):
        cp = -(-geo.cout // 16) * 16        # whole vectors of every ISA's kernels
        post = tuple(ctx.const(np.pad(np.asarray(ctx.in_const(k), np.float32).reshape(-1),
                                      (0, cp - geo.cout)), name)
                     for k, name in ((3, "pmul"), (4, "padd")))
        resid = ctx.inp[5] if ctx.has_input(5) else None
    if isa is not None and conv_nhwc_dw.supports(geo, isa):
        if not conv_nhwc_dw.emit(ctx, node, geo, isa, post, resid):
            _post_loop(ctx, geo, post, resid)
        return
    ctx.kernel = "generic"
    ctx(f"/* ConvNHWC {geo.describe()}: channel runs per output position, taps inside the "
        "input only */")
    depthwise_loops(ctx, node, geo, ctx.inp[0], ctx.out[0], tap_major(ctx, geo, 1),
                    ctx.inp[2] if _bias(node) else None)
    _post_loop(ctx, geo, post, resid)


def _post_loop(ctx, geo, post, resid) -> None:
    """The post-affine (and residual) over the output, where the kernel did not apply it."""
    if post is not None:
        emit_post_affine(ctx, geo.n * geo.oh * geo.ow, geo.cout, *post, resid)


def tap_major(ctx, geo, k: int) -> str:
    """C name of the depthwise weights of constant input k as [tap][C] (the portable loops')."""
    w = np.asarray(ctx.in_const(k), np.float32).reshape(geo.cin, geo.kh * geo.kw)
    return ctx.const(np.ascontiguousarray(w.T), "wtap")


def depthwise_loops(ctx, node, geo, x: str, y: str, wt: str, b) -> None:
    """The portable depthwise loops over X x, Y y (C expressions), tap-major weights wt and
    bias b (or None), then node's fused activation."""
    C = geo.cin
    act, params = fused_epilogue(node)
    with ctx.block(f"for (size_t r = 0; r < {geo.n * geo.oh}u; ++r)"):
        ctx(f"const size_t n = r / {geo.oh}u, oy = r % {geo.oh}u;")
        ctx(f"const long iy0 = (long)(oy * {geo.sy}u) - {geo.pt}L;")
        with ctx.block(f"for (size_t ox = 0; ox < {geo.ow}u; ++ox)"):
            ctx(f"const long ix0 = (long)(ox * {geo.sx}u) - {geo.pl}L;")
            ctx(f"float *restrict yo = {y} + (r * {geo.ow}u + ox) * {C}u;")
            init = f"{b}[c]" if b else "0.0f"
            ctx(f"for (size_t c = 0; c < {C}u; ++c) yo[c] = {init};")
            with ctx.block(f"for (size_t ky = 0; ky < {geo.kh}u; ++ky)"):
                ctx(f"const long iy = iy0 + (long)(ky * {geo.dy}u);")
                ctx(f"if (iy < 0 || iy >= {geo.h}L) continue;")
                with ctx.block(f"for (size_t kx = 0; kx < {geo.kw}u; ++kx)"):
                    ctx(f"const long ix = ix0 + (long)(kx * {geo.dx}u);")
                    ctx(f"if (ix < 0 || ix >= {geo.w}L) continue;")
                    ctx(f"const float *restrict xi = {x} + ((n * {geo.h}u + (size_t)iy) * "
                        f"{geo.w}u + (size_t)ix) * {C}u;")
                    ctx(f"const float *restrict wk = {wt} + (ky * {geo.kw}u + kx) * {C}u;")
                    ctx(f"for (size_t c = 0; c < {C}u; ++c) yo[c] += wk[c] * xi[c];")
            if act is not None:
                p = {**ACT_ATTRS.get(act, {}), **params}
                with ctx.block(f"for (size_t c = 0; c < {C}u; ++c)"):
                    ctx("const float v = yo[c];")
                    ctx(f"yo[c] = {act_expr(act, p, 'v', np.float32, ctx)};")


def _emit_gemm(node, ctx, geo, x: str) -> None:
    """The im2col + GEMM form on the channel-last input x (a C expression)."""
    dt = np.dtype(np.float32)
    K, M, P = geo.kh * geo.kw * geo.cin, geo.cout, geo.n * geo.oh * geo.ow
    w = np.asarray(ctx.in_const(1), np.float32)           # [M, Cin, kh, kw]
    b2 = np.ascontiguousarray(w.transpose(2, 3, 1, 0).reshape(K, M))
    plan = gemm_plan(ctx, dt, M, K)
    bp = ctx.const(pack_b(b2, plan.nb), "pk")
    c, crs, ccs = (ctx.inp[2], 0, 1) if _bias(node) else (None, 0, 0)
    direct = (geo.kh, geo.kw, geo.sy, geo.sx, geo.pt, geo.pl, geo.pb, geo.pr) == \
        (1, 1, 1, 1, 0, 0, 0, 0)
    if direct:      # the input rows are the patches
        ctx(f"/* ConvNHWC {geo.describe()}: GEMM [{P} x {K}] @ [{K} x {M}] */")
        gemm_call(ctx, plan, dt, P, M, K, x, K, 1, bp, ctx.out[0], c=c, crs=crs, ccs=ccs)
        emit_epilogue(ctx, node, P * M, dt, plan)
        return
    sched = (ctx.target.schedule or {}).get("conv") or {}
    ctx.schedule["tile_kb"] = int(sched.get("tile_kb", 192))
    budget = ctx.schedule["tile_kb"] * 1024 // 4
    mt = max(1, min(P, budget // max(K, 1)))
    if mt < P and mt >= 16:
        mt -= mt % 16
    col = ctx.scratch(mt * K * 4, "float", "col")
    y = ctx.out[0]
    run = geo.cin * 4
    ctx(f"/* ConvNHWC {geo.describe()}: im2col tiles of {mt} positions x K={K} (ky, kx, ci) "
        f"+ GEMM @ [{K} x {M}] */")

    def tile(p0: str, m: int) -> None:
        with ctx.block(f"for (size_t i = 0; i < {m}u; ++i)"):
            ctx(f"const size_t q = {p0} + i, ox = q % {geo.ow}u, oy = q / {geo.ow}u % {geo.oh}u,"
                f" n = q / {geo.ow * geo.oh}u;")
            ctx(f"const long ix0 = (long)(ox * {geo.sx}u) - {geo.pl}L;")
            ctx(f"float *restrict d = {col} + i * {K}u;")
            with ctx.block(f"for (size_t ky = 0; ky < {geo.kh}u; ++ky, d += {geo.kw * geo.cin}u)"):
                ctx(f"const long iy = (long)(oy * {geo.sy}u + ky * {geo.dy}u) - {geo.pt}L;")
                with ctx.block(f"if (iy < 0 || iy >= {geo.h}L)"):
                    ctx(f"memset(d, 0, {run * geo.kw}u);")
                    ctx("continue;")
                ctx(f"const float *restrict xr = {x} + (n * {geo.h}u + (size_t)iy) * "
                    f"{geo.w * geo.cin}u;")
                if geo.dx == 1:     # the row of the patch is one run of kw * Cin floats
                    with ctx.block(f"if (ix0 >= 0 && ix0 + {geo.kw}L <= {geo.w}L)"):
                        ctx(f"memcpy(d, xr + (size_t)ix0 * {geo.cin}u, {run * geo.kw}u);")
                        ctx("continue;")
                with ctx.block(f"for (size_t kx = 0; kx < {geo.kw}u; ++kx)"):
                    ctx(f"const long ix = ix0 + (long)(kx * {geo.dx}u);")
                    with ctx.block(f"if (ix < 0 || ix >= {geo.w}L)"):
                        ctx(f"memset(d + kx * {geo.cin}u, 0, {run}u);")
                    with ctx.block("else"):
                        ctx(f"memcpy(d + kx * {geo.cin}u, xr + (size_t)ix * {geo.cin}u, {run}u);")
        gemm_call(ctx, plan, dt, m, M, K, col, K, 1, bp, f"{y} + {p0} * {M}u", c=c, crs=crs,
                  ccs=ccs)

    full, rest = P // mt, P % mt
    if full:
        with ctx.block(f"for (size_t t = 0; t < {full}u; ++t)"):
            ctx(f"const size_t p0 = t * {mt}u;")
            tile("p0", mt)
    if rest:
        with ctx.block(""):
            ctx(f"const size_t p0 = {full * mt}u;")
            tile("p0", rest)
    emit_epilogue(ctx, node, P * M, dt, plan)
