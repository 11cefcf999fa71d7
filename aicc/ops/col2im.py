"""Col2Im (any spatial rank up to 8; float32, float64): sums the columns of input
[N, C * prod(block_shape), L] into the image [N, C, *image_shape]; column l of block offset b
adds to position l_d * stride + b_d * dilation - pad_begin along every dim d (positions in
the padding are dropped). Attributes dilations, pads, strides.

image_shape comes from the static output shape (its run-time value is not read). block_shape
is read at run time unless it is a compile-time constant; a run-time block_shape that does
not fit the input (a dim below 1, C * prod(block) != input dim 1, or a block count product
!= L) gives an all-zero output instead of reading out of bounds.
"""
from __future__ import annotations

import numpy as np

from ..emit_c.loops import numel
from ..kernels.conv.base_c import suffix, typed
from .base import Op, register
from .conv import FLOATS

MAXR = 8

KERNEL = """\
/* Col2Im over r spatial dims: img/stride/dil/pb/pe (image sizes, strides, dilations, pads
 * begin/end), blk the block shape (validated against cols = C * prod(blk) and L). */
static void aicc_col2im_SFX(size_t batch, size_t chans, size_t r, const size_t *img,
                            const int64_t *blk, const size_t *stride, const size_t *dil,
                            const size_t *pb, const size_t *pe, size_t cols, size_t L,
                            const TYPE *restrict x, TYPE *restrict y)
{
    size_t nb[8], bs[8], P = 1, K = 1, nl = 1;
    int ok = r <= 8;
    for (size_t d = 0; d < r; ++d)
        P *= img[d];
    for (size_t d = 0; ok && d < r; ++d) {
        const size_t span = img[d] + pb[d] + pe[d];
        if (blk[d] < 1 || (uint64_t)blk[d] > (uint64_t)span) {
            ok = 0;
            break;
        }
        bs[d] = (size_t)blk[d];
        if (dil[d] * (bs[d] - 1) + 1 > span) {
            ok = 0;
            break;
        }
        nb[d] = (span - dil[d] * (bs[d] - 1) - 1) / stride[d] + 1;
        K *= bs[d];
        nl *= nb[d];
    }
    if (!ok || K * chans != cols || nl != L) {
        for (size_t i = 0; i < batch * chans; ++i)
            for (size_t j = 0; j < P; ++j)
                y[i * P + j] = 0;
        return;
    }
    for (size_t i = 0; i < batch * chans * P; ++i)
        y[i] = 0;
    for (size_t nc = 0; nc < batch * chans; ++nc)
        for (size_t b = 0; b < K; ++b) {
            const TYPE *xr = x + (nc * K + b) * L;
            size_t off[8];
            for (size_t d = r, rem = b; d-- > 0;) {
                off[d] = rem % bs[d] * dil[d];
                rem /= bs[d];
            }
            for (size_t l = 0; l < L; ++l) {
                size_t o = 0, rem = l;
                int inside = 1;
                for (size_t d = r, mul = 1; d-- > 0;) {
                    const size_t pos = rem % nb[d] * stride[d] + off[d];
                    rem /= nb[d];
                    if (pos < pb[d] || pos - pb[d] >= img[d]) {
                        inside = 0;
                        break;
                    }
                    o += (pos - pb[d]) * mul;
                    mul *= img[d];
                }
                if (inside)
                    y[nc * P + o] += xr[l];
            }
        }
}"""


@register("Col2Im", since=18)
class Col2Im(Op):
    attrs = {"dilations": None, "pads": None, "strides": None}

    def _attrs(self, node, r):
        dil = [int(v) for v in (self.attr(node, "dilations") or [1] * r)]
        st = [int(v) for v in (self.attr(node, "strides") or [1] * r)]
        pads = [int(v) for v in (self.attr(node, "pads") or [0] * (2 * r))]
        if len(dil) != r or len(st) != r or len(pads) != 2 * r:
            raise ValueError("dilations/strides/pads of the wrong length")
        if min(dil + st) < 1 or min(pads) < 0:
            raise ValueError("dilations and strides must be positive, pads non-negative")
        return dil, st, pads[:r], pads[r:]

    def check(self, node, g):
        dt = g.dtype(node.inputs[0])
        if dt.name not in FLOATS:
            return f"dtype {dt.name} not supported (float32, float64)"
        x, y = g.shape(node.inputs[0]), g.shape(node.outputs[0])
        r = len(y) - 2
        if len(x) != 3 or r < 1 or r > MAXR:
            return f"input rank {len(x)} / output rank {len(y)} (need 3 and 3..{MAXR + 2})"
        if tuple(g.shape(node.inputs[2])) != (r,):
            return f"block_shape of shape {list(g.shape(node.inputs[2]))}, expected [{r}]"
        try:
            self._attrs(node, r)
        except ValueError as e:
            return str(e)
        blk = g.const(node.inputs[2])
        if blk is not None and int(np.prod(blk)) * int(y[1]) != int(x[1]):
            return f"block_shape {list(blk)} does not fit {x[1]} columns of {y[1]} channels"
        return None

    def emit(self, node, ctx):
        dt = ctx.in_dtype(0)
        sfx = suffix(dt)
        x, y = ctx.in_shape(0), ctx.out_shape(0)
        r = len(y) - 2
        dil, st, pb, pe = self._attrs(node, r)
        if numel(y) == 0:
            ctx("/* empty output: nothing to compute */")
            return
        ctx.helper(f"col2im{sfx}", typed(KERNEL, dt))

        def arr(name, vals, t="size_t", suf="u"):
            vs = ", ".join(f"{int(v)}{suf}" for v in vals)
            ctx(f"static const {t} {name}[{r}] = {{ {vs} }};")
        blk_c = ctx.in_const(2)
        ctx(f"/* Col2Im into {list(y)}, block_shape "
            f"{'read at run time' if blk_c is None else list(blk_c)} */")
        arr("img", y[2:])
        arr("st", st)
        arr("dil", dil)
        arr("pb", pb)
        arr("pe", pe)
        blk = ctx.inp[2]
        if blk_c is not None:
            arr("blk", blk_c, "int64_t", "")
            blk = "blk"
        ctx(f"aicc_col2im{sfx}({y[0]}u, {y[1]}u, {r}u, img, {blk}, st, dil, pb, pe, {x[1]}u, "
            f"{x[2]}u, {ctx.inp[0]}, {ctx.out[0]});")
