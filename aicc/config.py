"""The one Options object passed down the compiler: defaults from configs/default.yaml,
overridden by a user's YAML (-c) and by CLI flags."""
from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

import yaml

from .errors import ConfigError
from .targets import ROOT, Target, load_target

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

    @staticmethod
    def load(target: str = "generic", config=None, overrides: dict | None = None) -> "Options":
        d = yaml.safe_load(DEFAULT_CONFIG.read_text())
        if config is not None:
            p = Path(config)
            if not p.is_file():
                raise ConfigError(f"config file {p}: no such file")
            try:
                user = yaml.safe_load(p.read_text()) or {}
            except yaml.YAMLError as e:
                raise ConfigError(f"config file {p.name}: {' '.join(str(e).split())}") from None
            if not isinstance(user, dict):
                raise ConfigError(f"config file {p.name}: expected a mapping at the top")
            d = _merge(d, user)
        if overrides:
            d = _merge(d, overrides)
        unknown = set(d) - {"pipeline", "memory", "weights", "name", "limits", "dynamic"}
        if unknown:
            raise ConfigError(f"config: unknown section(s) {', '.join(sorted(unknown))}")
        return Options(target=load_target(target), pipeline=parse_pipeline(d.get("pipeline", [])),
                       memory=dict(d.get("memory") or {}), weights=dict(d.get("weights") or {}),
                       name=str(d.get("name", "model")), raw=d)


def parse_pipeline(items) -> list:
    out = []
    if not isinstance(items, list):
        raise ConfigError("config: 'pipeline' must be a list of pass names")
    for it in items:
        if isinstance(it, str):
            out.append((it, {}))
        elif isinstance(it, dict) and len(it) == 1:
            (name, opts), = it.items()
            out.append((str(name), dict(opts or {})))
        else:
            raise ConfigError(f"config: bad pipeline entry {it!r}")
    return out
