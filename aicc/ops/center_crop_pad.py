"""CenterCropPad: crop or zero-pad each axis to the target size, centred (an odd difference
puts the extra element at the end, the spec's rounding: start = (in - out) // 2 when
cropping, (out - in) // 2 when padding).

The target sizes are the static output shape: shape inference reads a constant ``shape``
input, and a run-time ``shape`` (the conformance cases) needs the output shape declared in the
model; the ``shape`` values themselves are then not read (the static shape is the contract).
The kernel zero-fills the output when any axis is padded, then copies the overlapping box
with the strided copy of transpose.py. Bit-exact; zeros are the dtype's 0. The function
expansion of this op (the *_expanded conformance variants) has intermediate tensors whose
shape depends on the run-time ``shape`` values, so it cannot be compiled statically; this
native implementation is used whenever the node itself reaches aicc.
"""
from __future__ import annotations

from ..emit_c.loops import numel, strides_of
from ..kernels.move.copy import emit_copy, empty_guard
from .base import Op, dtype_reason, register
from .reshape import static_output_reason


@register("CenterCropPad", since=18)
class CenterCropPad(Op):
    attrs = {"axes": None}

    def check(self, node, g):
        why = (dtype_reason(g, node.inputs[:1])
               or static_output_reason(node, g, "the run-time shape input"))
        if why is None and len(g.shape(node.inputs[0])) != len(g.shape(node.outputs[0])):
            why = f"output rank differs from the input rank {len(g.shape(node.inputs[0]))}"
        return why

    def emit(self, node, ctx):
        shape, out = ctx.in_shape(0), ctx.out_shape(0)
        if empty_guard(ctx):
            return
        ct = ctx.out_ctype(0)
        box, ib, ob = [], [], []
        for n, m in zip(shape, out):
            box.append(min(n, m))
            ib.append((n - m) // 2 if n > m else 0)
            ob.append((m - n) // 2 if m > n else 0)
        ist, ost = strides_of(shape), strides_of(out)
        if any(m > n for n, m in zip(shape, out)):
            ctx("/* CenterCropPad: zeros where padded */")
            with ctx.block(f"for (size_t i = 0; i < {numel(out)}u; ++i)"):
                ctx(f"{ctx.out[0]}[i] = ({ct})0;")
        emit_copy(ctx, box, ost, ist, ct, in_base=sum(a * b for a, b in zip(ib, ist)),
                  out_base=sum(a * b for a, b in zip(ob, ost)),
                  note=f"CenterCropPad {list(shape)} -> {list(out)}: box {box} from {ib} to {ob}")
