"""Load a bundle: build it with the system C compiler (its own Makefile) and bind it with cffi."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import weakref
from pathlib import Path

import cffi
import numpy as np

from ..errors import AiccError, BuildError, InputError
from ..ir import dtype_from_name

_CDEF = """
typedef void (*aicc_hook_fn)(void *user, uint32_t step, const char *op, int after);
int {name}_run(const void *weights, void *arena, size_t arena_bytes,
               const void *const *inputs, void *const *outputs);
int {name}_run_hooked(const void *weights, void *arena, size_t arena_bytes,
               const void *const *inputs, void *const *outputs, aicc_hook_fn hook, void *user);
const char *aicc_status_str(int status);
"""

_CDEF_CHECK = """
typedef struct { int kind; uint32_t step; uint32_t buffer; } aicc_check_report;
extern aicc_check_report aicc_last_check;
"""

_CDEF_DYN = """
int {name}_run_dims_hooked(const void *weights, void *arena, size_t arena_bytes,
               const int64_t *dims, const void *const *inputs, void *const *outputs,
               aicc_hook_fn hook, void *user);
"""


def _aligned(nbytes: int, align: int) -> np.ndarray:
    raw = np.zeros(nbytes + align, dtype=np.uint8)
    off = (-raw.ctypes.data) % align
    return raw[off:off + nbytes]


_FFIS: dict = {}


def _ffi(cdef: str):
    """One cffi.FFI per declaration text (parsing it takes ~9 ms), shared by the bundles
    that declare the same entry points; each dlopens its own library through it."""
    ffi = _FFIS.get(cdef)
    if ffi is None:
        ffi = cffi.FFI()
        ffi.cdef(cdef)
        _FFIS[cdef] = ffi
    return ffi


def build_bundle(path, cflags: str | None = None, quiet: bool = True) -> Path:
    """Run the bundle's Makefile; returns the shared library path."""
    path = Path(path)
    m = json.loads((path / "manifest.json").read_text())
    cmd = ["make", "-C", str(path), "--no-print-directory", f"lib{m['name']}.so"]
    if cflags is not None:
        cmd.append(f"CFLAGS={cflags}")
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        lines = (r.stderr or r.stdout).strip().splitlines()
        first = next((ln for ln in lines if "error" in ln), lines[-1] if lines else "")
        err = BuildError(f"bundle {path} failed to compile (a bug in aicc): {first.strip()}")
        err.detail = r.stderr
        raise err
    return path / f"lib{m['name']}.so"


