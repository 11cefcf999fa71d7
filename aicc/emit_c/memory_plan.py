"""Static memory planning: buffers (size, alignment, first step, last step) -> offsets.

The interface is deliberately tiny (after TFLite Micro's planner): a planner takes a list of
``Buffer`` and returns one offset per buffer. ``check_plan`` verifies any plan and is used by
every test.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError


@dataclass(frozen=True)
class Buffer:
    name: str
    size: int
    first: int       # first step that writes it
    last: int        # last step that reads it
    align: int = 64


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def plan_no_reuse(bufs: list) -> list:
    """Baseline: every buffer gets its own space."""
    out, off = [], 0
    for b in bufs:
        off = _align(off, b.align)
        out.append(off)
        off += b.size
    return out


def plan_greedy_by_size(bufs: list) -> list:
    """Place the largest buffers first, each at the lowest aligned offset where it does not
    overlap a placed buffer whose lifetime intersects its own (best fit among gaps)."""
    return _place(bufs, sorted(range(len(bufs)), key=lambda i: (-bufs[i].size, bufs[i].first, i)))


def plan_search(bufs: list, iterations: int = 300, seed: int = 0) -> list:
    """Greedy placement over several priority orders (size, lifetime, size x lifetime,
    first/last use), then a hill-climb that swaps nearby entries of the best order for a
    fixed number of iterations (a count, not a time, so bundles stay deterministic). Stops
    early at the lower bound. Never worse than greedy-by-size (its order is tried first)."""
    import random
    n = len(bufs)
    if n == 0:
        return []
    keys = [
        lambda i: (-bufs[i].size, bufs[i].first, i),
        lambda i: (-(bufs[i].last - bufs[i].first + 1), -bufs[i].size, i),
        lambda i: (-bufs[i].size * (bufs[i].last - bufs[i].first + 1), i),
        lambda i: (bufs[i].first, -bufs[i].size, i),
        lambda i: (-bufs[i].last, -bufs[i].size, i),
    ]
    best_order, best_offs, best = None, None, None
    for key in keys:
        order = sorted(range(n), key=key)
        offs = _place(bufs, order)
        size = arena_size(bufs, offs)
        if best is None or size < best:
            best_order, best_offs, best = order, offs, size
    lower = peak_live_bytes(bufs)
    rng = random.Random(seed)
    for _ in range(iterations if n > 1 else 0):
        if best <= lower:
            break
        order = list(best_order)
        i = rng.randrange(n)
        j = min(n - 1, i + 1 + rng.randrange(min(8, n)))
        order[i], order[j] = order[j], order[i]
        offs = _place(bufs, order)
        size = arena_size(bufs, offs)
        if size < best:
            best_order, best_offs, best = order, offs, size
    return best_offs


def _place(bufs: list, order: list) -> list:
    offsets = [None] * len(bufs)
    placed: list = []
    for i in order:
        b = bufs[i]
        live = sorted((offsets[j], offsets[j] + bufs[j].size) for j in placed
                      if bufs[j].first <= b.last and b.first <= bufs[j].last and bufs[j].size)
        best, best_gap, cur = None, None, 0
        for lo, hi in live:
            start = _align(cur, b.align)
            if start + b.size <= lo:
                gap = lo - start
                if best_gap is None or gap < best_gap:
                    best, best_gap = start, gap
            cur = max(cur, hi)
        if best is None:
            best = _align(cur, b.align)
        offsets[i] = best
        placed.append(i)
    return offsets


PLANNERS = {"greedy-by-size": plan_greedy_by_size, "no-reuse": plan_no_reuse,
            "search": plan_search}


def arena_size(bufs: list, offsets: list, align: int = 64) -> int:
    end = max((o + b.size for b, o in zip(bufs, offsets)), default=0)
    return _align(end, align)


def peak_live_bytes(bufs: list) -> int:
    steps = sorted({b.first for b in bufs} | {b.last for b in bufs})
    return max((sum(b.size for b in bufs if b.first <= s <= b.last) for s in steps), default=0)


def check_plan(bufs: list, offsets: list) -> None:
    """AssertionError if two buffers live at the same time overlap, or one is misaligned."""
    for b, o in zip(bufs, offsets):
        assert o % b.align == 0, f"{b.name} at {o} not aligned to {b.align}"
    idx = sorted(range(len(bufs)), key=lambda i: offsets[i])
    for a_pos, i in enumerate(idx):
        a, oa = bufs[i], offsets[i]
        for j in idx[a_pos + 1:]:
            b, ob = bufs[j], offsets[j]
            if ob >= oa + a.size:
                break
            if a.size and b.size and a.first <= b.last and b.first <= a.last:
                raise AssertionError(f"{a.name} [{oa},{oa + a.size}) overlaps {b.name} "
                                     f"[{ob},{ob + b.size}) while both are live")


def plan(bufs: list, planner: str = "greedy-by-size", iterations: int = 300) -> list:
    fn = PLANNERS.get(planner)
    if fn is None:
        raise ConfigError(f"unknown memory planner '{planner}' (known: {', '.join(PLANNERS)})")
    offsets = fn(bufs, iterations) if planner == "search" else fn(bufs)
    check_plan(bufs, offsets)
    return offsets
