"""The tuning log (`aicc tune -o tuning.json`, `aicc build --tuning tuning.json`): every
measurement taken, and the schedule choice it implies.

    {"format": "aicc-tuning", "version": 1, "target": "x86-avx2",
     "records": [{"key", "label", "features", "schedule", "cost", "unit", "machine", "job",
                  "error", "same_as", "code"}, ...]}

A job measured all its candidates of one problem on one machine, interleaved, the default
schedule ({}) among them; costs are compared only inside a job, as ratios to that job's
default, so jobs from several machines (a Ray cluster) merge into one log. ``error``: the
candidate did not lower for this node (never tried again); ``same_as``: it generated the
same C (``code``: a hash of it) as another candidate of the job or one measured before
(measured once). The file is rewritten whole
(temporary file, then rename) after every job, so an interrupted tune keeps every
measurement it took.
"""
from __future__ import annotations

import json
import os
import statistics
from pathlib import Path

from ..errors import ConfigError
from .space import sched_id

FORMAT, VERSION = "aicc-tuning", 1
MARGIN = 0.03          # a candidate replaces the default only when this much faster,
SURE_JOBS = 2          # measured in this many jobs (the leader is timed again in the next
LONE_MARGIN = 0.10     # round), or this much faster in its one job


class TuningLog:
    def __init__(self, target: str, records: list | None = None, path: Path | None = None):
        self.target, self.records, self.path = target, list(records or []), path

    # -- file --------------------------------------------------------------
    @staticmethod
    def load(path, target: str | None = None) -> "TuningLog":
        """The log at PATH; a file that is not one, or one tuned for another target, is a
        one-line ConfigError (exit 2)."""
        p = Path(path)
        try:
            d = json.loads(p.read_text())
        except FileNotFoundError:
            raise ConfigError(f"tuning log {p}: no such file") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ConfigError(f"tuning log {p}: not an aicc tuning log "
                              f"({' '.join(str(e).split())[:200]})") from None
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise ConfigError(f"tuning log {p}: not an aicc tuning log (no \"format\": "
                              f"\"{FORMAT}\")")
        if d.get("version") != VERSION:
            raise ConfigError(f"tuning log {p}: version {d.get('version')!r}; this aicc reads "
                              f"version {VERSION}")
        if target is not None and d.get("target") != target:
            raise ConfigError(f"tuning log {p}: tuned for target {d.get('target')!r}, not "
                              f"{target!r}")
        recs = d.get("records")
        if not isinstance(recs, list) or not all(_valid(r) for r in recs):
            bad = next((i for i, r in enumerate(recs or [None]) if not _valid(r)), 0) \
                if isinstance(recs, list) else "all"
            raise ConfigError(f"tuning log {p}: record {bad} is malformed")
        return TuningLog(str(d["target"]), recs, p)

    def save(self, path=None) -> None:
        p = Path(path or self.path)
        tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"format": FORMAT, "version": VERSION, "target": self.target,
                                   "records": self.records}, indent=1) + "\n")
        os.replace(tmp, p)

    # -- queries -------------------------------------------------------------
    def next_job(self) -> int:
        return 1 + max((int(r["job"]) for r in self.records), default=-1)

    def tried(self, key: str) -> set:
        """The schedules (canonical text) already measured, failed or found equal for a key."""
        return {sched_id(r["schedule"]) for r in self.records if r["key"] == key}

    def codes(self, key: str) -> dict:
        """{code hash: schedule text} of the key's measured candidates (the first of each)."""
        out: dict = {}
        for r in self.records:
            if r["key"] == key and r.get("code") and r.get("cost") is not None:
                out.setdefault(r["code"], sched_id(r["schedule"]))
        return out

    def ratios(self, counts: bool = False) -> dict:
        """{key: {schedule text: median over jobs of cost / the job's default cost}}
        (counts: (median, number of jobs))."""
        jobs: dict = {}
        for r in self.records:
            if r.get("cost") is not None:
                jobs.setdefault((r["key"], r["job"]), {})[sched_id(r["schedule"])] = r["cost"]
        out: dict = {}
        for (key, _), costs in sorted(jobs.items()):
            d = costs.get("{}")
            if not d:
                continue
            for s, c in costs.items():
                out.setdefault(key, {}).setdefault(s, []).append(c / d)
        return {k: {s: (statistics.median(v), len(v)) if counts else statistics.median(v)
                    for s, v in d.items()} for k, d in out.items()}

    def leaders(self) -> dict:
        """{key: (schedule text, ratio, jobs)}: each key's fastest candidate other than the
        default; ties go to the smaller canonical text."""
        out = {}
        for key, rs in self.ratios(counts=True).items():
            rest = [(r, s, n) for s, (r, n) in rs.items() if s != "{}"]
            if rest:
                r, s, n = min(rest)
                out[key] = (s, r, n)
        return out

    def default_codes(self) -> dict:
        """{key: the code hashes its default schedule had when it was measured}."""
        out: dict = {}
        for r in self.records:
            if not r["schedule"] and r.get("code"):
                out.setdefault(r["key"], set()).add(r["code"])
        return out

    def for_build(self) -> dict:
        """{key: (schedule, default code hashes)} for `aicc build --tuning` (apply.py): a
        choice holds while the compiler's default for the layer is the one it was measured
        against."""
        codes = self.default_codes()
        return {k: (s, codes.get(k, set())) for k, s in self.choices().items()}

    def choices(self) -> dict:
        """{key: schedule} for every key whose leader beats its default by MARGIN over
        SURE_JOBS jobs, or by LONE_MARGIN in one; depends on the log alone."""
        out = {}
        for key, (s, r, n) in self.leaders().items():
            if r <= 1.0 - (MARGIN if n >= SURE_JOBS else LONE_MARGIN):
                out[key] = json.loads(s)
        return out


def _valid(r) -> bool:
    return (isinstance(r, dict) and isinstance(r.get("key"), str)
            and isinstance(r.get("schedule"), dict) and isinstance(r.get("job"), int)
            and (r.get("cost") is None or isinstance(r["cost"], (int, float)))
            and isinstance(r.get("features", {}), dict))
