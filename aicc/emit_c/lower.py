"""Final graph -> Program: per-step C bodies, the memory plan and the weights image.

Every tensor gets a location: a graph input (caller pointer), a graph output (caller
pointer), an arena offset (intermediates and step scratch) or a weights offset (constants,
including constants derived by emitters such as packed weights).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from ..errors import ConfigError, ModelError, UnsupportedError
from ..ops import load_all, lookup
from .context import StepContext
from .cwriter import ctype
from .memory_plan import Buffer, arena_size, peak_live_bytes, plan
from .sharing import Sharing
from .weights import WeightsImage


@dataclass
class Step:
    index: int
    node: object
    body: str
    ctx: StepContext
    args: list = field(default_factory=list)   # (var, location, ctype, const?, comment)


@dataclass
class Program:
    graph: object
    steps: list
    helpers: dict
    buffers: list
    offsets: list
    arena_bytes: int
    peak_bytes: int
    weights: bytes
    weight_entries: list                        # (what, offset, nbytes)
    locations: dict                             # tensor -> (kind, offset|index)
    alignment: int
    shared: dict = field(default_factory=dict)  # tensor -> tensor whose memory it uses
    check: dict | None = None                   # checked mode: redzone, per-step writes
    shared_offsets: dict = field(default_factory=dict)  # tensor -> byte offset in its root
    placed: int = 0                             # Concat/Split/Slice turned into chunks
    io_offsets: dict | None = None              # memory.io_in_arena: arena offsets of the I/O


def kernel_table(prog) -> str:
    """One line per step: index, op, node, the kernel its emitter chose and the schedule it
    resolved (``--dump-ir``; manifest.json has the same per step)."""
    lines = []
    for s in prog.steps:
        sched = " ".join(f"{k}={v}" for k, v in sorted(s.ctx.schedule.items()))
        lines.append(f"step {s.index:3d} {s.node.op_type} {s.node.name!r}: "
                     f"{s.ctx.kernel or 'inline C'}" + (f" [{sched}]" if sched else ""))
    return "\n".join(lines) + "\n"


def jsonable(v):
    """v as plain JSON values (numpy arrays and scalars, tuples)."""
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, (np.floating, np.integer)):
        return v.item()
    if isinstance(v, tuple):
        return [jsonable(x) for x in v]
    return v


def step_kernel(s) -> dict:
    """A step's chosen kernel and resolved schedule, as manifest.json records them."""
    return {"kernel": getattr(s.ctx, "kernel", "") or "",
            "schedule": {k: jsonable(v)
                         for k, v in sorted(getattr(s.ctx, "schedule", {}).items())}}


def _uses(body: str, var: str) -> bool:
    return re.search(rf"\b{re.escape(var)}\b", body) is not None


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def _tensors(g) -> list:
    return list(g.inputs) + list(g.outputs) + [o for n in g.nodes for o in n.outputs if o]


def check_static(g) -> None:
    """Every tensor has a static shape (the dims a dynamic model's bucket pins included)."""
    for name in _tensors(g):
        t = g.type_of(name)
        if not t.is_static:
            raise UnsupportedError(f"tensor {name!r} has a non-static shape {t}; give the "
                                   "model's dynamic dims buckets (--buckets DIM=a,b,...) or "
                                   "pin them (--input-shape NAME=d0,d1,...)")


def lower(g, opts, *, weights: WeightsImage | None = None, helpers: dict | None = None) -> Program:
    """weights/helpers: shared by several programs (the buckets of a dynamic bundle)."""
    load_all()
    align = int(opts.memory.get("alignment", 64))
    if align <= 0 or align & (align - 1):
        raise ModelError(f"memory.alignment must be a power of two, not {align}")
    limits = opts.raw.get("limits", {}) if opts.raw else {}
    index_max = (1 << (int(getattr(opts.target, "index_bits", 64)) - 1)) - 1
    max_tensor = min(int(limits.get("max_tensor_bytes", 1 << 40)), index_max)
    check_static(g)
    for name in _tensors(g):
        t = g.type_of(name)
        if any(d < 0 for d in t.shape):
            raise ModelError(f"tensor {name!r} {t} has a negative dim")
        if t.nbytes > max_tensor:
            raise ModelError(f"tensor {name!r} {t} needs {t.nbytes} bytes, above the limit of "
                             f"{max_tensor} (limits.max_tensor_bytes / the target's index type)")
    helpers = {} if helpers is None else helpers
    mode = opts.memory.get("place_views", "auto")
    if mode != "auto":
        return _lower(g, opts, weights, helpers, bool(mode))
    # Concat placement and Split/Slice sub-views save copies but stretch lifetimes (a skip
    # connection placed inside a late Concat holds the whole output early): keep them when
    # the arena is no larger than without
    trial = dict(helpers)
    a = _lower(g, opts, weights, trial, True)
    if a.placed:
        plain = dict(helpers)
        b = _lower(g, opts, weights, plain, False)
        if b.arena_bytes < a.arena_bytes:
            a, trial = b, plain
    helpers.update(trial)
    a.helpers = helpers
    return a


