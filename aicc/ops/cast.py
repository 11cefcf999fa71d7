"""Cast and CastLike between float32/64, int8..int64, uint8..uint64 and bool, with no C
undefined (or implementation-defined) behaviour for any input value:

- float -> integer: truncation toward zero, saturated to the integer range; NaN -> 0,
  +Inf -> max, -Inf -> min (onnxruntime leaves these to the CPU; in-range values agree).
- integer -> integer: modulo 2^bits (two's complement wrap, as onnxruntime); signed
  results are formed from the unsigned bit pattern without relying on implementation-defined
  conversions.
- anything -> bool: x != 0 (so NaN -> true); bool -> anything: 0 or 1.
- float64 -> float32: IEEE rounding, overflow -> +-Inf (C99 Annex F); integer -> float: nearest.
- float16/bfloat16: through float32 (exact up-conversion; down-conversion rounds to nearest
  even, overflow -> Inf, NaN stays NaN). float64 -> half rounds twice (via float32), as
  onnxruntime does. Strings are not supported.
- 8-bit and 4-bit floats, 4-bit and 2-bit integers (one byte per element): see
  aicc/kernels/dtype/lowp.py. Floats decode exactly to float32 and encode from double with round to
  nearest even; ``saturate`` (default 1) clips out-of-range values and +-Inf to the max
  finite value, saturate=0 gives Inf/NaN per format (ml_dtypes). Integer targets wrap modulo
  2^bits (from floats: truncate first; NaN/Inf -> 0), as numpy/ml_dtypes astype. float64
  reaches the 8/4-bit floats through float32 (rounding twice), as ml_dtypes does.
  float8_e8m0fnu (a power of two): the float32 exponent rounded per ``round_mode``
  (up/down/nearest), NaN/Inf -> NaN, as onnx.numpy_helper.to_float8e8m0.
- same dtype: a memcpy.
"""
from __future__ import annotations

import numpy as np
from onnx import helper

from ..emit_c.cwriter import c_float, ctype
from ..emit_c.loops import emit_map, numel
from ..kernels.dtype import lowp
from ..kernels.dtype.half import HALF_TYPES, from_float, to_float
from ..kernels.dtype.lowp import LOWP, LOWP_FLOAT, LOWP_INT
from ..kernels.vmath import half as half_simd
from .base import Op, register
from .traits import ELEMENTWISE, HALF_NATIVE

_OK = {"float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
       "uint64", "bool", "float16", "bfloat16"} | LOWP


def _to_dtype(to) -> np.dtype:
    if isinstance(to, str):       # Cast-1 spelled the type as a string
        to = getattr(helper.TensorProto, to.upper())
    return np.dtype(helper.tensor_dtype_to_np_dtype(int(to)))


def _wrap_helper(ctx, dt: np.dtype) -> str:
    """uint64 bit pattern -> signed intN, modulo 2^N, without implementation-defined casts."""
    bits = dt.itemsize * 8
    ct = ctype(dt)
    name = f"aicc_wrap_{ct}"
    m = f"UINT64_C({(1 << bits) - 1})"
    mask = "" if bits == 64 else f"    u &= {m};\n"
    inv = "~u" if bits == 64 else f"(~u & {m})"
    ctx.helper(name, f"/* low {bits} bits of u as a two's complement {ct} */\n"
               f"static {ct} {name}(uint64_t u)\n{{\n{mask}"
               f"    if (u < UINT64_C({1 << (bits - 1)})) return ({ct})u;\n"
               f"    return ({ct})(-({ct}){inv} - 1);   /* u - 2^{bits}, in range */\n}}")
    return name


def _sat_helper(ctx, src: np.dtype, dst: np.dtype) -> str:
    """float -> integer, truncating, saturating, NaN -> 0."""
    sct, dct = ctype(src), ctype(dst)
    name = f"aicc_sat_{sct}_{dct}"
    info = np.iinfo(dst)
    lo = c_float(float(info.min), src)
    hi = c_float(float(info.max) + 1.0, src)     # 2^k: exact in float32 and float64
    mx = f"{'U' if not info.min else ''}INT{info.bits}_MAX"
    below = c_float(float(np.nextafter(src.type(float(info.max) + 1.0), src.type(0))), src)
    # x clamped to [min, the largest value below 2^k] (min / max selects: NaN -> the upper
    # bound) converts without undefined behaviour whatever x is; then selects of values fix
    # x >= 2^k and NaN, so a loop over the helper vectorizes (min, max, convert, two blends)
    ctx.helper(name, f"/* {sct} -> {dct}: truncate, saturate, NaN -> 0 */\n"
               f"static {dct} {name}({sct} x)\n{{\n"
               f"    {sct} c = x < {below} ? x : {below};\n"
               f"    c = c > {lo} ? c : {lo};\n"
               f"    const {dct} t = x >= {hi} ? {mx} : ({dct})c;\n"
               f"    return x != x ? 0 : t;\n}}")
    return name


