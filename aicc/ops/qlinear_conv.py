"""Integer convolutions: ConvInteger and QLinearConv (uint8 / int8); their values, zero
points, bias and requantization as ops/qlinear.py describes for the integer ops. Kernels: the
x86 integer GEMMs (kernels/qgemm/conv.py), the portable dot and plane kernels
(kernels/qgemm/portable.py, planes.py), the Cortex-M pair kernels (pairs.py, pairs_dw.py) and
Helium's (vdot.py, vdw.py); requantization in integers on ``requant: integer`` targets
(kernels/qgemm/fixed.py)."""
from __future__ import annotations

import numpy as np

from ..emit_c.loops import numel
from ..kernels.conv.base_c import PARAMS, RANGE
from ..kernels.conv.geometry import ConvGeometry, static_shapes
from ..kernels.qgemm import conv as qgemm_conv
from ..kernels.qgemm import fixed
from ..kernels.qgemm import pairs as qgemm_pairs
from ..kernels.qgemm import pairs_dw as qgemm_pairs_dw
from ..kernels.qgemm import vdot as qgemm_vdot
from ..kernels.qgemm import vdw as qgemm_vdw
from ..kernels.qgemm import planes as qconv_planes
from ..kernels.qgemm import portable as qgemm_c
from ..kernels.qgemm import simd as qgemm_simd
from ..kernels.qgemm.requant import Requant, WRAP, irange, sums_fit
from ..kernels.qgemm.round import requant_mult
from ..kernels.qgemm.simd import zp_const, zp_expr
from .base import Op, empty_body, register
from .qlinear import (INT8, _numel, _per_tensor, _requant_prelude, _sfx, _typed,
                      check_scales_output)
from .quantize import round_helper

DOT_ROWS, DOT_MACS = 4, 64   # convs take qgemm_c's dot kernel from 4 output channels per group
                             # or 64 products per output position and group (not depthwise)

CONV = """\
/* Integer convolution of one (batch, output channel) plane: acc[p] over the output positions
 * = sum over the group's input channels and kernel taps of (w - wzp) * (x - xzp), modulo 2^32.
 * x: the group's first input channel of this batch; w: this output channel's filter
 * [cin_g][k0][k1][k2]. Taps in the padding are skipped (they contribute zero). */
static void aicc_iconv_SFX(const aicc_conv_params *p, const TA *restrict x, int32_t xzp,
                           const TB *restrict w, int32_t wzp, uint32_t *restrict acc)
{
    const size_t o1n = p->out[1], o2n = p->out[2], P = p->out[0] * o1n * o2n;
    const size_t plane = p->in[0] * p->in[1] * p->in[2];
    for (size_t q = 0; q < P; ++q)
        acc[q] = 0u;
    for (size_t c = 0; c < p->cin_g; ++c) {
        const TA *xc = x + c * plane;
        for (size_t t = 0; t < p->k[0] * p->k[1] * p->k[2]; ++t) {
            const size_t t0 = t / (p->k[1] * p->k[2]), t1 = t / p->k[2] % p->k[1],
                         t2 = t % p->k[2];
            const int32_t wv = (int32_t)*w++ - wzp;
            const int64_t f0 = aicc_tap_off(p, 0, t0), f1 = aicc_tap_off(p, 1, t1),
                          f2 = aicc_tap_off(p, 2, t2);
            size_t l0, h0, l1, h1, l2, h2;
            if (wv == 0)
                continue;
            aicc_valid_range(f0, p->stride[0], p->in[0], p->out[0], &l0, &h0);
            aicc_valid_range(f1, p->stride[1], p->in[1], p->out[1], &l1, &h1);
            aicc_valid_range(f2, p->stride[2], p->in[2], p->out[2], &l2, &h2);
            const size_t s2 = p->stride[2], n2 = h2 - l2;
            const int16_t w16 = (int16_t)wv;    /* |w - wzp|, |x - xzp| <= 255: int16 */
            if (n2 == 0u)
                continue;
            for (size_t o0 = l0; o0 < h0; ++o0) {
                const size_t i0 = (size_t)((int64_t)(o0 * p->stride[0]) + f0);
                for (size_t o1 = l1; o1 < h1; ++o1) {
                    const size_t i1 = (size_t)((int64_t)(o1 * p->stride[1]) + f1);
                    const TA *restrict xs = xc + (i0 * p->in[1] + i1) * p->in[2] +
                                            (size_t)((int64_t)(l2 * s2) + f2);
                    uint32_t *restrict as = acc + (o0 * o1n + o1) * o2n + l2;
                    size_t j = 0;
                    if (s2 == 1u) {       /* blocks of 16 and 8: vectorized at -O2 */
                        for (; j + 16u <= n2; j += 16u)
                            for (size_t u = 0; u < 16u; ++u)
                                as[j + u] += (uint32_t)(w16 * (int16_t)((int32_t)xs[j + u] - xzp));
                        for (; j + 8u <= n2; j += 8u)
                            for (size_t u = 0; u < 8u; ++u)
                                as[j + u] += (uint32_t)(w16 * (int16_t)((int32_t)xs[j + u] - xzp));
                    } else if (s2 == 2u) {
                        for (; j + 8u <= n2; j += 8u) {
                            const TA *restrict xj = xs + 2u * j;
                            uint32_t *restrict aj = as + j;
                            for (size_t u = 0; u < 8u; ++u)
                                aj[u] += (uint32_t)(w16 * (int16_t)((int32_t)xj[2u * u] - xzp));
                        }
                    }
                    for (; j < n2; ++j)
                        as[j] += (uint32_t)(w16 * (int16_t)((int32_t)xs[j * s2] - xzp));
                }
            }
        }
    }
}"""



