"""Split: each output is a slab of the input along ``axis`` (negative axis counts from the
end). The slab sizes are the outputs' inferred shapes, which already encode every form of the
op: ``split`` as attribute (before opset 13) or constant input (from 13), ``num_outputs``
(from 18, the last chunk smaller when the size does not divide) and the equal split default.
Each output is one strided block copy (memcpy rows). A ``split`` input computed at run time
is never read: the static output shapes decide the chunks (a run-time value that disagrees
with them is ignored; nothing is read or written out of bounds). Dtype-agnostic, bit-exact.
"""
from __future__ import annotations

from ..emit_c.loops import numel, strides_of
from ..errors import UnsupportedError
from ..kernels.move.copy import emit_copy
from .base import Op, dtype_reason, register
from .reshape import static_output_reason
from .traits import HALF_NATIVE


@register("Split", since=1)
class Split(Op):
    traits = frozenset({HALF_NATIVE})
    attrs = {"axis": 0, "split": None, "num_outputs": None}

    def check(self, node, g):
        why = (dtype_reason(g, node.inputs[:1])
               or static_output_reason(node, g, "the run-time split input"))
        if why:
            return why
        shape = g.shape(node.inputs[0])
        r = len(shape)
        a = int(self.attr(node, "axis"))
        a = a + r if a < 0 else a
        outs = [g.shape(o) for o in node.outputs if o]
        if any(len(o) != r or any(o[d] != shape[d] for d in range(r) if d != a) for o in outs) \
                or sum(o[a] for o in outs) > shape[a]:
            return f"output shapes {[list(o) for o in outs]} do not split the input {list(shape)}"
        return None

    def view_offsets(self, node, g):
        """Every dim before the axis is 1: output k is the contiguous chunk after the ones
        before it."""
        shape = g.shape(node.inputs[0])
        r = len(shape)
        a = int(self.attr(node, "axis"))
        a = a + r if a < 0 else a
        if not all(node.outputs) or any(int(d) != 1 for d in shape[:a]):
            return None
        inner = g.type_of(node.inputs[0]).nbytes // max(int(numel(shape[:a + 1])), 1)
        offs, off = [], 0
        for o in node.outputs:
            offs.append(off * inner)
            off += int(g.shape(o)[a])
        return offs

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
            if v is None:            # read at run time: the static output shapes decide
                r = len(ctx.in_shape(0))
                a = int(self.attr(node, "axis"))
                a = a + r if a < 0 else a
                return [ctx.out_shape(k)[a] if name else dim - sum(
                    ctx.out_shape(j)[a] for j, o in enumerate(node.outputs) if o)
                    for k, name in enumerate(node.outputs)]
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
