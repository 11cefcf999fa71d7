"""Readable text form of a Graph (``aicc build --dump-ir``)."""
from __future__ import annotations


def format_graph(g) -> str:
    lines = [f"graph {g.name} (opset {g.opset})"]
    for i in g.inputs:
        lines.append(f"  input  {i}: {g.type_of(i)}")
    for c in sorted(g.constants):
        if any(c in n.inputs for n in g.nodes) or c in g.outputs:
            lines.append(f"  const  {c}: {g.type_of(c)}")
    for k, n in enumerate(g.nodes):
        outs = ", ".join(f"{o}: {g.types[o]}" if o in g.types else o for o in n.outputs)
        lines.append(f"  {k:4d}  {n}    # -> {outs}")
    for o in g.outputs:
        lines.append(f"  output {o}: {g.type_of(o)}")
    return "\n".join(lines)
