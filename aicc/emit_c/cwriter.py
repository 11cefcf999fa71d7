"""Small helpers for writing readable C99: types, literals, identifiers, indentation."""
from __future__ import annotations

import math
import re

import numpy as np

C_TYPES = {
    "float32": "float", "float64": "double",
    "int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t",
    "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t",
    "bool": "uint8_t", "float16": "uint16_t", "bfloat16": "uint16_t",
    # low-precision types, one byte per element (codes; see aicc/kernels/dtype/lowp.py)
    "float8_e4m3fn": "uint8_t", "float8_e4m3fnuz": "uint8_t", "float8_e5m2": "uint8_t",
    "float8_e5m2fnuz": "uint8_t", "float4_e2m1fn": "uint8_t", "float8_e8m0fnu": "uint8_t",
    "int4": "int8_t", "int2": "int8_t", "uint4": "uint8_t", "uint2": "uint8_t",
}

C_KEYWORDS = set("""auto break case char const continue default do double else enum extern
float for goto if inline int long register restrict return short signed sizeof static struct
switch typedef union unsigned void volatile while _Bool _Complex _Imaginary main""".split())


def ctype(dtype) -> str:
    name = np.dtype(dtype).name
    if name not in C_TYPES:
        raise KeyError(f"no C type for dtype {name}")
    return C_TYPES[name]


def dtype_tag(dtype) -> str:
    """Short dtype tag for C helper names: f32, f64, i8, u16, b8, ..."""
    dt = np.dtype(dtype)
    return {"f": "f", "i": "i", "u": "u", "b": "b"}[dt.kind] + str(dt.itemsize * 8)


def c_float(v, dtype="float32") -> str:
    """A C literal that reproduces the value exactly (round-trip digits)."""
    v = float(v)
    f = np.dtype(dtype) == np.float32
    if math.isnan(v):
        return "NAN" if f else "((double)NAN)"
    if math.isinf(v):
        s = "INFINITY" if f else "((double)INFINITY)"
        return s if v > 0 else f"(-{s})"
    if f:
        s = repr(float(np.float32(v)))
        return _fix_float_literal(s) + "f"
    return _fix_float_literal(repr(v))


def _fix_float_literal(s: str) -> str:
    if "e" not in s and "." not in s and "inf" not in s:
        s += ".0"
    return s


def c_int(v, dtype="int64") -> str:
    v = int(v)
    name = np.dtype(dtype).name
    if name == "int64":
        if v == -(2 ** 63):
            return "INT64_MIN"
        return f"INT64_C({v})"
    if name == "uint64":
        return f"UINT64_C({v})"
    if name == "int32" and v == -(2 ** 31):
        return "INT32_MIN"
    if name.startswith("uint"):
        return f"{v}u"
    return str(v)


def c_literal(v, dtype) -> str:
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return c_float(v, dt)
    if dt.kind == "b":
        return "1" if v else "0"
    return c_int(v, dt)


def sanitize(hint: str, maxlen: int = 24) -> str:
    """An ASCII identifier fragment from any string (use with an index for uniqueness)."""
    s = re.sub(r"[^A-Za-z0-9]+", "_", str(hint)).strip("_").lower()[:maxlen].strip("_")
    return s or "x"


class CWriter:
    def __init__(self) -> None:
        self.lines: list = []
        self.level = 0

    def __call__(self, line: str = "") -> "CWriter":
        for ln in line.split("\n") if line else [""]:
            self.lines.append(("    " * self.level + ln) if ln else "")
        return self

    def block(self, head: str):
        w = self

        class _B:
            def __enter__(self_inner):
                w(head + " {")
                w.level += 1

            def __exit__(self_inner, *exc):
                w.level -= 1
                w("}")
        return _B()

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"
