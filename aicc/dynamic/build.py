"""Compile a model with dynamic dims: one static plan per bucket, one bundle.

For every combination of buckets (the product over the dynamic dims, last dim fastest) the
model is imported with the dims pinned to the bucket's sizes (so shape subgraphs fold per
bucket), run through the pipeline, given its padding fills (``padding.insert_padding``) and
lowered; all buckets share one weights image (identical arrays stored once), one set of C
helpers and one arena sized for the largest need.
"""
from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field

import numpy as np

from ..emit_c.cwriter import sanitize
from ..emit_c.lower import check_static, lower, step_kernel
from ..emit_c.weights import WeightsImage
from ..errors import ConfigError, UnsupportedError
from ..frontend import import_model
from ..ops import check_supported, load_all
from ..passes import run_pipeline
from ..passes.node_overrides import apply_node_overrides
from ..tune.apply import apply_tuning
from .dispatch_c import dynamic_header_extra, dynamic_source
from .extent import Compound, Ext
from .padding import insert_padding


# AICC_MAX_RANK of runtime_c/aicc_rt.h: the dispatcher's shape arrays and the run-time box
# copy of padded inputs and outputs hold this many dims
MAX_RANK = 8


def _check_rank(what: str, name: str, rank: int) -> None:
    if rank > MAX_RANK:
        raise UnsupportedError(f"{what} {name!r} has rank {rank}: a bundle with dynamic dims "
                               f"takes inputs and outputs of rank {MAX_RANK} at most")


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


@dataclass
class Plan:
    dims: tuple
    prog: object
    arena_need: int = 0
    in_stage: list = field(default_factory=list)
    out_stage: list = field(default_factory=list)


@dataclass
class Port:
    """A graph input or output of the dynamic bundle."""
    name: str
    dtype: np.dtype
    shape: list                 # per axis: int, or Ext of the actual dims
    staged: bool                # copied through a padded staging buffer

    @property
    def c_shape(self) -> list:
        return [str(d) if isinstance(d, int) else f"aicc_max0({d.c('dims')})" for d in self.shape]

    def text(self, names) -> list:
        return [d if isinstance(d, int) else d.text(names) for d in self.shape]


class DynamicBundle:
    def __init__(self, dyn, plans, helpers, align, inputs, outputs, name, sha, embedded):
        self.names, self.buckets, self.maxima = dyn.names, dyn.buckets, dyn.maxima
        self.plans, self.helpers, self.align = plans, helpers, align
        self.inputs, self.outputs = inputs, outputs
        self.name, self.sha, self.embedded = name, sha, embedded
        # dim names come from the model: C comments get an index plus a sanitized hint
        self.c_names = [f"dim{s}_{sanitize(n, 16)}" for s, n in enumerate(self.names)]
        for p in self.inputs + self.outputs:
            p.text_shape = "[" + ", ".join(map(str, p.text(self.c_names))) + "]"

    def at(self, dims) -> str:
        """For C comments."""
        return ", ".join(f"{n}={d}" for n, d in zip(self.c_names, dims))

    # -- the writer's hooks ------------------------------------------------------------
    def source(self) -> str:
        return dynamic_source(self, self.name, self.sha, self.embedded)

    def header(self, text: str) -> str:
        cut = text.rindex("#ifdef __cplusplus")
        return text[:cut] + dynamic_header_extra(self, self.name) + text[cut:]

    def manifest(self, m: dict) -> dict:
        def port(p, spec):
            spec = dict(spec)
            spec["shape"] = p.text(self.names)
            spec["max_shape"] = [d if isinstance(d, int) else d.eval(self.maxima) for d in p.shape]
            spec["extents"] = {str(a): d.to_json() for a, d in enumerate(p.shape)
                               if not isinstance(d, int)}
            spec["buckets"] = {n: self.buckets[n] for s, n in enumerate(self.names)
                               if any(isinstance(d, Ext) and _uses(d, s) for d in p.shape)}
            return spec
        m["inputs"] = [port(p, s) for p, s in zip(self.inputs, m["inputs"])]
        m["outputs"] = [port(p, s) for p, s in zip(self.outputs, m["outputs"])]
        m["arena_bytes"] = max(p.arena_need for p in self.plans)
        m["dynamic"] = {
            "dims": [{"name": n, "buckets": self.buckets[n], "max": self.maxima[s]}
                     for s, n in enumerate(self.names)],
            "plans": [{"dims": dict(zip(self.names, p.dims)), "arena_bytes": p.arena_need,
                       "plan_arena_bytes": p.prog.arena_bytes, "steps": len(p.prog.steps),
                       "peak_live_bytes": p.prog.peak_bytes,
                       "kernels": [{"index": s.index, "op": s.node.op_type, "node": s.node.name,
                                    **step_kernel(s)} for s in p.prog.steps]}
                      for p in self.plans],
        }
        return m


