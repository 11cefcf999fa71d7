"""A precompiled <immintrin.h> for the x86 bundles the op tests compile (tests/ops/conftest.py).

A one-op x86 bundle's model.c takes gcc ~0.4 s at -O2, of which ~0.17 s is parsing
<immintrin.h> (syntax only: 0.2 s). tests/ops compiles ~2000 such bundles per `make test`, so
the op tests build their x86 bundles with ``-include aicc_pch.h``, whose .gch holds
<immintrin.h> compiled once per run with the bundle's own flags (target cflags, the test's
CFLAGS, -fPIC). The object code is the same byte for byte (tests/ops/test_pch.py checks it and
that gcc actually uses the .gch); gcc ignores a .gch whose flags do not match and reads the
header as text, which changes nothing but the time.

Not with debug info (``-g``: `make sanitize`), whose records of the header differ.

The runtime (aicc_rt.c, ~0.06-0.08 s a bundle, half of a small bundle's build) is the same
file in every bundle of a target: ``prebuilt_rt`` compiles it once per run and flags, with the
bundle's own make rule, and puts that aicc_rt.o into each later bundle before make runs (make
then finds it up to date). Keyed by the compiler's version, the target's cflags, CFLAGS and the
bytes of aicc_rt.c and aicc_rt.h. make compiles it as ./aicc_rt.c in the bundle's directory,
so the object is byte for byte the one each bundle would build (tests/ops/test_pch.py).

Scope: tests/ops and tests/test_conformance.py (``shared_build``). Every other test (models,
golden files, bundles, the CLI, embedded builds) compiles exactly as the bundle's Makefile does
for a user, so a bundle that forgets an #include still fails there.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

HEADER = "#include <immintrin.h>\n"
_cache: dict = {}


@functools.lru_cache(maxsize=None)
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


def _rt_key(bundle_dir: Path, cflags: str) -> str | None:
    """The cache key of the bundle's aicc_rt.o, None when it is not shared (no explicit CFLAGS,
    a CC override, debug info, a cross toolchain)."""
    if cflags is None or os.environ.get("CC") or "-g" in cflags.split():
        return None
    m = json.loads((bundle_dir / "manifest.json").read_text())
    tc = m.get("toolchain", {})
    if tc.get("cc") != "cc" or not tc.get("hosted"):
        return None
    h = hashlib.sha256(json.dumps([_cc_version("cc"), tc.get("cflags", []), cflags]).encode())
    h.update((bundle_dir / "aicc_rt.c").read_bytes())
    h.update((bundle_dir / "aicc_rt.h").read_bytes())
    return h.hexdigest()[:16]


def prebuilt_rt(bundle_dir, cflags: str | None) -> None:
    """aicc_rt.o into bundle_dir from the run's cache (else built there by the bundle's own
    make rule and cached), so that the bundle's make skips it."""
    d = Path(bundle_dir)
    key = _rt_key(d, cflags)
    if key is None:
        return
    cached = Path(tempfile.gettempdir()) / f"aicc-test-rt-{key}" / "aicc_rt.o"
    if cached.is_file():
        shutil.copyfile(cached, d / "aicc_rt.o")       # newer than the sources: up to date
        return
    r = subprocess.run(["make", "-C", str(d), "--no-print-directory", "aicc_rt.o",
                        f"CFLAGS={cflags}"], capture_output=True, text=True)
    if r.returncode != 0:
        return                                           # the bundle's build reports it
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_name(f"aicc_rt.o.{os.getpid()}")
    shutil.copyfile(d / "aicc_rt.o", tmp)
    os.replace(tmp, cached)


def shared_build(monkeypatch) -> None:
    """Make the loader build bundles with the precompiled header and the prebuilt runtime."""
    from aicc.bundle import loader
    build = loader.build_bundle

    def fast(path, cflags=None, quiet=True):
        cflags = with_pch(path, cflags)
        prebuilt_rt(path, cflags)
        return build(path, cflags, quiet)

    monkeypatch.setattr(loader, "build_bundle", fast)
