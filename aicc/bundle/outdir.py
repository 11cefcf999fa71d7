"""The output folder of `aicc build -o DIR`: what may be written there, and the atomic swap.

aicc never deletes anything it did not write. It writes into a folder that does not exist yet,
an empty folder, or a folder that holds an earlier bundle and nothing else (the files that
bundle's manifest names, and what its Makefile builds from them). It refuses, before compiling
anything, a symbolic link, a file, the root folder, the home folder, the current folder or any
parent of it, and any other non-empty folder.

A new bundle is written under a hidden temporary name beside DIR and swapped in by rename while
holding a lock on DIR's parent folder, so concurrent builds into one folder each leave one
complete bundle. The earlier bundle's files are then removed one by one by name.
"""
from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import pwd
import tempfile
from contextlib import contextmanager
from pathlib import Path

from ..errors import OutputError

RUNTIME_FILES = ("aicc_rt.h", "aicc_rt.c")


def bundle_files(name: str) -> set:
    """Every file name a bundle called NAME holds: what aicc writes, and what the bundle's
    Makefile (or model.mk) builds in the folder."""
    return {f"{name}.h", f"{name}.c", f"{name}_weights.S", "weights.bin", *RUNTIME_FILES,
            "model.mk", "Makefile", "manifest.json",
            f"{name}.o", "aicc_rt.o", f"{name}_weights.o", f"lib{name}.a", f"lib{name}.so"}


def _homes() -> set:
    homes = set()
    for h in (os.environ.get("HOME"), _pw_home()):
        if h:
            homes.add(Path(h).resolve())
    return homes


def _pw_home():
    try:
        return pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        return None


def _old_bundle_name(out: Path):
    """The name of the bundle in OUT, or None when OUT holds no aicc manifest."""
    try:
        m = json.loads((out / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    if isinstance(m, dict) and "aicc_version" in m and isinstance(m.get("name"), str):
        return m["name"]
    return None


def _list(names, limit=5) -> str:
    names = sorted(names)
    shown = ", ".join(repr(n) for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def check_out(out) -> Path:
    """Raise OutputError (exit 2, one line) when OUT is not a folder aicc may write a bundle
    to; returns OUT. Called before compiling and again, under the lock, before the swap."""
    out = Path(out)
    if os.path.islink(out):
        raise OutputError(f"output folder {out}: is a symbolic link; give the folder itself")
    if out.exists() and not out.is_dir():
        raise OutputError(f"output folder {out}: is a file, not a folder")
    real = out.resolve()
    if real == Path(real.anchor):
        raise OutputError(f"output folder {out}: is the root folder")
    if real in _homes():
        raise OutputError(f"output folder {out}: is the home folder")
    cwd = Path.cwd().resolve()
    if cwd == real or real in cwd.parents:
        raise OutputError(f"output folder {out}: is the current folder or a parent of it")
    if not out.is_dir():
        return out
    present = {p.name for p in out.iterdir()}
    if not present:
        return out
    name = _old_bundle_name(out)
    if name is None:
        raise OutputError(f"output folder {out}: is not empty and holds no aicc bundle (no "
                          "manifest.json); aicc writes only to a new or empty folder or over "
                          "an earlier bundle")
    own = bundle_files(name)
    foreign = {n for n in present
               if n not in own or not (out / n).is_file() or (out / n).is_symlink()}
    if foreign:
        raise OutputError(f"output folder {out}: holds an earlier bundle and files aicc did not "
                          f"write ({_list(foreign)}); move them or choose another folder")
    return out


@contextmanager
def _locked(folder: Path):
    """An exclusive lock on FOLDER (flock on the folder itself: no lock file is left behind)."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two folders atomically (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _remove_bundle(folder: Path, name: str) -> None:
    """Remove an earlier bundle's own files from FOLDER, then FOLDER if it is left empty."""
    for f in bundle_files(name):
        p = folder / f
        if p.is_file() and not p.is_symlink():
            p.unlink()
    try:
        folder.rmdir()
    except OSError:
        pass        # something aicc did not write appeared meanwhile: left where it is


def new_tmp(out: Path) -> Path:
    """A fresh hidden folder beside OUT to write the bundle into."""
    out.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))


def install(tmp: Path, out: Path) -> None:
    """Put the finished bundle TMP at OUT, replacing an earlier bundle there."""
    with _locked(out.parent):
        check_out(out)
        old = _old_bundle_name(out) if out.is_dir() else None
        if old is None:
            os.replace(tmp, out)          # OUT is missing or an empty folder
            return
        if not _exchange(tmp, out):       # two renames: OUT is briefly missing
            aside = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
            os.replace(out, aside)        # over the empty folder
            os.replace(tmp, out)
            tmp = aside
        _remove_bundle(tmp, old)          # TMP now holds the earlier bundle
