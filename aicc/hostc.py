"""Small C helpers compiled for this host at run time (the profiler's hook, the CPUID mask):
``(ffi, lib) = host_lib(source, cdef)`` with $CC (else cc); the library stays loaded for the
process, its file is removed once dlopen has mapped it."""
from __future__ import annotations

import os
import subprocess
import tempfile


def host_lib(source: str, cdef: str, name: str = "helper"):
    import cffi
    with tempfile.TemporaryDirectory(prefix="aicc-hostc-") as tmp:
        src, so = os.path.join(tmp, f"{name}.c"), os.path.join(tmp, f"lib{name}.so")
        with open(src, "w") as f:
            f.write(source)
        subprocess.run([os.environ.get("CC", "cc"), "-O2", "-std=gnu99", "-shared", "-fPIC",
                        src, "-o", so], check=True, capture_output=True)
        ffi = cffi.FFI()
        ffi.cdef(cdef)
        return ffi, ffi.dlopen(so)
