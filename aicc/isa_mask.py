"""Hide CPU features from the code of this process that asks CPUID after the call, so that
onnxruntime, loaded afterwards, picks the kernels of an older x86 CPU: the benchmarks compare
an ``x86-avx2`` bundle with onnxruntime's AVX2 kernels on a machine that has AVX-512.

How: Linux's CPUID faulting (``arch_prctl(ARCH_SET_CPUID, 0)``, x86-64, on CPUs and hypervisors
that offer it) makes every CPUID instruction of the thread (and of threads it starts later)
raise SIGSEGV. A handler runs the instruction with faulting briefly off, clears the feature bits
of the chosen level (the table below) and steps over it. Any other SIGSEGV goes to the handler
that was there before. Irreversible for the process; libraries that read CPUID before the call
(numpy, an onnxruntime already imported) keep what they saw, hence ``restrict`` refuses to run
once onnxruntime is loaded. XGETBV is not masked: software that finds a feature bit clear does
not use the feature, whatever the OS has enabled.
"""
from __future__ import annotations

import platform
import sys

from .errors import AiccError
from .hostc import host_lib

# CPUID feature bits, as (leaf, subleaf, register 0-3 for EAX EBX ECX EDX, bit)
_AVX512_BASE = [(7, 0, 1, b) for b in (16, 17, 28, 30, 31)]      # F DQ CD BW VL
_ZMM_STATE = [(0xD, 0, 0, b) for b in (5, 6, 7)]                  # opmask, ZMM_Hi256, Hi16_ZMM
_VNNI512 = [(7, 0, 2, 11)]                                        # AVX512_VNNI
_NEWER = ([(7, 0, 1, b) for b in (21, 26, 27)]                    # IFMA PF ER
          + [(7, 0, 2, b) for b in (1, 6, 12, 14)]                # VBMI VBMI2 BITALG VPOPCNTDQ
          + [(7, 0, 3, b) for b in (2, 3, 8, 22, 23, 24, 25)]     # 4VNNIW 4FMAPS VP2INTERSECT
          #                                                         AMX-BF16 AVX512-FP16 AMX-TILE AMX-INT8
          + [(7, 1, 0, b) for b in (4, 5, 21, 23)]                # AVX-VNNI AVX512-BF16 AMX-FP16 AVX-IFMA
          + [(7, 1, 3, b) for b in (4, 5, 10, 19)]                # AVX-VNNI-INT8 AVX-NE-CONVERT
          #                                                         AVX-VNNI-INT16 AVX10
          + [(0xD, 0, 0, b) for b in (17, 18)])                   # tile config / data state

# the features a level hides: what an older CPU of that level lacks
LEVELS = {
    "avx2": _AVX512_BASE + _ZMM_STATE + _VNNI512 + _NEWER,        # Haswell .. Zen 3
    "avx512": _VNNI512 + _NEWER,                                  # Skylake-SP
    "avx512-vnni": _NEWER,                                        # Cascade Lake
}

C_SRC = r"""
#define _GNU_SOURCE
#include <signal.h>
#include <string.h>
#include <cpuid.h>
#include <ucontext.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <asm/prctl.h>

#define NMAX 64
static unsigned clr[NMAX][3];      /* leaf, subleaf, register; bits in clrbits */
static unsigned clrbits[NMAX];
static int nclr;
static struct sigaction old_sa;
static volatile long ntrap;

static void handler(int sig, siginfo_t *si, void *ctx)
{
    greg_t *g = ((ucontext_t *)ctx)->uc_mcontext.gregs;
    const unsigned char *ip = (const unsigned char *)g[REG_RIP];
    if (ip[0] == 0x0f && ip[1] == 0xa2) {                  /* CPUID */
        unsigned r[4], leaf = (unsigned)g[REG_RAX], sub = (unsigned)g[REG_RCX];
        int i;
        syscall(SYS_arch_prctl, ARCH_SET_CPUID, 1);
        __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
        syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0);
        for (i = 0; i < nclr; ++i)
            if (clr[i][0] == leaf && clr[i][1] == sub) r[clr[i][2]] &= ~clrbits[i];
        g[REG_RAX] = r[0]; g[REG_RBX] = r[1]; g[REG_RCX] = r[2]; g[REG_RDX] = r[3];
        g[REG_RIP] += 2;
        ++ntrap;
        return;
    }
    /* a real fault: the previous handler, else its default action when this returns */
    if (old_sa.sa_flags & SA_SIGINFO) { old_sa.sa_sigaction(sig, si, ctx); return; }
    if (old_sa.sa_handler != SIG_IGN && old_sa.sa_handler != SIG_DFL) { old_sa.sa_handler(sig); return; }
    sigaction(SIGSEGV, &old_sa, NULL);
}

/* n quads (leaf, subleaf, register, mask); 0, or -1 (too many), -2 (sigaction), -3 (no faulting) */
int aicc_isa_restrict(const unsigned *q, int n)
{
    struct sigaction sa;
    int i;
    if (n > NMAX) return -1;
    for (i = 0; i < n; ++i) {
        clr[i][0] = q[4 * i]; clr[i][1] = q[4 * i + 1]; clr[i][2] = q[4 * i + 2];
        clrbits[i] = q[4 * i + 3];
    }
    nclr = n;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = handler;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, &old_sa) != 0) return -2;
    if (syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0) != 0) {
        sigaction(SIGSEGV, &old_sa, NULL);
        return -3;
    }
    return 0;
}

long aicc_isa_traps(void) { return ntrap; }

/* CPUID as this thread sees it (it traps while a restriction is on) */
void aicc_isa_cpuid(unsigned leaf, unsigned sub, unsigned *r)
{
    __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
}
"""

