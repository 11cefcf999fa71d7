"""YAML documents of the configs and target files: parsed by libyaml's C parser where PyYAML
has it (the same documents as the pure-Python SafeLoader, about 10x faster), and each distinct
text parsed once per process. Callers get their own deep copy, free to change it."""
from __future__ import annotations

import copy
import functools

import yaml

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.lru_cache(maxsize=64)
def _parsed(text: str):
    return yaml.load(text, Loader=_LOADER)


def load_yaml(text: str):
    """yaml.safe_load(text), from the cache when this text was read before."""
    return copy.deepcopy(_parsed(text))
