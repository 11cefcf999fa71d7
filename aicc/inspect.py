"""``aicc inspect``: what a model holds and what aicc can compile; what a bundle plans."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from .config import Options
from .errors import AiccError
from .frontend import import_model
from .ops import load_all, lookup
from .passes import run_pipeline


PROBE = 16


def inspect_model(path) -> tuple:
    load_all()
    g = import_model(path)
    lines = [f"model {Path(path).name}: opset {g.opset}, {len(g.nodes)} nodes, "
             f"{len(g.constants)} initializers "
             f"({sum(v.nbytes for v in g.constants.values())} bytes)"]
    for i in g.inputs:
        lines.append(f"  input  {i!r}: {g.type_of(i)}")
    for o in g.outputs:
        lines.append(f"  output {o!r}: {g.type_of(o) if o in g.types or o in g.constants else '?'}")
    dyn = {}
    for i in g.inputs:
        for a, d in enumerate(g.shape(i)):
            if not isinstance(d, int):
                dyn.setdefault(d, []).append(f"{i!r} axis {a}")
    if dyn:
        # support is judged with every dynamic dim at a probe size (a bucket's view)
        lines.append("  dynamic dims: " + "; ".join(f"{d} ({', '.join(w)})" for d, w in dyn.items())
                     + f"; support checked with each at {PROBE} (build with --buckets DIM=...)")
        g = import_model(path, {i: [PROBE if not isinstance(d, int) else d for d in g.shape(i)]
                                for i in g.inputs if not g.type_of(i).is_static})
    counts = Counter(n.op_type if not n.domain else f"{n.domain}.{n.op_type}" for n in g.nodes)
    # support is judged after the default pipeline (folding removes Shape, Constant, ...)
    problems = {}
    try:
        final = run_pipeline(g, Options.load("generic").pipeline)
    except AiccError as e:
        final = None
        lines.append(f"  pipeline failed: {e}")
    remaining = Counter()
    if final is not None:
        for n in final.nodes:
            remaining[n.op_type if not n.domain else f"{n.domain}.{n.op_type}"] += 1
            op = lookup(n, final.opset)
            reason = "no implementation" if op is None else op.check(n, final)
            if reason:
                key = n.op_type if not n.domain else f"{n.domain}.{n.op_type}"
                problems.setdefault((key, reason), []).append(n.name)
    lines.append("  ops (count in model, after passes, support):")
    bad_ops = {op for op, _ in problems}
    for op, c in sorted(counts.items()):
        status = "UNSUPPORTED" if op in bad_ops else ("folded/fused" if remaining[op] == 0 else "ok")
        lines.append(f"    {op:28s} {c:5d} {remaining[op]:5d}  {status}")
    for (op, reason), names in sorted(problems.items()):
        shown = ", ".join(repr(x) for x in names[:5]) + (" ..." if len(names) > 5 else "")
        lines.append(f"  unsupported {op}: {reason} (nodes {shown})")
    ok = not problems and final is not None
    lines.append("  supported: yes" if ok else
                 f"  supported: no ({len(problems)} problem(s))")
    return "\n".join(lines), ok


def inspect_bundle(path, memory: bool = False, svg=None, size: bool = False) -> str:
    p = Path(path)
    mf = p / "manifest.json"
    if not mf.is_file():
        raise AiccError(f"{p}: not an aicc bundle (no manifest.json)")
    m = json.loads(mf.read_text())
    lines = [f"bundle {p}: aicc {m['aicc_version']}, target {m['target']}, name {m['name']}",
             f"  model sha256 {m['model_sha256']}"]
    for io in ("inputs", "outputs"):
        for t in m[io]:
            lines.append(f"  {io[:-1]:6s} {t['name']!r}: {t['dtype']}{t['shape']}")
    mem = m["memory"]
    peak = mem["peak_live_bytes"]
    ratio = m["arena_bytes"] / peak if peak else 1.0
    lines.append(f"  arena {m['arena_bytes']} bytes (align {m['arena_align']}), peak live "
                 f"{peak} bytes, ratio {ratio:.3f}, planner {mem['planner']}")
    lines.append(f"  weights {m['weights_bytes']} bytes "
                 f"({'embedded' if m['weights_embedded'] else 'weights.bin, caller-loaded'})")
    counts = Counter(s["op"] for s in m["steps"])
    lines.append(f"  {len(m['steps'])} steps: " +
                 ", ".join(f"{k} x{v}" for k, v in sorted(counts.items())))
    kernels = Counter((s["op"], s.get("kernel") or "inline C") for s in m["steps"])
    lines.append("  kernels: " + ", ".join(f"{op} {k} x{v}" for (op, k), v in
                                           sorted(kernels.items())))
    if memory:
        from .memory_svg import memory_report, plan_svg
        lines += memory_report(m)
        out = Path(svg) if svg else p / "memory.svg"
        out.write_text(plan_svg(m))
        lines.append(f"  picture: {out}")
    if size:
        from .size import format_report, measure, write_manifest_size
        report = measure(p)
        write_manifest_size(p, report)
        lines += format_report(report)
        lines.append(f"  (written to {mf} under \"size\")")
    return "\n".join(lines)
