"""The one Options object passed down the compiler: defaults from configs/default.yaml,
overridden by a user's YAML (-c) and by CLI flags."""
from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from pathlib import Path

import yaml

from .errors import ConfigError
from .targets import ROOT, Target, load_target
from .yamlio import load_yaml

DEFAULT_CONFIG = ROOT / "configs" / "default.yaml"


def _merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


@dataclass
class Options:
    target: Target
    pipeline: list            # [(pass name, {option: value})]
    memory: dict
    weights: dict
    name: str = "model"
    raw: dict = None
    nodes: dict = None        # {node name: {"kernel": str, "schedule": {...}}} (YAML nodes:)
    tuning: dict = None       # {problem key: (schedule, default code hashes)}: a tuning log
                              # (aicc/tune/log.py for_build)

    @staticmethod
    def load(target: str = "generic", config=None, overrides: dict | None = None) -> "Options":
        d = load_yaml(DEFAULT_CONFIG.read_text())
        if config is not None:
            p = Path(config)
            if not p.is_file():
                raise ConfigError(f"config file {p}: no such file")
            try:
                user = load_yaml(p.read_text()) or {}
            except yaml.YAMLError as e:
                raise ConfigError(f"config file {p.name}: {' '.join(str(e).split())}") from None
            if not isinstance(user, dict):
                raise ConfigError(f"config file {p.name}: expected a mapping at the top")
            d = _merge(d, user)
        if overrides:
            d = _merge(d, overrides)
        unknown = set(d) - {"pipeline", "memory", "weights", "name", "limits", "dynamic",
                            "schedule", "nodes"}
        if unknown:
            raise ConfigError(f"config: unknown section(s) {', '.join(sorted(unknown))}")
        tgt = load_target(target)
        if d.get("schedule"):
            tgt = dataclasses.replace(tgt, schedule=_merge(tgt.schedule or {},
                                                           _schedule(d["schedule"])))
        nodes = parse_nodes(d.get("nodes"))
        pipeline = [(name, _yaml_mode({**tgt.pass_options.get(name, {}), **o}))
                    for name, o in parse_pipeline(d.get("pipeline", []))]
        if nodes:       # nodes given a kernel / schedule keep their op (their Conv kernels)
            pipeline = [(name, {**o, "keep": sorted({*o.get("keep", ()), *nodes})})
                        if name in ("layout-nhwc", "fuse-pw-dw") else (name, o)
                        for name, o in pipeline]
        return Options(target=tgt, pipeline=pipeline,
                       memory=dict(d.get("memory") or {}), weights=dict(d.get("weights") or {}),
                       name=str(d.get("name", "model")), raw=d, nodes=nodes)


def _schedule(sched) -> dict:
    """The YAML ``schedule:`` section: {op family: {parameter: value}}, merged over the
    target's schedule (e.g. ``schedule: {conv: {implicit_pct: 10}}``)."""
    if not isinstance(sched, dict) or not all(isinstance(v, dict) for v in sched.values()):
        raise ConfigError("config: 'schedule' must map op families (gemm, conv, ...) to "
                          "mappings of parameters")
    return sched


def parse_nodes(nodes) -> dict:
    """The YAML ``nodes:`` section: per-node overrides by node name (the name after the
    pipeline, as `aicc inspect` and the manifest show it), each with ``kernel`` (a variant of
    the target's kernels list) and/or ``schedule`` (parameters of the op's family, e.g.
    ``{algo: im2col, mr: 4}`` for a Conv)."""
    if nodes is None:
        return {}
    if not isinstance(nodes, dict):
        raise ConfigError("config: 'nodes' must map node names to {kernel: ..., schedule: ...}")
    out = {}
    for name, over in nodes.items():
        if not isinstance(over, dict) or not over or set(over) - {"kernel", "schedule"}:
            raise ConfigError(f"config: nodes: {str(name)!r}: expected a mapping with kernel "
                              "and/or schedule")
        if "schedule" in over and not isinstance(over["schedule"], dict):
            raise ConfigError(f"config: nodes: {str(name)!r}: schedule must be a mapping")
        out[str(name)] = dict(over)
    return out


def _yaml_mode(opts: dict) -> dict:
    """A pass's options with a boolean ``mode`` spelled as the passes expect: YAML 1.1 reads
    ``{mode: off}`` / ``{mode: on}`` as false / true."""
    if isinstance(opts.get("mode"), bool):
        return {**opts, "mode": "on" if opts["mode"] else "off"}
    return opts


def parse_pipeline(items) -> list:
    out = []
    if not isinstance(items, list):
        raise ConfigError("config: 'pipeline' must be a list of pass names")
    for it in items:
        if isinstance(it, str):
            out.append((it, {}))
        elif isinstance(it, dict) and len(it) == 1:
            (name, opts), = it.items()
            if opts is not None and not isinstance(opts, dict):
                raise ConfigError(f"config: pipeline entry {name!r}: options must be a mapping")
            out.append((str(name), dict(opts or {})))
        else:
            raise ConfigError(f"config: bad pipeline entry {it!r}")
    return out
