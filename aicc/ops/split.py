"""Split: each output is a slab of the input along ``axis`` (negative axis counts from the
end). The slab sizes are the outputs' inferred shapes, which already encode every form of the
op: ``split`` as attribute (before opset 13) or constant input (from 13), ``num_outputs``
(from 18, the last chunk smaller when the size does not divide) and the equal split default.
Each output is one strided block copy (memcpy rows). Dtype-agnostic, bit-exact.
"""
from __future__ import annotations

from ..errors import UnsupportedError
from .base import Op, register
from .loops import numel, strides_of
from .reshape import runtime_input_reason
from .transpose import dtype_reason, emit_copy


@register("Split", since=1)
class Split(Op):
    attrs = {"axis": 0, "split": None, "num_outputs": None}

    def check(self, node, g):
        return (dtype_reason(g, node.inputs[:1])
                or runtime_input_reason(node, g, (1,), "split input"))

    def emit(self, node, ctx):
        shape = ctx.in_shape(0)
        r = len(shape)
        axis = int(self.attr(node, "axis"))
        axis = axis + r if axis < 0 else axis
        ist = strides_of(shape)
        sizes = self.sizes(node, ctx, shape[axis])
        off = 0
        for k, name in enumerate(node.outputs):
            if not name:
                off += sizes[k]
                continue
            oshape = ctx.out_shape(k)
            assert oshape[axis] == sizes[k], (oshape, sizes)
            if numel(oshape) == 0:
                ctx(f"(void){ctx.out[k]};  /* output {k} is empty */")
            else:
                emit_copy(ctx, oshape, strides_of(oshape), ist, ctx.out_ctype(k),
                          out_var=ctx.out[k], in_base=off * ist[axis],
                          note=f"output {k} = input[{off}:{off + oshape[axis]}] along axis {axis}")
            off += oshape[axis]

    def sizes(self, node, ctx, dim):
        """Chunk sizes along the axis, per the op version's rules."""
        n = len(node.outputs)
        if ctx.has_input(1):
            v = ctx.in_const(1)
            if v is None:
                raise UnsupportedError(f"Split {node.name}: split input is not a constant")
            sizes = [int(x) for x in v.reshape(-1)]
        elif self.attr(node, "split") is not None:
            sizes = [int(x) for x in self.attr(node, "split")]
        elif self.attr(node, "num_outputs") is not None:
            c = -(-dim // int(self.attr(node, "num_outputs")))
            sizes = [max(0, min(c, dim - c * k)) for k in range(n)]
        else:
            sizes = [dim // n] * n
        if len(sizes) != n or sum(sizes) != dim:
            raise UnsupportedError(f"Split {node.name}: sizes {sizes} do not split {dim}")
        return sizes
