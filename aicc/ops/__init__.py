"""One module per op (or small family). Importing this package registers them all."""
import importlib
import pkgutil

from .base import (_REGISTRY, Op, check_supported, lookup, register, register_many,
                   registered_ops)

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


def has_trait(node, trait: str) -> bool:
    """Whether an op registered for node's domain and type declares ``trait``
    (ops/traits.py)."""
    load_all()
    lst = _REGISTRY.get((node.domain if node.domain != "ai.onnx" else "", node.op_type), ())
    return any(trait in op.traits for _, op in lst)


def ops_with(trait: str) -> list:
    """The op types (domain-qualified outside the default domain) declaring ``trait``."""
    load_all()
    return sorted({f"{d + '.' if d else ''}{t}" for (d, t), lst in _REGISTRY.items()
                   if any(trait in op.traits for _, op in lst)})


__all__ = ["Op", "check_supported", "has_trait", "load_all", "lookup", "ops_with", "register",
           "register_many", "registered_ops"]