def _const_or_false(ctx, k):
    """Input k's constant value, or False when it is computed at run time (sums_fit)."""
    v = ctx.in_const(k)
    return False if v is None else v


def _simd_conv(op, node, ctx) -> bool:
    return qgemm_conv.usable(ctx, ConvGeometry(op, node, ctx.in_shape(op.X),
                                               ctx.in_shape(op.W)), op)



class _ConvBase(Op):
    attrs = {"auto_pad": "NOTSET", "dilations": None, "group": 1, "kernel_shape": None,
             "pads": None, "strides": None}
    X = W = XZ = WZ = 0
    WS = None

    def check_conv(self, node, g):
        x, w, y = node.inputs[self.X], node.inputs[self.W], node.outputs[0]
        for name in (x, w):
            if g.dtype(name).name not in INT8:
                return f"operand dtype {g.dtype(name).name} not supported (uint8, int8)"
        shapes = static_shapes(g, [x, w, y])
        if shapes is None:
            return None
        xs, ws, ys = shapes
        try:
            geo = ConvGeometry(self, node, xs, ws)
        except ValueError as e:
            return str(e)
        if ys != (geo.batch, geo.cout, *geo.out):
            return f"output shape {list(ys)} disagrees with the attributes"
        r = _per_tensor(g, node, [self.XZ], "x zero point")
        if r:
            return r
        for k in [self.WZ] + ([self.WS] if self.WS is not None else []):
            present = k < len(node.inputs) and node.inputs[k]
            if present and _numel(g, node.inputs[k]) not in (1, geo.cout):
                return (f"w zero point/scale of shape {list(g.shape(node.inputs[k]))}: "
                        f"per-tensor or per output channel [{geo.cout}] only")
        return None

    def emit_conv(self, node, ctx, post):
        """``post(ch, src, cnt, dst)`` writes cnt outputs of output channel ch from their
        uint32 sums src[q] to out[dst + q]."""
        ta, tb = ctx.in_dtype(self.X), ctx.in_dtype(self.W)
        geo = ConvGeometry(self, node, ctx.in_shape(self.X), ctx.in_shape(self.W))
        P = numel(geo.out)
        if geo.batch * geo.cout * P == 0:
            empty_body(ctx)
            return
        K = geo.cin_g * numel(geo.k)
        if (geo.cout_g >= DOT_ROWS or geo.cout_g * K >= DOT_MACS) and qgemm_c.bound(
                ctx, self.W, self.WZ, geo.cout, K, self.X, self.XZ) <= qgemm_c.LIMIT:
            vw = qgemm_vdot.conv_weights(ctx, self, geo) if qgemm_vdot.isa_for(ctx) else None
            words = (qgemm_pairs.conv_weights(ctx, self, geo)
                     if vw is None and qgemm_pairs.isa_for(ctx) else None)
            if vw is not None:
                qgemm_vdot.emit_conv(ctx, self, geo, vw, post)
            elif words is not None:
                qgemm_pairs.emit_conv(ctx, self, geo, words, post)
            else:
                qgemm_c.emit_conv(ctx, self, geo, post)
            return
        ctx.helper("conv.0.params", PARAMS)
        ctx.helper("conv.1.range", RANGE)
        ctx.helper("qlinear.0.wrap", WRAP)
        acc = ctx.scratch(P * 4, "uint32_t", "acc")
        ctx(f"const int32_t xzp = {zp_expr(ctx, self.XZ)};")
        wz = None
        if ctx.has_input(self.WZ):
            wzn = _numel(ctx.g, node.inputs[self.WZ])
            wz = f"(int32_t){ctx.inp[self.WZ]}[{'oc' if wzn > 1 else '0'}]"
        vdw = qgemm_vdw.weights(ctx, self, geo) if qgemm_vdw.usable(ctx, geo) else None
        if vdw is not None:
            qgemm_vdw.emit(ctx, self, geo, vdw, acc, post)
            return
        if qgemm_pairs_dw.dw_usable(ctx, geo):
            qgemm_pairs_dw.emit_dw(ctx, lambda code: _typed(code, ta, tb), geo, ctx.inp[self.X],
                                   ctx.inp[self.W], wz or "0", acc, post, ta)
            return
        if qconv_planes.supports(geo):
            qconv_planes.emit(ctx, lambda code: _typed(code, ta, tb), _sfx(ta, tb), geo,
                              ctx.inp[self.X], ctx.inp[self.W], wz or "0", acc, post)
            return
        fn = f"aicc_iconv{_sfx(ta, tb)}"
        ctx.helper(f"qlinear.2.conv{_sfx(ta, tb)}", _typed(CONV, ta, tb))
        ctx(f"/* {geo.describe()} */")
        ctx(geo.params())
        inP, K = numel(geo.inp), geo.cin_g * numel(geo.k)
        with ctx.block(f"for (size_t nb = 0; nb < {geo.batch}u; ++nb)"):
            with ctx.block(f"for (size_t oc = 0; oc < {geo.cout}u; ++oc)"):
                ctx(f"const size_t gi = oc / {geo.cout_g}u;")
                xoff = f"(nb * {geo.cin}u + gi * {geo.cin_g}u) * {inP}u"
                ctx(f"{fn}(&prm, {ctx.inp[self.X]} + {xoff}, xzp, {ctx.inp[self.W]} + oc * {K}u, "
                    f"{wz or '0'}, {acc});")
                post("oc", acc, f"{P}u", f"(nb * {geo.cout}u + oc) * {P}u")


