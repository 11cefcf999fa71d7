"""One tuning job: the candidates of one problem compiled into one bundle (compile_job), then
timed step by step on the machine that runs the target (measure_job).

The bundle holds one step per distinct candidate, each the problem's node with the
candidate's ``aicc_schedule`` on the same inputs, so every candidate is timed in the same
program and run, interleaved. Candidates that do not lower for the node are reported with
their error; candidates whose step and helpers are the same C as an earlier one are
reported as ``same_as`` it and not compiled twice.

Costs: on a host that runs the bundle, the median over runs of each step's thread CPU time
(ns; bench's C hook around every step, reading CLOCK_THREAD_CPUTIME_ID); on an emulator, the
step's executed instructions (exact; runner/count.py).
"""
from __future__ import annotations

import copy
import hashlib
import io
import tarfile
import time
from pathlib import Path

import numpy as np

from ..errors import AiccError
from ..ir import Graph
from .space import sched_id



def node_graph(g, n) -> Graph:
    """A graph of node n alone: its run-time inputs as graph inputs, its constants kept."""
    ins = [t for t in dict.fromkeys(n.inputs) if t and t not in g.constants]
    used = [t for t in n.inputs if t] + list(n.outputs)
    return Graph(nodes=[copy.copy(n)], inputs=ins, outputs=list(n.outputs),
                 types={t: g.types[t] for t in used if t in g.types},
                 constants={t: g.constants[t] for t in n.inputs if t in g.constants},
                 opset=g.opset, name="tune")


def _with_schedule(n, sched: dict, tag: str | None = None):
    m = copy.copy(n)
    m.attrs = dict(n.attrs)
    if sched:
        m.attrs["aicc_schedule"] = {**dict(n.attrs.get("aicc_schedule") or {}), **sched}
    if tag is not None:
        m.name = tag
        m.outputs = [f"{o}__{tag}" if o else o for o in n.outputs]
    return m


def code_of(g1: Graph, sched: dict, opts) -> str:
    """A hash of the C that the one-node graph g1 lowers to with schedule ``sched`` (its step
    and helpers): candidates with one hash are one kernel, and a default whose hash differs
    from the one a log recorded means the compiler's default changed since the tuning."""
    from ..emit_c.lower import lower
    n = g1.nodes[0]
    one = Graph(nodes=[_with_schedule(n, sched)], inputs=g1.inputs, outputs=g1.outputs,
                types=g1.types, constants=g1.constants, opset=g1.opset, name=g1.name)
    prog = lower(one, opts)
    text = "\n".join([prog.steps[0].body] + [prog.helpers[k] for k in sorted(prog.helpers)])
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def compile_job(g1: Graph, cands: list, opts, out: Path, known: dict | None = None) -> dict:
    """Lower each candidate of the one-node graph g1, then write one bundle at OUT with a step
    per distinct candidate. ``known``: {code hash: schedule text} of candidates measured
    before (a candidate with the same code is not measured again). Returns {"steps":
    {schedule text: step index}, "errors": {schedule text: message}, "same_as": {schedule
    text: schedule text}, "codes": {schedule text: code hash}, "seconds"}."""
    from ..bundle.writer import write_bundle
    from ..emit_c.lower import lower
    t0 = time.perf_counter()
    n = g1.nodes[0]
    errors, same, seen, keep, codes = {}, {}, {}, [], {}
    known = known or {}
    for c in cands:
        s = sched_id(c)
        try:
            sig = codes[s] = code_of(g1, c, opts)
        except (AiccError, ValueError, KeyError, TypeError, AssertionError) as e:
            errors[s] = " ".join(str(e).split())[:200] or type(e).__name__
            continue
        if sig in seen:
            same[s] = seen[sig]
        elif sig in known and s != "{}" and known[sig] != s:
            same[s] = known[sig]
        else:
            seen[sig] = s
            keep.append(c)
    res = {"steps": {}, "errors": errors, "same_as": same, "codes": codes}
    if keep:
        nodes = [_with_schedule(n, c, f"t{i}") for i, c in enumerate(keep)]
        types = dict(g1.types)
        for m in nodes:
            for o, base in zip(m.outputs, n.outputs):
                if o:
                    types[o] = g1.types[base]
        multi = Graph(nodes=nodes, inputs=g1.inputs, outputs=[o for m in nodes for o in m.outputs
                                                              if o],
                      types=types, constants=g1.constants, opset=g1.opset, name="tune")
        prog = lower(multi, opts)
        write_bundle(prog, out, name="tune", target=opts.target, opts=opts,
                     model_sha="0" * 64, original_inputs=[
                         {"name": i, "shape": list(g1.types[i].shape)} for i in g1.inputs])
        idx = {s.node.name: s.index for s in prog.steps}
        res["steps"] = {sched_id(c): idx[f"t{i}"] for i, c in enumerate(keep)}
    res["seconds"] = time.perf_counter() - t0
    return res


def measure_job(bundle: Path, steps: dict, *, runner=None, seconds: float = 0.3,
                min_runs: int = 7, max_runs: int = 300) -> dict:
    """{"costs": {schedule text: cost}, "unit": "ns" | "instructions", "machine": ...} of the
    steps of a compile_job bundle, on this machine (or under the target's emulator)."""
    from ..runner import open_bundle
    from ..validate import random_inputs
    from .machine import machine_id
    b = open_bundle(bundle, runner)
    feeds = random_inputs(b.inputs, 0)
    if getattr(b, "emulated", False):
        c = b.counts(feeds, profile=True)
        return {"costs": {s: float(c["steps"][i]) for s, i in steps.items()},
                "unit": "instructions", "machine": f"{c['emulator']} ({c['counter']})"}
    if hasattr(b, "times"):
        raise AiccError("aicc tune on a device runner needs per-step timing, which runners "
                        "other than an emulator do not report yet")
    from ..bench import step_hook
    hook, read = step_hook(len(b.manifest["steps"]), "CLOCK_THREAD_CPUTIME_ID")
    for _ in range(3):
        b.run(feeds, hook=hook)
    rows, t_end = [], time.perf_counter() + seconds
    while len(rows) < max_runs and (len(rows) < min_runs or time.perf_counter() < t_end):
        b.run(feeds, hook=hook)
        rows.append(read())
    med = np.median(np.array(rows), axis=0)
    return {"costs": {s: float(med[i]) for s, i in steps.items()}, "unit": "ns",
            "machine": machine_id(), "runs": len(rows)}


def pack(folder: Path) -> bytes:
    """A bundle folder as a tar (a compile job's result sent to another machine)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        t.add(str(folder), arcname=".")
    return buf.getvalue()


def unpack(data: bytes, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as t:
        t.extractall(folder, filter="data")
    return folder
