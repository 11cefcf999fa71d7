"""A precompiled <immintrin.h> for the x86 bundles the op tests compile (tests/ops/conftest.py).

A one-op x86 bundle's model.c takes gcc ~0.4 s at -O2, of which ~0.17 s is parsing
<immintrin.h> (syntax only: 0.2 s). tests/ops compiles ~2000 such bundles per `make test`, so
the op tests build their x86 bundles with ``-include aicc_pch.h``, whose .gch holds
<immintrin.h> compiled once per run with the bundle's own flags (target cflags, the test's
CFLAGS, -fPIC). The object code is the same byte for byte (tests/ops/test_pch.py checks it and
that gcc actually uses the .gch); gcc ignores a .gch whose flags do not match and reads the
header as text, which changes nothing but the time.

Not with debug info (``-g``: `make sanitize`), whose records of the header differ.

Scope: tests/ops only. Every other test (models, golden files, bundles, the CLI, embedded
builds) compiles exactly as the bundle's Makefile does for a user, so a bundle that forgets an
#include still fails there.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
from pathlib import Path

HEADER = "#include <immintrin.h>\n"
_cache: dict = {}


def _cc_version(cc: str) -> str:
    r = subprocess.run([cc, "--version"], capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else ""


def pch_header(cc: str, target_cflags: list, cflags: str) -> Path | None:
    """aicc_pch.h whose aicc_pch.h.gch is built with ``cc target_cflags cflags -fPIC``
    (built once, shared by the xdist workers through an atomic rename); None if gcc cannot
    build it."""
    flags = [*target_cflags, *cflags.split(), "-fPIC"]
    key = (cc, tuple(flags))
    if key in _cache:
        return _cache[key]
    ver = _cc_version(cc)
    h = hashlib.sha256(json.dumps([ver, flags, HEADER]).encode()).hexdigest()[:16]
    d = Path(tempfile.gettempdir()) / f"aicc-test-pch-{h}"
    hdr, gch = d / "aicc_pch.h", d / "aicc_pch.h.gch"
    if not gch.is_file():
        d.mkdir(parents=True, exist_ok=True)
        if not hdr.is_file():
            tmp = d / f"aicc_pch.h.{os.getpid()}"
            tmp.write_text(HEADER)
            os.replace(tmp, hdr)
        tmp = d / f"aicc_pch.h.gch.{os.getpid()}"
        r = subprocess.run([cc, *flags, "-x", "c-header", str(hdr), "-o", str(tmp)],
                           capture_output=True, text=True)
        if r.returncode != 0 or not ver:
            tmp.unlink(missing_ok=True)
            _cache[key] = None
            return None
        os.replace(tmp, gch)
    _cache[key] = hdr
    return hdr


def with_pch(bundle_dir, cflags: str | None) -> str | None:
    """cflags plus ``-include aicc_pch.h`` for an x86 bundle compiled with explicit CFLAGS
    by the host's cc; cflags unchanged otherwise."""
    if cflags is None or os.environ.get("CC") or "-g" in cflags.split():
        return cflags       # with -g (make sanitize) the debug info names the .gch
    m = json.loads((Path(bundle_dir) / "manifest.json").read_text())
    tc = m.get("toolchain", {})
    if not m.get("target", "").startswith("x86-") or tc.get("cc") != "cc" \
            or not tc.get("hosted"):
        return cflags
    hdr = pch_header("cc", tc.get("cflags", []), cflags)
    return cflags if hdr is None else f"{cflags} -include {hdr}"