@register("ConvInteger", since=10)
class ConvInteger(_ConvBase):
    X, W, XZ, WZ = 0, 1, 2, 3

    def check(self, node, g):
        return self.check_conv(node, g)

    def emit(self, node, ctx):
        ctx("/* ConvInteger: int32 y = conv(x - xzp, w - wzp), accumulated modulo 2^32 */")
        if _simd_conv(self, node, ctx):
            qgemm_conv.emit_conv(self, node, ctx, None)
            return

        def post(ch, src, cnt, dst):
            with ctx.block(f"for (size_t q = 0; q < {cnt}; ++q)"):
                ctx(f"{ctx.out[0]}[{dst} + q] = aicc_u32_i32({src}[q]);")
        self.emit_conv(node, ctx, post)


@register("QLinearConv", since=10)
class QLinearConv(_ConvBase):
    X, W, XZ, WZ, WS = 0, 3, 2, 5, 4

    def check(self, node, g):
        r = check_scales_output(g, node)
        if r:
            return r
        if len(node.inputs) > 8 and node.inputs[8]:
            if g.dtype(node.inputs[8]).name != "int32":
                return "bias must be int32"
            w = g.shape(node.inputs[3])
            if tuple(g.shape(node.inputs[8])) != (w[0],):
                return f"bias shape {list(g.shape(node.inputs[8]))}, expected [{w[0]}]"
        return (_per_tensor(g, node, [1, 6, 7], "x scale / y scale / y zero point")
                or self.check_conv(node, g))

    def emit(self, node, ctx):
        ydt = ctx.out_dtype(0)
        lo, hi = irange(ydt.name)
        wsn = _numel(ctx.g, node.inputs[4])
        ctx("/* QLinearConv: y = saturate(rint((acc + bias) * (x_scale * w_scale / y_scale)) + "
            "yzp), acc = conv(x - xzp, w - wzp) in int32 */")
        _requant_prelude(ctx, 1, 6, 7)
        bias = ctx.inp[8] if ctx.has_input(8) else None
        if fixed.usable(ctx):
            self._emit_fixed(node, ctx, wsn, bias)
            return
        rnd = round_helper(ctx, np.dtype(np.float64))
        if _simd_conv(self, node, ctx):
            geo = ConvGeometry(self, node, ctx.in_shape(self.X), ctx.in_shape(self.W))
            fits = sums_fit(qgemm_simd.conv_weights(ctx, self, geo), ctx.in_dtype(self.X).name,
                            zp_const(ctx, self.XZ),
                            None if bias is None else _const_or_false(ctx, 8))
            mult = f"sa * {ctx.inp[4]}[oc] / ys" if wsn > 1 else f"sa * {ctx.inp[4]}[0] / ys"
            nt = requant_mult(ctx, wsn)
            qgemm_conv.emit_conv(self, node, ctx, Requant(
                rnd, mult, f"(int32_t){bias}[oc]" if bias else None, fits=fits,
                chan_mult=wsn > 1, rform=nt))
            return

        geo = ConvGeometry(self, node, ctx.in_shape(self.X), ctx.in_shape(self.W))
        rows_f = qgemm_c.float_rows(ctx, self, geo, bias)

        def post(ch, src, cnt, dst):
            # rnd's values, in vectorized blocks: float32 where the sums fit 2^24
            rq = (qgemm_c.requant_row_f32 if rows_f else qgemm_c.requant_row)(ctx, ydt)
            ctx(f"const float mlt = sa * {ctx.inp[4]}[{ch if wsn > 1 else '0'}] / ys;")
            bv = f"(uint32_t){bias}[{ch}]" if bias else "0u"
            ctx(f"{rq}({cnt}, {src}, {bv}, mlt, yzp, {lo}, {hi}, {ctx.out[0]} + {dst});")
        self.emit_conv(node, ctx, post)

    def _emit_fixed(self, node, ctx, wsn, bias):
        """The portable conv loops with the requantization in integers (kernels/qgemm/
        fixed.py: targets with ``requant: integer``), given the build's bound on the
        sums."""
        ydt = ctx.out_dtype(0)
        geo = ConvGeometry(self, node, ctx.in_shape(self.X), ctx.in_shape(self.W))
        bnd = fixed.bound_arg(qgemm_c.bound(ctx, self.W, self.WZ, geo.cout,
                                            geo.cin_g * numel(geo.k), self.X, self.XZ))

        def post(ch, src, cnt, dst):
            rq = fixed.row(ctx, ydt)
            ctx(f"const float mlt = sa * {ctx.inp[4]}[{ch if wsn > 1 else '0'}] / ys;")
            bv = f"(uint32_t){bias}[{ch}]" if bias else "0u"
            ctx(f"{rq}({cnt}, {src}, {bv}, mlt, yzp, {bnd}, {ctx.out[0]} + {dst});")
        self.emit_conv(node, ctx, post)
