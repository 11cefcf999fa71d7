"""Load a bundle: build it with the system C compiler (its own Makefile) and bind it with cffi."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import cffi
import numpy as np

from ..errors import AiccError, BuildError, InputError
from ..ir import dtype_from_name
from .fastpath import dynamic_runner, static_runner

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
        raise compile_error(f"bundle {path}", r, " (a bug in aicc)")
    return path / f"lib{m['name']}.so"


def compile_error(what: str, r, why: str = "") -> BuildError:
    """The BuildError of a failed compiler or make run ``r`` (text output): its first line
    that says "error" (else its last), the whole stderr as ``detail``."""
    lines = (r.stderr or r.stdout).strip().splitlines()
    first = next((ln for ln in lines if "error" in ln), lines[-1] if lines else "")
    err = BuildError(f"{what} failed to compile{why}: {first.strip()}")
    err.detail = r.stderr
    return err


class BundleInfo:
    """What a bundle's manifest says about running it: its inputs and outputs, the checks of
    the feeds, the output shapes. Bundle (here, through cffi) and the runners' bundles
    (aicc/runner: a program on an emulator or a device) run it."""

    def __init__(self, path) -> None:
        self.path = Path(path)
        mf = self.path / "manifest.json"
        if not mf.is_file():
            raise InputError(f"{self.path}: not an aicc bundle (no manifest.json)")
        self.manifest = json.loads(mf.read_text())
        self.name = self.manifest["name"]
        self.dynamic = self.manifest.get("dynamic")

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

    def checked_inputs(self, feeds: dict):
        """(the input arrays in the bundle's order, {dynamic dim: value}); an InputError
        names what does not fit (name, dtype, shape, a dynamic dim beyond the largest bucket)."""
        ins, dims = self._check_inputs(feeds)
        for x in (self.dynamic or {}).get("dims", ()):
            if not 1 <= dims[x["name"]] <= x["max"]:
                raise InputError(f"dynamic dim {x['name']!r} = {dims[x['name']]} is outside "
                                 f"1..{x['max']} (the largest bucket)")
        return ins, dims

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

class Bundle(BundleInfo):
    """A compiled bundle bound through cffi. ``run({name: array}) -> {name: array}``."""

    def __init__(self, path, cflags: str | None = None) -> None:
        super().__init__(path)
        from ..targets import host_supports, list_targets, load_target
        tname = self.manifest.get("target", "generic")
        if tname in list_targets() and not host_supports(load_target(tname)):
            raise InputError(f"{self.path}: built for target {tname}, which this machine cannot "
                             "run directly (aicc run, validate and bench run it under its "
                             "emulator or a --runner: aicc.runner.open_bundle)")
        so = build_bundle(self.path, cflags)
        # dlopen a private copy: a rebuilt bundle at the same path must not hit the cache
        self._tmpdir = tempfile.mkdtemp(prefix="aicc-so-")
        private = Path(self._tmpdir) / so.name
        shutil.copyfile(so, private)
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

    def run(self, feeds: dict, hook=None) -> dict:
        """Run on {input name: array}; returns {output name: array}. ``hook``: a Python
        callable ``hook(step, op, after)`` called before and after every step, or a C hook
        as a tuple (address of an ``aicc_hook_fn``, user pointer) of ints (bench.profile)."""
        if hook is None:
            fast = getattr(self, "_fast", False)
            if fast is False:           # the first call: the fast path (fastpath.py)
                self._fast = fast = (dynamic_runner if self.dynamic else static_runner)(self)
                if fast is not None and not self.dynamic:
                    self.run = fast     # it falls back to _run_full itself
            if self.dynamic:
                res = fast(feeds)
                if res is not None:
                    return res
            elif fast is not None:
                return fast(feeds)
        return self._run_full(feeds, hook)

    def _run_full(self, feeds: dict, hook=None) -> dict:
        """run() with every check and its errors (no fast path)."""
        ins, dims = self.checked_inputs(feeds)
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
