"""Straight-line programs for the 1-D Winograd transforms (conv_winograd_c._transform applies
one to every row, then to every column, of a t x t patch): out = mat @ in with shared
subexpressions, fewer operations than one linear combination per output row.

F(4,3)'s B^T (points 0, +-1, 1/2, -2; conv_winograd_c.cook_toom) with a = x4 - x2 and
b = x3 - x1: 16 operations (6 FMA, 10 add / sub) instead of 20 (14 FMA); its A^T: 12 instead
of 14. Measured on AMD Zen 4: ResNet-8 ratio to onnxruntime 0.683 -> 0.659 (x86-avx512; its
16@32 F(4,3) step 24.3 -> 22.7 us), 0.743 -> 0.712 (x86-avx2). Each program is checked against its matrix in exact
arithmetic when first used (``program``), so a program can only be used for the matrix it
computes; matrices without one get one combination per row (``direct``).

Rounding: a program changes the float32 summation order of the transform (e.g. B^T row 0 is
((x0 - x2) + (x4 - x2)) + 1.5 (x3 - x1) instead of x0 - 1.5 x1 - 2 x2 + 1.5 x3 + x4 left to
right), within the F(4,3) error figures of conv_winograd.py.
"""
from __future__ import annotations

from fractions import Fraction

H = Fraction(1, 2)
PROGRAMS = {   # key: the matrix rows as tuples of Fractions; steps: (dst, [(coef, src)])
    "bt4": [("a", [(1, "x4"), (-1, "x2")]), ("b", [(1, "x3"), (-1, "x1")]),
            ("e", [(1, "x0"), (-1, "x2")]), ("e", [(1, "e"), (1, "a")]),
            ("o0", [(1, "e"), (3 * H, "b")]),
            ("s", [(1, "x2"), (1, "x3")]), ("c", [(1, "a"), (1, "b")]),
            ("o1", [(1, "c"), (3 * H, "s")]),
            ("u", [(1, "x3"), (-1, "x2")]), ("d", [(1, "a"), (-1, "b")]),
            ("o2", [(1, "d"), (3 * H, "u")]),
            ("o3", [(1, "a"), (2, "b")]), ("o4", [(1, "a"), (-H, "b")]),
            ("f", [(1, "x5"), (-1, "x3")]), ("f", [(1, "f"), (-1, "b")]),
            ("o5", [(1, "f"), (3 * H, "a")])],
    "at4": [("p", [(1, "x1"), (1, "x2")]), ("q", [(1, "x1"), (-1, "x2")]),
            ("r", [(1, "x3"), (1, "x4")]), ("o0", [(1, "x0"), (1, "p")]),
            ("o0", [(1, "o0"), (1, "r")]),
            ("o1", [(1, "q"), (H, "x3"), (-2, "x4")]),
            ("o2", [(1, "p"), (H * H, "x3"), (4, "x4")]),
            ("o3", [(1, "q"), (1, "x5")]), ("o3", [(1, "o3"), (H * H * H, "x3"), (-8, "x4")])],
}


def _evaluate(steps, n_in: int) -> dict:
    """Each variable as its coefficients over x0..x{n_in - 1} (exact)."""
    env = {f"x{i}": tuple(Fraction(int(i == k)) for k in range(n_in)) for i in range(n_in)}
    for dst, terms in steps:
        env[dst] = tuple(sum(Fraction(c) * env[s][k] for c, s in terms) for k in range(n_in))
    return env


def _key(mat) -> tuple:
    return tuple(tuple(Fraction(v) for v in row) for row in mat)


_CHECKED = {}


def program(mat):
    """The steps computing o_i = sum_s mat[i][s] x_s for mat, or None."""
    key = _key(mat)
    if key not in _CHECKED:
        _CHECKED[key] = None
        for steps in PROGRAMS.values():
            try:
                env = _evaluate(steps, len(mat[0]))
            except (KeyError, IndexError):
                continue
            if all(env.get(f"o{i}") == row for i, row in enumerate(key)):
                _CHECKED[key] = steps
                break
    return _CHECKED[key]


def direct(mat):
    """One combination per output row."""
    return [(f"o{i}", [(v, f"x{s}") for s, v in enumerate(row)]) for i, row in enumerate(mat)]


def emit(lincomb, isa: str, mat, ins: list, outs: list, tmp: str, ind: str) -> list:
    """C lines computing outs[i] = sum_s mat[i][s] ins[s] (lincomb: conv_winograd_c's);
    temporaries are named tmp + step number (each assignment a new const)."""
    steps = program(mat) or direct(mat)
    names = {f"x{i}": v for i, v in enumerate(ins)}
    o = []
    for k, (dst, terms) in enumerate(steps):
        out = outs[int(dst[1:])] if dst[0] == "o" and dst[1:].isdigit() and k == max(
            j for j, (d, _) in enumerate(steps) if d == dst) else f"{tmp}{k}"
        o.append(lincomb(isa, out, [(Fraction(c), names[s]) for c, s in terms], ind))
        names[dst] = out
    return o
