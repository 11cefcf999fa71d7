"""QuantizeLinear, DequantizeLinear (opset 10-28) and DynamicQuantizeLinear (opset 11).

Granularity follows the shape of the scale (the zero point has the same shape):
per-tensor (one element), per-axis (1-D of length x.shape[axis]) and blocked (same rank as x,
ceil(x.shape[axis] / block_size) along ``axis``). Scales and zero points may be constants
(per-tensor ones are baked in as literals) or run-time tensors (read through their pointer).

Quantized types: uint8, int8, uint16, int16 (and int32 for DequantizeLinear); int4, uint4,
int2, uint2, the 8-bit floats and float4_e2m1fn (one byte per element, see aicc/kernels/dtype/lowp.py).
For the 8-bit floats QuantizeLinear is ``y = cast(x / scale)`` rounded to nearest even with
the ``saturate`` attribute (1: clip to the max finite value, +-Inf too; 0: overflow gives
Inf/NaN per format), the zero point (zero by the spec) ignored, as onnx.reference; for
float4_e2m1fn ``y = cast(x / scale + zp)``, always saturating. DequantizeLinear of a float
type computes ``float32(x) * scale`` (the zero point is ignored, as onnx.reference).

QuantizeLinear: ``q = saturate(rint(x / scale) + zero_point)``. The division is done in the
``precision`` attribute type when given, else in numpy's promotion of x and scale (float32
for float32 x and scale; float64 for int32 x), as in onnx.reference; ``rint`` rounds half to
even (default floating-point environment). Out-of-range results saturate to the type range;
a NaN quotient gives the zero point (onnxruntime leaves NaN to the CPU's float->int
conversion); +-Inf saturates. A zero scale gives +-Inf or NaN quotients, handled the same way.

DequantizeLinear: ``y = (x - zero_point) * scale``. The difference is exact (integer
arithmetic, then float32; int32 with a zero point uses float64, as onnx.reference does), the
product is rounded once in the promoted type of float32 and the scale, then converted to the
output type. NaN/Inf scales propagate (IEEE).

DynamicQuantizeLinear (uint8 only, as in the spec): float32 min/max over x (NaN elements are
ignored by the min/max and quantize to the zero point), range extended to include 0,
``scale = (max - min) / 255`` (1 when max == min, as onnxruntime; onnx.reference gives
1 / 255), ``zp = rint(clamp(-min / scale, 0, 255))``; all steps in float32 in the order of
onnx.reference. An empty x gives scale 1 and zero point 0.
"""
from __future__ import annotations

import numpy as np
from onnx import helper

from ..emit_c.cwriter import c_float, c_int, ctype
from ..kernels.dtype import lowp
from ..kernels.dtype.lowp import E8M0, LOWP_INT
from ..kernels.dtype.lowp import LOWP_FLOAT as _LF
from ..kernels.qgemm import quantize as quantize_simd
from ..kernels.vmath.portable import sel
from .base import Op, register
from .traits import ELEMENTWISE, LOWP_NATIVE

LOWP_FLOAT = _LF - {E8M0}     # float8_e8m0fnu is not a quantized type
from ..emit_c.loops import numel

QTYPES = {"uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535),
          "int16": (-32768, 32767), "int4": (-8, 7), "uint4": (0, 15), "int2": (-2, 1),
          "uint2": (0, 3)}
DQ_TYPES = set(QTYPES) | {"int32"} | LOWP_FLOAT
Q_TYPES = set(QTYPES) | LOWP_FLOAT
FLOATS = ("float32", "float64")


def _onnx_dtype(code) -> np.dtype | None:
    if not code:
        return None
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(int(code)))
    except Exception:  # noqa: BLE001 - 8-bit floats etc. without a numpy dtype
        return None


def _tname(code) -> str:
    try:
        return helper.tensor_dtype_to_string(int(code)).replace("TensorProto.", "").lower()
    except Exception:  # noqa: BLE001
        return str(code)


