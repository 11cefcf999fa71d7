"""Intel AMX tiles for the integer GEMMs' quad form (target x86-avx512-amx: Sapphire Rapids
and later Xeons). ``tdpbusd`` multiplies a 16 x 64 tile of uint8 by a 64 x 16 tile of int8
(stored as 16 rows of 16 columns x 4 k) into a 16 x 16 tile of int32 sums: 16384 products per
instruction against vpdpbusd's 64 (this Xeon: 3.7 T products/s on one core, against 0.41).

The operands are the quad form's (kernels/qgemm/simd.py): A rows of uint8 (activations, x + 128 for
int8, zeros past K), B = w - wzp as int8 in panels of 32 columns, row kg of a panel holding
columns 0-15 x 4 k then 16-31 x 4 k. A B tile (16 k groups x 16 columns) is therefore 16 rows
128 bytes apart in a panel, with no repacking: the AMX path only needs K padded to a multiple
of 64 (whole k tiles; zeros on both sides add nothing) and A's rows padded to whole tiles of 16
(tile rows past M are read from the scratch and their sums are never used). The sums are the
same integers as the vector forms' (exact products, int32 adds that wrap modulo 2^32; tdpbusd
does not saturate), so the outputs match the other forms bit for bit.

The kernel: per 32-column panel, 2 x 2 accumulator tiles per 32 rows over all of K
(tiles 0-3), A tiles 4-5, B tiles 6-7, and 1 x 2 tiles for a last 16 rows (16 output
channels: half the products of a zero-padded 2 x 2 block); the int32 tiles go to the block
buffer that qrequant_simd's output stage reads, as from the vector kernels.

Linux gives a process the AMX register state only on request (arch_prctl
ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, Linux 5.16 and later); a tile instruction before
that raises SIGILL. ``aicc_amx_ready`` asks once per process (a raw syscall: no headers beyond
C99's) and the bundle runs the VNNI kernel instead when the request fails, on other systems,
or when compiled with -DAICC_NO_AMX. Each AMX step configures the tiles and releases them at
its end, so the large tile state is not saved and restored on context switches between runs.
"""
from __future__ import annotations

# rows of A below which the VNNI kernel is used: a tile always multiplies 16 rows. QLinearMatMul
# M x 512 x 512 on this Xeon, us, VNNI / AMX: M = 1 4.7 / 5.4, 2 5.6 / 5.4, 4 6.6 / 5.3,
# 8 11.1 / 6.6, 16 22.7 / 8.1
MIN_ROWS = 3
K_TILE = 64          # bytes of k per A tile row / k values per B tile
ROW_TILE = 16        # A rows per tile: A and C are padded to whole tiles

READY = """\
/* 1 when this process may use the AMX tiles. Linux: the kernel's permission is requested once
 * (arch_prctl(ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18), syscall 158; 0 on
 * success, Linux 5.16+). Elsewhere, or with -DAICC_NO_AMX: 0, and the vector kernels run.
 * Two threads racing on the first call both make the (idempotent) request. */
static int aicc_amx_ready(void)
{
#if defined(__linux__) && defined(__x86_64__) && !defined(AICC_NO_AMX)
    static volatile int state = 0;      /* 0 not asked, 1 granted, -1 refused */
    if (state == 0) {
        long r;
        __asm__ __volatile__("syscall" : "=a"(r) : "0"(158L), "D"(0x1023L), "S"(18L)
                             : "rcx", "r11", "memory");
        state = r == 0 ? 1 : -1;
    }
    return state == 1;
#else
    return 0;
#endif
}"""

def _cfg(kr: int) -> str:
    """The palette-1 tile configuration for k tiles of kr groups of 4 (64 bytes): tiles 0-3 16
    rows x 16 int32, 4-5 16 rows x 4 kr bytes (A), 6-7 kr rows x 64 bytes (B)."""
    b = [1] + [0] * 15 + [64, 0] * 4 + [4 * kr, 0] * 2 + [64, 0] * 2 + [0] * 16 \
        + [16] * 6 + [kr] * 2 + [0] * 8
    rows = [", ".join(map(str, b[i:i + 16])) for i in range(0, 64, 16)]
    return (f"static const unsigned char aicc_amx_cfg{kr}[64] = {{\n    "
            + ",\n    ".join(rows) + "};")


