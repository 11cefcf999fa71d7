"""MatMul (numpy semantics) on the GEMM kernel of gemm.py.

1-D operands: A [K] is a row [1, K] and B [K] a column [K, 1], the added dim being dropped
from the output. N-D operands are stacks of matrices whose batch dims broadcast. When B has
no batch dims (or only 1s), A's batch folds into M: one kernel call over [batch*M, K]. Else
one call per output matrix, the loop over batch dims written with constant bounds and
broadcast strides. A constant B is packed at compile time (every batch entry); a run-time B
is packed into step scratch, once per distinct B matrix.

Fused epilogue (set by the fusion pass): an optional 3rd input, a bias [N] (or [1]) added
along the last axis inside the kernel, then the ``aicc_act`` activation over the output.
With ``aicc_post_affine`` (pass fuse-post-affine: a batch norm after the activation) a 4th
and 5th input, mul [N] and add [N]: then ``y * mul[j] + add[j]`` per column, a multiply and
then an add (the BatchNormalization node's roundings), on each output tile of the SIMD
variants after its activation, in a pass over the output after the portable kernel.

Kernel variant (portable, avx2, avx512) chosen by gemm.gemm_plan from the target; the SIMD
variants apply bias and activation per tile inside the driver. Accumulation in the output
dtype, k ascending (FMA on the SIMD variants: see gemm.py); NaN/Inf and empty operands as in
gemm.py (K == 0 gives zeros, plus the bias when fused).
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import ctype
from ..emit_c.loops import collapse, collapsed_strides, numel
from ..kernels.gemm.call import batch_dims, check_epilogue, emit_epilogue, gemm_call, gemm_plan
from ..kernels.gemm.portable import pack_b, pack_helper, packed_elems
from ..kernels.gemm.simd import ISA as GEMM_ISA
from ..kernels.vmath.act import apply_epilogue, unfused
from .base import Op, empty_body, float_dtype_reason, register
from .normalization import POST_AFFINE as POST, emit_post_affine, post_affine_ref
from .traits import EPILOGUE, SCHEDULABLE


@register("MatMul", since=1)
class MatMul(Op):
    traits = frozenset({EPILOGUE, SCHEDULABLE})
    def check(self, node, g):
        ins = [i for i in node.inputs if i]
        r = float_dtype_reason(g.dtype(i) for i in ins)
        if r:
            return r
        sa, sb = g.shape(node.inputs[0]), g.shape(node.inputs[1])
        if len(sa) == 0 or len(sb) == 0:
            return "scalar operand"
        pa, pb, _, _, _, n = batch_dims(sa, sb)
        if (sa[-1] if len(sa) else 0) != (sb[-2] if len(sb) > 1 else sb[0]):
            return f"inner dims differ: {list(sa)} x {list(sb)}"
        if any(x != y and 1 not in (x, y) and isinstance(x, int) and isinstance(y, int)
               for x, y in zip(pa, pb)):         # a named (symbolic) dim: aicc inspect
            return f"batch dims do not broadcast: {list(sa)} x {list(sb)}"
        post = bool(node.attrs.get(POST))
        if len(node.inputs) > (5 if post else 3):
            return f"more than {5 if post else 3} inputs"
        if post:
            if len(node.inputs) != 5 or not (node.inputs[3] and node.inputs[4]):
                return "aicc_post_affine without its mul and add inputs"
            if any(tuple(g.shape(i)) != (n,) for i in node.inputs[3:5]):
                return f"post-affine mul / add not of shape [N={n}]"
        if len(node.inputs) == 3 and node.inputs[2]:
            sc = tuple(int(d) for d in g.shape(node.inputs[2]))
            if numel(sc) not in (1, n) or (len(sc) > 1 and numel(sc[:-1]) != 1):
                return f"fused bias of shape {list(sc)} is not [N={n}]"
        return check_epilogue(node, g.dtype(node.inputs[0]))

    def reference(self, node, g, inputs):
        from .reference import run_onnx_reference
        base = unfused(node)
        base.inputs = list(node.inputs[:2])
        y = run_onnx_reference(base, g, inputs[:2])[0]
        bias = inputs[2] if len(inputs) > 2 and inputs[2] is not None else None
        y = apply_epilogue(node, y, None if bias is None else np.asarray(bias).reshape(-1))
        return [post_affine_ref(y, inputs[3], inputs[4]) if node.attrs.get(POST) else y]

    def emit(self, node, ctx):
        dt = ctx.out_dtype(0)
        ct = ctype(dt)
        pa, pb, bo, m, k, n = batch_dims(ctx.in_shape(0), ctx.in_shape(1))
        total = numel(bo) * m * n
        if total == 0:
            empty_body(ctx)
            return
        plan = gemm_plan(ctx, dt, n, k)
        nb = plan.nb
        a, y = ctx.inp[0], ctx.out[0]
        c = ccs = None
        if ctx.has_input(2):
            c, ccs = ctx.inp[2], (1 if numel(ctx.in_shape(2)) > 1 else 0)
        epi = dict(c=c, crs=0, ccs=ccs or 0, beta=1.0)
        post = (ctx.inp[3], ctx.inp[4]) if node.attrs.get(POST) else None
        if plan.isa is not None:
            epi["post"] = post      # per tile in the SIMD driver
        # B operand: (row stride, col stride) of one matrix and its batch entries
        sb = ctx.in_shape(1)
        brs, bcs = (n, 1) if len(sb) > 1 else (1, 1)
        nbb = numel(pb)
        bconst = ctx.in_const(1)
        pk_elems = packed_elems(k, n, nb)
        if k == 0:
            bvar = None
        elif bconst is not None:
            mats = np.asarray(bconst, dtype=dt).reshape(nbb, k, n)
            bvar = ctx.const(np.stack([pack_b(x, nb) for x in mats]), "pk")
        else:
            bvar = ctx.scratch(pk_elems * dt.itemsize, ct, "pk")
        rows = plan.isa is not None and bool(GEMM_ISA[plan.isa].get("pack_rows"))
        pack = pack_helper(ctx, dt, nb, rows) if k and bconst is None else None

        if nbb == 1:
            # B is one matrix: A's batch folds into M (A and Y are contiguous stacks)
            if pack:
                ctx(f"{pack}({k}u, {n}u, {ctx.inp[1]}, {brs}u, {bcs}u, {bvar});")
            gemm_call(ctx, plan, dt, numel(bo) * m, n, k, a, k, 1, bvar or "NULL", y, **epi)
            emit_epilogue(ctx, node, total, dt, plan)
            _post_pass(ctx, plan, post, total // n, n)
            return

        # one GEMM per output matrix; batch loops with broadcast strides (in matrices)
        dims, full = collapse(bo, [pa, pb])
        nd = len(dims)
        strides = collapsed_strides(dims, full)
        if pack:
            ctx("size_t packed = (size_t)-1;   /* B matrix currently in the panel buffer */")
        ctx("size_t ob = 0;")
        for d in range(nd):
            ctx(f"for (size_t b{d} = 0; b{d} < {dims[d]}u; ++b{d}) {{")
            ctx.w.level += 1

        def ix(st):
            t = [f"b{d}" if st[d] == 1 else f"b{d} * {st[d]}u" for d in range(nd) if st[d]]
            return " + ".join(t) if t else "0"
        ctx(f"const size_t ia = {ix(strides[0])}, ib = {ix(strides[1])};")
        if pack:
            with ctx.block("if (ib != packed)"):
                ctx(f"{pack}({k}u, {n}u, {ctx.inp[1]} + ib * {k * n}u, {brs}u, {bcs}u, {bvar});")
                ctx("packed = ib;")
            bp = bvar
        elif bvar is not None:
            bp = f"{bvar} + ib * {pk_elems}u"
        else:
            bp = "NULL"
            ctx("(void)ib;")
        gemm_call(ctx, plan, dt, m, n, k, f"{a} + ia * {m * k}u", k, 1, bp,
                  f"{y} + ob * {m * n}u", **epi)
        ctx("++ob;")
        for _ in range(nd):
            ctx.w.level -= 1
            ctx("}")
        emit_epilogue(ctx, node, total, dt, plan)
        _post_pass(ctx, plan, post, total // n, n)


def _post_pass(ctx, plan, post, rows: int, n: int) -> None:
    """The post-affine over the whole output [rows, n] after the portable kernel (the SIMD
    drivers apply it per tile)."""
    if post is not None and plan.isa is None:
        emit_post_affine(ctx, rows, n, *post)
