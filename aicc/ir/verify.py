"""IR invariants, checked after every pass in tests and debug builds."""
from __future__ import annotations

from ..errors import ModelError


def verify(g) -> None:
    """Raise ModelError if the graph is not a well-formed DAG in topological order."""
    defined = set(g.inputs) | set(g.constants)
    producers = {}
    for n in g.nodes:
        for i in n.inputs:
            if i and i not in defined:
                where = "is produced later (cycle or bad order)" if any(
                    i in m.outputs for m in g.nodes) else "has no producer"
                raise ModelError(f"node '{n.name}' ({n.op_type}): input '{i}' {where}")
        for o in n.outputs:
            if not o:
                continue
            if o in producers or o in g.inputs or o in g.constants:
                raise ModelError(f"tensor '{o}' has more than one producer "
                                 f"(node '{n.name}' ({n.op_type}))")
            producers[o] = n
            defined.add(o)
    for o in g.outputs:
        if o not in defined:
            raise ModelError(f"graph output '{o}' has no producer")
    for name in defined:
        if name not in g.constants and name not in g.types:
            raise ModelError(f"tensor '{name}' has no type")
