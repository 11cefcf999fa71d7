"""kernels/conv/bcast.py's padded taps skipped at build time: block kernels specialized to the output
rows and column blocks whose taps reach the zero padding (a first conv with a tall kernel on a
small input, DS-CNN's 10 x 4 on 49 x 10: 16% of its taps land on padding).

A product with a padded zero leaves the FMA chain's value unchanged (the chain starts at +0
and never holds -0, and 0 * w is +-0 for a finite w), so skipping it changes no bit; a
non-finite weight (0 * Inf = NaN) keeps every tap. A specialization is taken when it saves
at least SAVE_MIN of the conv's products, and at most MAX_KERNELS kernels per channel block
(row classes x column runs; the conv schedule's ``edge_kernels``, 0 for none): beyond them
the zeros are multiplied as before. Code: DS-CNN's x86-avx512 model.o 17.5 -> 26.0 KB.

skip = (rows, cols): the kernel rows ky and the (position, kx) pairs of a block left out.
"""
from __future__ import annotations

SAVE_MIN = 0.01
MAX_KERNELS = 8
NONE = (frozenset(), frozenset())


def _cols(g, ox0: int, r: int) -> frozenset:
    """(i, kx) whose input column lies in the padding, for the block of r positions at ox0."""
    return frozenset((i, kx) for i in range(r) for kx in range(g.kw)
                     if not 0 <= (ox0 + i) * g.sx + kx * g.dx - g.pl < g.w)


def _rows(g, oy: int) -> frozenset:
    """The kernel rows ky whose input row lies in the padding, for output row oy."""
    return frozenset(ky for ky in range(g.kh) if not 0 <= oy * g.sy + ky * g.dy - g.pt < g.h)


def plan(g, runs: list, unroll: bool, finite: bool, max_kernels: int = MAX_KERNELS) -> tuple:
    """(column runs [(x0, x1, rr, cols)], row classes [(rows, [oy])]) for conv_bcast's runs
    [(x0, x1, rr)] of blocks: edge blocks that save enough become single-block runs with their
    padded (i, kx) pairs; rows (only with unrolled taps) grouped by their padded ky. At most
    max_kernels kernels per channel block (the conv schedule's edge_kernels; 0 or 1: none)."""
    if not finite or not g.padded or max_kernels <= 1:
        return [(x0, x1, rr, frozenset()) for x0, x1, rr in runs], []
    cols = []
    for x0, x1, rr in runs:
        edge = [ox for ox in range(x0, x1, rr)
                if len(_cols(g, ox, rr)) * 1.0 / (g.ow * g.kw) >= SAVE_MIN]
        start = x0
        for ox in edge:                     # interior stretches stay loops
            if ox > start:
                cols.append((start, ox, rr, frozenset()))
            cols.append((ox, ox + rr, rr, _cols(g, ox, rr)))
            start = ox + rr
        if start < x1:
            cols.append((start, x1, rr, frozenset()))
    if len(cols) > max_kernels:             # too many edge blocks: the runs as they were
        cols = [(x0, x1, rr, frozenset()) for x0, x1, rr in runs]
    classes: dict = {}
    if unroll:
        for oy in range(g.oh):
            rows = _rows(g, oy)
            if rows and len(rows) * 1.0 / (g.oh * g.kh) >= SAVE_MIN:
                classes.setdefault(rows, []).append(oy)
    budget = max_kernels // max(1, len(cols)) - 1      # row classes beside the interior one
    best = sorted(classes.items(), key=lambda kv: -len(kv[0]) * len(kv[1]))[:max(0, budget)]
    return cols, sorted(best, key=lambda kv: kv[1][0])
