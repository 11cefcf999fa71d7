"""The whole build: frontend -> passes -> lower -> bundle. One Options object goes down."""
from __future__ import annotations

import re
from pathlib import Path

from .config import Options
from .dynamic.build import dynamic_bundle
from .dynamic.symbols import find_dynamic_dims
from .emit_c.lower import kernel_table, lower
from .errors import ConfigError
from .frontend import file_sha256, import_model
from .ops import check_supported, load_all
from .passes import run_pipeline
from .passes.node_overrides import apply_node_overrides
from .tune.apply import apply_tuning


def compile_graph(g, opts: Options, *, check: bool = False, trace=None):
    """Graph -> (final Graph, Program). Raises UnsupportedError before anything is written."""
    load_all()
    g = run_pipeline(g, opts.pipeline, check=check, trace=trace)
    g = apply_tuning(g, opts.tuning, opts)
    g = apply_node_overrides(g, opts.nodes, opts.target)
    check_supported(g)          # names every unsupported op at once, before anything is written
    return g, lower(g, opts)


def pipeline_graph(model_path, opts: Options, input_shapes: dict | None = None):
    """The graph `aicc build` would lower (after the pipeline and the overrides), for `aicc
    tune`; a model with dynamic dims left is a ConfigError naming them."""
    load_all()
    g = import_model(model_path, input_shapes)
    dyn = [f"{i!r} axis {a} ({d})" for i in g.inputs for a, d in enumerate(g.shape(i))
           if not isinstance(d, int)]
    if dyn:
        raise ConfigError(f"aicc tune needs static shapes; pin with --input-shape NAME=d0,d1,... "
                          f"the dynamic dims of {', '.join(dyn)}")
    g = run_pipeline(g, opts.pipeline)
    g = apply_node_overrides(g, opts.nodes, opts.target)
    check_supported(g)
    return g


def build(model_path, target: str = "generic", out=None, config=None, *,
          input_shapes: dict | None = None, name: str | None = None, dump_ir=None,
          check: bool = False, overrides: dict | None = None,
          buckets: dict | None = None, tuning=None) -> Path:
    """Compile MODEL.onnx into a bundle folder; returns the folder.

    buckets: {dynamic dim name: [sizes] | "16,32,64" | "max:N"}, merged over the YAML's
    ``dynamic.buckets``/``dynamic.max``; a model with dynamic dims gets one plan per bucket.
    tuning: a tuning log (`aicc tune`) whose choices set the schedules of the layers it
    measured."""
    from .bundle.outdir import check_out
    from .bundle.writer import write_bundle
    opts = Options.load(target, config, overrides)
    if tuning is not None:
        from .tune.log import TuningLog
        opts.tuning = TuningLog.load(tuning, opts.target.name).for_build()
    if name is not None:
        opts.name = name
    if not re.fullmatch(r"[a-z][a-z0-9_]{0,31}", opts.name):
        raise ConfigError(f"bundle name {opts.name!r}: use 1-32 of [a-z0-9_], starting with a letter")
    out = check_out(Path(out) if out is not None else Path("build") / Path(model_path).stem)
    g = import_model(model_path, input_shapes)
    original = [{"name": i, "shape": [d if isinstance(d, int) else str(d) for d in g.shape(i)]}
                for i in g.inputs]
    trace = None
    if dump_ir is not None:
        dump_ir.write(f"# after import\n{g}\n")
        trace = lambda p, gr: dump_ir.write(f"# after {p}\n{gr}\n")  # noqa: E731
    sha = file_sha256(model_path)
    dyn = find_dynamic_dims(g, (opts.raw or {}).get("dynamic") or {}, dict(buckets or {}))
    if dyn is not None:
        prog, d = dynamic_bundle(model_path, opts, dyn, input_shapes, name=opts.name, sha=sha,
                                 check=check, trace=trace)
        if dump_ir is not None:
            for p in d.plans:
                dump_ir.write(f"# kernels and schedules after lowering, bucket "
                              f"{', '.join(f'{n}={v}' for n, v in zip(d.names, p.dims))}\n"
                              f"{kernel_table(p.prog)}")
        return write_bundle(prog, out, name=opts.name, target=opts.target, opts=opts,
                            model_sha=sha, original_inputs=original, dynamic=d)
    g, prog = compile_graph(g, opts, check=check, trace=trace)
    if dump_ir is not None:
        dump_ir.write(f"# kernels and schedules after lowering\n{kernel_table(prog)}")
    return write_bundle(prog, out, name=opts.name, target=opts.target, opts=opts,
                        model_sha=sha, original_inputs=original)
