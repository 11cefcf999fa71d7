"""``aicc inspect BUNDLE --size``: code, read-only data and RAM of a bundle on its target.

The bundle's objects are compiled in a scratch copy with the target's toolchain (the
bundle's own model.mk: target cflags + the Makefile's default CFLAGS unless given) and
measured with the target's ``size`` (e.g. arm-none-eabi-size):

* Berkeley ``size`` gives text (every read-only allocated section), data and bss;
* ``size -A`` names the sections: ``.rodata*``, unwind tables (``.eh_frame``,
  ``.ARM.exidx``) and the weights section count as read-only data; the rest of text is code.

flash = code + rodata + data (initial values); RAM = data + bss + the caller's arena
(MODEL_ARENA_BYTES, not in any object: the caller declares it). The report is also stored
in manifest.json under "size".
"""
from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

from .errors import AiccError, BuildError, ConfigError
from .targets import load_target

CROSS_HINT = "install the target's toolchain (make cross-toolchain; see docs/EMBEDDED.md)"
FIELDS = ("code", "rodata", "data", "bss")
# read-only data: constants, strings, and unwind tables (not instructions)
RODATA_PREFIXES = (".rodata", ".srodata", ".eh_frame", ".ARM.exidx", ".ARM.extab",
                   ".gcc_except_table")


def _tools(m: dict) -> dict:
    tc = m.get("toolchain")
    if tc:      # the bundle records the toolchain it was written for
        return {"cc": tc["cc"], "ar": tc["ar"], "size": tc["size"]}
    t = load_target(m["target"])
    return {k: t.tool(k) for k in ("cc", "ar", "size")}


def _run(cmd, cwd=None) -> str:
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        last = ((r.stderr or r.stdout).strip().splitlines() or [""])[-1]
        err = BuildError(f"{' '.join(map(str, cmd[:3]))} ... failed: {last.strip()}")
        err.detail = r.stderr
        raise err
    return r.stdout


def _berkeley(size: str, obj: Path) -> dict:
    lines = _run([size, "-B", str(obj)]).strip().splitlines()
    text, data, bss = (int(x) for x in lines[1].split()[:3])
    return {"text": text, "data": data, "bss": bss}


def _sections(size: str, obj: Path) -> dict:
    out = {}
    for ln in _run([size, "-A", str(obj)]).splitlines():
        parts = ln.split()
        if len(parts) == 3 and parts[1].isdigit() and parts[0].startswith("."):
            out[parts[0]] = out.get(parts[0], 0) + int(parts[1])
    return out


def _is_rodata(sec: str, weights_section: str) -> bool:
    return (sec.startswith(RODATA_PREFIXES) or sec == weights_section
            or sec.startswith(weights_section + "."))


def measure(bundle, cflags: str | None = None) -> dict:
    """Compile BUNDLE's objects with its target's toolchain and measure them."""
    p = Path(bundle)
    mf = p / "manifest.json"
    if not mf.is_file():
        raise AiccError(f"{p}: not an aicc bundle (no manifest.json)")
    m = json.loads(mf.read_text())
    tools = _tools(m)
    missing = [t for t in tools.values() if shutil.which(t) is None]
    if missing:
        raise ConfigError(f"target {m['target']}: {', '.join(missing)} not found; {CROSS_HINT}")
    wsec = (m.get("sections") or {}).get("weights") or ".rodata"
    name = m["name"]
    with tempfile.TemporaryDirectory(prefix="aicc-size-") as tmp:
        work = Path(tmp)
        for f in p.iterdir():
            if f.is_file() and f.suffix not in (".o", ".a", ".so"):
                shutil.copyfile(f, work / f.name)
        cmd = ["make", "-C", str(work), "--no-print-directory", f"lib{name}.a",
               f"CC={tools['cc']}", f"AR={tools['ar']}"]
        if cflags is not None:
            cmd.append(f"CFLAGS={cflags}")
        _run(cmd)
        objs = {}
        objects = [f"{name}.o", "aicc_rt.o"]
        if m.get("weights_embedded", True):
            objects.append(f"{name}_weights.o")
        for o in objects:
            b = _berkeley(tools["size"], work / o)
            ro = sum(v for k, v in _sections(tools["size"], work / o).items()
                     if _is_rodata(k, wsec))
            ro = min(ro, b["text"])
            objs[o] = {"code": b["text"] - ro, "rodata": ro, "data": b["data"], "bss": b["bss"]}
    total = {k: sum(o[k] for o in objs.values()) for k in FIELDS}
    arena = int(m["arena_bytes"])
    return {
        "target": m["target"],
        "tool": tools["size"],
        "cc": tools["cc"],
        "cflags": cflags if cflags is not None else "bundle default",
        "objects": objs,
        "total": total,
        "arena_bytes": arena,
        "flash_bytes": total["code"] + total["rodata"] + total["data"],
        "ram_bytes": total["data"] + total["bss"] + arena,
        "runtime_code_bytes": objs["aicc_rt.o"]["code"],
    }


def write_manifest_size(bundle, report: dict) -> None:
    """Store the report in BUNDLE/manifest.json under "size" (same formatting as the writer)."""
    mf = Path(bundle) / "manifest.json"
    m = json.loads(mf.read_text())
    m["size"] = report
    mf.write_text(json.dumps(m, indent=1, sort_keys=True) + "\n")


def format_report(r: dict) -> list:
    lines = [f"  size on {r['target']} ({r['tool']}, {r['cc']}, CFLAGS {r['cflags']}):",
             f"    {'object':22s} {'code':>9s} {'rodata':>9s} {'data':>7s} {'bss':>7s}"]
    for o, v in list(r["objects"].items()) + [("total", r["total"])]:
        lines.append(f"    {o:22s} " + " ".join(f"{v[k]:{w}d}" for k, w in
                                                zip(FIELDS, (9, 9, 7, 7))))
    lines.append(f"    flash {r['flash_bytes']} bytes (code + rodata + data); RAM "
                 f"{r['ram_bytes']} bytes (data + bss + arena {r['arena_bytes']})")
    lines.append(f"    runtime (aicc_rt.o) code {r['runtime_code_bytes']} bytes")
    return lines
