"""The harness: a small C program that runs a bundle on one set of inputs on its target and
prints the outputs, so that a bundle this machine cannot load (another ISA, bare metal) runs
under an emulator or on a device.

The inputs (and the weights of a --weights-file bundle) are linked into the program
(``.incbin`` of a data file), so the program needs nothing from its platform but a way to
print (runtime_c/boards/platform.h). It prints:

    aicc-status S TEXT     the status of the last run (0: AICC_OK) and its text
    aicc-out K N           output K follows: N bytes (its largest shape for dynamic bundles)
    x HEX                  up to 64 of those bytes per line
    aicc-end               the last line: output that stops before it is truncated

``reps`` runs one after the other; around each run, and with ``profile`` before and after
every step (the runtime's hook), the program calls ``aicc_harness_mark``, where an
instruction-counting emulator takes its readings (runner/count.py). ``timed`` (hosted targets:
a POSIX clock) prints each run's thread CPU time and wall time in µs:

    aicc-time CPU WALL
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import numpy as np

from ..bundle.loader import compile_error
from ..errors import AiccError
from ..ir import dtype_from_name
from ..targets import Target

BOARDS = Path(__file__).resolve().parent.parent.parent / "runtime_c" / "boards"
MARK = "aicc_harness_mark"
ALIGN = 64


class RunnerError(AiccError):
    """A runner that cannot run the program: a missing tool, a device that does not answer,
    output that is truncated or garbled."""


def _pad(n: int) -> int:
    return -n % ALIGN


def _data_file(ins, weights: bytes | None, path: Path) -> tuple:
    """Write the inputs (each at a 64-byte boundary) then the weights to ``path``; returns
    (the inputs' offsets, the weights' offset or None)."""
    offs, blob = [], bytearray()
    for a in ins:
        offs.append(len(blob))
        blob += a.tobytes() + bytes(_pad(a.nbytes))
    woff = None
    if weights is not None:
        woff = len(blob)
        blob += weights
    path.write_bytes(bytes(blob) or b"\0")
    return offs, woff


def output_bytes(info, dims: dict) -> list:
    """Bytes the program prints per output: its shape (static), its largest shape (dynamic)."""
    out = []
    for o in info.outputs:
        shape = o["max_shape"] if info.dynamic else o["shape"]
        out.append(int(np.prod(shape, dtype=np.int64)) * dtype_from_name(o["dtype"]).itemsize)
    return out


HELPERS = r"""
volatile uint32_t aicc_harness_sink;

/* where an instruction-counting emulator reads its counter; also the runtime's step hook */
void aicc_harness_mark(void *user, uint32_t step, const char *op, int after)
    __attribute__((noinline));
void aicc_harness_mark(void *user, uint32_t step, const char *op, int after)
{
    (void)user;
    (void)op;
    aicc_harness_sink += step + (uint32_t)after;
}

/* called through a volatile pointer, so that the compiler neither inlines nor clones it */
static void (*volatile mark)(void *, uint32_t, const char *, int) = aicc_harness_mark;

static char line[160];

static char *put_u32(char *p, uint32_t v)
{
    char tmp[10];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + (int)(v % 10u));
        v /= 10u;
    } while (v != 0u);
    while (n > 0) {
        *p++ = tmp[--n];
    }
    return p;
}

static void print_status(int st)
{
    char *p = line;
    memcpy(p, "aicc-status ", 12);
    p = put_u32(p + 12, (uint32_t)st);
    *p++ = ' ';
    *p = '\0';
    platform_write(line);
    platform_write(aicc_status_str(st));
    platform_write("\n");
}

static void print_bytes(uint32_t k, const unsigned char *b, uint32_t n)
{
    static const char hex[] = "0123456789abcdef";
    uint32_t i = 0u, j;
    char *p = line;
    memcpy(p, "aicc-out ", 9);
    p = put_u32(p + 9, k);
    *p++ = ' ';
    p = put_u32(p, n);
    *p++ = '\n';
    *p = '\0';
    platform_write(line);
    while (i < n) {
        p = line;
        *p++ = 'x';
        *p++ = ' ';
        for (j = 0u; j < 64u && i < n; ++j, ++i) {
            *p++ = hex[b[i] >> 4];
            *p++ = hex[b[i] & 15u];
        }
        *p++ = '\n';
        *p = '\0';
        platform_write(line);
    }
}
"""


TIMER = r"""
#include <time.h>

static int64_t clock_ns(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (int64_t)t.tv_sec * 1000000000 + (int64_t)t.tv_nsec;
}

