"""The SIMD GEMM's epilogue pieces (kernels/gemm/simd.py's driver): the tile epilogue helper
``y = act(alpha * y + beta * C)`` (scalar expression, or the activation's vector pass where
vmath/vector.py has one), the activations the micro-kernels apply in registers
(register_clamp) and float32 C literals for their bounds (flit)."""
from __future__ import annotations

import hashlib
import math

import numpy as np

from ...emit_c.cwriter import c_literal
from ..vmath.act import ACT_ATTRS, act_expr
from ..vmath.vector import array_act


def epilogue(ctx, act, params) -> str:
    """Tile epilogue helper: y = act(alpha * y + beta * C(i, j)); returns its name. An
    activation with a vector form (vmath/vector.py array_act: HardSwish, HardSigmoid, Sigmoid,
    Gelu, ...) runs as that in-place pass over each row after the affine loop (the same values:
    the scalar form's per-element branches kept GCC from vectorizing the loop, HardSwish on a
    256 x 960 tile 0.25 ms on x86-avx2, AMD EPYC)."""
    vec = None
    if act:
        p = {**ACT_ATTRS.get(act, {}), **params}
        vec = array_act(ctx, act, p)
        expr = "v" if vec else act_expr(act, p, "v", np.float32, ctx)
        tag = hashlib.sha1(f"{act}:{vec or expr}".encode()).hexdigest()[:10]
        name = f"aicc_sg_epi_{tag}" + ("v" if vec else "")
        what = f"then {act}" + (f" by {vec}" if vec else "")
    else:
        expr, name, what = "v", "aicc_sg_epi", "no activation"
    # with a vector pass, the affine loop of c == NULL runs only when alpha is not 1
    guard = "if (alpha != 1.0f)\n                " if vec else ""
    after = f"\n        {vec}(yr, nc);" if vec else ""
    code = f"""\
/* GEMM tile epilogue ({what}): Y(r, j) = act(alpha * Y(r, j) + beta * C(r, j)) for the
 * mr x nc tile at y (row stride ldy); C(r, j) = c[r*crs + j*ccs], c NULL when absent. */
static void {name}(float *restrict y, size_t ldy, size_t mr, size_t nc, float alpha,
    const float *restrict c, size_t crs, size_t ccs, float beta)
{{
    for (size_t r = 0; r < mr; ++r) {{
        float *restrict yr = y + r * ldy;
        if (c == NULL) {{
            {guard}for (size_t j = 0; j < nc; ++j) {{
                const float v = alpha * yr[j];
                yr[j] = {expr};
            }}
        }} else if (ccs == 1u) {{
            const float *restrict cr = c + r * crs;
            for (size_t j = 0; j < nc; ++j) {{
                const float v = alpha * yr[j] + beta * cr[j];
                yr[j] = {expr};
            }}
        }} else {{
            const float cv = beta * c[r * crs];
            for (size_t j = 0; j < nc; ++j) {{
                const float v = alpha * yr[j] + cv;
                yr[j] = {expr};
            }}
        }}{after}
    }}
}}"""
    ctx.helper(f"gemm_simd.3.{name}", code)
    return name


def register_clamp(act, params):
    """(lo, hi) when the activation is a clamp the kernels apply in registers (none, Relu,
    Clip), else None."""
    if act is None:
        return -math.inf, math.inf
    if act == "Relu":
        return 0.0, math.inf
    if act == "Clip":
        lo, hi = params.get("min"), params.get("max")
        return (-math.inf if lo is None else float(lo)), (math.inf if hi is None else float(hi))
    return None


def flit(v: float) -> str:
    """A float32 C literal; +-inf as +-HUGE_VALF."""
    if v == math.inf:
        return "HUGE_VALF"
    if v == -math.inf:
        return "-HUGE_VALF"
    return c_literal(v, "float32")