class Bundle:
    """A compiled bundle bound through cffi. ``run({name: array}) -> {name: array}``."""

    def __init__(self, path, cflags: str | None = None) -> None:
        self.path = Path(path)
        mf = self.path / "manifest.json"
        if not mf.is_file():
            raise InputError(f"{self.path}: not an aicc bundle (no manifest.json)")
        self.manifest = json.loads(mf.read_text())
        self.name = self.manifest["name"]
        from ..targets import host_supports, list_targets, load_target
        tname = self.manifest.get("target", "generic")
        if tname in list_targets() and not host_supports(load_target(tname)):
            raise InputError(f"{self.path}: built for target {tname}, which this machine cannot "
                             "run directly (cross targets run under their emulator: see "
                             "docs/EMBEDDED.md)")
        so = build_bundle(self.path, cflags)
        # dlopen a private copy: a rebuilt bundle at the same path must not hit the cache
        self._tmpdir = tempfile.mkdtemp(prefix="aicc-so-")
        private = Path(self._tmpdir) / so.name
        shutil.copyfile(so, private)
        self.dynamic = self.manifest.get("dynamic")
        self.checked = bool(self.manifest.get("memory", {}).get("checked"))
        self.ffi = _ffi(_CDEF.format(name=self.name) +
                        (_CDEF_DYN.format(name=self.name) if self.dynamic else "") +
                        (_CDEF_CHECK if self.checked else ""))
        self.lib = self.ffi.dlopen(str(private))
        self._run = getattr(self.lib, f"{self.name}_run")
        self._run_hooked = getattr(self.lib, f"{self.name}_run_hooked")
        if self.dynamic:
            self._run_dims = getattr(self.lib, f"{self.name}_run_dims_hooked")
        self.arena = _aligned(max(self.manifest["arena_bytes"], 1), self.manifest["arena_align"])
        self.weights = None
        if not self.manifest["weights_embedded"]:
            blob = (self.path / self.manifest["weights_file"]).read_bytes()
            self.weights = _aligned(max(len(blob), 1), self.manifest["arena_align"])
            self.weights[:len(blob)] = np.frombuffer(blob, dtype=np.uint8)

    @property
    def inputs(self) -> list:
        return self.manifest["inputs"]

    @property
    def outputs(self) -> list:
        return self.manifest["outputs"]

    def _check_inputs(self, feeds: dict) -> list:
        names = [i["name"] for i in self.inputs]
        missing = [n for n in names if n not in feeds]
        extra = [n for n in feeds if n not in names]
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"missing input(s) {', '.join(map(repr, missing))}")
            if extra:
                parts.append(f"unknown input(s) {', '.join(map(repr, extra))}")
            raise InputError("; ".join(parts) + f" (expected: {', '.join(map(repr, names))})")
        arrays, dims = [], {}
        for spec in self.inputs:
            a = np.asarray(feeds[spec["name"]])
            want = dtype_from_name(spec["dtype"])
            if a.dtype != want:
                raise InputError(f"input '{spec['name']}': dtype {a.dtype.name}, "
                                 f"expected {want.name}")
            if not self._shape_ok(spec, a.shape, dims):
                raise InputError(f"input '{spec['name']}': shape {list(a.shape)}, "
                                 f"expected {self._expected(spec, dims)}")
            arrays.append(np.ascontiguousarray(a))
        return arrays, dims

    def _shape_ok(self, spec, shape, dims) -> bool:
        """Static dims must match; a dynamic dim takes its value from the first input that
        carries it and must be within 1..its largest bucket (and agree with other inputs)."""
        want = spec["shape"]
        if len(shape) != len(want):
            return False
        for d, w in zip(shape, want):
            if isinstance(w, int):
                if d != w:
                    return False
            elif dims.setdefault(w, int(d)) != d:
                return False
        return True

    def _expected(self, spec, dims) -> str:
        parts = []
        for w in spec["shape"]:
            if isinstance(w, int):
                parts.append(str(w))
            else:
                mx = next(x["max"] for x in self.dynamic["dims"] if x["name"] == w)
                parts.append(f"{w}={dims[w]}" if w in dims else f"{w} (1..{mx})")
        return "[" + ", ".join(parts) + "]"

    def output_shapes(self, dims: dict) -> list:
        if not self.dynamic:
            return [o["shape"] for o in self.outputs]
        from ..dynamic.extent import Ext
        vals = [dims[x["name"]] for x in self.dynamic["dims"]]
        out = []
        for o in self.outputs:
            ext = o.get("extents", {})
            out.append([max(Ext.from_json(ext[str(a)]).eval(vals), 0) if str(a) in ext else d
                        for a, d in enumerate(o["max_shape"])])
        return out

    def _prepare_dyn(self) -> None:
        """Precomputed state for calls of a dynamic bundle: where each dim is read, how each
        output's shape follows from the dims."""
        from ..dynamic.extent import Ext
        ffi = self.ffi
        names = [x["name"] for x in self.dynamic["dims"]]
        ins = []
        for i in self.inputs:
            ins.append((i["name"], dtype_from_name(i["dtype"]),
                        [(a, names.index(d)) if isinstance(d, str) else (a, None)
                         for a, d in enumerate(i["shape"])], [d if isinstance(d, int) else None
                                                            for d in i["shape"]]))
        outs = []
        for o in self.outputs:
            ext = o.get("extents", {})
            outs.append((o["name"], dtype_from_name(o["dtype"]),
                         [Ext.from_json(ext[str(a)]) if str(a) in ext else d
                          for a, d in enumerate(o["max_shape"])]))
        self._dyn = (names, [x["max"] for x in self.dynamic["dims"]], ins, outs,
                     ffi.new("void *[]", max(len(ins), 1)), ffi.new("void *[]", max(len(outs), 1)),
                     ffi.new("int64_t[]", max(len(names), 1)),
                     ffi.NULL if self.weights is None else ffi.from_buffer(self.weights),
                     ffi.from_buffer(self.arena), self.arena.nbytes)

    def _run_dyn_fast(self, feeds):
        """The common call of a dynamic bundle, or None to take the full path."""
        names, maxima, ins, outs, in_ptrs, out_ptrs, dv, w, arena, nbytes = self._dyn
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
            buf = self.ffi.from_buffer(a)
            keep.append(buf)
            in_ptrs[k] = buf
        for s, d in enumerate(dims):
            dv[s] = d
        res = {}
        for k, (name, dt, shape) in enumerate(outs):
            o = np.empty([d if isinstance(d, int) else max(d.eval(dims), 0) for d in shape], dt)
            if o.size == 0:
                return None
            buf = self.ffi.from_buffer(o)
            keep.append(buf)
            out_ptrs[k] = buf
            res[name] = o
        st = self._run_dims(w, arena, nbytes, dv, in_ptrs, out_ptrs, self.ffi.NULL, self.ffi.NULL)
        if st != 0:
            return None                 # the full path reports it
        return res

    def _prepare_fast(self) -> None:
        """The common call (static shapes, no hook) as a closure over precomputed state,
        bound as the instance's ``run``: it checks the feeds, runs, and returns the outputs;
        anything unusual (a hook, other arrays, a failed run) goes to ``_run_full``, which
        checks, runs again and reports. Locals instead of attribute lookups, and no method
        in between: after a model's run the interpreter's own code and data are cold, so
        every step here costs more than it does warm (FC autoencoder, interleaved with
        onnxruntime: run() 16.4 us, the bare C call from Python 12.5). The last array given
        for each input keeps its cffi buffer (the buffer export pins the array's memory:
        numpy refuses to resize it), so the same array again needs only the checks of its
        (settable) dtype, shape and strides, against those of a C-contiguous array; other
        arrays take the flags check and a new buffer."""
        ffi = self.ffi
        self._fast = None
        if self.dynamic:
            self._prepare_dyn()
            return
        if self.manifest["memory"].get("io_in_arena"):
            return
        ins = [(i["name"], dtype_from_name(i["dtype"]), tuple(i["shape"])) for i in self.inputs]
        outs = [(o["name"], dtype_from_name(o["dtype"]), tuple(o["shape"])) for o in self.outputs]
        if any(0 in shape for _n, _d, shape in ins + outs):
            return                     # empty tensors: the full path passes non-NULL pointers
        in_ptrs = ffi.new("void *[]", max(len(ins), 1))
        out_ptrs = ffi.new("void *[]", max(len(outs), 1))
        w = ffi.NULL if self.weights is None else ffi.from_buffer(self.weights)
        arena, nbytes = ffi.from_buffer(self.arena), self.arena.nbytes
        from_buffer, empty, ndarray, run = ffi.from_buffer, np.empty, np.ndarray, self._run
        wself = weakref.ref(self)       # no cycle through the instance's run attribute

        def full(feeds, hook):
            return wself()._run_full(feeds, hook)
        nin = len(ins)
        ins = [(k, name, np.dtype(dt), shape, np.empty(shape, dt).strides)
               for k, (name, dt, shape) in enumerate(ins)]
        outs = [(name, np.dtype(dt), shape) for name, dt, shape in outs]
        last = [object()] * nin        # the last array of each input (its buffer: in_ptrs[k])
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
            res, keep = {}, []
            k = 0
            for name, dt, shape in outs:
                res[name] = o = empty(shape, dt)
                keep.append(from_buffer(o))
                out_ptrs[k] = keep[k]
                k += 1
            return res if run(w, arena, nbytes, in_ptrs, out_ptrs) == 0 else full(feeds, hook)

        self._fast = fast
        self.run = fast

    def run(self, feeds: dict, hook=None) -> dict:
        """Run on {input name: array}; returns {output name: array}. ``hook``: a Python
        callable ``hook(step, op, after)`` called before and after every step, or a C hook
        as a tuple (address of an ``aicc_hook_fn``, user pointer) of ints (bench.profile)."""
        if hook is None:
            fast = getattr(self, "_fast", False)
            if fast is False:
                self._prepare_fast()
                fast = self._fast
            if self.dynamic:
                res = self._run_dyn_fast(feeds)
                if res is not None:
                    return res
            elif fast is not None:
                return fast(feeds)
        return self._run_full(feeds, hook)

    def _run_full(self, feeds: dict, hook=None) -> dict:
        """run() with every check and its errors (no fast path)."""
        ins, dims = self._check_inputs(feeds)
        if self.dynamic:
            for x in self.dynamic["dims"]:
                if not 1 <= dims[x["name"]] <= x["max"]:
                    raise InputError(f"dynamic dim {x['name']!r} = {dims[x['name']]} is outside "
                                     f"1..{x['max']} (the largest bucket)")
        outs = [np.empty(s, dtype=dtype_from_name(o["dtype"]))
                for o, s in zip(self.outputs, self.output_shapes(dims))]
        ffi = self.ffi
        in_ptrs = ffi.new("void *[]", [ffi.cast("void *", a.ctypes.data) for a in ins] or [ffi.NULL])
        out_ptrs = ffi.new("void *[]", [ffi.cast("void *", a.ctypes.data) for a in outs] or [ffi.NULL])
        io = self.manifest["memory"].get("io_in_arena")
        if io:                 # inputs written into the arena, outputs read back from it
            for a, off in zip(ins, io["inputs"]):
                self.arena[off:off + a.nbytes] = np.frombuffer(a.tobytes(), dtype=np.uint8)
            in_ptrs = out_ptrs = ffi.NULL
        w = ffi.NULL if self.weights is None else ffi.cast("void *", self.weights.ctypes.data)
        arena = ffi.cast("void *", self.arena.ctypes.data)
        cb, user = ffi.NULL, ffi.NULL
        if isinstance(hook, tuple):      # a C hook: (function address, user pointer) as ints
            cb, user = ffi.cast("aicc_hook_fn", hook[0]), ffi.cast("void *", hook[1])
        elif hook is not None:
            cb = ffi.callback("aicc_hook_fn",
                              lambda u, i, op, after: hook(int(i), ffi.string(op).decode(), bool(after)))
        if self.dynamic:
            dv = ffi.new("int64_t[]", [dims[x["name"]] for x in self.dynamic["dims"]])
            st = self._run_dims(w, arena, self.arena.nbytes, dv, in_ptrs, out_ptrs, cb, user)
        elif hook is None:
            st = self._run(w, arena, self.arena.nbytes, in_ptrs, out_ptrs)
        else:
            st = self._run_hooked(w, arena, self.arena.nbytes, in_ptrs, out_ptrs, cb, user)
        if st == 7 and self.checked:
            raise AiccError(self._check_message())
        if st != 0:
            raise AiccError(f"bundle run failed: {ffi.string(self.lib.aicc_status_str(st)).decode()}")
        if io:
            for a, off in zip(outs, io["outputs"]):
                a.reshape(-1).view(np.uint8)[:] = self.arena[off:off + a.nbytes]
        return {o["name"]: a for o, a in zip(self.outputs, outs)}

    def _check_message(self) -> str:
        r = self.lib.aicc_last_check
        step = self.manifest["steps"][r.step] if r.step < len(self.manifest["steps"]) else {}
        what = f"step {r.step} ({step.get('op', '?')}, node {step.get('node', '?')!r})"
        bufs = self.manifest["memory"]["buffers"]
        if r.kind == 1:
            where = ("the guard zone before the first buffer" if r.buffer >= len(bufs) else
                     f"the guard zone after buffer {bufs[r.buffer]['tensor']!r}")
            return f"checked mode: {what} wrote outside its buffers, into {where}"
        return (f"checked mode: {what} changed a live buffer or an input it does not own")

    def __del__(self):
        d = getattr(self, "_tmpdir", None)
        if d and os.path.isdir(d):
            shutil.rmtree(d, ignore_errors=True)


def load(path, cflags: str | None = None) -> Bundle:
    return Bundle(path, cflags)