static void print_time(int64_t cpu, int64_t wall)
{
    char *p = line;
    memcpy(p, "aicc-time ", 10);
    p = put_u32(p + 10, (uint32_t)(cpu / 1000));
    *p++ = ' ';
    p = put_u32(p, (uint32_t)(wall / 1000));
    *p++ = '\n';
    *p = '\0';
    platform_write(line);
}
"""


def harness_c(info, ins, offs, woff, dims: dict, reps: int, profile: bool,
              timed: bool = False) -> str:
    """The program's C text for bundle ``info`` (a loader.BundleInfo) on inputs ``ins``
    stored at ``offs`` (and the weights at ``woff``) of the linked data."""
    m, name, up, data = info.manifest, info.name, info.name.upper(), "aicc_harness_data"
    io = m["memory"].get("io_in_arena")
    sizes = output_bytes(info, dims)
    c = [f"/* aicc runner harness for bundle '{name}' (aicc/runner/harness.py) */",
         "#include <stdint.h>", "#include <string.h>", f'#include "{m["files"]["header"]}"',
         '#include "platform.h"', "", f"extern const unsigned char {data}[];",
         f"static unsigned char arena[{up}_ARENA_STORAGE_BYTES + 1u] {up}_ARENA_ATTR;"]
    if not io:
        c += [f"static unsigned char out{k}[{max(n, 1)}u] __attribute__((aligned(64)));"
              for k, n in enumerate(sizes)]
    c += [HELPERS, TIMER if timed else "", "int main(void)", "{"]
    if io or not offs:
        c.append("    const void *const *ins = NULL;")
    else:
        c.append("    static const void *const ins[] = {"
                 + ", ".join(f"{data} + {o}" for o in offs) + "};")
    if io or not sizes:
        c.append("    void *const *outs = NULL;")
    else:
        c.append("    static void *const outs[] = {"
                 + ", ".join(f"out{k}" for k in range(len(sizes))) + "};")
    c.append(f"    const void *weights = {'NULL' if woff is None else f'{data} + {woff}'};")
    if info.dynamic:
        c.append("    static const int64_t dims[] = {"
                 + ", ".join(str(int(dims[x["name"]])) for x in info.dynamic["dims"]) + "};")
    c += [f"    unsigned char *a = (unsigned char *){up}_ARENA_PTR(arena);", "    uint32_t r;",
          "    int st = 0;", f"    for (r = 0u; r < {int(reps)}u && st == 0; ++r) {{"]
    if io:
        c += [f"        memcpy(a + {off}, {data} + {o}, {int(x.nbytes)}u);"
              for x, o, off in zip(ins, offs, io["inputs"])]
    hook = MARK if profile else "NULL"
    args = f"weights, a, {up}_ARENA_BYTES"
    if info.dynamic:
        call = f"{name}_run_dims_hooked({args}, dims, ins, outs, {hook}, NULL)"
    elif profile:
        call = f"{name}_run_hooked({args}, ins, outs, {hook}, NULL)"
    else:
        call = f"{name}_run({args}, ins, outs)"
    if timed:
        c += ["        int64_t cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID);",
              "        int64_t wall = clock_ns(CLOCK_MONOTONIC);"]
    c += ['        mark(NULL, 0xffffffffu, "", 0);', f"        st = {call};",
          '        mark(NULL, 0xffffffffu, "", 1);']
    if timed:
        c += ["        print_time(clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu,",
              "                   clock_ns(CLOCK_MONOTONIC) - wall);"]
    c += ["    }", "    print_status(st);",
          "    if (st == 0) {"]
    for k, n in enumerate(sizes):
        src = f"a + {io['outputs'][k]}" if io else f"out{k}"
        c.append(f"        print_bytes({k}u, {src}, {n}u);")
    c += ["    }", '    platform_write("aicc-end\\n");', "    return 0;", "}", ""]
    return "\n".join(c)


DATA_S = """/* the harness's inputs and weights (aicc/runner/harness.py) */
    .section .rodata
    .balign 64
    .global aicc_harness_data
aicc_harness_data:
    .incbin "harness_data.bin"
#if defined(__linux__) && defined(__ELF__)
    .section .note.GNU-stack,"",%progbits