def _lower(g, opts, weights, helpers, place: bool) -> Program:
    """One lowering: steps, lifetimes, the arena plan, then the weights and each step's
    arguments (``place``: Concat placement and Split/Slice sub-views)."""
    align = int(opts.memory.get("alignment", 64))
    limits = opts.raw.get("limits", {}) if opts.raw else {}
    index_max = (1 << (int(getattr(opts.target, "index_bits", 64)) - 1)) - 1
    share = Sharing(g, place)
    steps, placed = _emit_steps(g, opts, helpers, share)
    io_in_arena = bool(opts.memory.get("io_in_arena", False))
    first, last = _lifetimes(g, steps, io_in_arena)
    inputs, outputs = set(g.inputs), set(g.outputs)

    def arena_tensor(name):
        if io_in_arena:            # the caller writes inputs and reads outputs in the arena
            return name not in g.constants
        return name not in outputs and name not in inputs and name not in g.constants

    if opts.memory.get("inplace", True):
        for s in steps:
            share.try_inplace(s, last, arena_tensor)
    bufs, where, scratch_ix = _buffers(g, steps, share, first, last, arena_tensor, align)
    checked = bool(opts.memory.get("checked", False))
    rz = _align(int(opts.memory.get("redzone", 64 if checked else 0)), align) if checked else 0
    offsets, arena = _plan_arena(bufs, opts, align, rz)
    cap = min(int(limits.get("max_arena_bytes", 1 << 40)), index_max)
    if arena > cap:
        raise ModelError(f"the arena needs {arena} bytes, above the limit of {cap} "
                         "(limits.max_arena_bytes)")
    image = WeightsImage(align) if weights is None else weights
    locations = _locations(g, share, where, offsets, io_in_arena)
    _bind_args(g, steps, locations, offsets, scratch_ix, image)
    blob = image.image()
    cap = min(int(limits.get("max_weights_bytes", 1 << 40)), index_max)
    if len(blob) > cap:
        raise ModelError(f"the weights need {len(blob)} bytes, above the limit of {cap} "
                         "(limits.max_weights_bytes)")
    check = None
    if checked:
        writes = []
        for s in steps:
            w = {where[share.root(o)] for o in s.node.outputs
                 if o and share.root(o) in where}
            w |= {scratch_ix[(s.index, var)] for var, _n, _c in s.ctx.scratches}
            writes.append(sorted(w))
        check = {"redzone": rz, "writes": writes}
    return Program(graph=g, steps=steps, helpers=helpers, buffers=bufs, offsets=offsets,
                   check=check,
                   arena_bytes=arena, peak_bytes=peak_live_bytes(bufs), weights=blob,
                   weight_entries=list(image.entries), locations=locations, alignment=align,
                   shared={k: share.root(k) for k in sorted(share.parent)},
                   io_offsets=({"inputs": [locations[n][1] for n in g.inputs],
                                "outputs": [locations[n][1] for n in g.outputs]}
                               if io_in_arena else None),
                   shared_offsets={k: share.root_offset(k) for k in sorted(share.parent)
                                   if share.root_offset(k)}, placed=placed)


def _emit_steps(g, opts, helpers, share) -> tuple:
    """-> (steps, placed): a step per node that is neither a view nor a placed chunk, with
    the C body its op's emitter wrote; ``placed`` counts the nodes placed without a step."""
    steps, placed = [], 0
    for node in g.nodes:
        if share.is_view(node):
            share.add_view(node)           # no step: the output is the input's memory
            continue
        if share.try_place(node) or share.try_subview(node):
            placed += 1                    # no step: inputs/outputs are chunks of one buffer
            continue
        op = lookup(node, g.opset)
        k = len(steps)
        ctx = StepContext(g, node, k, opts.target, helpers)
        try:
            op.emit(node, ctx)
        except ValueError as e:
            # a kernel or schedule forced on this node (build YAML `nodes:`) that its emitter
            # refuses: the user's configuration, not a bug in aicc
            if "aicc_schedule" not in node.attrs and "aicc_kernel" not in node.attrs:
                raise
            raise ConfigError(f"node {node.name!r} ({node.op_type}): {e}") from e
        steps.append(Step(k, node, ctx.w.text(), ctx))
    return steps, placed


