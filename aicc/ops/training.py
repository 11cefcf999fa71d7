"""ai.onnx.preview.training optimizers: Momentum (standard and nesterov), Adam, Adagrad.

Deterministic element-wise math on variadic groups of tensors. Inputs are ``R`` (learning
rate, float/double scalar), ``T`` (int64 step count, scalar), then n tensors X, n gradients G
and the n (Momentum, Adagrad) or 2n (Adam: V then H) state tensors; outputs are the n new X,
then the new states, in the same order (an omitted output is skipped). Every tensor group i
must have X, G and states of one shape; R and T are read at run time.

Formulas follow onnx.reference (the spec): the per-element arithmetic is done in the tensors'
type (attributes rounded to it, as numpy's weak Python floats), the scalar learning-rate
adjustments (Adagrad's r / (1 + t * decay), Adam's bias correction) in double. NaN/Inf in the
inputs propagate as in the reference (no special cases); nothing is read out of bounds.
"""
from __future__ import annotations

import numpy as np

from ..emit_c.loops import numel
from .base import Op, register

DOMAIN = "ai.onnx.preview.training"


def _lit(v, ct) -> str:
    v = float(np.float32(v)) if ct == "float" else float(v)
    return f"{v!r}" + ("f" if ct == "float" else "") if np.isfinite(v) else "0"


class _Optimizer(Op):
    n_states = 1
    folds = False

    def groups(self, node):
        n = (len(node.inputs) - 2) // (2 + self.n_states)
        return n

    def check(self, node, g):
        k = 2 + self.n_states
        if len(node.inputs) < 2 + k or (len(node.inputs) - 2) % k:
            return f"needs R, T and {k}-tuples of tensors (got {len(node.inputs)} inputs)"
        n = self.groups(node)
        if any(not i for i in node.inputs):
            return "omitted inputs not supported"
        if g.dtype(node.inputs[1]).name != "int64":
            return "T must be int64"
        if g.dtype(node.inputs[0]).name not in ("float32", "float64"):
            return "R must be float32 or float64"
        for i in range(n):
            names = [node.inputs[2 + i + j * n] for j in range(k)]
            names += [node.outputs[i + j * n] for j in range(1 + self.n_states)
                      if i + j * n < len(node.outputs) and node.outputs[i + j * n]]
            dts = {g.dtype(m).name for m in names}
            if len(dts) != 1 or dts.pop() not in ("float32", "float64"):
                return f"group {i}: tensors must share one float32/float64 dtype"
            shapes = {tuple(g.shape(m)) for m in names}
            if len(shapes) != 1:
                return f"group {i}: tensors of different shapes {sorted(shapes)}"
        if self.op_type == "Momentum" and self.attr(node, "mode") not in ("standard", "nesterov"):
            return f"mode {self.attr(node, 'mode')!r} not supported"
        for a, v in self.attrs.items():
            if v is None and a not in node.attrs:
                return f"attribute {a} is required"
        return None

    def emit(self, node, ctx):
        n = self.groups(node)
        ctx(f"/* {self.op_type} over {n} tensor(s): R = {ctx.inp[0]}[0], T = {ctx.inp[1]}[0] */")
        ctx(f"const double r = (double){ctx.inp[0]}[0];")
        ctx(f"const int64_t t = {ctx.inp[1]}[0];")
        self.scalars(node, ctx)
        for i in range(n):
            ins = [ctx.inp[2 + i + j * n] for j in range(2 + self.n_states)]
            outs = [ctx.out[i + j * n] if i + j * n < len(ctx.out) else None
                    for j in range(1 + self.n_states)]
            size = numel(ctx.in_shape(2 + i))
            ct = ctx.in_ctype(2 + i)
            if size == 0 or not any(outs):
                for o in outs:
                    if o:
                        ctx(f"(void){o};")
                continue
            with ctx.block(f"for (size_t j = 0; j < {size}u; ++j)"):
                self.element(node, ctx, ct, ins, outs)

    def scalars(self, node, ctx):
        pass

    def store(self, ctx, out, expr):
        if out:
            ctx(f"{out}[j] = {expr};")


