"""A binary op's fused activation (elementwise.Binary, a conv's residual Add): a vector helper
over an array where the activation has one, else a small inline function per element.
"""
from __future__ import annotations

import hashlib

import numpy as np

from ...emit_c.cwriter import ctype, dtype_tag, sanitize
from .act import ACT_ATTRS, act_expr, fused_epilogue
from .mathlib import tag_of
from .vector import array_act


def fused_array_act(ctx, node, dt) -> str | None:
    """Name of the vector helper ``void f(float *y, size_t n)`` applying the node's fused
    activation over an array (float32 on the SIMD targets, for the activations that have
    one), else None: then ``fused_act_helper`` per element."""
    name, params = fused_epilogue(node)
    if name is None or dt != np.float32:
        return None
    return array_act(ctx, name, {**ACT_ATTRS.get(name, {}), **params})


def fused_act_helper(ctx, node, dt) -> str | None:
    """Name of ``static inline T f(T r)`` applying the node's fused activation (None if it
    has none): the argument rounds the binary result to the dtype before the activation."""
    name, params = fused_epilogue(node)
    if name is None:
        return None
    params = {**ACT_ATTRS.get(name, {}), **params}
    ct = ctype(dt)
    tag = sanitize(name, 16)
    if params:
        tag += "_" + hashlib.sha1(repr(sorted(params.items())).encode()).hexdigest()[:8]
    expr = act_expr(name, params, 'r', dt, ctx)
    fn = f"aicc_bact_{dtype_tag(dt)}_{tag}{tag_of(expr)}"
    shown = ", ".join(f"{k}={v}" for k, v in sorted(params.items()))
    ctx.helper(f"elementwise.act.{fn}",
               f"/* fused activation {name}({shown}) of a binary op's rounded result */\n"
               f"static inline {ct} {fn}({ct} r)\n{{\n"
               f"    return {expr};\n}}")
    return fn
