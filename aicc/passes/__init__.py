"""Graph -> Graph passes, one module each, registered by name (kebab-case in YAML)."""
import importlib
import pkgutil

from .registry import PASSES, graph_pass, run_pipeline

_SKIP = {"registry", "schedule", "memory_plan"}


def load_all() -> None:
    for m in pkgutil.iter_modules(__path__):
        if m.name not in _SKIP:
            importlib.import_module(f"{__name__}.{m.name}")


__all__ = ["PASSES", "graph_pass", "run_pipeline", "load_all"]
