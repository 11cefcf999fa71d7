"""Pass registry and pipeline runner. A pass is a named ``Graph -> Graph`` function with
keyword-only options; its docstring states its contract."""
from __future__ import annotations

import inspect
from typing import Callable

from ..errors import ConfigError
from ..ir import verify

PASSES: dict = {}


def graph_pass(name: str) -> Callable:
    def deco(fn):
        PASSES[name] = fn
        fn.pass_name = name
        return fn
    return deco


def run_pipeline(g, pipeline, *, check: bool = False, trace=None):
    """Run [(name, options)] in order. ``check`` verifies the IR after every pass;
    ``trace(name, graph)`` is called after each pass (for --dump-ir)."""
    from . import load_all
    load_all()
    for name, opts in pipeline:
        fn = PASSES.get(name)
        if fn is None:
            raise ConfigError(f"unknown pass '{name}' (known: {', '.join(sorted(PASSES))})")
        params = inspect.signature(fn).parameters
        bad = [k for k in opts if k not in params or params[k].kind != inspect.Parameter.KEYWORD_ONLY]
        if bad:
            raise ConfigError(f"pass '{name}': unknown option(s) {', '.join(bad)}")
        g = fn(g, **opts)
        if check:
            verify(g)
        if trace is not None:
            trace(name, g)
    return g
