"""MaxPool (with the optional Indices output), AveragePool, GlobalAveragePool, GlobalMaxPool:
1-D, 2-D and 3-D, float32 and float64 (MaxPool also int8 and uint8). Kernels: kernels/pool/portable.py
(portable C); float32 on the x86 SIMD targets (the target's ``kernels:`` list or the node's
``aicc_kernel``): kernels/pool/simd.py, except MaxPool with Indices.

Attributes: kernel_shape, strides, pads, dilations, auto_pad, ceil_mode, storage_order
(Indices), count_include_pad. Output sizes and auto_pad SAME_* padding follow onnxruntime:
pad_needed = (ceil(in / stride) - 1) * stride + kernel - in (kernel not dilated), split
head = pad_needed / 2 (SAME_UPPER) or (pad_needed + 1) / 2 (SAME_LOWER); with ceil_mode the
last window must start inside the input or its leading padding (onnx shape inference
sometimes keeps that window; check() then reports the shape mismatch). Nodes whose SAME
padding would be negative (kernel smaller than stride) are unsupported (onnxruntime rejects
them).

Semantics at the edges:
* MaxPool: padding never wins (it acts as -inf); a window with no input element (only
  possible with pads >= kernel, which onnxruntime rejects) gives -inf (int8/uint8: the
  type's minimum) and Indices -1.
* AveragePool divisor: without count_include_pad the number of input elements in the
  window; with it, the taps inside the padded input [-pad_begin, in + pad_end) (windows that
  ceil_mode extends beyond the trailing padding are not charged for the overhang); a window
  with no input element gives 0. As onnxruntime.
* NaN: MaxPool and GlobalMaxPool propagate NaN (a NaN anywhere in the window gives NaN, and
  Indices points at the first NaN); onnxruntime's result for NaN windows depends on its
  kernel variant (its scalar kernels skip NaN, its SIMD kernels depend on position), so we
  take the numpy/PyTorch rule. Averages propagate NaN/Inf by IEEE arithmetic.
* Ties: Indices gives the first maximum in window scan order, as onnxruntime. The index is
  flattened over the whole input tensor (n, c, then the spatial dims row-major, or
  column-major with storage_order 1).
"""
from __future__ import annotations

from ..emit_c.loops import numel
from ..kernels.conv.base_c import params_c, suffix, use
from ..kernels.conv.geometry import AUTO_PADS, ints, static_shapes
from ..kernels.pool import simd as pool_simd
from ..kernels.pool.portable import DIVIDE, GLOBAL, POOL, POOL_IDX, ROWS, TAPS, ptyped
from .base import Op, register, register_many
from .conv import FLOATS
from .traits import ROUNDING_COMMUTES