def _lifetimes(g, steps, io_in_arena: bool) -> tuple:
    """-> (first, last): per tensor the first step writing it and the last step touching it
    (an input counts only where the step's body reads it). With io_in_arena the caller
    writes the inputs before step 0 and reads the outputs after the last step."""
    first, last = {}, {}
    for s in steps:
        for name in s.node.outputs:
            if name:
                first.setdefault(name, s.index)
                last[name] = max(last.get(name, s.index), s.index)
        for k, name in enumerate(s.node.inputs):
            if name and _uses(s.body, s.ctx.inp[k]):
                last[name] = max(last.get(name, -1), s.index)
    if io_in_arena:
        end = max(len(steps) - 1, 0)
        for name in g.inputs:
            first[name] = 0
            last.setdefault(name, 0)
        for name in g.outputs:
            if name in g.inputs or name in g.constants:
                raise ModelError(f"memory.io_in_arena: graph output {name!r} is an input or "
                                 "a constant")
            last[name] = end
    return first, last


def _buffers(g, steps, share, first, last, arena_tensor, align) -> tuple:
    """-> (bufs, where, scratch_ix): one buffer per shared root in the arena, living from
    the first to the last step of any tensor sharing it (in order of first use), then one
    per step scratch; ``where``: root tensor -> buffer index; ``scratch_ix``: (step, var) ->
    buffer index."""
    gfirst, glast = {}, {}
    for name in first:
        r = share.root(name)
        gfirst[r] = min(gfirst.get(r, first[name]), first[name])
    for name, lst in last.items():
        r = share.root(name)
        glast[r] = max(glast.get(r, lst), lst)
    bufs, where = [], {}
    for name in sorted(gfirst, key=lambda n: (gfirst[n], n)):
        if not arena_tensor(name) or share.root(name) != name:
            continue
        where[name] = len(bufs)
        bufs.append(Buffer(name, g.type_of(name).nbytes, gfirst[name], glast[name], align))
    scratch_ix = {}
    for s in steps:
        for var, nbytes, _ct in s.ctx.scratches:
            scratch_ix[(s.index, var)] = len(bufs)
            bufs.append(Buffer(f"step{s.index}.{var}", nbytes, s.index, s.index, align))
    return bufs, where, scratch_ix


def _plan_arena(bufs, opts, align: int, rz: int) -> tuple:
    """-> (offsets, arena bytes) from the configured planner; ``rz`` > 0 (checked mode): a
    guard zone of rz bytes after every buffer and one before the first."""
    planner = opts.memory.get("planner", "search")
    iters = int(opts.memory.get("search_iterations", 300))
    if rz:
        guarded = [Buffer(b.name, b.size + rz, b.first, b.last, b.align) for b in bufs]
        offsets = [o + rz for o in plan(guarded, planner, iters)]
        return offsets, rz + arena_size(guarded, [o - rz for o in offsets], align)
    offsets = plan(bufs, planner, iters)
    return offsets, max(arena_size(bufs, offsets, align), align)


def _locations(g, share, where, offsets, io_in_arena: bool) -> dict:
    """tensor -> (kind, offset or index): the caller's inputs and outputs, arena buffers,
    and the views, in-place outputs and placed chunks at their root's place."""
    locations = {}
    if not io_in_arena:
        for i, name in enumerate(g.inputs):
            locations[name] = ("input", i)
        for i, name in enumerate(g.outputs):
            locations[name] = ("output", i)
    for name, ix in where.items():
        locations[name] = ("arena", offsets[ix])
    for name in share.parent:
        r = share.root(name)
        if r in locations:
            kind, off = locations[r]
            locations[name] = (kind, off + share.root_offset(name) if kind == "arena" else off)
    return locations


def _bind_args(g, steps, locations, offsets, scratch_ix, image) -> None:
    """Each step's arguments (variable, kind, offset, C type, read-only, comment), in order:
    inputs its body reads (constants enter the weights image here, in step order), outputs,
    derived constants, scratch buffers."""
    put = image.put
    for s in steps:
        n, ctx = s.node, s.ctx
        for k, name in enumerate(n.inputs):
            var = ctx.inp[k]
            if not name or not _uses(s.body, var):
                continue
            if name in g.constants and name not in locations:
                locations[name] = ("weights", put(name, g.constants[name]))
            kind, off = locations[name]
            s.args.append((var, kind, off, ctype(g.dtype(name)), True, str(g.type_of(name))))
        for k, name in enumerate(n.outputs):
            var = ctx.out[k]
            if not name:
                continue
            kind, off = locations[name]
            s.args.append((var, kind, off, ctype(g.dtype(name)), False, str(g.type_of(name))))
        for var, arr in ctx.extra_consts:
            off = put(f"step{s.index}.{var}", arr)
            s.args.append((var, "weights", off, ctype(arr.dtype), True,
                           f"{arr.dtype.name}{list(arr.shape)} derived"))
        for var, nbytes, ct in ctx.scratches:
            off = offsets[scratch_ix[(s.index, var)]]
            s.args.append((var, "arena", off, ct, False, f"scratch {nbytes} bytes"))