class Granularity:
    """Where the scale of element (o, a, i) is, x viewed as [outer, D, inner] around axis."""

    def __init__(self, x_shape, s_shape, axis, block):
        r = len(x_shape)
        ns = numel(s_shape)
        self.outer = self.d = 1
        self.inner = numel(x_shape)
        self.mode = "tensor"
        if ns == 1:                 # one scale: per-tensor whatever its rank (as onnx.reference)
            return
        if r == 0:
            raise ValueError(f"scale of shape {list(s_shape)} for a scalar input")
        a = axis + r if axis < 0 else axis
        if not 0 <= a < r:
            raise ValueError(f"axis {axis} out of range for rank {r}")
        self.outer, self.d, self.inner = numel(x_shape[:a]), int(x_shape[a]), numel(x_shape[a + 1:])
        if not block:
            if len(s_shape) != 1 or s_shape[0] != x_shape[a]:
                raise ValueError(f"per-axis scale of shape {list(s_shape)} for axis {a} of "
                                 f"{list(x_shape)}")
            self.mode = "axis"
            return
        if block < 0:
            raise ValueError(f"block_size {block}")
        want = list(x_shape)
        want[a] = -(-int(x_shape[a]) // block)
        if list(s_shape) != want:
            raise ValueError(f"blocked scale of shape {list(s_shape)}, expected {want} "
                             f"(axis {a}, block_size {block})")
        self.mode, self.block, self.s = "block", int(block), want[a]

    def index(self) -> str:
        """C index of the scale for loop variables o, a, i."""
        if self.mode == "tensor":
            return "0"
        if self.mode == "axis":
            return "a"
        return f"(o * {self.s}u + a / {self.block}u) * {self.inner}u + i"


def _granularity(op, node, g, k_scale):
    block = int(op.attr(node, "block_size") or 0)
    return Granularity(tuple(g.shape(node.inputs[0])), tuple(g.shape(node.inputs[k_scale])),
                       int(op.attr(node, "axis")), block)


def _scalar(ctx, k, dt) -> str:
    """C expression of element 0 of input k: a literal when constant, else a load (the value
    of a low-precision type: float for 8/4-bit floats, int8/uint8 for 4/2-bit integers)."""
    dt = np.dtype(dt)
    v = ctx.in_const(k)
    if v is not None:
        v = np.asarray(v).reshape(-1)[0]
        if dt.name in LOWP_FLOAT:
            return c_float(float(v), np.float32)
        if dt.name in LOWP_INT:
            return str(int(v))
        return c_float(v, dt) if dt.kind == "f" else c_int(v, dt)
    return _load(ctx, k, dt, "0")


def _load(ctx, k, dt, idx) -> str:
    """C expression of the value of element ``idx`` of input k (decoding low-precision types)."""
    x = f"{ctx.inp[k]}[{idx}]"
    if dt.name in LOWP_FLOAT:
        return f"{lowp.to_float(ctx, dt.name)}({x})"
    if dt.name in LOWP_INT:
        return f"{lowp.int_value(ctx, dt.name)}({x})"
    return x


def _emit_loops(ctx, gr, body) -> None:
    """Loop nest over x viewed as [outer, D, inner]; ``body(k, sidx)`` writes element k."""
    if gr.mode == "tensor":
        with ctx.block(f"for (size_t k = 0; k < {gr.inner}u; ++k)"):
            body("k", "0")
        return
    ctx("size_t k = 0;")
    with ctx.block(f"for (size_t o = 0; o < {gr.outer}u; ++o)"):
        with ctx.block(f"for (size_t a = 0; a < {gr.d}u; ++a)"):
            with ctx.block(f"for (size_t i = 0; i < {gr.inner}u; ++i, ++k)"):
                body("k", gr.index())


def round_helper(ctx, ft: np.dtype) -> str:
    """rint(v) + zp clamped to [lo, hi] as int32; NaN gives the zero point (clamped). float32
    v on a target without double-precision hardware (``double_fpu: false``): the same values
    in float32 (no soft-double or libm call): v clamped to the integers [lo - zp, hi - zp]
    first (exact floats: the types span at most 2^16), which rounding commutes with, then
    rounded half to even by the 1.5 * 2^23 shift (exact below 2^22), then zp added in int32."""
    ct = ctype(ft)
    f = "f" if ft == np.float32 else ""
    name = f"aicc_qround_{ct}"
    if ft == np.float32 and not ctx.target.double_fpu:
        ctx.helper(name, f"/* Quantization rounding: rint(float v) (half to even) + zp, saturated to\n"
                   f" * [lo, hi] (ops/quantize.py: float32 only, no double-precision hardware).\n"
                   f" * NaN -> zp (clamped); +-Inf saturate. */\n"
                   f"static AICC_UNUSED int32_t {name}(float v, int32_t zp, int32_t lo, int32_t hi)\n{{\n"
                   f"    const float L = (float)(lo - zp), H = (float)(hi - zp);\n"
                   f"    const float c = v != v ? 0.0f : (v < L ? L : (v > H ? H : v));\n"
                   f"    const int32_t r = (int32_t)((c + 0x1.8p23f) - 0x1.8p23f) + zp;\n"
                   f"    return r < lo ? lo : (r > hi ? hi : r);\n}}")
        return name
    ctx.helper(name, f"/* Quantization rounding: rint({ct} v) (half to even) + zp, saturated to\n"
               f" * [lo, hi]. NaN -> zp (clamped); +-Inf saturate. The sum is exact in double. */\n"
               f"static AICC_UNUSED int32_t {name}({ct} v, int32_t zp, int32_t lo, int32_t hi)\n{{\n"
               f"    const double r = (v != v) ? (double)zp : (double)rint{f}(v) + (double)zp;\n"
               f"    if (r <= (double)lo) return lo;\n"
               f"    if (r >= (double)hi) return hi;\n"
               f"    return (int32_t)r;\n}}")
    return name


def emit_blocks(ctx, n: int, value, out: str, yct: str, lo: int, hi: int, rnd: str) -> None:
    """``out[k] = saturate(rint(v) + zp)`` for k < n, v = ``value(k)`` a float32 C expression
    and ``zp`` the C variable of the zero point: round_helper's values, in blocks of 16 that
    GCC -O2 vectorizes (no call, no branch), then the n % 16 rest through ``rnd``. In a block,
    v is clamped to the integers [lo - zp, hi - zp] first (rounding commutes with that), then
    rounded to nearest even by the 1.5 * 2^23 shift (exact below 2^22); NaN selects 0 by a bit
    select (-> zp), +-Inf saturate. A never-true NaN select after the clamps keeps GCC from
    turning clamps with constant bounds into branches (which stop the vectorizer)."""
    pick = sel(ctx)
    n16 = n // 16 * 16
    if n16:
        ctx(f"const float L = (float)({lo} - zp), H = (float)({hi} - zp);")
        with ctx.block(f"for (size_t k0 = 0; k0 < {n16}u; k0 += 16u)"):
            with ctx.block("for (size_t u = 0; u < 16u; ++u)"):
                ctx("const size_t k = k0 + u;")
                ctx(f"const float v = {value('k')};")
                ctx(f"const float w = {pick}(v == v, v, 0.0f);   /* NaN -> 0 */")
                ctx("const float c0 = w < L ? L : w;")
                ctx("float c = c0 > H ? H : c0;")
                ctx("c = w != w ? w : c;     /* never true: keeps GCC from threading the clamps */")
                ctx("const float t = c + 0x1.8p23f;")
                ctx(f"{out}[k] = ({yct})((int32_t)(t - 0x1.8p23f) + zp);")
    if n16 < n:
        with ctx.block(f"for (size_t k = {n16}u; k < {n}u; ++k)"):
            ctx(f"{out}[k] = ({yct}){rnd}({value('k')}, zp, {lo}, {hi});")


@register("QuantizeLinear", since=10)
class QuantizeLinear(Op):
    traits = frozenset({ELEMENTWISE, LOWP_NATIVE})
    attrs = {"axis": 1, "saturate": 1, "block_size": 0, "output_dtype": 0, "precision": 0}

    def check(self, node, g):
        xdt, sdt, ydt = g.dtype(node.inputs[0]), g.dtype(node.inputs[1]), g.dtype(node.outputs[0])
        if xdt.name not in FLOATS + ("int32",):
            return f"input dtype {xdt.name} not supported (float32, float64, int32)"
        if sdt.name not in FLOATS:
            return f"scale dtype {sdt.name} not supported (float32, float64)"
        if ydt.name not in Q_TYPES:
            return (f"quantized type {ydt.name} not supported (uint8, int8, uint16, int16, "
                    "int4, uint4, int2, uint2, 8-bit floats, float4_e2m1fn)")
        p = self.attr(node, "precision")
        if p and (_onnx_dtype(p) is None or _onnx_dtype(p).name not in FLOATS):
            return f"precision {_tname(p)} not supported (float32, float64)"
        try:
            _granularity(self, node, g, 1)
        except ValueError as e:
            return str(e)
        return None

    def emit(self, node, ctx):
        xdt, sdt, ydt = ctx.in_dtype(0), ctx.in_dtype(1), ctx.out_dtype(0)
        n = numel(ctx.in_shape(0))
        if n == 0:
            ctx(f"(void){ctx.out[0]};  /* empty tensor */")
            return
        p = _onnx_dtype(self.attr(node, "precision"))
        ft = p if p is not None else np.result_type(xdt, sdt)
        if ft.name not in FLOATS:
            ft = np.dtype(np.float64)
        fct = ctype(ft)
        gr = _granularity(self, node, ctx.g, 1)
        has_zp = ctx.has_input(2)
        yct = ctype(ydt)
        if ydt.name in LOWP_FLOAT:
            self._emit_float(node, ctx, ft, gr, has_zp)
            return
        lo, hi = QTYPES[ydt.name]
        rnd = round_helper(ctx, ft)
        enc = (lambda r: f"{lowp.int_from_bits(ctx, ydt.name)}((uint64_t)(int64_t){r})") \
            if ydt.name in LOWP_INT else (lambda r: f"({yct}){r}")
        ctx(f"/* QuantizeLinear ({gr.mode}): y = saturate(rint(x / scale) + zp) in {ydt.name}, "
            f"division in {ft.name} */")
        if gr.mode == "tensor":
            ctx(f"const {fct} s = ({fct}){_scalar(ctx, 1, sdt)};")
            ctx(f"const int32_t zp = {f'(int32_t){_scalar(ctx, 2, ydt)}' if has_zp else '0'};")
            if xdt == np.float32 and ft == np.float32 and ydt.name in quantize_simd.TYPES:
                isa = quantize_simd.isa_of(ctx)
                risa = quantize_simd.round_isa(ctx)
                if risa and not isa:
                    quantize_simd.emit_round(ctx, risa, ydt.name, n, ctx.inp[0], ctx.out[0], "s",
                                             "zp")
                elif isa:
                    quantize_simd.emit(ctx, isa, ydt.name, n, ctx.inp[0], ctx.out[0], "s", "zp",
                                       lo, hi, rnd)
                else:
                    emit_blocks(ctx, n, lambda k: f"{ctx.inp[0]}[{k}] / s", ctx.out[0], yct,
                                lo, hi, rnd)
                return
            sx, zx = "s", "zp"
        else:
            sx = "({fct}){s}[{{i}}]".format(fct=fct, s=ctx.inp[1])
            zx = f"(int32_t){_load(ctx, 2, ydt, '{i}')}" if has_zp else "0"

        def body(k, si):
            r = (f"{rnd}(({fct}){ctx.inp[0]}[{k}] / {sx.replace('{i}', si)}, "
                 f"{zx.replace('{i}', si)}, {lo}, {hi})")
            ctx(f"{ctx.out[0]}[{k}] = {enc(r)};")
        _emit_loops(ctx, gr, body)

    def _emit_float(self, node, ctx, ft, gr, has_zp):
        """8-bit floats: y = cast(x / scale) (saturate attribute; the zero point must be 0 and
        is ignored, as onnx.reference); float4_e2m1fn: y = cast(x / scale + zp), saturating."""
        ydt, sdt, fct = ctx.out_dtype(0), ctx.in_dtype(1), ctype(ft)
        enc = lowp.from_double(ctx, ydt.name, bool(self.attr(node, "saturate")))
        use_zp = has_zp and ydt.name == "float4_e2m1fn"
        ctx(f"/* QuantizeLinear ({gr.mode}): y = {ydt.name}(x / scale{' + zp' if use_zp else ''}), "
            f"division in {ft.name}, round to nearest even */")
        if gr.mode == "tensor":
            ctx(f"const {fct} s = ({fct}){_scalar(ctx, 1, sdt)};")
            sx = "s"
            zx = f"({fct}){_scalar(ctx, 2, ydt)}" if use_zp else ""
        else:
            sx = f"({fct}){ctx.inp[1]}[{{i}}]"
            zx = f"({fct}){_load(ctx, 2, ydt, '{i}')}" if use_zp else ""

        def body(k, si):
            v = f"({fct}){ctx.inp[0]}[{k}] / {sx.replace('{i}', si)}"
            if zx:
                v = f"({v}) + {zx.replace('{i}', si)}"
            ctx(f"{ctx.out[0]}[{k}] = {enc}((double)(float)({v}));")   # via float32 as ml_dtypes
        _emit_loops(ctx, gr, body)


@register("DequantizeLinear", since=10)
class DequantizeLinear(Op):
    traits = frozenset({ELEMENTWISE, LOWP_NATIVE})
    attrs = {"axis": 1, "block_size": 0, "output_dtype": 0}

    def check(self, node, g):
        xdt, sdt, ydt = g.dtype(node.inputs[0]), g.dtype(node.inputs[1]), g.dtype(node.outputs[0])
        if xdt.name not in DQ_TYPES:
            return (f"quantized type {xdt.name} not supported (uint8, int8, uint16, int16, "
                    "int32, int4, uint4, int2, uint2, 8-bit floats, float4_e2m1fn)")
        if sdt.name not in FLOATS:
            return f"scale dtype {sdt.name} not supported (float32, float64)"
        if ydt.name not in FLOATS:
            return f"output dtype {ydt.name} not supported (float32, float64)"
        try:
            _granularity(self, node, g, 1)
        except ValueError as e:
            return str(e)
        return None

    def emit(self, node, ctx):
        xdt, sdt, ydt = ctx.in_dtype(0), ctx.in_dtype(1), ctx.out_dtype(0)
        n = numel(ctx.in_shape(0))
        if n == 0:
            ctx(f"(void){ctx.out[0]};  /* empty tensor */")
            return
        gr = _granularity(self, node, ctx.g, 1)
        has_zp = ctx.has_input(2)
        # difference type (exact), product type, output type: as onnx.reference
        wide = xdt.name == "int32" and has_zp
        dt = np.dtype(np.float64) if wide else np.dtype(np.float32)
        pt = np.result_type(dt, sdt)
        dct, pct, yct = ctype(dt), ctype(pt), ctype(ydt)
        ctx(f"/* DequantizeLinear ({gr.mode}): y = (x - zp) * scale, product in {pt.name} */")
        isf = xdt.name in LOWP_FLOAT
        # the difference in int32 for types up to 16 bits (exact; the loop vectorizes: without
        # AVX-512DQ an int64 -> float conversion is scalar, 9.7 us instead of 1.4 for 16384
        # uint8 on x86-avx512), int64 for int32 x
        zt = "float" if isf else ("int64_t" if xdt.itemsize >= 4 else "int32_t")
        if isf:       # zero point of a float type: zero by the spec, ignored (as onnx.reference)
            has_zp = False
        if gr.mode == "tensor":
            ctx(f"const {pct} s = ({pct}){_scalar(ctx, 1, sdt)};")
            if has_zp:
                ctx(f"const {zt} zp = ({zt}){_scalar(ctx, 2, xdt)};")
            sx, zx = "s", "zp"
        else:
            sx = f"({pct}){ctx.inp[1]}[{{i}}]"
            zx = f"({zt}){_load(ctx, 2, xdt, '{i}')}" if has_zp else ""

        def body(k, si):
            x = _load(ctx, 0, xdt, k)
            d = (f"({dct})(({zt}){x} - {zx.replace('{i}', si)})" if has_zp
                 else f"({dct}){x}")
            ctx(f"{ctx.out[0]}[{k}] = ({yct})(({pct}){d} * {sx.replace('{i}', si)});")
        _emit_loops(ctx, gr, body)


@register("DynamicQuantizeLinear", since=11)
class DynamicQuantizeLinear(Op):
    def check(self, node, g):
        if g.dtype(node.inputs[0]).name != "float32":
            return f"input dtype {g.dtype(node.inputs[0]).name} not supported (float32)"
        return None

    def emit(self, node, ctx):
        n = numel(ctx.in_shape(0))
        x, (y, ys, yz) = ctx.inp[0], ctx.out[:3]
        rnd = round_helper(ctx, np.dtype(np.float32))
        ctx("/* DynamicQuantizeLinear: uint8 with the range [min(x, 0), max(x, 0)] */")
        ctx("float mx = 0.0f, mn = 0.0f, s, zpf;")
        ctx("int32_t zp;")
        if n:
            with ctx.block(f"for (size_t k = 0; k < {n}u; ++k)"):
                ctx(f"if ({x}[k] > mx) mx = {x}[k];   /* NaN compares false: ignored */")
                ctx(f"if ({x}[k] < mn) mn = {x}[k];")
        ctx("s = mx == mn ? 1.0f : (mx - mn) / 255.0f;   /* as onnxruntime */")
        ctx("zpf = 0.0f - mn / s;")
        ctx("zpf = zpf < 0.0f ? 0.0f : (zpf > 255.0f ? 255.0f : zpf);")
        ctx(f"zp = {rnd}(zpf, 0, 0, 255);")
        if y:
            if n:
                with ctx.block(f"for (size_t k = 0; k < {n}u; ++k)"):
                    ctx(f"{y}[k] = (uint8_t){rnd}({x}[k] / s, zp, 0, 255);")
            else:
                ctx(f"(void){y};")
        if ys:
            ctx(f"{ys}[0] = s;")
        if yz:
            ctx(f"{yz}[0] = (uint8_t)zp;")
