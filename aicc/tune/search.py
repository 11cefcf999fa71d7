"""`aicc tune`: measure schedules for each distinct layer of a model, within a time budget,
into a tuning log that `aicc build --tuning` reads.

The search goes in rounds. A round ranks each problem's untried candidates with the cost
model fitted on the log as it stood at the round's start, and makes one job per problem:
the default schedule plus the next ``per_job`` candidates. Problems go in order of their
share of the model's time (measured default cost x occurrences; FLOPs before any
measurement). Jobs get their numbers before they run and their records are kept sorted, so
the log, and the choices it gives, depend only on the measurements, not on which machine
finished first (serial and Ray runs with the same measurements give the same log).
"""
from __future__ import annotations

import json
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError
from .log import SURE_JOBS, TuningLog
from .model import CostModel
from .space import candidates, family, load_space, problem, sched_id, tuned
from .trial import node_graph

PER_JOB = 5
MIN_BUDGET_S = 10.0


def parse_budget(text: str) -> float:
    """"10m", "300s", "1h", "90" (seconds) -> seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", str(text))
    if not m:
        raise ConfigError(f"--budget {text!r}: expected a duration such as 300s, 10m or 1h")
    s = float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]
    if s < MIN_BUDGET_S:
        raise ConfigError(f"--budget {text}: too short for one measurement (a job compiles and "
                          f"times a bundle: give at least {MIN_BUDGET_S:.0f}s)")
    return s


@dataclass
class Problem:
    key: str
    label: str
    features: dict
    graph: object                  # the node alone (trial.node_graph)
    cands: list
    nodes: list = field(default_factory=list)


@dataclass
class Job:
    job: int
    problem: Problem
    cands: list
    known: dict = field(default_factory=dict)    # {code hash: schedule text} measured before


def problems_of(g, target) -> dict:
    """{key: Problem} of the graph's tuned nodes, in graph order."""
    out: dict = {}
    for n in g.nodes:
        if not tuned(n, g):
            continue
        p = problem(n, g, target.name)
        if p["key"] not in out:
            out[p["key"]] = Problem(p["key"], p["label"], p["features"], node_graph(g, n),
                                    candidates(family(n, target),
                                               defaults=target.schedule))
        out[p["key"]].nodes.append(n.name)
    return out


def records_of(job: Job, comp: dict, meas: dict | None) -> list:
    """The log records of one finished job, in candidate order."""
    p, recs = job.problem, []
    for c in job.cands:
        s = sched_id(c)
        r = {"key": p.key, "label": p.label, "features": p.features, "schedule": c,
             "cost": None, "unit": None, "machine": None, "job": job.job, "error": None,
             "same_as": None, "code": comp.get("codes", {}).get(s)}
        if s in comp["errors"]:
            r["error"] = comp["errors"][s]
        elif s in comp["same_as"]:
            r["same_as"] = comp["same_as"][s]
        elif meas is not None:
            r.update(cost=meas["costs"][s], unit=meas["unit"], machine=meas["machine"])
        recs.append(r)
    return recs


class SerialExecutor:
    """Compile and measure here, one job after another."""

    def __init__(self, opts, runner=None):
        self.opts, self.runner = opts, runner

    def run(self, jobs: list, deadline: float, on_done) -> bool:
        """Runs the jobs, calling on_done(job, compiled, measured) after each; False when
        the deadline stopped it."""
        from .trial import compile_job, measure_job
        with tempfile.TemporaryDirectory(prefix="aicc-tune-") as tmp:
            for j in jobs:
                if time.monotonic() >= deadline:
                    return False
                out = Path(tmp) / f"job{j.job}"
                comp = compile_job(j.problem.graph, j.cands, self.opts, out, j.known)
                meas = measure_job(out, comp["steps"], runner=self.runner) \
                    if comp["steps"] else None
                on_done(j, comp, meas)
        return True

    def close(self) -> None:
        pass


def tune(model, target: str, out, *, budget: str = "10m", config=None,
         input_shapes: dict | None = None, per_job: int = PER_JOB, executor=None,
         runner=None, progress=None) -> dict:
    """Tune MODEL for TARGET into the log OUT (resumed when it exists). Returns a summary:
    {"log", "jobs", "measured", "problems": [{key, label, nodes, default, best, ratio,
    schedule}], "stopped": "budget" | "exhausted"}."""
    from ..compiler import pipeline_graph
    from ..config import Options
    t_end = time.monotonic() + parse_budget(budget)
    opts = Options.load(target, config)
    g = pipeline_graph(model, opts, input_shapes)
    probs = problems_of(g, opts.target)
    out = Path(out)
    log = TuningLog.load(out, opts.target.name) if out.exists() else \
        TuningLog(opts.target.name, path=out)
    log.path = out
    space = load_space()
    executor = executor or SerialExecutor(opts, runner)
    say = progress or (lambda msg: None)
    stopped, jobs_run = "exhausted", 0

    def on_done(j, comp, meas):
        nonlocal jobs_run
        log.records = sorted(log.records + records_of(j, comp, meas),
                             key=lambda r: (r["job"], sched_id(r["schedule"])))
        log.save()
        jobs_run += 1
        say(f"job {j.job}: {j.problem.label} x{len(j.problem.nodes)}: "
            f"{len(comp['steps'])} timed, {len(comp['same_as'])} same code, "
            f"{len(comp['errors'])} not for this node")

    while True:
        if time.monotonic() >= t_end:
            stopped = "budget"
            break
        model_ = CostModel(space).fit(log)
        shares = _shares(log, probs)
        jobs, nxt, leaders = [], log.next_job(), log.leaders()
        for p in sorted(probs.values(), key=lambda p: (-shares[p.key], p.key)):
            tried = log.tried(p.key)
            rest = model_.rank(p.features, [c for c in p.cands if c and sched_id(c) not in tried])
            lead = leaders.get(p.key)
            again = [json.loads(lead[0])] if lead and lead[1] < 1.0 and lead[2] < SURE_JOBS \
                else []
            if rest or again:       # the leader is timed again until SURE_JOBS jobs hold it
                jobs.append(Job(nxt, p, [{}] + again + rest[:per_job], log.codes(p.key)))
                nxt += 1
        if not jobs:
            break
        if not executor.run(jobs, t_end, on_done):
            stopped = "budget"
            break
    if jobs_run == 0 and not log.records:
        raise ConfigError(f"--budget {budget}: ran out before one measurement finished")
    return _summary(log, probs, stopped, jobs_run)


def _shares(log, probs) -> dict:
    """Each problem's weight in the model's time: its default cost (median over jobs) times
    its occurrences, else its FLOPs (in a unit far below any measured cost) times them."""
    base: dict = {}
    for r in log.records:
        if r["key"] in probs and not r["schedule"] and r.get("cost") is not None:
            base.setdefault(r["key"], []).append(r["cost"])
    out = {}
    for k, p in probs.items():
        c = sorted(base.get(k, []))
        out[k] = len(p.nodes) * (c[len(c) // 2] if c else p.features.get("flops", 0.0) * 1e-12)
    return out


def _summary(log, probs, stopped, jobs_run) -> dict:
    ratios, chosen = log.ratios(), log.choices()
    rows = []
    for k, p in probs.items():
        best = chosen.get(k, {})
        rows.append({"key": k, "label": p.label, "nodes": len(p.nodes),
                     "tried": len(log.tried(k)), "candidates": len(p.cands),
                     "ratio": ratios.get(k, {}).get(sched_id(best)), "schedule": best})
    return {"log": str(log.path), "jobs": jobs_run, "records": len(log.records),
            "problems": rows, "stopped": stopped}
