"""neon: float32 Add / Sub / Mul / Div of two same-shape operands, or of one and a single
value (ops/elementwise.py Binary), 16 values per step: LD1 of 4 registers per operand, 4
vector operations, ST1 of 4 (the C loop GCC vectorizes takes 7 instructions per 4 values).
The same IEEE operations as the scalar expression, element by element: the same bits."""
from __future__ import annotations

import numpy as np

OPS = {"Add": "vaddq_f32", "Sub": "vsubq_f32", "Mul": "vmulq_f32", "Div": "vdivq_f32"}
SCALAR = {"Add": "+", "Sub": "-", "Mul": "*", "Div": "/"}


def emit(ctx, op: str, a: str, b: str, out_shape, shape_a, shape_b) -> bool:
    """Write the step's loop when the shapes are one of those forms; False otherwise."""
    n = int(np.prod(out_shape, dtype=np.int64))
    na, nb = (int(np.prod(s, dtype=np.int64)) for s in (shape_a, shape_b))
    if op not in OPS or n < 16 or not ({na, nb} <= {n, 1}) or (na, nb) == (1, 1):
        return False
    va = f"vld1q_dup_f32({a})" if na == 1 else None
    vb = f"vld1q_dup_f32({b})" if nb == 1 else None
    sa = f"{a}[0]" if na == 1 else f"{a}[i]"
    sb = f"{b}[0]" if nb == 1 else f"{b}[i]"
    y = ctx.out[0]
    ctx("{")
    if va:
        ctx(f"    const float32x4_t va = {va};")
    if vb:
        ctx(f"    const float32x4_t vb = {vb};")
    n16 = n - n % 16
    ctx(f"    for (size_t i = 0; i < {n16}u; i += 16u) {{")
    if not va:
        ctx(f"        const float32x4x4_t x = vld1q_f32_x4({a} + i);")
    if not vb:
        ctx(f"        const float32x4x4_t w = vld1q_f32_x4({b} + i);")
    ctx("        float32x4x4_t z;")
    for q in range(4):
        xa = "va" if va else f"x.val[{q}]"
        xb = "vb" if vb else f"w.val[{q}]"
        ctx(f"        z.val[{q}] = {OPS[op]}({xa}, {xb});")
    ctx(f"        vst1q_f32_x4({y} + i, z);")
    ctx("    }")
    if n16 < n:        # (a loop that cannot run: GCC -O3 warns, aggressive-loop-optimizations)
        ctx(f"    for (size_t i = {n16}u; i < {n}u; ++i)")
        ctx(f"        {y}[i] = {sa} {SCALAR[op]} {sb};")
    ctx("}")
    return True
