"""Extents: the real (unpadded) length of a padded axis as an expression of the actual dims.

An ``Ext`` is a tiny expression tree over the dynamic dims (``Ext.sym(i)``): integer
constants, ``+``, ``*`` by a constant and floor division by a positive constant. It
evaluates in Python (manifest, loader, self-checks against the bucket's static shapes) and
renders as C over ``d[i]`` (int64_t) with a floor-division helper, so the generated code
computes the same number the compiler does. Extents are clamped to [0, bucket size] where
they are used, so a formula that goes negative for tiny inputs is harmless.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Ext:
    op: str                 # "sym" | "const" | "add" | "mul" | "div"
    a: object = None        # sym index | const value | left Ext
    b: object = None        # right Ext (add) | int factor (mul) | int divisor (div)

    # -- construction (folds constants so expressions stay readable) ----------
    @staticmethod
    def sym(i: int) -> "Ext":
        return Ext("sym", int(i))

    @staticmethod
    def const(v: int) -> "Ext":
        return Ext("const", int(v))

    def __add__(self, other) -> "Ext":
        o = other if isinstance(other, Ext) else Ext.const(int(other))
        if o.op == "const" and o.a == 0:
            return self
        if self.op == "const" and o.op == "const":
            return Ext.const(self.a + o.a)
        if self.op == "add" and self.b.op == "const" and o.op == "const":
            return self.a + (self.b.a + o.a)
        return Ext("add", self, o)

    def __sub__(self, other: int) -> "Ext":
        return self + (-int(other))

    def __mul__(self, k: int) -> "Ext":
        k = int(k)
        if k == 1:
            return self
        if self.op == "const":
            return Ext.const(self.a * k)
        return Ext("mul", self, k)

    def __floordiv__(self, k: int) -> "Ext":
        k = int(k)
        if k <= 0:
            raise ValueError("extent divisor must be positive")
        if k == 1:
            return self
        if self.op == "const":
            return Ext.const(self.a // k)
        return Ext("div", self, k)

    # -- use ------------------------------------------------------------------------
    def eval(self, dims) -> int:
        if self.op == "sym":
            return int(dims[self.a])
        if self.op == "const":
            return self.a
        if self.op == "add":
            return self.a.eval(dims) + self.b.eval(dims)
        if self.op == "mul":
            return self.a.eval(dims) * self.b
        return self.a.eval(dims) // self.b

    def c(self, dims: str = "d") -> str:
        """C expression (int64_t) over the array ``dims``; floor division via aicc_fdiv."""
        if self.op == "sym":
            return f"{dims}[{self.a}]"
        if self.op == "const":
            return f"(int64_t){self.a}" if self.a >= 0 else f"(-(int64_t){-self.a})"
        if self.op == "add":
            return f"({self.a.c(dims)} + {self.b.c(dims)})"
        if self.op == "mul":
            return f"({self.a.c(dims)} * {self.b})"
        return f"aicc_fdiv({self.a.c(dims)}, {self.b})"

    def text(self, names) -> str:
        """Readable form for manifest.json and messages, e.g. ``(h + -1) // 2 + 1``."""
        if self.op == "sym":
            return names[self.a]
        if self.op == "const":
            return str(self.a)
        if self.op == "add":
            if self.b.op == "const" and self.b.a < 0:
                return f"{self.a.text(names)} - {-self.b.a}"
            return f"{self.a.text(names)} + {self.b.text(names)}"
        if self.op == "mul":
            return f"({self.a.text(names)}) * {self.b}"
        return f"({self.a.text(names)}) // {self.b}"

    def to_json(self):
        if self.op in ("sym", "const"):
            return [self.op, self.a]
        b = self.b.to_json() if isinstance(self.b, Ext) else self.b
        return [self.op, self.a.to_json(), b]

    @staticmethod
    def from_json(j) -> "Ext":
        if j[0] in ("sym", "const"):
            return Ext(j[0], int(j[1]))
        b = Ext.from_json(j[2]) if j[0] == "add" else int(j[2])
        return Ext(j[0], Ext.from_json(j[1]), b)


FDIV_C = """\
/* floor division of an extent formula by a positive constant (C's / truncates) */
static AICC_UNUSED int64_t aicc_fdiv(int64_t a, int64_t b)
{
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}"""


@dataclass(frozen=True)
class Compound:
    """A padded axis that is several axes merged (outer to inner): ``parts`` are (size,
    Ext or None for an unpadded part). The real elements are those whose every part index is
    below its extent; they are not a prefix, so only position-wise ops may carry it until a
    reshape splits it back (e.g. [seq, batch, d] -> [seq * batch, d] -> Gemm -> back)."""
    parts: tuple

    @property
    def size(self) -> int:
        n = 1
        for s, _ in self.parts:
            n *= int(s)
        return n

    def text(self, names) -> str:
        return " x ".join(f"[{e.text(names)} of {s}]" if e is not None else str(s)
                          for s, e in self.parts)

    def to_json(self):
        raise TypeError("a merged padded axis has no single extent")
