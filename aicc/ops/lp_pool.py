"""LpPool and GlobalLpPool (1-D, 2-D, 3-D; float32 and float64): y = (sum over the window of
|x|^p)^(1/p), padding contributing nothing. Attributes as the other pools (kernel_shape,
strides, pads, dilations, auto_pad, ceil_mode; PoolGeometry in pool.py), p >= 1 (default 2).

p = 1 sums |x|, p = 2 takes sqrt of the sum of squares, other p use pow. NaN propagates; Inf
gives Inf; a window without input elements gives 0.
"""
from __future__ import annotations

from ..emit_c.loops import numel
from ..kernels.conv.base_c import params_c, suffix, typed, use
from .base import Op, register
from .conv import FLOATS
from .pool import PoolGeometry

KERNEL = """\
/* LpPool, one output element at a time: the taps of its window that land inside the input
 * add |x|^pw; the result is the pw-th root of the sum. */
static void aicc_lppool_SFX(const aicc_conv_params *p, int pw, const TYPE *restrict x,
                            TYPE *restrict y)
{
    const size_t X = p->in[0] * p->in[1] * p->in[2], KK = p->k[0] * p->k[1] * p->k[2];
    const TYPE e = (TYPE)pw, inv = (TYPE)1 / (TYPE)pw;
    size_t q = 0;
    for (size_t c = 0; c < p->batch * p->cin_g; ++c)
        for (size_t z = 0; z < p->out[0]; ++z)
            for (size_t r = 0; r < p->out[1]; ++r)
                for (size_t o = 0; o < p->out[2]; ++o, ++q) {
                    TYPE s = 0;
                    for (size_t t = 0; t < KK; ++t) {
                        const int64_t iz = aicc_pos(p, 0, z, t / (p->k[1] * p->k[2]));
                        const int64_t iy = aicc_pos(p, 1, r, t / p->k[2] % p->k[1]);
                        const int64_t ix = aicc_pos(p, 2, o, t % p->k[2]);
                        TYPE v;
                        if (!aicc_inside(iz, p->in[0]) || !aicc_inside(iy, p->in[1]) ||
                            !aicc_inside(ix, p->in[2]))
                            continue;
                        v = FABS(x[c * X + ((size_t)iz * p->in[1] + (size_t)iy) * p->in[2] +
                                   (size_t)ix]);
                        s += pw == 1 ? v : (pw == 2 ? v * v : POW(v, e));
                    }
                    y[q] = pw == 1 ? s : (pw == 2 ? SQRT(s) : POW(s, inv));
                }
}"""


def _kernel(ctx, dt):
    use(ctx, dt)
    f = "f" if dt.name == "float32" else ""
    code = typed(KERNEL, dt)
    for name in ("FABS", "POW", "SQRT"):
        code = code.replace(f"{name}(", f"{name.lower()}{f}(")
    ctx.helper(f"pool.6.lppool{suffix(dt)}", code)


def _check(op, node, g):
    dt = g.dtype(node.inputs[0])
    if dt.name not in FLOATS:
        return f"dtype {dt.name} not supported (float32, float64)"
    p = op.attr(node, "p")
    if int(p) < 1:
        return f"p {p} (must be at least 1)"
    return None


@register("LpPool", since=1)
class LpPool(Op):
    attrs = {"auto_pad": "NOTSET", "ceil_mode": 0, "dilations": None, "kernel_shape": None,
             "p": 2, "pads": None, "strides": None}

    def check(self, node, g):
        reason = _check(self, node, g)
        if reason:
            return reason
        try:
            geo = PoolGeometry(self, node, tuple(int(d) for d in g.shape(node.inputs[0])))
        except ValueError as e:
            return str(e)
        want = (geo.batch, geo.c, *geo.out)
        if tuple(g.shape(node.outputs[0])) != want:
            return f"output shape {list(g.shape(node.outputs[0]))} disagrees with the " \
                   f"attributes ({list(want)})"
        return None

    def emit(self, node, ctx):
        dt = ctx.in_dtype(0)
        if numel(ctx.out_shape(0)) == 0:
            ctx("/* empty output: nothing to compute */")
            return
        geo = PoolGeometry(self, node, ctx.in_shape(0))
        _kernel(ctx, dt)
        pw = int(self.attr(node, "p"))
        ctx(f"/* LpPool p={pw}, {'x'.join(map(str, geo.k))} window, stride "
            f"{'x'.join(map(str, geo.stride))}, pads {geo.pad + geo.pad_end} */")
        ctx(geo.params())
        ctx(f"aicc_lppool{suffix(dt)}(&prm, {pw}, {ctx.inp[0]}, {ctx.out[0]});")


@register("GlobalLpPool", since=1)
class GlobalLpPool(Op):
    attrs = {"p": 2}

    def check(self, node, g):
        reason = _check(self, node, g)
        if reason:
            return reason
        r = len(g.shape(node.inputs[0])) - 2
        if r < 1 or r > 3:
            return f"input rank {r + 2} (1 to 3 spatial dims)"
        return None

    def emit(self, node, ctx):
        dt = ctx.in_dtype(0)
        x = ctx.in_shape(0)
        if numel(ctx.out_shape(0)) == 0:
            ctx("/* empty output: nothing to compute */")
            return
        _kernel(ctx, dt)
        r = len(x) - 2
        pw = int(self.attr(node, "p"))
        ctx(f"/* GlobalLpPool p={pw} over {numel(x[2:])} elements per plane */")
        ctx(params_c(batch=x[0], group=1, cin_g=x[1], cout_g=x[1], inp=x[2:], out=[1] * r,
                     k=x[2:], stride=[1] * r, dil=[1] * r, pad=[0] * r, pad_end=[0] * r))
        ctx(f"aicc_lppool{suffix(dt)}(&prm, {pw}, {ctx.inp[0]}, {ctx.out[0]});")
