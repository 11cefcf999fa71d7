"""`aicc build --tuning LOG`: the log's choices set the ``aicc_schedule`` of every node whose
problem key they name, after the pipeline and before the build YAML's ``nodes:`` overrides
(which win). A layer the log never measured keeps the heuristics' schedule, and so does a
layer whose default kernel is no longer the one its choice was measured against (the
compiler's heuristics or kernels changed since the tuning): its choice is stale, and the
build says how many layers that is (run aicc tune again)."""
from __future__ import annotations

import sys

from .space import problem, tuned
from .trial import code_of, node_graph


def apply_tuning(g, tuning: dict | None, opts):
    """Graph -> Graph with the tuned schedules set (the input graph is not changed)."""
    if not tuning:
        return g
    g = g.copy()
    stale = used = 0
    for n in g.nodes:
        if not tuned(n, g):
            continue
        s, defaults = tuning.get(problem(n, g, opts.target.name)["key"], (None, None))
        if not s:
            continue
        if code_of(node_graph(g, n), {}, opts) not in defaults:
            stale += 1
            continue
        used += 1
        n.attrs = {**n.attrs, "aicc_schedule": {**dict(n.attrs.get("aicc_schedule") or {}),
                                                **s}}
    if stale:
        print(f"aicc: note: the tuning log's choice for {stale} of {stale + used} layers was "
              "measured against another default kernel (the compiler changed since): those "
              "layers keep the default; run aicc tune again", file=sys.stderr)
    return g
