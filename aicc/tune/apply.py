"""`aicc build --tuning LOG`: the log's choices set the ``aicc_schedule`` of every node whose
problem key they name, after the pipeline and before the build YAML's ``nodes:`` overrides
(which win). A layer the log never measured keeps the heuristics' schedule."""
from __future__ import annotations

from .space import problem, tuned


def apply_tuning(g, choices: dict | None, target):
    """Graph -> Graph with the tuned schedules set (the input graph is not changed)."""
    if not choices:
        return g
    g = g.copy()
    for n in g.nodes:
        if not tuned(n, g):
            continue
        s = choices.get(problem(n, g, target.name)["key"])
        if s:
            n.attrs = {**n.attrs, "aicc_schedule": {**dict(n.attrs.get("aicc_schedule") or {}),
                                                    **s}}
    return g