def cast_expr(ctx, src: np.dtype, dst: np.dtype, x: str, saturate: bool = True,
              round_mode: str = "up") -> str:
    """C expression converting the C expression ``x`` of dtype src to dtype dst.
    ``saturate`` (Cast-19) only matters for 8-bit float targets, ``round_mode`` (Cast-24)
    only for float8_e8m0fnu."""
    if src.name in LOWP_FLOAT:                 # decode exactly, continue from float32
        x, src = f"{lowp.to_float(ctx, src.name)}({x})", np.dtype(np.float32)
    elif src.name in LOWP_INT:                 # sign-extend the low bits, continue as 8 bits
        x = f"{lowp.int_value(ctx, src.name)}({x})"
        src = np.dtype(np.int8 if lowp.INT_FORMATS[src.name][1] else np.uint8)
    if dst.name in LOWP_FLOAT:
        if src.kind == "b":
            x = f"({x} != 0)"
        elif src.name in HALF_TYPES:
            x = f"{to_float(ctx, src.name)}({x})"
        elif src.kind == "f" and src != np.float32:
            x = f"(float){x}"      # through float32 (double rounding), as ml_dtypes
        if dst.name == lowp.E8M0:
            return f"{lowp.e8m0_from_float(ctx, saturate, round_mode)}((float){x})"
        return f"{lowp.from_double(ctx, dst.name, saturate)}((double){x})"
    if dst.name in LOWP_INT:
        ct = ctype(dst)
        if src.kind == "b":
            return f"({ct})({x} != 0)"
        if src.name in HALF_TYPES:
            x, src = f"{to_float(ctx, src.name)}({x})", np.dtype(np.float32)
        if src.kind == "f":
            return f"{lowp.int_from_double(ctx, dst.name)}((double){x})"
        return f"{lowp.int_from_bits(ctx, dst.name)}((uint64_t){x})"
    if src.name in HALF_TYPES and dst.name in HALF_TYPES:
        return f"{from_float(ctx, dst.name)}({to_float(ctx, src.name)}({x}))"
    if src.name in HALF_TYPES:
        return cast_expr(ctx, np.dtype(np.float32), dst, f"{to_float(ctx, src.name)}({x})")
    if dst.name in HALF_TYPES:
        if src.kind == "b":
            x = f"(float)({x} != 0)"
        elif src != np.float32:
            x = f"(float){x}"
        return f"{from_float(ctx, dst.name)}({x})"
    dct = ctype(dst)
    if dst.kind == "b":
        return f"(uint8_t)({x} != 0)"
    if src.kind == "b" or dst.kind == "f":
        return f"({dct}){x}"
    if src.kind == "f":
        return f"{_sat_helper(ctx, src, dst)}({x})"
    # integer -> integer
    if dst.kind == "u" or np.can_cast(src, dst, casting="safe"):
        return f"({dct}){x}"
    return f"{_wrap_helper(ctx, dst)}((uint64_t){x})"


class _CastBase(Op):
    def dst(self, node, g) -> np.dtype:
        raise NotImplementedError

    def check(self, node, g):
        src, dst = g.dtype(node.inputs[0]), self.dst(node, g)
        for dt in (src, dst):
            if dt.name not in _OK:
                return f"cast {src.name} -> {dst.name}: {dt.name} not supported"
        return None

    def emit(self, node, ctx):
        src, dst = ctx.in_dtype(0), ctx.out_dtype(0)
        n = numel(ctx.out_shape(0))
        if n == 0:
            ctx(f"(void){ctx.out[0]};  /* empty tensor */")
            return
        if src == dst:
            ctx("/* Cast to the same dtype: a copy */")
            ctx(f"memcpy({ctx.out[0]}, {ctx.inp[0]}, {n * src.itemsize}u);")
            return
        ctx(f"/* Cast {src.name} -> {dst.name} (see aicc/ops/cast.py for edge cases) */")
        if half_simd.emit(ctx, src, dst, n):
            return
        sat = bool(self.attr(node, "saturate"))
        rm = self.attr(node, "round_mode") or "up"
        rm = rm.decode() if isinstance(rm, bytes) else str(rm)
        emit_map(ctx, n, lambda x: cast_expr(ctx, src, dst, x, sat, rm))


@register("Cast", since=1)
class Cast(_CastBase):
    traits = frozenset({ELEMENTWISE, HALF_NATIVE})
    attrs = {"to": None, "saturate": 1, "round_mode": "up"}

    def dst(self, node, g):
        return _to_dtype(node.attrs["to"])


@register("CastLike", since=15)
class CastLike(_CastBase):
    traits = frozenset({HALF_NATIVE})
    attrs = {"saturate": 1, "round_mode": "up"}

    def dst(self, node, g):
        return g.dtype(node.inputs[1])
