"""The fast paths of ``Bundle.run``: the common call (C-contiguous arrays of the right dtype
and shape, no hook) as a closure over precomputed state. Anything unusual goes to the
bundle's full path, which checks everything, runs and reports.

Locals instead of attribute lookups, and no method in between: after a model's run the
interpreter's own code and data are cold, so every step here costs more than it does warm
(FC autoencoder interleaved with onnxruntime: run() 16.4 us, the bare C call from
Python 12.5).

Output arrays are given again when nothing else holds them (``_FREE``): the caller has
dropped the array of the last call and every view of it. An array the caller still holds
is never written; the next call gets a new one. That saves the allocation and the buffer
export: right after onnxruntime's run has left the interpreter cold, 2-3 us a call on a quiet
machine and 8-14 us in its busy stretches (FC autoencoder, ResNet-8)."""
from __future__ import annotations

import sys
import weakref

import cffi
import numpy as np

from ..ir import dtype_from_name


def _free_refcount() -> int:
    """``sys.getrefcount(prev[k])`` of an output array that only a fast path holds: in its
    list ``prev`` and in the cffi buffer it passes to C (the buffer export holds a reference,
    as does every view and memoryview of the array). Measured the way the paths test it."""
    prev = [np.empty(1, np.uint8)]
    buf = cffi.FFI().from_buffer(prev[0])
    n = sys.getrefcount(prev[0])
    del buf
    return n


_FREE = _free_refcount()


def static_runner(b):
    """``fast(feeds, hook=None) -> {name: array}`` for a static bundle, or None where only
    the full path works (inputs and outputs in the arena, empty tensors). The last array
    given for each input keeps its cffi buffer (the buffer export pins the array's memory:
    numpy refuses to resize it), so the same array again needs only the checks of its
    (settable) dtype, shape and strides, against those of a C-contiguous array; other arrays
    take the flags check and a new buffer."""
    if b.manifest["memory"].get("io_in_arena"):
        return None
    ins = [(i["name"], dtype_from_name(i["dtype"]), tuple(i["shape"])) for i in b.inputs]
    outs = [(o["name"], dtype_from_name(o["dtype"]), tuple(o["shape"])) for o in b.outputs]
    if any(0 in shape for _n, _d, shape in ins + outs):
        return None                    # empty tensors: the full path passes non-NULL pointers
    ffi = b.ffi
    in_ptrs = ffi.new("void *[]", max(len(ins), 1))
    out_ptrs = ffi.new("void *[]", max(len(outs), 1))
    w = ffi.NULL if b.weights is None else ffi.from_buffer(b.weights)
    arena, nbytes = ffi.from_buffer(b.arena), b.arena.nbytes
    from_buffer, empty, ndarray, run = ffi.from_buffer, np.empty, np.ndarray, b._run
    getrefcount = sys.getrefcount
    wb = weakref.ref(b)                # no cycle through the instance's run attribute

    def full(feeds, hook):
        return wb()._run_full(feeds, hook)
    nin = len(ins)
    ins = [(k, name, np.dtype(dt), shape, np.empty(shape, dt).strides)
           for k, (name, dt, shape) in enumerate(ins)]
    outs = [(name, np.dtype(dt), shape) for name, dt, shape in outs]
    prev = [np.empty(shape, dt) for _n, dt, shape in outs]
    obufs = [from_buffer(o) for o in prev]
    for k, buf in enumerate(obufs):
        out_ptrs[k] = buf
    last = [object()] * nin            # the last array of each input (its buffer: in_ptrs[k])
    bufs = [None] * nin

    def fast(feeds: dict, hook=None):
        if hook is not None or len(feeds) != nin:
            return full(feeds, hook)
        for k, name, dt, shape, strides in ins:
            a = feeds.get(name)
            if a is last[k] and a.dtype is dt and a.shape == shape and a.strides == strides:
                continue
            if type(a) is not ndarray or a.dtype != dt or a.shape != shape:
                return full(feeds, hook)
            fl = a.flags
            if not (fl.c_contiguous and fl.aligned):
                return full(feeds, hook)
            bufs[k] = buf = from_buffer(a)
            last[k] = a
            in_ptrs[k] = buf
        res = {}
        k = 0
        for name, dt, shape in outs:
            if getrefcount(prev[k]) != _FREE:          # still held by the caller: a new one
                prev[k] = o = empty(shape, dt)
                obufs[k] = buf = from_buffer(o)
                out_ptrs[k] = buf
            res[name] = prev[k]
            k += 1
        return res if run(w, arena, nbytes, in_ptrs, out_ptrs) == 0 else full(feeds, hook)
    return fast


