"""Patches of the portable integer conv (kernels/qgemm/portable.py) from a padded channel-last copy.

qgemm_c's dot kernel wants one row of Kp int16 per output position. Gathered straight from
the NCHW input (aicc_icols16), every value is a store Kp * 2 bytes from the previous one:
ResNet-8 int8 on generic spent 43% of its time there (a 16 -> 16 3x3 conv on 32 x 32: 147K
scattered stores). Here, per batch item, the input is first written once as a zero-padded
channel-last int16 volume ``xp[Hp][Wp][Cp]`` of x - x_zp (Cp: the channels rounded up to
the dot kernel's granule; padding and the extra channels stay zero: the volume is zeroed once
per step and every batch item writes the same entries). A position's patch is then its T taps'
runs of Cp contiguous values, copied in granules (fixed-size memcpy: inlined moves; a copy
loop became a call of memmove per tap), in the order
k = t * Cp + c; the weights are reordered to that order at build time, their extra channels
set to the row's zero point (so w - w_zp is 0 there).

Taken for 1-D / 2-D convs of one group with constant weights and weight zero points, when
the extra channels add at most a quarter to K (``T * Cp <= 5/4`` of K rounded up: not the
3-channel first convs, whose K = 27 would become 72) and the volume fits in the target's
``schedule: qconv: pad_kb`` KiB of scratch (default 256; cortex-m4 0: its RAM holds the arena,
and without caches the NCHW gather costs no more there; ResNet-8 int8's arena is 119 KB
without the volumes, 156 KB with them). The products, their sums and the overflow bound are
qgemm_c's: the same values.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..conv.planes_c import extent

PAD_KB = 256       # the padded volume's default budget (arena scratch during the step)

XPAD = """\
/* One batch item's input as a zero-padded channel-last int16 volume, x - xzp:
 * xp[((iy + pt) * wp + ix + pl) * cp + c] for the rows / columns a tap reads (iy + pt < hp,
 * ix + pl < wp) and c < C; padding and channels C..cp keep the zeros the step wrote. */
static void aicc_ixpad16_SFX(const aicc_conv_params *p, const T *restrict x, int32_t xzp,
                             size_t cp, size_t hp, size_t wp, int16_t *restrict xp)
{
    const size_t C = p->cin_g, H = p->in[1], W = p->in[2], pt = p->pad[1], pl = p->pad[2];
    const size_t nx = wp > pl ? (W < wp - pl ? W : wp - pl) : 0;
    for (size_t iy = 0; iy < H && iy + pt < hp; ++iy)
        for (size_t c = 0; c < C; ++c) {
            const T *restrict xr = x + (c * H + iy) * W;
            int16_t *restrict d = xp + ((iy + pt) * wp + pl) * cp + c;
            for (size_t ix = 0; ix < nx; ++ix)
                d[ix * cp] = (int16_t)((int32_t)xr[ix] - xzp);
        }
}"""

COLS = """\
/* Patches of output positions [p0, p0 + nt) from the padded volume: row j of col holds the
 * T taps' cp channels, col[j * T * cp + t * cp + c] = xp[(base_j + off[t]) * cp + c], base_j
 * the position's first tap (stride applied). */
static void aicc_icolsT16_gGRAN(const aicc_conv_params *p, const int16_t *restrict xp,
                                const size_t *restrict off, size_t T, size_t cp, size_t wp,
                                size_t p0, size_t nt, int16_t *restrict col)
{
    const size_t OW = p->out[2], sh = p->stride[1], sw = p->stride[2];
    for (size_t j = 0; j < nt; ++j) {
        const size_t q = p0 + j, base = q / OW * sh * wp + q % OW * sw;
        int16_t *restrict d = col + j * T * cp;
        for (size_t t = 0; t < T; ++t) {
            const int16_t *restrict s = xp + (base + off[t]) * cp;
            int16_t *restrict dt = d + t * cp;
            for (size_t c = 0; c < cp; c += GRANu)     /* a fixed size: inlined moves */
                memcpy(dt + c, s + c, GRANu * sizeof(int16_t));
        }
    }
}"""


@dataclass
class Plan:
    cp: int               # channels padded to the granule
    taps: int             # T
    off: list             # per tap: offset in positions of the padded volume
    hp: int
    wp: int
    weights: np.ndarray   # [M][T][cp] in the weights' dtype, extra channels = the row's zp

    @property
    def k(self) -> int:
        return self.taps * self.cp


def plan(ctx, op, geo, g: int) -> Plan | None:
    """The padded-volume form for this conv (g: the dot kernel's granule), or None."""
    if len(geo.k) > 2 or geo.group != 1:
        return None
    w = ctx.in_const(op.W)
    z = ctx.in_const(op.WZ) if ctx.has_input(op.WZ) else np.zeros((1,), np.int64)
    if w is None or z is None:
        return None
    k, _, d, _, hp, wp = extent(geo)      # hp, wp: the rows / columns any tap reads
    T, C = k[0] * k[1], geo.cin
    cp = -(-C // g) * g
    ctx.schedule["pad_kb"] = int(((ctx.target.schedule or {}).get("qconv") or {}).get("pad_kb",
                                                                                     PAD_KB))
    budget = ctx.schedule["pad_kb"] << 10
    if T * cp * 4 > -(-(T * C) // g) * g * 5 or hp * wp * cp * 2 > budget:
        return None
    m = geo.cout
    w = np.asarray(w)
    zr = np.broadcast_to(np.asarray(z).reshape(-1), (m,)).astype(w.dtype)
    wre = np.empty((m, T, cp), w.dtype)
    wre[:] = zr[:, None, None]
    wre[:, :, :C] = w.reshape(m, C, T).transpose(0, 2, 1)
    off = [ky * d[0] * wp + kx * d[1] for ky in range(k[0]) for kx in range(k[1])]
    return Plan(cp, T, off, hp, wp, wre)


def helpers(ctx, typed, ta, g: int) -> tuple:
    """(volume writer, patch gatherer) helper names for input dtype ta."""
    xpad = typed(ctx, "xpad16", XPAD, ta)
    name = f"aicc_icolsT16_g{g}"
    ctx.helper(f"qlinear.3.colsT.g{g}", COLS.replace("GRAN", str(g)))
    return xpad, name