#endif
"""


def _run(cmd, cwd=None, what="") -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("CC", "AR", "CFLAGS", "MAKEFLAGS")}
    try:
        r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env, timeout=600)
    except FileNotFoundError:
        raise RunnerError(f"{cmd[0]} is not installed ({what}; make cross-toolchain installs "
                          "the ARM toolchains)") from None
    if r.returncode != 0:
        raise compile_error(what, r)


def build_program(info, target: Target, feeds: dict, workdir: Path, *, reps: int = 1,
                  profile: bool = False, timed: bool = False, cflags: str | None = None) -> tuple:
    """Build the harness for bundle ``info`` on ``feeds`` in ``workdir``; returns (the
    program's path, {dynamic dim: value}). ``cflags``: the CFLAGS the bundle's own files
    compile with (None: its Makefile's default)."""
    ins, dims = info.checked_inputs(feeds)
    m = info.manifest
    weights = None
    if not m["weights_embedded"]:
        weights = (info.path / m["weights_file"]).read_bytes()
    offs, woff = _data_file(ins, weights, workdir / "harness_data.bin")
    (workdir / "harness.c").write_text(harness_c(info, ins, offs, woff, dims, reps, profile, timed))
    (workdir / "harness_data.S").write_text(DATA_S)
    cc, ar = target.tool("cc"), target.tool("ar")
    bundle = info.path.resolve()
    lib = bundle / m["files"]["static_lib"]
    _run(["make", "-C", str(bundle), "--no-print-directory", lib.name, f"CC={cc}", f"AR={ar}",
          *([f"CFLAGS={cflags}"] if cflags is not None else [])],
         what=f"bundle {bundle} for target {target.name}")
    board = target.board or {"sources": ["hosted.c"], "ldflags": ["-no-pie"]}
    sources = [str(BOARDS / s) for s in board.get("sources", ())]
    ldflags = [a.replace("{boards}", str(BOARDS)) for a in board.get("ldflags", ())]
    exe = workdir / "harness.elf"
    _run([cc, *target.cflags, *target.opt_cflags, "-std=gnu99", f"-I{bundle}", f"-I{BOARDS}",
          "harness.c", "harness_data.S", *sources, str(lib), *ldflags, "-lm", "-o", str(exe)],
         cwd=workdir, what=f"the runner's harness for target {target.name}")
    return exe, dims


_LINE = re.compile(r"^(aicc-status|aicc-out|x|aicc-end)(?: (.*))?$")


def parse_output(text: str, info, dims: dict, where: str) -> dict:
    """The harness's printed outputs -> {output name: array}; a RunnerError when the text is
    truncated or garbled, an AiccError with the runtime's status when the run failed."""
    sizes = output_bytes(info, dims)
    status, cur, bufs, ended, garbled = None, None, {}, False, None
    for ln in text.splitlines():
        mt = _LINE.match(ln.strip())
        if not mt:
            continue           # what else the platform printed (a loader's warning)
        tag, rest = mt.groups()
        try:
            if tag == "aicc-status":
                code, _, status_text = rest.partition(" ")
                status = int(code)
            elif tag == "aicc-out":
                k, n = map(int, rest.split())
                cur = k
                bufs[k] = (n, bytearray())
            elif tag == "x" and cur is not None:
                bufs[cur][1].extend(bytes.fromhex(rest))
            elif tag == "aicc-end":
                ended = True
        except (ValueError, TypeError, AttributeError):
            garbled = garbled or ln
    if status is None or not ended:
        raise RunnerError(f"{where}: output truncated (no {'status' if status is None else 'end'} "
                          "line from the program)")
    if garbled is not None:
        raise RunnerError(f"{where}: garbled output line {garbled[:80]!r}")
    if status != 0:
        raise AiccError(f"bundle run failed: {status_text}")
    out = {}
    shapes = info.output_shapes(dims)
    for k, (o, n, shape) in enumerate(zip(info.outputs, sizes, shapes)):
        got = bufs.get(k)
        if got is None or got[0] != n or len(got[1]) != n:
            have = 0 if got is None else len(got[1])
            raise RunnerError(f"{where}: output {o['name']!r} truncated ({have} of {n} bytes)")
        dt = dtype_from_name(o["dtype"])
        count = int(np.prod(shape, dtype=np.int64))
        out[o["name"]] = np.frombuffer(bytes(got[1][:count * dt.itemsize]),
                                       dtype=dt).reshape(shape).copy()
    return out


def parse_times(text: str) -> list:
    """[(thread CPU s, wall s)] per run of a ``timed`` program."""
    out = []
    for ln in text.splitlines():
        if ln.startswith("aicc-time "):
            cpu, wall = map(int, ln.split()[1:3])
            out.append((cpu * 1e-6, wall * 1e-6))
    return out