def _uses(e: Ext, s: int) -> bool:
    if e.op == "sym":
        return e.a == s
    if e.op == "const":
        return False
    return _uses(e.a, s) or (isinstance(e.b, Ext) and _uses(e.b, s))


def compile_buckets(model_path, opts, dyn, user_shapes, *, check=False, trace=None):
    """-> (plans, helpers, inputs, outputs): every bucket compiled, ports checked."""
    load_all()
    if opts.memory.get("io_in_arena"):
        raise ConfigError("memory.io_in_arena is not available with dynamic dims (each bucket "
                          "stages its inputs and outputs in the arena itself)")
    for inp, shp in dyn.shapes.items():
        _check_rank("input", inp, len(shp))
    align = int(opts.memory.get("alignment", 64))
    image, helpers, plans = WeightsImage(align), {}, []
    sym_ix = {n: i for i, n in enumerate(dyn.names)}
    pads_by_plan = []

    def pinned(combo):
        shapes = dict(user_shapes or {})
        for inp, shp in dyn.shapes.items():
            if any(isinstance(d, str) for d in shp):
                shapes[inp] = [combo[sym_ix[d]] if isinstance(d, str) else d for d in shp]
        return shapes

    for combo in itertools.product(*[dyn.buckets[n] for n in dyn.names]):
        in_pads = {inp: {a: Ext.sym(sym_ix[d]) for a, d in enumerate(shp) if isinstance(d, str)}
                   for inp, shp in dyn.shapes.items()}
        g = import_model(model_path, pinned(combo))
        g = run_pipeline(g, opts.pipeline, check=check, trace=trace)
        g = apply_tuning(g, opts.tuning, opts)
        g = apply_node_overrides(g, opts.nodes, opts.target)
        check_supported(g)          # malformed nodes are reported before padding looks at them
        check_static(g)             # and shapes the bucket left symbolic
        g, pads = insert_padding(g, in_pads, list(combo), dyn.names)
        probe = _probe_dims(combo, dyn)
        if probe is not None:
            _check_probe(import_model(model_path, pinned(probe)), g, pads, probe, dyn)
        check_supported(g)
        plans.append(Plan(tuple(combo), lower(g, opts, weights=image, helpers=helpers)))
        pads_by_plan.append(pads)
    blob = image.image()
    for p in plans:
        p.prog = dataclasses.replace(p.prog, weights=blob)
    inputs = [Port(i, plans[0].prog.graph.dtype(i),
                   [Ext.sym(sym_ix[d]) if isinstance(d, str) else int(d) for d in dyn.shapes[i]],
                   any(isinstance(d, str) for d in dyn.shapes[i]))
              for i in plans[0].prog.graph.inputs]
    for o in plans[0].prog.graph.outputs:
        _check_rank("output", o, len(plans[0].prog.graph.shape(o)))
    outputs = [_output_port(o, plans, pads_by_plan, dyn) for o in plans[0].prog.graph.outputs]
    for p in plans:
        off = _align(max(p.prog.arena_bytes, 1), align)
        for port in inputs:
            p.in_stage.append(off if port.staged else 0)
            if port.staged:
                off += _align(p.prog.graph.type_of(port.name).nbytes, align)
        for port in outputs:
            p.out_stage.append(off if port.staged else 0)
            if port.staged:
                off += _align(p.prog.graph.type_of(port.name).nbytes, align)
        p.arena_need = off
    return plans, helpers, inputs, outputs


