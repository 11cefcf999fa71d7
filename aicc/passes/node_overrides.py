"""Per-node overrides from the build YAML's ``nodes:`` section, applied to the graph after the
pipeline (node names are the final graph's: fused nodes keep their producer's name).

``kernel`` becomes the node's ``aicc_kernel`` attribute (it must be one of the target's
``kernels:``), ``schedule`` is merged over any ``aicc_schedule`` the node has. Every name
that matches no node is reported at once, with the op types that do accept overrides.
"""
from __future__ import annotations

from ..errors import ConfigError
from ..ops import has_trait, ops_with
from ..ops.traits import SCHEDULABLE



def apply_node_overrides(g, nodes: dict, target):
    """Graph -> Graph with the overrides set as attributes (the input graph is not changed)."""
    if not nodes:
        return g
    by_name = {n.name: n for n in g.nodes}
    missing = sorted(k for k in nodes if k not in by_name)
    if missing:
        known = sorted(n.name for n in g.nodes if n.name and has_trait(n, SCHEDULABLE))
        hint = ", ".join(known[:12]) + (", ..." if len(known) > 12 else "")
        raise ConfigError(f"config: nodes: no node named {', '.join(map(repr, missing))} after "
                          f"the pipeline ({'/'.join(ops_with(SCHEDULABLE))} nodes: {hint or 'none'})")
    bad = []
    for name, over in nodes.items():
        n = by_name[name]
        if not has_trait(n, SCHEDULABLE):
            bad.append(f"{name!r} is a {n.op_type} (overrides apply to "
                       f"{', '.join(ops_with(SCHEDULABLE))})")
        k = over.get("kernel")
        if k is not None and str(k) not in target.kernels:
            bad.append(f"{name!r}: kernel {k!r} is not one of target {target.name}'s kernels "
                       f"({', '.join(target.kernels)})")
    if bad:
        raise ConfigError("config: nodes: " + "; ".join(bad))
    g = g.copy()                 # copies the nodes: their attrs dicts are replaced, not edited
    for n in g.nodes:
        over = nodes.get(n.name)
        if over is None:
            continue
        attrs = dict(n.attrs)
        if "kernel" in over:
            attrs["aicc_kernel"] = str(over["kernel"])
        if "schedule" in over:
            attrs["aicc_schedule"] = {**dict(attrs.get("aicc_schedule") or {}),
                                      **over["schedule"]}
        n.attrs = attrs
    return g
