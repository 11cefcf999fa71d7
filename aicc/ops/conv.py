"""Conv (1-D, 2-D, 3-D; float32 and float64): groups, depthwise, strides, dilations,
explicit pads and auto_pad, optional bias, fused activation epilogue (``aicc_act``) and
fused residual Add (``aicc_residual``, input 3: kernels/conv/residual.py).

Weights and bias may be compile-time constants or run-time tensors. The GEMM kernel wants
the weights packed: constant weights are packed at compile time (no run-time cost), run-time
weights are packed into step scratch at the start of the step (``aicc_packw``). Kernels (C
text in kernels/conv/base_c.py): 1-D / 2-D convs with one input channel per group (depthwise,
channel multipliers, single-channel inputs) sum over the stride phases of the padded plane
(kernels/conv/planes_c.py), 3-D ones and single-output-channel groups use the direct row kernel
(weights in their ONNX layout), float32 3x3 stride-1 convs Winograd F(2x2, 3x3) where the
target's ``conv_c`` schedule allows it (kernels/winograd/portable.py; generic), everything else im2col +
GEMM (1x1 stride-1 unpadded convs gather with a plain copy). That is the portable path
(generic target, float64); on the
x86 SIMD targets float32 convs run kernels/conv/simd.py's kernel variants (packed SIMD GEMM:
direct 1x1, im2col, implicit, transposed; depthwise kernels; Winograd F(2x2,3x3) /
F(4x4,3x3) for 3x3 stride-1 convs, kernels/winograd/simd.py), chosen per node from the target's
``kernels:`` list and ``schedule: conv:`` block, overridable with ``aicc_kernel`` /
``aicc_schedule`` (``algo``, ``mr``, ``kc``, ``jb``, ``tile_kb``, ``wino_m``, ...) on the node.

auto_pad SAME_UPPER/SAME_LOWER follow onnxruntime: total padding
max(0, (ceil(in/stride) - 1) * stride + (k - 1) * dilation + 1 - in), the odd element at the
end (UPPER) or the beginning (LOWER).

NaN/Inf: IEEE arithmetic, no -ffast-math; a NaN or Inf in a receptive field propagates to
the outputs it reaches (including 0 * Inf = NaN for zero weights, as in onnxruntime).
Summation order differs from onnxruntime, so results agree to rounding, not bit-exactly
(Winograd: its transforms add their own rounding, and an Inf can turn neighbouring outputs of
its tile into NaN; see kernels/winograd/simd.py).
"""
from __future__ import annotations

from ..emit_c.loops import numel
from ..kernels.conv import portable
from ..kernels.conv import residual as conv_residual
from ..kernels.conv import simd as conv_simd
from ..kernels.conv.base_c import act_check
from ..kernels.conv.geometry import ConvGeometry, static_shapes
from ..kernels.conv.schedule import ALGOS
from ..kernels.vmath.act import apply_epilogue, unfused
from .base import Op, register
from .reference import run_onnx_reference
from .traits import EPILOGUE, SCHEDULABLE

FLOATS = ("float32", "float64")


class ConvLike(Op):
    """The support check shared by Conv and ConvTranspose: float dtype, fusable epilogue,
    attributes that give a valid geometry, bias and output shapes that agree with it."""
    geometry = None          # ConvGeometry / ConvTGeometry: (op, node, x shape, w shape)

    def check(self, node, g):
        dt = g.dtype(node.inputs[0])
        if dt.name not in FLOATS:
            return f"dtype {dt.name} not supported (float32, float64)"
        reason = act_check(node, dt)
        if reason:
            return reason
        shapes = static_shapes(g, [node.inputs[0], node.inputs[1], node.outputs[0]])
        if shapes is None:
            return None                     # lower() reports non-static shapes
        x, w, y = shapes
        try:
            geo = self.geometry(self, node, x, w)
        except ValueError as e:
            return str(e)
        if self._has_bias(node) and tuple(g.shape(node.inputs[2])) != (geo.cout,):
            return f"bias shape {list(g.shape(node.inputs[2]))}, expected [{geo.cout}]"
        want = (geo.batch, geo.cout, *geo.out)
        if y != want:
            return f"output shape {list(y)} disagrees with the attributes ({list(want)})"
        return conv_residual.check(node, g, y)

    @staticmethod
    def _has_bias(node):
        return len(node.inputs) > 2 and bool(node.inputs[2])


@register("Conv", since=1)
class Conv(ConvLike):
    traits = frozenset({EPILOGUE, SCHEDULABLE})
    attrs = {"auto_pad": "NOTSET", "dilations": None, "group": 1, "kernel_shape": None,
             "pads": None, "strides": None}
    geometry = ConvGeometry

    def reference(self, node, g, inputs):
        plain = unfused(conv_residual.without(node))
        y = run_onnx_reference(plain, g, inputs[:len(plain.inputs)])[0]
        if conv_residual.has_residual(node):
            y = conv_residual.reference(y, inputs[3])
        return [apply_epilogue(node, y)]

    def check(self, node, g):
        sched = node.attrs.get("aicc_schedule") or {}
        if "algo" in sched and sched["algo"] not in ALGOS:
            return f"aicc_schedule algo {sched['algo']!r} (one of {', '.join(ALGOS)})"
        return super().check(node, g)

    def emit(self, node, ctx):
        x, w = ctx.in_shape(0), ctx.in_shape(1)
        geo = ConvGeometry(self, node, x, w)
        dt = ctx.out_dtype(0)
        if numel(ctx.out_shape(0)) == 0:
            ctx("/* empty output: nothing to compute */")
            return
        bias = ctx.inp[2] if self._has_bias(node) else "NULL"
        if conv_residual.has_residual(node):      # the conv alone, then the Add's loop
            self._emit_conv(ctx, conv_residual.without(node), geo, dt, bias)
            conv_residual.pass_after(ctx, node, numel(ctx.out_shape(0)))
            return
        self._emit_conv(ctx, node, geo, dt, bias)

    @staticmethod
    def _emit_conv(ctx, node, geo, dt, bias):
        """The SIMD variants (kernels/conv/simd.py) where the target has them, else the
        portable kernels (kernels/conv/portable.py)."""
        simd = conv_simd.plan(ctx, dt, geo)
        if simd is not None:
            conv_simd.emit(ctx, node, geo, simd[0], simd[1], bias)
            return
        portable.emit(ctx, node, geo, dt, bias)
