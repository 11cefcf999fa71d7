"""A precompiled intrinsics header (<immintrin.h> for x86, <arm_neon.h> for arm-neon) for the
bundles the op tests compile (tests/ops/conftest.py).

A one-op x86 bundle's model.c takes gcc ~0.4 s at -O2, of which ~0.17 s is parsing
<immintrin.h> (syntax only: 0.2 s). tests/ops compiles ~2000 such bundles per `make test`, so
the op tests build their x86 bundles with ``-include aicc_pch.h``, whose .gch holds
<immintrin.h> compiled once per run with the bundle's own flags (target cflags, the test's
CFLAGS, -fPIC). The object code is the same byte for byte (tests/ops/test_pch.py checks it and
that gcc actually uses the .gch); gcc ignores a .gch whose flags do not match and reads the
header as text, which changes nothing but the time.

The arm-neon bundles, built by the cross compiler for the emulator (aicc/runner/harness.py),
get the same: <arm_neon.h> precompiled by aarch64-linux-gnu-gcc, which gcc then reads before
model.c's own include of it (a no-op under its include guard); the runtime object shared.

Not with debug info (``-g``: `make sanitize`), whose records of the header differ.

The runtime (aicc_rt.c, ~0.06-0.08 s a bundle, half of a small bundle's build) is the same
file in every bundle of a target: ``prebuilt_rt`` compiles it once per run and flags, with the
bundle's own make rule, and puts that aicc_rt.o into each later bundle before make runs (make
then finds it up to date). Keyed by the compiler's version, the target's cflags, CFLAGS and the
bytes of aicc_rt.c and aicc_rt.h. make compiles it as ./aicc_rt.c in the bundle's directory,
so the object is byte for byte the one each bundle would build (tests/ops/test_pch.py). Cross
bundles share it the same way, keyed by their cross compiler.

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

# the intrinsics header of a target family (None: no precompiled header)
HEADERS = {"x86-": "immintrin.h", "arm-neon": "arm_neon.h"}
_cache: dict = {}


@functools.lru_cache(maxsize=None)
def _cc_version(cc: str) -> str:
    r = subprocess.run([cc, "--version"], capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else ""


def header_of(target: str) -> str | None:
    """HEADERS' header of the target (None: none)."""
    return next((h for pre, h in HEADERS.items() if target.startswith(pre)), None)


def pch_header(cc: str, target_cflags: list, cflags: str, header: str) -> Path | None:
    """aicc_pch.h (``#include <header>``) whose aicc_pch.h.gch is built with ``cc
    target_cflags cflags -fPIC`` (built once, shared by the xdist workers through an atomic
    rename); None if gcc cannot build it."""
    flags = [*target_cflags, *cflags.split(), "-fPIC"]
    text = f"#include <{header}>\n"
    key = (cc, tuple(flags), text)
    if key in _cache:
        return _cache[key]
    ver = _cc_version(cc)
    h = hashlib.sha256(json.dumps([ver, cc, flags, text]).encode()).hexdigest()[:16]
    d = Path(tempfile.gettempdir()) / f"aicc-test-pch-{h}"
    hdr, gch = d / "aicc_pch.h", d / "aicc_pch.h.gch"
    if not gch.is_file():
        d.mkdir(parents=True, exist_ok=True)
        if not hdr.is_file():
            tmp = d / f"aicc_pch.h.{os.getpid()}"
            tmp.write_text(text)
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
    """cflags plus ``-include aicc_pch.h`` for an x86 or arm-neon bundle compiled with
    explicit CFLAGS by its target's compiler; cflags unchanged otherwise."""
    if cflags is None or os.environ.get("CC") or "-g" in cflags.split():
        return cflags       # with -g (make sanitize) the debug info names the .gch
    m = json.loads((Path(bundle_dir) / "manifest.json").read_text())
    tc = m.get("toolchain", {})
    header = header_of(m.get("target", ""))
    if header is None or not tc.get("cc"):
        return cflags
    hdr = pch_header(tc["cc"], tc.get("cflags", []), cflags, header)
    return cflags if hdr is None else f"{cflags} -include {hdr}"


def _rt_key(bundle_dir: Path, cflags: str) -> str | None:
    """The cache key of the bundle's aicc_rt.o, None when it is not shared (no explicit CFLAGS,
    a CC override, debug info)."""
    if cflags is None or os.environ.get("CC") or "-g" in cflags.split():
        return None
    m = json.loads((bundle_dir / "manifest.json").read_text())
    tc = m.get("toolchain", {})
    cc = tc.get("cc")
    if not cc:
        return None
    h = hashlib.sha256(json.dumps([_cc_version(cc), cc, tc.get("cflags", []),
                                   cflags]).encode())
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
    """Make the loader (host bundles) and the emulator's harness (cross bundles) build bundles
    with the precompiled header and the prebuilt runtime."""
    from aicc import runner
    from aicc.bundle import loader
    build, program = loader.build_bundle, runner.build_program

    def fast(path, cflags=None, quiet=True):
        cflags = with_pch(path, cflags)
        prebuilt_rt(path, cflags)
        return build(path, cflags, quiet)

    def fast_program(info, target, feeds, workdir, *, cflags=None, **kw):
        cflags = with_pch(info.path, cflags)
        prebuilt_rt(info.path, cflags)
        return program(info, target, feeds, workdir, cflags=cflags, **kw)

    monkeypatch.setattr(loader, "build_bundle", fast)
    monkeypatch.setattr(runner, "build_program", fast_program)
