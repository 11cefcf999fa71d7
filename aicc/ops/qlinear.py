"""Integer matmul/conv: MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv (uint8/int8);
the convs' emitters are in ops/qlinear_conv.py, QGemm (QLinearMatMul plus a bias) in ops/qgemm.py.

Products ``(a - a_zp) * (b - b_zp)`` are formed in int32 (at most 255 * 255 in magnitude:
never overflows) and accumulated modulo 2^32 in uint32 (the spec allows the accumulation to
wrap "if and only if in 32 bits"; onnxruntime wraps the same way). The sum is turned back
into int32 without implementation-defined conversions. Zero-point taps of padding contribute
nothing (the padding value is the zero point).

Zero points and scales (constants or run-time tensors):
- MatMulInteger / QLinearMatMul: ``a`` per-tensor; ``b`` per-tensor or per-column (N
  elements, every other dim 1); ``y`` per-tensor (onnxruntime's restrictions).
- ConvInteger / QLinearConv: ``x`` and ``y`` per-tensor; ``w`` per-tensor or per output
  channel (M elements). QLinearConv's optional int32 bias is added modulo 2^32.

Requantization (QLinear*): ``y = saturate(rint(acc * m) + y_zp)`` with ``m = a_scale *
b_scale / y_scale`` computed in float32 and ``acc * m`` in float64, as onnx.reference does
(onnxruntime multiplies in float32; the two can differ by one unit on near-ties). Rounding is
half to even; NaN (a NaN or zero scale) gives y_zp; +-Inf saturates. On targets with
``requant: integer`` (the Cortex-M targets; the default without double-precision hardware) the
same values come from 32-bit integer arithmetic (kernels/qgemm/fixed.py: no soft-double or libm
call).
float16/bfloat16 scales and 8-bit float operands are refused by check().
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import ctype
from ..emit_c.loops import collapse, collapsed_strides, numel
from ..kernels.gemm.call import batch_dims
from ..kernels.qgemm import fixed
from ..kernels.qgemm import pairs as qgemm_pairs
from ..kernels.qgemm import vdot as qgemm_vdot
from ..kernels.qgemm import portable as qgemm_c
from ..kernels.qgemm import simd as qgemm_simd
from ..kernels.qgemm.requant import Requant, WRAP, irange
from ..kernels.qgemm.round import multipliers
from ..kernels.qgemm.simd import scalar, zp_expr
from .base import Op, empty_body, register
from .quantize import round_helper

INT8 = ("uint8", "int8")

ROW = """\
/* One row of an integer matrix product: acc[n] = sum_k (a[k] - azp) * (b[k, n] - bzp[n * bzs])
 * modulo 2^32, b row-major [K, N]. Each product fits in int32 (|.| <= 255 * 255). */
