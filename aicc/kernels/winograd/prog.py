"""The Winograd matrices of F(m, 3) (``cook_toom``, from the interpolation points) and
straight-line programs for the 1-D transforms (conv_winograd_c._transform applies one to every
row, then to every column, of a t x t patch): out = mat @ in with shared subexpressions, fewer
operations than one linear combination per output row.

F(4,3)'s B^T (points 0, +-1, 1/2, -2; cook_toom below) with a = x4 - x2 and
b = x3 - x1: 16 operations (6 FMA, 10 add / sub) instead of 20 (14 FMA); its A^T: 12 instead of
14. Measured on AMD Zen 4: ResNet-8 ratio to onnxruntime 0.683 -> 0.659 (x86-avx512; its 16@32
F(4,3) step 24.3 -> 22.7 us), 0.743 -> 0.712 (x86-avx2). Each program is checked against its
matrix in exact arithmetic when first used (``program``), so a program can only be used for the
matrix it
computes; matrices without one get one combination per row (``direct``).

Rounding: a program changes the float32 summation order of the transform (e.g. B^T row 0 is
((x0 - x2) + (x4 - x2)) + 1.5 (x3 - x1) instead of x0 - 1.5 x1 - 2 x2 + 1.5 x3 + x4 left to
right), within the F(4,3) error figures of kernels/winograd/simd.py.
"""
from __future__ import annotations

from fractions import Fraction

POINTS = {   # interpolation points (plus infinity) of F(m, 3)
    2: (0, 1, -1),
    4: (0, 1, -1, Fraction(1, 2), -2),    # ~3x less error than the usual 0, +-1, +-2
}


def _polymul(p, q):
    out = [Fraction(0)] * (len(p) + len(q) - 1)
    for i, a in enumerate(p):
        for j, b in enumerate(q):
            out[i + j] += a * b
    return out


def cook_toom(m: int, r: int = 3) -> tuple:
    """(B^T [t][t], G [t][r], A^T [m][t]) of F(m, r), t = m + r - 1, as Fractions, with
    y = A^T [(G g) * (B^T d)] the correlation y[i] = sum_k d[i + k] g[k] (the fractions sit
    in G, which is applied at compile time)."""
    a = [Fraction(p) for p in POINTS[m]]
    t = m + r - 1
    n = t - 1
    f = []
    for i in range(n):
        v = Fraction(1)
        for k in range(n):
            if k != i:
                v *= a[i] - a[k]
        f.append(v)
    lx = []                                 # prod_{k != i} (x - a_k), coefficients
    for i in range(n):
        p = [Fraction(1)]
        for k in range(n):
            if k != i:
                p = _polymul(p, [-a[k], Fraction(1)])
        lx.append(p)
    fs = f + [Fraction(1)]
    if fs[0] < 0:
        fs[0] = -fs[0]
    at = [[a[j] ** i if j < n else Fraction(int(i == m - 1)) for j in range(t)]
          for i in range(m)]
    g = [[a[i] ** j / fs[i] if i < n else Fraction(int(j == r - 1)) for j in range(r)]
         for i in range(t)]
    tm = [[Fraction(int(i == j)) for j in range(n)] + [-a[i] ** n] for i in range(n)]
    bt_rows = [[sum(lx[k][i] / f[k] * tm[k][j] for k in range(n)) for j in range(n + 1)]
               for i in range(n)]            # L @ T: n x t
    b = bt_rows + [[Fraction(int(j == t - 1)) for j in range(t)]]
    bt = [[fs[i] * b[j][i] for j in range(t)] for i in range(t)]
    return bt, g, at


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
