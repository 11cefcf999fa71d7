"""Armv8.1-M with the M-profile Vector Extension (Helium, MVE: Cortex-M55): 128-bit vectors of
float32 and integers in eight Q registers, and the FPU's VCVTR (isa/fpv4).

The int8 dot-product kernels have an entry (``qvdot``: kernels/qgemm/vdot.py): VMLADAVA.S8
adds the 16 products of two int8 vectors to a 32-bit general register in one instruction.
Otherwise what the description changes is what it leaves out: FPv4's ``fpu`` entry (scalar
register blocks, kernels/conv/tile_fpu.py), because GCC vectorizes the portable kernels'
arrays of 4 with MVE at -O2 (float32 DS-CNN under qemu: 6.64M instructions portable, 7.37M
with the scalar blocks). QuantizeLinear keeps VCVTR (``qround``, the same spellings as FPv4).
The spellings are ACLE's (arm_mve.h, GCC 12.2 arm-none-eabi with -mcpu=cortex-m55).
"""
from __future__ import annotations

from ..base import Isa
from ..fpv4 import ISA as FPV4

# the int8 dot kernels' data movement (kernels/qgemm/vdot.py): rows of int8 / uint8 scattered
# to a channel-last image (8 values a call: widened to 16-bit lanes, their low bytes stored by a
# VSTRB scatter with offsets j * c; uint8 as v - 128, the XOR of bit 7), and byte copies (16 a
# predicated VLDRB / VSTRB pair) and fills (newlib's memset: a byte a store)
QV_PRELUDE = """\
/* d[j * c] = x[j] (int8) for j < n, c < 8192 (isa/helium: qvdot). */
static inline void aicc_qv_scatter_s8_helium(const int8_t *restrict x, size_t n,
                                             int8_t *restrict d, size_t c)
{
    const uint16x8_t o = vmulq_n_u16(vidupq_n_u16(0u, 1), (uint16_t)c);
    size_t j = 0;
    for (; j + 8u <= n; j += 8u, x += 8, d += 8u * c)
        vstrbq_scatter_offset_s16(d, o, vldrbq_s16(x));
    if (j < n) {
        const mve_pred16_t p = vctp16q((uint32_t)(n - j));
        vstrbq_scatter_offset_p_s16(d, o, vldrbq_z_s16(x, p), p);
    }
}

/* d[j * c] = x[j] - 128 (uint8 as int8) for j < n, c < 8192 (isa/helium: qvdot). */
static inline void aicc_qv_scatter_u8_helium(const uint8_t *restrict x, size_t n,
                                             int8_t *restrict d, size_t c)
{
    const uint16x8_t o = vmulq_n_u16(vidupq_n_u16(0u, 1), (uint16_t)c);
    const uint16x8_t h = vdupq_n_u16(0x80u);
    size_t j = 0;
    for (; j + 8u <= n; j += 8u, x += 8, d += 8u * c)
        vstrbq_scatter_offset_u16((uint8_t *)d, o, veorq_u16(vldrbq_u16(x), h));
    if (j < n) {
        const mve_pred16_t p = vctp16q((uint32_t)(n - j));
        vstrbq_scatter_offset_p_u16((uint8_t *)d, o, veorq_u16(vldrbq_z_u16(x, p), h), p);
    }
}

/* d[j] = v for j < n (isa/helium: qvdot). */
static inline void aicc_qv_fill_helium(int8_t *restrict d, size_t n, int8_t v)
{
    const int8x16_t q = vdupq_n_s8(v);
    size_t j = 0;
    for (; j + 16u <= n; j += 16u, d += 16)
        vst1q_s8(d, q);
    if (j < n)
        vstrbq_p_s8(d, q, vctp8q((uint32_t)(n - j)));
}

/* d[j] = s[j] for j < n (isa/helium: qvdot). */
static inline void aicc_qv_copy_helium(const int8_t *restrict s, size_t n, int8_t *restrict d)
{
    size_t j = 0;
    for (; j + 16u <= n; j += 16u, s += 16, d += 16)
        vst1q_s8(d, vld1q_s8(s));
    if (j < n) {
        const mve_pred16_t p = vctp8q((uint32_t)(n - j));
        vstrbq_p_s8(d, vldrbq_z_s8(s, p), p);
    }
}"""

ISA = Isa(
    name="helium", family="arm", header="<arm_mve.h>", vector_bytes=16, registers=8,
    # arm_mve.h does not declare ACLE's __ssat / __usat (qround): arm_acle.h in the prelude
    prelude="#include <arm_acle.h>\n\n" + FPV4.prelude, qround=dict(FPV4.qround),
    # int8 rows dotted into int32 scalars (kernels/qgemm/vdot.py): vtype holds ``lanes`` int8;
    # load reads them from p (no alignment), loadz the first n of them (n <= lanes; zeros in
    # the other lanes, nothing read past p + n: a tail-predicated VLDRB), mac adds the lanes'
    # products of a and b to the int32 c (modulo 2^32: VMLADAVA.S8)
    qvdot=dict(vtype="int8x16_t", lanes=16, load="vld1q_s8({p})",
               loadz="vldrbq_z_s8({p}, vctp8q((uint32_t){n}))",
               mac="vmladavaq_s8({c}, {a}, {b})", prelude=QV_PRELUDE,
               scatter_s8="aicc_qv_scatter_s8_helium", scatter_u8="aicc_qv_scatter_u8_helium",
               copy="aicc_qv_copy_helium", fill="aicc_qv_fill_helium",
               # depthwise convs (kernels/qgemm/vdw.py): 4 output positions in int32 lanes
               # (dw_vtype); dw_load widens 4 int8 from p, dw_gather 4 int8 at p + o (o:
               # dw_offsets, lanes j * s), dw_mla adds v * the scalar w to a (modulo 2^32),
               # dw_store writes the first n lanes of v (predicated)
               dw_vtype="int32x4_t", dw_otype="uint32x4_t", dw_lanes=4,
               dw_load="vldrbq_s32({p})", dw_gather="vldrbq_gather_offset_s32({p}, {o})",
               dw_offsets="vmulq_n_u32(vidupq_n_u32(0u, 1), {s})", dw_dup="vdupq_n_s32({x})",
               dw_mla="vmlaq_n_s32({a}, {v}, {w})",
               dw_store="vstrwq_p_s32((int32_t *)(void *)({p}), {v}, vctp32q((uint32_t)({n})))"),
)
