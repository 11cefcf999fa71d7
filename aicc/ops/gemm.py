"""Gemm: ``Y[M,N] = alpha * (A @ B) + beta * C`` (transA / transB; C broadcast). The kernel,
its variants and its rounding are described in kernels/gemm/call.py (shared with MatMul).
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import ctype
from ..kernels.gemm.call import a_rows, check_epilogue, emit_epilogue, gemm_call, gemm_plan
from ..kernels.gemm.portable import pack_b, pack_helper, packed_elems
from ..kernels.vmath.act import apply_epilogue, unfused
from .base import Op, empty_body, float_dtype_reason, register
from .traits import EPILOGUE, SCHEDULABLE


@register("Gemm", since=7)
class Gemm(Op):
    traits = frozenset({EPILOGUE, SCHEDULABLE})
    attrs = {"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 0}

    def _mnk(self, node, g):
        sa, sb = g.shape(node.inputs[0]), g.shape(node.inputs[1])
        m, k = (sa[1], sa[0]) if self.attr(node, "transA") else (sa[0], sa[1])
        n = sb[0] if self.attr(node, "transB") else sb[1]
        return int(m), int(n), int(k)

    def check(self, node, g):
        ins = [i for i in node.inputs if i]
        r = float_dtype_reason(g.dtype(i) for i in ins)
        if r:
            return r
        if len(g.shape(node.inputs[0])) != 2 or len(g.shape(node.inputs[1])) != 2:
            return "A and B must be 2-D"
        if len(node.inputs) > 2 and node.inputs[2]:
            m, n, _ = self._mnk(node, g)
            sc = tuple(int(d) for d in g.shape(node.inputs[2]))
            if len(sc) > 2 or any(d not in (1, full) for d, full in zip(sc[::-1], (n, m))):
                return f"C of shape {list(sc)} does not broadcast to [{m}, {n}]"
        return check_epilogue(node, g.dtype(node.inputs[0]))

    def reference(self, node, g, inputs):
        from .reference import run_onnx_reference
        y = run_onnx_reference(unfused(node), g, inputs)[0]
        return [apply_epilogue(node, y)]

    def emit(self, node, ctx):
        g, dt = ctx.g, ctx.out_dtype(0)
        m, n, k = self._mnk(node, g)
        ta, tb = self.attr(node, "transA"), self.attr(node, "transB")
        alpha, beta = float(self.attr(node, "alpha")), float(self.attr(node, "beta"))
        if m * n == 0:
            empty_body(ctx)
            return
        plan = gemm_plan(ctx, dt, n, k)
        nb = plan.nb
        ars, acs = (1, m) if ta else (k, 1)
        a, ars, acs = a_rows(ctx, plan, dt, m, k, ctx.inp[0], ars, acs)
        bconst = ctx.in_const(1)
        if k == 0:
            bp = "NULL"
        elif bconst is not None:
            b2 = np.asarray(bconst).T if tb else np.asarray(bconst)
            bp = ctx.const(pack_b(np.ascontiguousarray(b2, dtype=dt), nb), "pk")
        else:
            bp = ctx.scratch(packed_elems(k, n, nb) * dt.itemsize, ctype(dt), "pk")
            brs, bcs = (1, k) if tb else (n, 1)
            ctx(f"{pack_helper(ctx, dt, nb)}({k}u, {n}u, {ctx.inp[1]}, {brs}u, {bcs}u, {bp});")
        c, crs, ccs = None, 0, 0
        if ctx.has_input(2):
            sc = (1, 1) + ctx.in_shape(2)
            cm, cn = sc[-2], sc[-1]
            c, crs, ccs = ctx.inp[2], (cn if cm != 1 else 0), (1 if cn != 1 else 0)
        gemm_call(ctx, plan, dt, m, n, k, a, ars, acs, bp, ctx.out[0], alpha=alpha,
                  c=c, crs=crs, ccs=ccs, beta=beta)
        emit_epilogue(ctx, node, m * n, dt, plan)
