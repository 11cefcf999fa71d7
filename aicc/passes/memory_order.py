"""memory-order: choose an execution order with a lower peak of live intermediate bytes.

A greedy list scheduler: among the nodes whose inputs are ready, run the one that adds the
least live memory (bytes it allocates minus bytes it frees), ties broken by the model's own
order. The result is kept only when its simulated peak is lower than the model order's, so
the chosen order is never worse than the model's own.
"""
from __future__ import annotations

from .registry import graph_pass


def _sizes(g) -> dict:
    out = {}
    for n in g.nodes:
        for o in n.outputs:
            if o and (o in g.types) and g.types[o].is_static:
                out[o] = g.types[o].nbytes
    return out


def simulated_peak(g, order) -> int:
    """Peak of live intermediate bytes (graph outputs and inputs excluded) for an order."""
    size = _sizes(g)
    outs = set(g.outputs)
    remaining = {}
    for n in order:
        for i in set(x for x in n.inputs if x):
            remaining[i] = remaining.get(i, 0) + 1
    live = peak = 0
    for n in order:
        for o in n.outputs:
            if o and o not in outs:
                live += size.get(o, 0)
        peak = max(peak, live)
        for i in set(x for x in n.inputs if x):
            remaining[i] -= 1
            if remaining[i] == 0 and i in size and i not in outs:
                live -= size[i]
        for o in n.outputs:                       # outputs nobody reads die at once
            if o and o not in outs and remaining.get(o, 0) == 0:
                live -= size.get(o, 0)
    return peak


def greedy_order(g) -> list:
    size = _sizes(g)
    outs = set(g.outputs)
    producers = {o: k for k, n in enumerate(g.nodes) for o in n.outputs if o}
    deps = [set(producers[i] for i in n.inputs if i in producers) for n in g.nodes]
    users = {}
    for k, n in enumerate(g.nodes):
        for i in set(x for x in n.inputs if x):
            users.setdefault(i, set()).add(k)
    pending = {i: len(u) for i, u in users.items()}
    unmet = [len(d) for d in deps]
    dependents = {}
    for j, d in enumerate(deps):
        for k in d:
            dependents.setdefault(k, []).append(j)
    order = []
    ready = {k for k, d in enumerate(deps) if not d}
    while ready:
        def cost(k):
            n = g.nodes[k]
            alloc = sum(size.get(o, 0) for o in n.outputs if o and o not in outs)
            freed = sum(size.get(i, 0) for i in set(x for x in n.inputs if x)
                        if pending.get(i) == 1 and i in size and i not in outs)
            return (alloc - freed, k)
        k = min(ready, key=cost)
        ready.discard(k)
        order.append(g.nodes[k])
        for i in set(x for x in g.nodes[k].inputs if x):
            pending[i] -= 1
        for j in dependents.get(k, ()):
            unmet[j] -= 1
            if unmet[j] == 0:
                ready.add(j)
    return order


@graph_pass("memory-order")
def memory_order(g, *, strategy: str = "greedy"):
    """Reorder nodes to lower the peak of live intermediate memory (``strategy: model``
    keeps the model's order). Never returns an order with a higher simulated peak."""
    if strategy == "model" or len(g.nodes) < 3:
        return g
    order = greedy_order(g)
    if len(order) != len(g.nodes) or simulated_peak(g, order) >= simulated_peak(g, g.nodes):
        return g
    g = g.copy()
    g.nodes = order
    return g
