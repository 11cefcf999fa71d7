"""The float32 conv schedule on the x86 SIMD targets (kernels/conv/simd.py describes each
parameter): the defaults per ISA (SCHED), then the target's ``schedule: conv:``, then the
node's ``aicc_schedule``; and the input extents the padded copies cover.
"""
from __future__ import annotations

import math

from ..gemm.simd import nr_of, step_rows
from ..gemm.tile import V
from ..isa.registry import ISAS, table


# conv schedule defaults per ISA (target yaml `schedule: conv:` and aicc_schedule override)
SCHED = table("conv")
ALGOS = ("auto", "direct", "im2col", "implicit", "depthwise", "dwchan", "transposed",
         "winograd", "bcast", "grouped", "stem")


def schedule(isa: str, *overrides) -> dict:
    s = dict(SCHED[isa])
    for over in overrides:
        for k, v in (over or {}).items():
            if k in s:
                s[k] = str(v) if k == "algo" else int(v)
    nr = nr_of(isa)
    # the micro-kernels hold mr x V vectors of accumulators: the rows the GEMM's V-vector
    # kernels take at most on the ISA's registers
    s["mr"] = max(1, min(s["mr"], ISAS[isa].gemm_mr_max[V]))
    s["kc"] = max(1, s["kc"])
    s["jb"] = max(nr, s["jb"] // nr * nr)
    s["tile_kb"] = max(1, s["tile_kb"])
    s["wino_kb"] = max(1, s["wino_kb"])
    if s["wino_m"] not in (0, 2, 4):
        raise ValueError(f"conv schedule wino_m {s['wino_m']} (2, 4 or 0: auto)")
    if s["wino_chan"] not in (0, 1, 2):
        raise ValueError(f"conv schedule wino_chan {s['wino_chan']} (0 tiles, 1 auto, "
                         "2 channels vectorized)")
    if s["algo"] not in ALGOS:
        raise ValueError(f"conv schedule algo {s['algo']!r} (one of {', '.join(ALGOS)})")
    return s


def balanced(sched: dict, m: int) -> dict:
    """The schedule with mr lowered to split m rows into equal row tiles (same tile count:
    64 rows with mr 12 run as 11, 11, 11, 11, 10, 10 instead of 12 x 5 + 4). With a
    ``row_step`` (ISA conv schedule: NEON 4, the lanes of the packed A's vectors) the rows
    round up to a multiple of it where that is estimated cheaper (gemm/simd.py step_rows:
    64 rows as 12 x 5 + 4)."""
    if m <= 0:
        return sched
    tiles = -(-m // sched["mr"])
    return {**sched, "mr": step_rows(m, -(-m // tiles), sched["mr"],
                                     sched.get("row_step", 1))}


def channel_blocks(sched: dict, geo, node) -> dict:
    """The schedule with kc lowered to one input channel's taps (kh * kw) when the conv's
    whole K = channels x taps fits one K block and spans several channels (a network's first
    conv: 3 channels x 3 x 3 taps) and the node's aicc_schedule does not set kc: each
    channel's taps are then an FMA chain from zero and the channels' sums are added, as
    onnxruntime's NCHW-input conv kernel sums them. One chain over all 27 products was 1.36x
    onnxruntime's root-mean-square error against float64 (docs/ACCURACY.md)."""
    taps = math.prod(geo.k)
    if "kc" in (node.attrs.get("aicc_schedule") or {}):
        return sched
    if geo.cin_g > 1 and taps > 1 and geo.cin_g * taps <= sched["kc"]:
        return {**sched, "kc": taps}
    return sched


def extents(geo) -> list:
    """Input extent each spatial dim's taps cover: (out - 1) * stride + (k - 1) * dil + 1."""
    return [(o - 1) * s + (k - 1) * d + 1
            for o, s, k, d in zip(geo.out, geo.stride, geo.k, geo.dil)]


def padded_extents(geo):
    """extents(geo), or None when every tap is inside the unpadded input (no copy needed)."""
    ext = extents(geo)
    if not (any(geo.pad) or any(e > i for e, i in zip(ext, geo.inp))):
        return None
    return ext


def node_schedule(ctx, isa: str) -> dict:
    """The conv schedule of ctx's node on isa: SCHED, then the target's ``schedule: conv:``,
    then the node's ``aicc_schedule``."""
    s = schedule(isa, (ctx.target.schedule or {}).get("conv"),
                 ctx.node.attrs.get("aicc_schedule"))
    ctx.schedule = dict(s)
    return s
