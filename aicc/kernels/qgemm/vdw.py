"""Depthwise int8 convs (one input channel per group, 1-D / 2-D) with constant int8-sized
weights on the ISAs whose ``qvdot`` description has the ``dw_*`` spellings (isa/helium: MVE's
VMLA of int32 lanes by a scalar), before the pair ISAs' kernel (kernels/qgemm/pairs_dw.py).

Per input channel, the plane is copied as int8 into a padded buffer (uint8 as x - 128, the
description's ``scatter`` with stride 1; the zero point in the padding: ``fill``). Every output
is then ``sum_t w_t xp[o + off_t] - x_zp * cs`` over the taps t (w = w - w_zp, cs its sum,
computed at build time, the zero point folded into the starting value), 4 output positions of
a row at a time in int32 lanes: per tap one widening load of 4 int8 (stride > 1: a gather) and
one multiply-accumulate by the tap's weight, held in a register; the row's last positions a
predicated store. The sums are modulo 2^32 like the portable kernels', so the outputs are
theirs bit for bit; ``post`` requantizes each channel's plane as for the other conv kernels.
"""
from __future__ import annotations

import hashlib

import numpy as np

from ...emit_c.loops import numel
from .simd import zp_values
from .spell import fill
from .vdot import TABLES, _scatter, isa_for, spellings


def usable(ctx, geo) -> bool:
    """A qvdot ISA with the depthwise spellings, one input channel per group, 1-D / 2-D."""
    isa = isa_for(ctx)
    return (isa is not None and "dw_mla" in TABLES[isa] and geo.cin_g == 1
            and len(geo.k) <= 2)


def weights(ctx, op, geo) -> tuple | None:
    """(int8 w - w_zp [cout][taps], int32 column sums [cout]), None when the weights or their
    zero point are not constant or a value does not fit int8."""
    if ctx.in_const(op.W) is None or (ctx.has_input(op.WZ) and ctx.in_const(op.WZ) is None):
        return None
    w = np.asarray(ctx.in_const(op.W)).astype(np.int64).reshape(geo.cout, -1)
    w = w - zp_values(ctx, op.WZ, geo.cout)[:, None]
    if w.size and (w.min() < -128 or w.max() > 127):
        return None
    return w.astype(np.int8), w.sum(axis=1).astype(np.int32)


NOSCHED = """\
#if defined(__GNUC__) && !defined(__clang__)
/* GCC's first scheduling pass hoists every tap's load and spills them and the weights */
#define AICC_QV_NOSCHED __attribute__((optimize("no-schedule-insns")))
#else
#define AICC_QV_NOSCHED
#endif"""


def _kernel(ctx, isa: str, geo, Wp: int) -> str:
    """Name of the channel kernel of this geometry (sizes, offsets literal): acc[oy * OW + ox]
    = z + sum over the taps t of wc[t] * xp[oy * SH * Wp + ox * SW + off_t]."""
    sp = TABLES[isa]
    ln = int(sp["dw_lanes"])
    (KH, KW), (SH, SW), (DH, DW) = (([1] + v)[-2:] for v in (geo.k, geo.stride, geo.dil))
    OH, OW = ([1] + geo.out)[-2:]
    taps, vt = KH * KW, sp["dw_vtype"]
    body = [f"const {vt} z = {fill(sp['dw_dup'], x='zc')};"]
    body += [f"const int32_t w{t} = wc[{t}];" for t in range(taps)]
    if SW > 1:
        body.append(f"const {sp['dw_otype']} go = {fill(sp['dw_offsets'], s=f'{SW}u')};")

    def vec(store):
        out = [f"{vt} s = z;"]
        for t in range(taps):
            p = f"r + {(t // KW) * DH * Wp + (t % KW) * DW}u"
            v = fill(sp["dw_load"], p=p) if SW == 1 else fill(sp["dw_gather"], p=p, o="go")
            out.append(f"s = {fill(sp['dw_mla'], a='s', v=v, w=f'w{t}')};")
        return out + [store]
    full = OW // ln * ln
    body += [f"for (size_t oy = 0; oy < {OH}u; ++oy) {{",
             f"    const int8_t *restrict r = xp + oy * {SH * Wp}u;",
             f"    uint32_t *restrict a = acc + oy * {OW}u;"]
    if full:
        body += [f"    for (size_t ox = 0; ox < {full}u; ox += {ln}u, r += {ln * SW}u, "
                 f"a += {ln}) {{"]
        body += ["        " + ln_ for ln_ in vec(fill(sp["dw_store"], p="a", v="s",
                                                       n=f"{ln}u") + ";")]
        body += ["    }"]
    if OW % ln:
        body += ["    {"] + ["        " + ln_ for ln_ in vec(
            fill(sp["dw_store"], p="a", v="s", n=f"{OW % ln}u") + ";")] + ["    }"]
    body += ["}"]
    kdesc = "x".join(str(v) for v in geo.k)
    text = (f"/* One channel of a depthwise conv (kernels/qgemm/vdw.py): {kdesc} taps, stride "
            f"{SH}x{SW}, dilation {DH}x{DW}, output [{OH}][{OW}] from the padded plane xp\n"
            f" * (rows of {Wp}): acc = zc + sum of wc[t] * xp at tap t, {ln} positions of a row "
            f"a vector. */\n"
            f"static AICC_QV_NOSCHED void NAME(const int8_t *restrict xp, "
            f"const int8_t *restrict wc, int32_t zc,\n"
            f"                                 uint32_t *restrict acc)\n{{\n" +
            "".join(f"    {b}\n" for b in body) + "}")
    name = f"aicc_qvdw_{hashlib.sha1(text.encode()).hexdigest()[:8]}_{isa}"
    ctx.helper("qvdot.5.nosched", NOSCHED)
    ctx.helper(f"qvdot.6.dw.{name}", text.replace("NAME", name))
    return name