class PoolGeometry:
    def __init__(self, op, node, x_shape):
        r = len(x_shape) - 2
        if r < 1 or r > 3:
            raise ValueError(f"rank {len(x_shape)} input (1-D, 2-D and 3-D pooling only)")
        self.batch, self.c = int(x_shape[0]), int(x_shape[1])
        self.inp = [int(d) for d in x_shape[2:]]
        k = op.attr(node, "kernel_shape")
        if k is None or len(k) != r:
            raise ValueError(f"kernel_shape {k} (need {r} values)")
        self.k = [int(v) for v in k]
        self.stride = ints(op.attr(node, "strides"), r, 1)
        self.dil = ints(op.attr(node, "dilations"), r, 1)
        if min(self.k + self.stride + self.dil) < 1:
            raise ValueError("kernel_shape, strides and dilations must be positive")
        ceil = int(op.attr(node, "ceil_mode") or 0)
        mode = op.attr(node, "auto_pad") or "NOTSET"
        if mode not in AUTO_PADS:
            raise ValueError(f"auto_pad {mode!r}")
        if mode in ("SAME_UPPER", "SAME_LOWER"):
            self.pad, self.pad_end = [], []
            for i, k, s in zip(self.inp, self.k, self.stride):
                need = (-(-i // s) - 1) * s + k - i
                if need < 0:
                    raise ValueError("auto_pad SAME with a kernel smaller than the stride "
                                     "(negative padding)")
                head = need // 2 if mode == "SAME_UPPER" else (need + 1) // 2
                self.pad.append(head)
                self.pad_end.append(need - head)
        elif mode == "VALID":
            self.pad, self.pad_end = [0] * r, [0] * r
        else:
            pads = ints(op.attr(node, "pads"), 2 * r, 0)
            if len(pads) != 2 * r or min(pads) < 0:
                raise ValueError(f"pads {pads} (need {2 * r} non-negative values)")
            self.pad, self.pad_end = pads[:r], pads[r:]
        self.out = []
        for i, b, e, k, d, s in zip(self.inp, self.pad, self.pad_end, self.k, self.dil,
                                    self.stride):
            num = i + b + e - d * (k - 1) - 1
            o = num // s + 1
            if ceil:
                o = -(-num // s) + 1
                if (o - 1) * s >= i + b:
                    o -= 1
            self.out.append(o)
        if min(self.out) < 1:
            raise ValueError(f"empty output (spatial size {self.out})")

    def whole_plane(self) -> bool:
        """One window covering each whole plane (no padding, dilation 1): the pool is a
        global pool of the plane (ResNet's AveragePool 8x8 on an 8 x 8 map)."""
        return (self.k == self.inp and max(self.pad + self.pad_end) == 0
                and max(self.dil) == 1)

    def params(self, flag=0) -> str:
        return params_c(batch=self.batch, group=1, cin_g=self.c, cout_g=self.c, inp=self.inp,
                        out=self.out, k=self.k, stride=self.stride, dil=self.dil, pad=self.pad,
                        pad_end=self.pad_end, flag=flag)


def _check_float(g, node, dtypes=FLOATS):
    dt = g.dtype(node.inputs[0])
    return None if dt.name in dtypes else f"dtype {dt.name} not supported ({', '.join(dtypes)})"


class _Pool(Op):
    dtypes = FLOATS

    def check(self, node, g):
        reason = _check_float(g, node, self.dtypes)
        if reason:
            return reason
        outs = [o for o in node.outputs if o]
        shapes = static_shapes(g, [node.inputs[0]] + outs)
        if shapes is None:
            return None
        try:
            geo = PoolGeometry(self, node, shapes[0])
        except ValueError as e:
            return str(e)
        want = (geo.batch, geo.c, *geo.out)
        for s in shapes[1:]:
            if s != want:
                hint = ""
                if int(self.attr(node, "ceil_mode") or 0):
                    hint = (" (ceil_mode: onnxruntime drops a last window that starts in the "
                            "trailing padding, onnx shape inference keeps it)")
                return f"output shape {list(s)} disagrees with the attributes ({list(want)}){hint}"
        return None

    def _emit(self, node, ctx, avg, flag):
        geo = PoolGeometry(self, node, ctx.in_shape(0))
        dt = ctx.in_dtype(0)
        if numel(ctx.out_shape(0)) == 0:
            ctx("/* empty output: nothing to compute */")
            return
        sfx = suffix(dt)
        kind = "AveragePool" if avg else "MaxPool"
        what = (f"{kind} {'x'.join(map(str, geo.k))} window, stride "
                f"{'x'.join(map(str, geo.stride))}, pads {geo.pad + geo.pad_end}")
        if not avg and len(node.outputs) > 1 and node.outputs[1]:
            use(ctx, dt)
            ctx.helper(f"pool.4.maxpool_idx{sfx}", ptyped(POOL_IDX, dt))
            ctx(f"/* {what}, with Indices (storage_order {flag}) */")
            ctx(geo.params(flag))
            ctx(f"aicc_maxpool_idx{sfx}(&prm, {ctx.inp[0]}, {ctx.out[0]}, {ctx.out[1]});")
            return
        isa = pool_simd.isa_of(ctx, dt)
        if isa is not None and geo.whole_plane():
            ctx(f"/* {what}: one window per plane, pooled as a global pool */")
            pool_simd.emit_global(ctx, geo.batch * geo.c, numel(geo.inp), avg, isa)
            return
        if isa is not None:
            ctx.kernel = isa
            ctx(f"/* {what} */")
            pool_simd.emit_window(ctx, geo, avg, flag, isa)
            return
        use(ctx, dt)
        ctx.helper("pool.0.taps", TAPS)
        ctx.helper(f"pool.1.rows{sfx}", ptyped(ROWS, dt))
        ctx.helper(f"pool.2.divide{sfx}", ptyped(DIVIDE, dt))
        ctx.helper(f"pool.3.pool{sfx}", ptyped(POOL, dt))
        ctx(f"/* {what} */")
        ctx(geo.params(flag))
        ctx(f"aicc_pool{sfx}(&prm, {1 if avg else 0}, {ctx.inp[0]}, {ctx.out[0]});")


@register("MaxPool", since=1)
class MaxPool(_Pool):
    traits = frozenset({ROUNDING_COMMUTES})
    dtypes = FLOATS + ("int8", "uint8")
    attrs = {"auto_pad": "NOTSET", "ceil_mode": 0, "dilations": None, "kernel_shape": None,
             "pads": None, "storage_order": 0, "strides": None}

    def check(self, node, g):
        if len(node.outputs) > 1 and node.outputs[1]:
            if int(self.attr(node, "storage_order") or 0) not in (0, 1):
                return "storage_order must be 0 or 1"
        return super().check(node, g)

    def emit(self, node, ctx):
        self._emit(node, ctx, False, int(self.attr(node, "storage_order") or 0))


@register("AveragePool", since=1)
class AveragePool(_Pool):
    attrs = {"auto_pad": "NOTSET", "ceil_mode": 0, "count_include_pad": 0, "dilations": None,
             "kernel_shape": None, "pads": None, "strides": None}

    def emit(self, node, ctx):
        self._emit(node, ctx, True, int(self.attr(node, "count_include_pad") or 0))


@register_many(["GlobalAveragePool", "GlobalMaxPool"], since=1,
               traits={"GlobalMaxPool": {ROUNDING_COMMUTES}})
class GlobalPool(Op):
    def check(self, node, g):
        reason = _check_float(g, node)
        if reason:
            return reason
        if len(g.shape(node.inputs[0])) < 3:
            return "input rank below 3"
        return None

    def emit(self, node, ctx):
        x = ctx.in_shape(0)
        dt = ctx.in_dtype(0)
        planes, n = x[0] * x[1], numel(x[2:])
        if planes == 0:
            ctx("/* empty output: nothing to compute */")
            return
        if n == 0:      # mean of nothing is NaN, max of nothing -inf
            v = "NAN" if self.op_type == "GlobalAveragePool" else "-INFINITY"
            with ctx.block(f"for (size_t i = 0; i < {planes}u; ++i)"):
                ctx(f"{ctx.out[0]}[i] = {v};")
            return
        sfx = suffix(dt)
        avg = 1 if self.op_type == "GlobalAveragePool" else 0
        ctx(f"/* {self.op_type} over {planes} planes of {n} elements */")
        isa = pool_simd.isa_of(ctx, dt)
        if isa is not None:
            ctx.kernel = isa
            pool_simd.emit_global(ctx, planes, n, bool(avg), isa)
            return
        ctx.helper(f"pool.5.global{sfx}", ptyped(GLOBAL, dt))
        ctx(f"aicc_global_pool{sfx}({planes}u, {n}u, {avg}, {ctx.inp[0]}, {ctx.out[0]});")
