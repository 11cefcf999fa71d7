"""Register clamps of the SIMD tiles and kernels: which sides of [lo, hi] an activation
clamps (clamp_sides), the C expression of one clamped vector (clamp_expr), and the clamp of a
micro-kernel tile's accumulators from a runtime [lo, hi] (tile_clamp)."""
from __future__ import annotations

import math

from .tile import _f


def clamp_sides(lo: float, hi: float) -> tuple:
    """The kind of the clamp [lo, hi]: (lo finite, hi finite), the sides clamp_expr applies
    (Relu: (True, False), the max alone; none: (False, False))."""
    return lo != -math.inf, hi != math.inf


def clamp_expr(x: str, kind: tuple, mn: str, mx: str) -> str:
    """x clamped by the vectors vlo / vhi with the ISA's min / max (names mn, mx); kind = (lo
    finite, hi finite): only those sides (max(-inf, v) and min(+inf, v) are v, so Relu is one
    max). NaN passes either way: max / min return their second operand when one is NaN."""
    if kind[0]:
        x = f"{mx}(vlo, {x})"
    return f"{mn}(vhi, {x})" if kind[1] else x


def tile_clamp(o: list, d: dict, ind: str, accs: list, lohi: str = "lohi") -> None:
    """Clamp the accumulators to [lohi[0], lohi[1]] (a runtime pointer, non-NULL): hi = +inf
    (Relu) takes the max alone, one branch per tile (Relu: 1 instruction per vector instead of 2,
    DS-CNN on x86-avx512 -1.3%)."""
    mn, mx = d["min"], d["max"]
    xs = [x for row in accs for x in row]
    o.append(f"{ind}{{ const {d['vec']} vlo = " + _f(d["bcast"], p=lohi) + ";")
    o.append(f"{ind}  if ({lohi}[1] < HUGE_VALF) {{")
    o.append(f"{ind}    const {d['vec']} vhi = " + _f(d["bcast"], p=f"{lohi} + 1") + ";")
    o += [f"{ind}    {x} = {clamp_expr(x, (True, True), mn, mx)};" for x in xs]
    o.append(f"{ind}  }} else {{")
    o += [f"{ind}    {x} = {clamp_expr(x, (True, False), mn, mx)};" for x in xs]
    o.append(f"{ind}  }}")
    o.append(f"{ind}}}")
