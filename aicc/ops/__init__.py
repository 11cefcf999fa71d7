"""One module per op (or small family). Importing this package registers them all."""
import importlib
import pkgutil

from .base import Op, check_supported, lookup, register, register_many, registered_ops

_SKIP = {"base", "reference"}
_loaded = False


def load_all() -> None:
    global _loaded
    if _loaded:
        return
    for m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if m.name not in _SKIP and not m.name.startswith("_"):
            importlib.import_module(f"{__name__}.{m.name}")
    _loaded = True


__all__ = ["Op", "check_supported", "lookup", "register", "register_many", "registered_ops",
           "load_all"]