@register("Momentum", since=1, domain=DOMAIN)
class Momentum(_Optimizer):
    attrs = {"alpha": None, "beta": None, "mode": None, "norm_coefficient": None}
    n_states = 1

    def element(self, node, ctx, ct, ins, outs):
        x, gr, v = ins
        a = _lit(self.attr(node, "alpha"), ct)
        b = _lit(self.attr(node, "beta"), ct)
        nc = _lit(self.attr(node, "norm_coefficient"), ct)
        ctx(f"const {ct} g = {nc} * {x}[j] + {gr}[j];")
        ctx(f"const {ct} v = {a} * {v}[j] + (t > 0 ? {b} : ({ct})1) * g;")
        if self.attr(node, "mode") == "nesterov":
            self.store(ctx, outs[0], f"({ct})({x}[j] - ({ct})r * (g + {a} * v))")
        else:
            self.store(ctx, outs[0], f"({ct})({x}[j] - ({ct})r * v)")
        self.store(ctx, outs[1], "v")


@register("Adagrad", since=1, domain=DOMAIN)
class Adagrad(_Optimizer):
    attrs = {"decay_factor": 0.0, "epsilon": 1e-6, "norm_coefficient": 0.0}
    n_states = 1

    def scalars(self, node, ctx):
        ctx(f"const double rr = r / (1.0 + (double)t * {float(self.attr(node, 'decay_factor'))!r});")

    def element(self, node, ctx, ct, ins, outs):
        x, gr, h = ins
        nc = _lit(self.attr(node, "norm_coefficient"), ct)
        eps = _lit(self.attr(node, "epsilon"), ct)
        sq = "sqrtf" if ct == "float" else "sqrt"
        ctx(f"const {ct} g = {nc} * {x}[j] + {gr}[j];")
        ctx(f"const {ct} h = {h}[j] + g * g;")
        ctx(f"const {ct} d = {sq}(h) + {eps};")
        self.store(ctx, outs[0], f"({ct})((double){x}[j] - rr * (double)(g / d))")
        self.store(ctx, outs[1], "h")


@register("Adam", since=1, domain=DOMAIN)
class Adam(_Optimizer):
    attrs = {"alpha": 0.9, "beta": 0.999, "epsilon": 1e-6, "norm_coefficient": 0.0,
             "norm_coefficient_post": 0.0}
    n_states = 2

    def scalars(self, node, ctx):
        a = float(self.attr(node, "alpha"))
        b = float(self.attr(node, "beta"))
        ctx(f"const double rr = t > 0 ? r * sqrt(1.0 - pow({b!r}, (double)t)) / "
            f"(1.0 - pow({a!r}, (double)t)) : r;")

    def element(self, node, ctx, ct, ins, outs):
        x, gr, v, h = ins
        a, b = self.attr(node, "alpha"), self.attr(node, "beta")
        nc = _lit(self.attr(node, "norm_coefficient"), ct)
        eps = _lit(self.attr(node, "epsilon"), ct)
        post = _lit(1 - float(self.attr(node, "norm_coefficient_post")), ct)
        sq = "sqrtf" if ct == "float" else "sqrt"
        ctx(f"const {ct} g = {nc} * {x}[j] + {gr}[j];")
        ctx(f"const {ct} v = {_lit(a, ct)} * {v}[j] + {_lit(1 - float(a), ct)} * g;")
        ctx(f"const {ct} h = {_lit(b, ct)} * {h}[j] + {_lit(1 - float(b), ct)} * (g * g);")
        ctx(f"const {ct} d = {sq}(h) + {eps};")
        ctx(f"const double xn = (double){x}[j] - rr * (double)(v / d);")
        self.store(ctx, outs[0], f"({ct})({post} * ({ct})xn)")
        self.store(ctx, outs[1], "v")
        self.store(ctx, outs[2], "h")