def _kernel(name: str, params: str, kr: int, panel: str, a_at: str, b_at: str, b_ld: str,
            dp: str, doc: str) -> str:
    """C text of an AMX kernel: C[m x np * 32] (row stride ldc int32) = A[m x 4 kgn] (rows
    lda = 4 kgn bytes apart, padded to whole 16-row tiles) x np panels of 32 columns; per panel
    (``panel``: its pointer declaration) 2 x 2 tiles of 32 rows while more than 16 remain, then
    1 x 2 for a last 16 (rows past m: garbage in, garbage out). a_at(r, kg) / b_at(kg): the A
    tile of rows r.. and the B tile at k group kg (b_ld bytes between its rows); dp: the tile
    dot product; kr: k groups per tile."""
    def block(two: bool) -> list:
        acc = range(4 if two else 2)
        L = [f"int32_t *c0 = c + r * ldc + cp{', *c1 = c0 + 16u * ldc' if two else ''};",
             *[f"_tile_zero({t});" for t in acc],
             f"for (size_t kg = 0; kg < kgn; kg += {kr}u) {{",
             f"    _tile_loadd(4, {a_at.format(r='r', kg='kg')}, lda);",
             f"    _tile_loadd(6, {b_at.format(kg='kg')}, {b_ld});",
             f"    _tile_loadd(7, {b_at.format(kg='kg')} + 64u, {b_ld});",
             f"    {dp}(0, 4, 6);",
             f"    {dp}(1, 4, 7);"]
        if two:
            L += [f"    _tile_loadd(5, {a_at.format(r='r + 16u', kg='kg')}, lda);",
                  f"    {dp}(2, 5, 6);",
                  f"    {dp}(3, 5, 7);"]
        L.append("}")
        L += [f"_tile_stored({t}, c{t // 2}{' + 16' if t % 2 else ''}, ldc * 4u);" for t in acc]
        return ["            " + ln for ln in L]
    return "\n".join([
        f"/* {doc} */",
        f"static void {name}({params})", "{",
        "    const size_t lda = 4u * kgn;",
        f"    _tile_loadconfig(aicc_amx_cfg{kr});",
        "    for (size_t p = 0; p < np_; ++p) {",
        f"        {panel}",
        "        const size_t cp = p * 32u;",
        "        size_t r = 0;",
        "        for (; r + 16u < m; r += 32u) {", *block(True), "        }",
        "        if (r < m) {", *block(False), "        }",
        "    }",
        "    _tile_release();", "}"])


def available(ctx) -> bool:
    """The target has AMX-INT8 (x86-avx512-amx)."""
    return "amx_int8" in ctx.target.cpu_flags


def k_groups(kgn: int) -> int:
    """k groups of 4 padded to whole AMX k tiles."""
    return -(-kgn // (K_TILE // 4)) * (K_TILE // 4)


def rows_padded(m: int) -> int:
    return -(-m // ROW_TILE) * ROW_TILE


def _common(ctx, kr: int) -> None:
    ctx.helper("qlinear.4.3.amx_ready", READY)
    ctx.helper(f"qlinear.4.4.amx_cfg{kr:02d}", _cfg(kr))


def gemm(ctx) -> str:
    """Emit the MatMul's AMX helpers; returns the GEMM's name (call it only when
    aicc_amx_ready())."""
    _common(ctx, 16)
    ctx.helper("qlinear.4.5.amx_gemm", _kernel(
        "aicc_qgemm_amx", "size_t m, size_t kgn, size_t np_, const uint8_t *a,\n"
        "                           const uint8_t *bp, int32_t *c, size_t ldc", 16,
        "const uint8_t *pb = bp + p * kgn * 128u;", "a + ({r}) * lda + 4u * {kg}",
        "pb + {kg} * 128u", "128", "_tile_dpbusd",
        "MatMul on AMX tiles: A the activation rows (uint8), B np quad-form panels (panel p at\n"
        " * bp + p * kgn * 128, int8); kgn % 16 == 0."))
    return "aicc_qgemm_amx"


def conv_chunk(cgn: int) -> int:
    """Channel groups per k tile of the implicit conv (a tap's groups are cs bytes apart, the
    next tap's are elsewhere): the largest divisor of cgn up to 16, or 0 when that is below 4
    (fewer than 16 k per tile instruction: no faster than the VNNI kernel)."""
    kr = max(d for d in range(1, 17) if cgn % d == 0)
    return kr if kr >= 4 else 0


def conv(ctx, kr: int) -> str:
    """Emit the implicit conv's AMX kernel for k tiles of kr channel groups; returns its name."""
    _common(ctx, kr)
    name = f"aicc_qconv_amx_k{kr}"
    ctx.helper(f"qlinear.4.5.amx_conv{kr:02d}", _kernel(
        name, "size_t m, size_t kgn, size_t np_, const uint8_t *w,\n"
        "                               const uint8_t *x, const int32_t *off, size_t cs, "
        "int32_t *c,\n                               size_t ldc", kr,
        "const uint8_t *xp = x + p * 128u;", "w + ({r}) * lda + 4u * {kg}", "xp + off[{kg}]",
        "cs", "_tile_dpbsud",
        "The implicit conv GEMM (kernels/qgemm/conv.py, quad form qb) on AMX tiles: A the weights\n"
        " * (int8 w - wzp, zero rows past the channels), B the padded input (unsigned bytes, 4\n"
        " * channels interleaved): k group (tap t, channel group c), kg = t cgn + c, of positions\n"
        " * 32 p.. is the run at x + off[kg] + 128 p, and consecutive channel groups are cs bytes\n"
        f" * apart, so a tap's cgn groups are cgn / {kr} tiles of {kr} rows."))
    return name
