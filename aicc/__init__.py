"""aicc: an ahead-of-time compiler from ONNX models to portable C bundles."""
__version__ = "0.1.0"


def build(model_path, target="generic", out=None, config=None, **kw):
    """Compile an ONNX model into a bundle folder and return its path."""
    from .compiler import build as _build
    return _build(model_path, target=target, out=out, config=config, **kw)


def load(path, cflags=None):
    """Build (with the system C compiler) and bind a bundle; ``.run({name: array})``."""
    from .bundle.loader import load as _load
    return _load(path, cflags)


__all__ = ["__version__", "build", "load"]