def dynamic_runner(b):
    """``fast(feeds) -> {name: array} | None`` for a dynamic bundle (None: take the full
    path): where each dim is read, how each output's shape follows from the dims, computed
    once. An output array is given again only if its shape is the same too."""
    from ..dynamic.extent import Ext
    ffi = b.ffi
    names = [x["name"] for x in b.dynamic["dims"]]
    maxima = [x["max"] for x in b.dynamic["dims"]]
    ins = []
    for i in b.inputs:
        ins.append((i["name"], dtype_from_name(i["dtype"]),
                    [(a, names.index(d)) if isinstance(d, str) else (a, None)
                     for a, d in enumerate(i["shape"])],
                    [d if isinstance(d, int) else None for d in i["shape"]]))
    outs = []
    for o in b.outputs:
        ext = o.get("extents", {})
        outs.append((o["name"], dtype_from_name(o["dtype"]),
                     [Ext.from_json(ext[str(a)]) if str(a) in ext else d
                      for a, d in enumerate(o["max_shape"])]))
    in_ptrs = ffi.new("void *[]", max(len(ins), 1))
    out_ptrs = ffi.new("void *[]", max(len(outs), 1))
    dv = ffi.new("int64_t[]", max(len(names), 1))
    w = ffi.NULL if b.weights is None else ffi.from_buffer(b.weights)
    arena, nbytes, run_dims = ffi.from_buffer(b.arena), b.arena.nbytes, b._run_dims
    prev = [np.empty(0, np.uint8) for _o in outs]  # no buffer, so never _FREE
    obufs = [None] * len(outs)

    def fast(feeds):
        if len(feeds) != len(ins):
            return None
        dims = [None] * len(names)
        keep = []
        for k, (name, dt, axes, static) in enumerate(ins):
            a = feeds.get(name)
            if (type(a) is not np.ndarray or a.dtype != dt or a.ndim != len(axes)
                    or not a.flags.c_contiguous or not a.flags.aligned or a.size == 0):
                return None
            for (ax, s), st in zip(axes, static):
                n = a.shape[ax]
                if s is None:
                    if n != st:
                        return None
                elif dims[s] is None:
                    if not 1 <= n <= maxima[s]:
                        return None
                    dims[s] = n
                elif dims[s] != n:
                    return None
            buf = ffi.from_buffer(a)
            keep.append(buf)
            in_ptrs[k] = buf
        for s, d in enumerate(dims):
            dv[s] = d
        res = {}
        for k, (name, dt, shape) in enumerate(outs):
            shp = tuple(d if isinstance(d, int) else max(d.eval(dims), 0) for d in shape)
            if sys.getrefcount(prev[k]) != _FREE or prev[k].shape != shp:
                o = np.empty(shp, dt)
                if o.size == 0:
                    return None
                prev[k], obufs[k] = o, ffi.from_buffer(o)
            out_ptrs[k] = obufs[k]
            res[name] = prev[k]
        if run_dims(w, arena, nbytes, dv, in_ptrs, out_ptrs, ffi.NULL, ffi.NULL) != 0:
            return None                # the full path reports it
        return res
    return fast