static void aicc_imm_row_SFX(size_t N, size_t K, const TA *restrict a, int32_t azp,
                             const TB *restrict b, const TB *restrict bzp, size_t bzs,
                             uint32_t *restrict acc)
{
    for (size_t n = 0; n < N; ++n)
        acc[n] = 0u;
    for (size_t k = 0; k < K; ++k) {
        const int32_t av = (int32_t)a[k] - azp;
        const TB *restrict bk = b + k * N;
        if (av == 0)
            continue;
        if (bzs == 0) {           /* one zero point: a contiguous loop (vectorized at -O3) */
            const int32_t bz = (int32_t)bzp[0];
            for (size_t n = 0; n < N; ++n)
                acc[n] += (uint32_t)(av * ((int32_t)bk[n] - bz));
        } else {
            for (size_t n = 0; n < N; ++n)
                acc[n] += (uint32_t)(av * ((int32_t)bk[n] - (int32_t)bzp[n]));
        }
    }
}"""

def _sfx(ta, tb) -> str:
    return f"_{'u8' if ta.name == 'uint8' else 's8'}{'u8' if tb.name == 'uint8' else 's8'}"


def _typed(code, ta, tb) -> str:
    return (code.replace("_SFX", _sfx(ta, tb)).replace("TA", ctype(ta))
            .replace("TB", ctype(tb)))


def _numel(g, name) -> int:
    return numel(tuple(g.shape(name)))


def _per_tensor(g, node, ks, what) -> str | None:
    for k in ks:
        if k < len(node.inputs) and node.inputs[k] and _numel(g, node.inputs[k]) != 1:
            return (f"{what} (input {k}) must be per-tensor, has shape "
                    f"{list(g.shape(node.inputs[k]))}")
    return None


def _per_last(g, name, n) -> int | None:
    """Stride (0 or 1) of a per-tensor or per-last-dim (n elements) tensor, else None."""
    s = tuple(int(d) for d in g.shape(name))
    if numel(s) == 1:
        return 0
    if numel(s) == n and len(s) >= 1 and s[-1] == n:
        return 1
    return None


def check_scales_output(g, node) -> str | None:
    """QLinearMatMul / QLinearConv: float32 scales (inputs 1, 4, 6), a uint8 / int8 output."""
    for k in (1, 4, 6):
        if g.dtype(node.inputs[k]).name != "float32":
            return f"scale dtype {g.dtype(node.inputs[k]).name} not supported (float32)"
    if g.dtype(node.outputs[0]).name not in INT8:
        return f"output dtype {g.dtype(node.outputs[0]).name} not supported (uint8, int8)"
    return None


def column_multipliers(sa, sb, sy, n: int) -> np.ndarray:
    """The float32 multipliers ``sa * sb[j] / sy`` of n output columns (per tensor or per
    column b scale), the product and the quotient rounded to float32 as the C computes them."""
    with np.errstate(all="ignore"):
        return (np.float32(np.asarray(sa).reshape(-1)[0])
                * np.broadcast_to(np.asarray(sb, np.float32).reshape(-1), (n,))
                / np.float32(np.asarray(sy).reshape(-1)[0])).astype(np.float32)


def _requant_prelude(ctx, ks, ys_k, yzp_k):
    """Declare ``sa`` (the per-tensor input scale), ``ys`` and ``yzp``."""
    ctx(f"const float sa = {scalar(ctx, ks)};")
    ctx(f"const float ys = {scalar(ctx, ys_k)};")
    ctx(f"const int32_t yzp = {zp_expr(ctx, yzp_k)};")
    ctx("(void)sa; (void)ys; (void)yzp;   /* unread when the output is empty */")


def _nonempty_mm(ctx, op) -> bool:
    pa, pb, bo, m, k, n = batch_dims(ctx.in_shape(op.A), ctx.in_shape(op.B))
    return numel(bo) * m * n > 0 and k > 0


class _MatMulBase(Op):
    """Shared by MatMulInteger and QLinearMatMul: input positions of a, b and their zps."""
    A = B = AZ = BZ = 0
    BS = None

    def check_mm(self, node, g):
        a, b = node.inputs[self.A], node.inputs[self.B]
        for name in (a, b):
            if g.dtype(name).name not in INT8:
                return f"operand dtype {g.dtype(name).name} not supported (uint8, int8)"
        sa, sb = tuple(g.shape(a)), tuple(g.shape(b))
        if len(sa) == 0 or len(sb) == 0:
            return "scalar operand"
        pa, pb, _, _, k, n = batch_dims(sa, sb)
        if (sb[-2] if len(sb) > 1 else sb[0]) != k:
            return f"inner dims differ: {list(sa)} x {list(sb)}"
        if any(x != y and 1 not in (x, y) for x, y in zip(pa, pb)):
            return f"batch dims do not broadcast: {list(sa)} x {list(sb)}"
        r = _per_tensor(g, node, [self.AZ], "a zero point")
        if r:
            return r
        for k_ in [self.BZ] + ([self.BS] if self.BS is not None else []):
            present = k_ < len(node.inputs) and node.inputs[k_]
            if present and _per_last(g, node.inputs[k_], n) is None:
                return (f"b zero point/scale of shape {list(g.shape(node.inputs[k_]))}: "
                        f"per-tensor or per-column [{n}] only")
        return None

    def emit_mm(self, node, ctx, value, dot_post=None):
        """Loops over output matrices and rows; ``value(acc, j)`` gives (declarations for
        output column j, the C expression of its output from its uint32 sum acc). The dot
        kernel's path writes through ``dot_post(ch, src, cnt, dst, step, tile)`` when given
        (qgemm_c.emit_matmul's post; tile: the most rows of one call), else value's."""
        ta, tb = ctx.in_dtype(self.A), ctx.in_dtype(self.B)
        pa, pb, bo, m, k, n = batch_dims(ctx.in_shape(self.A), ctx.in_shape(self.B))
        if numel(bo) * m * n == 0:
            empty_body(ctx)
            return
        if self._dot_usable(ctx, pb, numel(bo) * m, k, n):
            b = np.asarray(ctx.in_const(self.B)).reshape(k, n)

            tile = qgemm_c.tile_rows(ctx, k, numel(bo) * m)

            def post(ch, src, cnt, dst, step):
                if dot_post is not None:
                    dot_post(ch, src, cnt, dst, step, tile)
                    return
                decls, v = value(f"{src}[q]", ch)
                for d in decls:
                    ctx(d)
                with ctx.block(f"for (size_t q = 0; q < {cnt}; ++q)"):
                    ctx(f"{ctx.out[0]}[{dst} + q * {step}] = {v};")
            vw = (qgemm_vdot.matmul_weights(ctx, self, k, n, b.T)
                  if qgemm_vdot.isa_for(ctx) else None)
            words = (qgemm_pairs.matmul_weights(ctx, self, numel(bo) * m, k, n, b.T)
                     if vw is None and qgemm_pairs.isa_for(ctx) else None)
            if vw is not None:
                qgemm_vdot.emit_matmul(ctx, self, numel(bo) * m, k, n, vw, post)
            elif words is not None:
                qgemm_pairs.emit_matmul(ctx, self, numel(bo) * m, k, n, words, post)
            else:
                qgemm_c.emit_matmul(ctx, self, numel(bo) * m, k, n,
                                    np.ascontiguousarray(b.T), post)
            return
        ctx.helper("qlinear.0.wrap", WRAP)
        ctx.helper(f"qlinear.1.row{_sfx(ta, tb)}", _typed(ROW, ta, tb))
        row = f"aicc_imm_row{_sfx(ta, tb)}"
        acc = ctx.scratch(n * 4, "uint32_t", "acc")
        tbc = ctype(tb)
        if ctx.has_input(self.BZ):
            bzs = _per_last(ctx.g, node.inputs[self.BZ], n)
            bz = ctx.inp[self.BZ]
        else:
            ctx(f"static const {tbc} bz0 = 0;")
            bzs, bz = 0, "&bz0"
        ctx(f"const int32_t azp = {zp_expr(ctx, self.AZ)};")
        dims, full = collapse(bo, [pa, pb])
        nd = len(dims)
        strides = collapsed_strides(dims, full)
        ctx("size_t ob = 0;")
        for d in range(nd):
            ctx(f"for (size_t b{d} = 0; b{d} < {dims[d]}u; ++b{d}) {{")
            ctx.w.level += 1

        def ix(st):
            t = [f"b{d}" if st[d] == 1 else f"b{d} * {st[d]}u" for d in range(nd) if st[d]]
            return " + ".join(t) if t else "0"
        ctx(f"const size_t ia = {ix(strides[0])}, ib = {ix(strides[1])};")
        with ctx.block(f"for (size_t i = 0; i < {m}u; ++i)"):
            ctx(f"{row}({n}u, {k}u, {ctx.inp[self.A]} + (ia * {m}u + i) * {k}u, azp, "
                f"{ctx.inp[self.B]} + ib * {k * n}u, {bz}, {bzs}u, {acc});")
            decls, v = value(f"{acc}[j]", "j")
            with ctx.block(f"for (size_t j = 0; j < {n}u; ++j)"):
                for d in decls:
                    ctx(d)
                ctx(f"{ctx.out[0]}[(ob * {m}u + i) * {n}u + j] = {v};")
        ctx("++ob;")
        for _ in range(nd):
            ctx.w.level -= 1
            ctx("}")

    def _dot_usable(self, ctx, pb, rows, k, n) -> bool:
        """qgemm_c's dot kernel: b constant, one matrix for all of a's rows, and no sum
        that can overflow int32 (one row: 1x512x512 33 -> 29 us on generic)."""
        bz = ctx.in_const(self.BZ) if ctx.has_input(self.BZ) else 0
        if ctx.in_const(self.B) is None or bz is None or numel(pb) != 1 or rows < 1:
            return False
        return qgemm_c.bound(ctx, self.B, self.BZ, n, k, self.A, self.AZ,
                             w_rows=lambda w: w.reshape(k, n).T) <= qgemm_c.LIMIT


@register("MatMulInteger", since=10)
class MatMulInteger(_MatMulBase):
    A, B, AZ, BZ = 0, 1, 2, 3

    def check(self, node, g):
        return self.check_mm(node, g)

    def emit(self, node, ctx):
        ctx("/* MatMulInteger: int32 y = (a - azp) @ (b - bzp), accumulated modulo 2^32 */")
        if _nonempty_mm(ctx, self) and qgemm_simd.matmul_usable(ctx, self.A, self.B, self.BZ):
            qgemm_simd.emit_matmul(self, node, ctx, None)
            return

        self.emit_mm(node, ctx, lambda acc, j: ([], f"aicc_u32_i32({acc})"))


@register("QLinearMatMul", since=10)
class QLinearMatMul(_MatMulBase):
    A, B, AZ, BZ, BS = 0, 3, 2, 5, 4

    def check(self, node, g):
        return (check_scales_output(g, node)
                or _per_tensor(g, node, [1, 6, 7], "a scale / y scale / y zero point")
                or self.check_mm(node, g))

    BIAS = None     # input position of an int32 bias [n] added to the sums (aicc.QGemm)

    def bias(self, ctx, j) -> str:
        """The C of column j's bias as uint32 (" + ..." to add to a sum), or ""."""
        if self.BIAS is None or not ctx.has_input(self.BIAS):
            return ""
        return f" + (uint32_t){ctx.inp[self.BIAS]}[{j}]"

    def emit(self, node, ctx):
        ydt = ctx.out_dtype(0)
        lo, hi = irange(ydt.name)
        bss = _per_last(ctx.g, node.inputs[4], batch_dims(ctx.in_shape(0), ctx.in_shape(3))[5])
        ctx(f"/* {node.op_type}: y = saturate(rint(acc * (a_scale * b_scale / y_scale)) + yzp), "
            f"acc = (a - azp) @ (b - bzp){' + bias' if self.bias(ctx, 0) else ''} in int32 */")
        _requant_prelude(ctx, 1, 6, 7)
        yct = ctype(ydt)
        if fixed.usable(ctx):
            self._emit_fixed(node, ctx, bss)
            return
        rnd = round_helper(ctx, np.dtype(np.float64))
        if _nonempty_mm(ctx, self) and qgemm_simd.matmul_usable(ctx, self.A, self.B, self.BZ):
            n = batch_dims(ctx.in_shape(0), ctx.in_shape(3))[5]
            mc, nt, mcol = multipliers(ctx, bool(bss), n)
            qgemm_simd.emit_matmul(self, node, ctx, Requant(rnd, mc, per_col=bool(bss),
                                                            rform=nt, mcol=mcol),
                                   ctx.in_const(self.BIAS) if self.bias(ctx, 0) else None)
            return

        def value(acc, j):
            bs = f"{ctx.inp[4]}[{j if bss else '0'}]"
            return ([f"const float mlt = sa * {bs} / ys;"],
                    f"({yct}){rnd}((double)aicc_u32_i32({acc}{self.bias(ctx, j)}) * (double)mlt, "
                    f"yzp, {lo}, {hi})")

        def dot_post(ch, src, cnt, dst, step, tile):     # one output column of a tile
            rq = qgemm_c.requant_row(ctx, ydt)
            tq = ctx.scratch(tile, yct, "tq")
            ctx(value(src, ch)[0][0])
            ctx(f"{rq}({cnt}, {src}, 0u{self.bias(ctx, ch)}, mlt, yzp, {lo}, {hi}, {tq});")
            with ctx.block(f"for (size_t q = 0; q < {cnt}; ++q)"):
                ctx(f"{ctx.out[0]}[{dst} + q * {step}] = {tq}[q];")
        self.emit_mm(node, ctx, value, dot_post)

    def _emit_fixed(self, node, ctx, bss):
        """The portable loops with the requantization in integers (kernels/qgemm/fixed.py:
        targets with ``requant: integer``)."""
        ydt = ctx.out_dtype(0)
        yct = ctype(ydt)
        _, pb, bo, m, k, n = batch_dims(ctx.in_shape(0), ctx.in_shape(3))
        bound = (qgemm_c.bound(ctx, self.B, self.BZ, n, k, self.A, self.AZ,
                               w_rows=lambda w: w.reshape(k, n).T)
                 if numel(pb) == 1 else -1)    # batches of b: no bound
        bnd = fixed.bound_arg(bound)

        def mult(j):
            return f"const float mlt = sa * {ctx.inp[4]}[{j if bss else '0'}] / ys;"

        def value(acc, j):
            return [mult(j)], f"({yct}){fixed.one(ctx, ydt)}({acc}{self.bias(ctx, j)}, mlt, yzp)"

        fma = self._one_row_fma(ctx, ydt, bound, n) if numel(bo) * m == 1 else None

        def dot_post(ch, src, cnt, dst, step, tile):     # one output column of a tile
            if fma:         # per-column multipliers of a one-row product: no row set-up
                ctx(mult(ch))
                ctx(f"{ctx.out[0]}[{dst}] = ({yct}){fma}(aicc_u32_i32({src}[0]"
                    f"{self.bias(ctx, ch)}), mlt, yzp);")
                return
            rq = fixed.row(ctx, ydt)
            tq = ctx.scratch(tile, yct, "tq")
            ctx(mult(ch))
            ctx(f"{rq}({cnt}, {src}, 0u{self.bias(ctx, ch)}, mlt, yzp, {bnd}, {tq});")
            with ctx.block(f"for (size_t q = 0; q < {cnt}; ++q)"):
                ctx(f"{ctx.out[0]}[{dst} + q * {step}] = {tq}[q];")
        self.emit_mm(node, ctx, value, dot_post)

    def _one_row_fma(self, ctx, ydt, bound: int, n: int) -> str | None:
        """kernels/qgemm/fixed.py's fused multiply-add helper for a one-row product with
        per-column constant multipliers (a fully connected layer), when it applies; bound: the
        build's bound on |sum| (negative: none)."""
        sa, sb, sy = (ctx.in_const(k) for k in (1, 4, 6))
        if sa is None or sb is None or sy is None or np.asarray(sb).size != n or bound < 0:
            return None
        bias = np.asarray(ctx.in_const(self.BIAS)) if self.bias(ctx, 0) else np.zeros(1)
        return fixed.one_fma(ctx, ydt, column_multipliers(sa, sb, sy, n),
                             bound + int(np.abs(bias.astype(np.int64)).max()))