def emit(ctx, op, geo, arranged: tuple, acc: str, post) -> None:
    """Per batch item and input channel: its padded plane, then per output channel of the
    group the channel kernel into acc (numel(out) uint32) and ``post`` (qlinear's) on it; the
    caller declared xzp."""
    isa = isa_for(ctx)
    sp = TABLES[isa]
    spellings(ctx, isa)         # the #include and the helpers (fill, scatter)
    ta = ctx.in_dtype(op.X)
    ln = int(sp["dw_lanes"])
    SW = ([1] + geo.stride)[-1]
    (H, W), (PT, PL) = ([1] + geo.inp)[-2:], ([0] + geo.pad)[-2:]
    Hp, Wp = H + PT + ([0] + geo.pad_end)[-2], W + PL + ([0] + geo.pad_end)[-1]
    P, taps = numel(geo.out), numel(geo.k)
    kern = _kernel(ctx, isa, geo, Wp)
    wq = ctx.const(arranged[0], "wdw")
    cs = ctx.const(arranged[1], "wcs")
    # the last vector of a row reads up to ln * SW past its first position
    xp = ctx.scratch(Hp * Wp + ln * SW + 16, "int8_t", "xp")
    ctx.kernel = f"{isa} qvdw"
    ctx(f"/* {geo.describe()}: {ln} positions of a row in int32 lanes, one multiply-accumulate "
        f"per tap, over the channel's padded int8 plane [{Hp}][{Wp}] */")
    zx = "xzp - 128" if np.dtype(ta).name == "uint8" else "xzp"
    ctx(f"const int32_t zx = {zx};")
    with ctx.block(f"for (size_t nb = 0; nb < {geo.batch}u; ++nb)"):
        with ctx.block(f"for (size_t gi = 0; gi < {geo.group}u; ++gi)"):
            xg = f"{ctx.inp[op.X]} + (nb * {geo.cin}u + gi) * {numel(geo.inp)}u"
            if (Hp, Wp) != (H, W):
                ctx(f"{sp['fill']}({xp}, {Hp * Wp}u, (int8_t)zx);")
            with ctx.block(f"for (size_t iy = 0; iy < {H}u; ++iy)"):
                ctx(f"{_scatter(isa, ta)}({xg} + iy * {W}u, {W}u, "
                    f"{xp} + (iy + {PT}u) * {Wp}u + {PL}u, 1u);")
            with ctx.block(f"for (size_t m = 0; m < {geo.cout_g}u; ++m)"):
                ctx(f"const size_t oc = gi * {geo.cout_g}u + m;")
                ctx(f"{kern}({xp}, {wq} + oc * {taps}u, "
                    f"(int32_t)(0u - (uint32_t)zx * (uint32_t){cs}[oc]), {acc});")
                post("oc", acc, f"{P}u", f"(nb * {geo.cout}u + oc) * {P}u")
