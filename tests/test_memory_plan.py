"""Planner properties over random lifetimes: no overlap of live buffers, aligned offsets,
arena at least the peak live bytes; greedy never worse than the no-reuse baseline."""
import numpy as np
import pytest

from aicc.emit_c.memory_plan import (Buffer, arena_size, check_plan, peak_live_bytes,
                                     plan, plan_greedy_by_size, plan_no_reuse, plan_search)


def random_buffers(seed, n=40, steps=30):
    r = np.random.default_rng(seed)
    bufs = []
    for i in range(n):
        a = int(r.integers(0, steps))
        b = int(r.integers(a, min(steps, a + 8)))
        size = int(r.choice([0, 1, 3, 64, 100, 1000, 4096, int(r.integers(1, 50000))]))
        bufs.append(Buffer(f"t{i}", size, a, b, int(r.choice([16, 64]))))
    return bufs


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("planner", [plan_greedy_by_size, plan_no_reuse, plan_search])
def test_planner_properties(seed, planner):
    bufs = random_buffers(seed)
    offs = planner(bufs)
    check_plan(bufs, offs)
    assert arena_size(bufs, offs, 64) >= peak_live_bytes(bufs)


@pytest.mark.parametrize("seed", range(30))
def test_greedy_not_worse_than_baseline(seed):
    bufs = random_buffers(seed)
    assert arena_size(bufs, plan_greedy_by_size(bufs)) <= arena_size(bufs, plan_no_reuse(bufs))


def test_chain_reuses_memory():
    # a chain a->b->c->d: only two buffers live at a time
    bufs = [Buffer(f"t{i}", 1024, i, i + 1) for i in range(4)]
    offs = plan(bufs)
    assert arena_size(bufs, offs) == 2048


def test_check_plan_catches_overlap():
    bufs = [Buffer("a", 100, 0, 2), Buffer("b", 100, 1, 3)]
    with pytest.raises(AssertionError, match="overlaps"):
        check_plan(bufs, [0, 64])
    with pytest.raises(AssertionError, match="aligned"):
        check_plan(bufs, [0, 100])


@pytest.mark.parametrize("seed", range(30))
def test_search_not_worse_than_greedy_and_deterministic(seed):
    bufs = random_buffers(seed)
    a = plan_search(bufs, 100)
    assert arena_size(bufs, a) <= arena_size(bufs, plan_greedy_by_size(bufs))
    assert plan_search(bufs, 100) == a