_state: dict = {}


def _lib():
    if "lib" not in _state:
        _state["ffi"], _state["lib"] = host_lib(
            C_SRC, "int aicc_isa_restrict(const unsigned *q, int n); long aicc_isa_traps(void);"
                   "void aicc_isa_cpuid(unsigned leaf, unsigned sub, unsigned *r);", "aiccisa")
    return _state["ffi"], _state["lib"]


def quads(level: str) -> list:
    """The level's (leaf, subleaf, register, mask) entries, one per register."""
    masks: dict = {}
    for leaf, sub, reg, bit in LEVELS[level]:
        masks[(leaf, sub, reg)] = masks.get((leaf, sub, reg), 0) | (1 << bit)
    return [(*k, m) for k, m in sorted(masks.items())]


def restrict(level: str) -> None:
    """Hide the features of ``level`` (a key of LEVELS; "native" does nothing) from CPUID for
    the rest of this process. Raises AiccError where it cannot: onnxruntime already loaded, not
    Linux x86-64, or no CPUID faulting. Calling it again with the same level is a no-op."""
    if level == "native":
        return
    if level not in LEVELS:
        raise AiccError(f"unknown ISA level {level!r}: one of native, {', '.join(LEVELS)}")
    if _state.get("level") == level:
        return
    if "level" in _state:
        raise AiccError(f"CPUID is already restricted to {_state['level']!r} in this process")
    if "onnxruntime" in sys.modules:
        raise AiccError("restricting the ISA must come before onnxruntime is loaded: it reads "
                        "the CPU features once, when it is imported")
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        raise AiccError(f"ISA restriction needs Linux on x86-64 (this is {sys.platform}, "
                        f"{platform.machine()})")
    ffi, lib = _lib()
    q = quads(level)
    st = lib.aicc_isa_restrict(ffi.new("unsigned[]", [v for e in q for v in e]), len(q))
    if st == -3:
        raise AiccError("this machine has no CPUID faulting (arch_prctl ARCH_SET_CPUID failed): "
                        "onnxruntime cannot be restricted to an older ISA here")
    if st != 0:
        raise AiccError(f"ISA restriction failed ({st})")
    _state["level"] = level


def traps() -> int:
    """CPUID instructions answered by the handler so far in this process (0: none, or no
    restriction): onnxruntime's loading adds some when it reads the masked features."""
    return int(_state["lib"].aicc_isa_traps()) if "lib" in _state else 0


def cpuid(leaf: int, sub: int = 0) -> tuple:
    """(EAX, EBX, ECX, EDX) of CPUID as this process sees it."""
    ffi, lib = _lib()
    r = ffi.new("unsigned[4]")
    lib.aicc_isa_cpuid(leaf, sub, r)
    return tuple(r)


def level_of(target_name: str) -> str:
    """The level matching a target: x86-avx2 -> avx2, x86-avx512 -> avx512, x86-avx512-vnni
    -> avx512-vnni; any other target -> native."""
    name = target_name.removeprefix("x86-")
    return name if name in LEVELS else "native"