def _probe_dims(combo, dyn):
    """Sizes just below the bucket (one less in every dim that allows it), or None."""
    probe = []
    for n, v in zip(dyn.names, combo):
        lower = [b for b in dyn.buckets[n] if b < v]
        probe.append(v - 1 if v - 1 >= 1 and (not lower or v - 1 > lower[-1]) else v)
    return tuple(probe) if tuple(probe) != tuple(combo) else None


def _check_probe(gp, g, pads, probe, dyn) -> None:
    """The model imported at the probe sizes (shape inference only) must agree with the
    padded extents: a padded axis whose real length at the probe differs from its formula
    follows the dims through values padding cannot see (e.g. a Resize to the size of
    another tensor), and the build is refused naming the tensor's producer."""
    producer = {o: n for n in g.nodes for o in n.outputs}
    bad = []
    for t, p in pads.items():
        tp = gp.types.get(t)
        if tp is None or not tp.is_static or len(tp.shape) != len(g.shape(t)):
            continue
        for ax, e in p.items():
            if isinstance(e, Compound):
                continue
            want = max(e.eval(probe), 0)
            if int(tp.shape[ax]) != want:
                n = producer.get(t)
                who = f"node {n.name!r} ({n.op_type})" if n is not None else f"tensor {t!r}"
                bad.append(f"{who}: axis {ax} is {tp.shape[ax]} at {_at(probe, dyn)}, padding "
                           f"gives {e.text(dyn.names)} = {want}")
    if bad:
        raise UnsupportedError("a size follows the dynamic dims in a way padding cannot: "
                               + "; ".join(bad[:5]) + (" ..." if len(bad) > 5 else ""))


def _output_port(name, plans, pads_by_plan, dyn) -> Port:
    """An output's shape over the dims: padded axes by their extent (the same formula in
    every bucket), other axes fixed (the same size in every bucket)."""
    # an axis is padded in the buckets where it can be: a bucket of size 1 never pads its
    # dim, so the axis is exact there (its size must then be the extent formula's value)
    first = {}
    for pads in pads_by_plan:
        for a, e in pads.get(name, {}).items():
            first.setdefault(a, e)
    shape0 = plans[0].prog.graph.shape(name)
    if any(isinstance(e, Compound) for e in first.values()):
        raise UnsupportedError(f"output {name!r} has an axis merged from two padded axes; "
                               "reshape it apart inside the model")
    for p, pads in zip(plans, pads_by_plan):
        mine = pads.get(name, {})
        shp = p.prog.graph.shape(name)
        same = all(a in first and e.to_json() == first[a].to_json() for a, e in mine.items())
        exact = all(a in mine or first[a].eval(p.dims) == int(shp[a]) for a in first)
        if not (same and exact):
            raise UnsupportedError(f"output {name!r}: its padded axes differ between buckets")
        for a, d in enumerate(shp):
            if a not in first and int(d) != int(shape0[a]):
                raise UnsupportedError(
                    f"output {name!r} axis {a} is {shape0[a]} at {_at(plans[0].dims, dyn)} but {d} "
                    f"at {_at(p.dims, dyn)}: its size follows the dynamic dims through values "
                    "aicc cannot track (e.g. a shape computed into data)")
    shape = [first[a] if a in first else int(d) for a, d in enumerate(shape0)]
    return Port(name, plans[0].prog.graph.dtype(name), shape, bool(first))


def _at(dims, dyn) -> str:
    return ", ".join(f"{n}={d}" for n, d in zip(dyn.names, dims))


def dynamic_bundle(model_path, opts, dyn, user_shapes, *, name, sha, check=False, trace=None):
    """-> (largest bucket's program with the shared weights and arena size, DynamicBundle)."""
    plans, helpers, inputs, outputs = compile_buckets(model_path, opts, dyn, user_shapes,
                                                      check=check, trace=trace)
    embedded = bool(opts.weights.get("embed", True))
    align = int(opts.memory.get("alignment", 64))
    d = DynamicBundle(dyn, plans, helpers, align, inputs, outputs, name, sha, embedded)
    big = dataclasses.replace(plans[-1].prog, arena_bytes=max(p.arena_need for p in plans))
    return big, d
