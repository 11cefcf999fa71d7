"""Dropout (opset 7-11: ``ratio`` attribute, always inference; opset 12+: ``ratio`` and
``training_mode`` inputs, ``seed`` attribute).

Inference (training_mode absent or false, or ratio 0): ``output = input`` (bit for bit, NaN
payloads kept) and the optional mask is all true. remove-identity (passes/cleanup.py) already
bypasses an inference Dropout whose mask is unused; this module compiles the rest.

Training mode with ratio > 0 is random. ONNX's reference (and the conformance expected
outputs) draw ``numpy.random.RandomState(seed).uniform(0, 1, shape) >= ratio`` as the keep
mask and scale kept elements by ``1 / (1 - ratio)``. When the node has a ``seed`` attribute,
the kernel reproduces exactly that: numpy's legacy MT19937 seeding (init_genrand), its
53-bit doubles, the same comparison in double precision, and the scale computed in the
ratio's type; so a compiled model matches onnx.reference (not onnxruntime, whose generator
differs). Without a seed the draws are not reproducible by anything, and a node whose
training_mode is not a compile-time false is refused ("random in training mode"). Training
mode needs float32/float64 data and ratio; a ratio of 1 or more drops everything (output 0,
no division), NaN ratio keeps nothing either (comparison false) and writes zeros.
training_mode and ratio are read at run time when they are graph inputs.
"""
from __future__ import annotations

import numpy as np

from ..emit_c.loops import numel
from .base import Op, dtype_reason, register
from .traits import HALF_NATIVE

_MT = r"""/* numpy's legacy RandomState(seed) MT19937 (init_genrand seeding, 53-bit doubles):
   the keep mask of a training-mode Dropout is uniform(0,1) >= ratio, as onnx.reference */
static void aicc_mt_seed(uint32_t *key, uint32_t seed)
{
    size_t i;
    for (i = 0; i < 624u; ++i) {
        key[i] = seed;
        seed = (uint32_t)(1812433253u * (seed ^ (seed >> 30)) + (uint32_t)(i + 1u));
    }
}

static uint32_t aicc_mt_next(uint32_t *key, size_t *pos)
{
    uint32_t y;
    if (*pos == 624u) {
        size_t i;
        for (i = 0; i < 624u; ++i) {
            uint32_t v = (key[i] & 0x80000000u) | (key[(i + 1u) % 624u] & 0x7fffffffu);
            key[i] = key[(i + 397u) % 624u] ^ (v >> 1) ^ ((v & 1u) ? 0x9908b0dfu : 0u);
        }
        *pos = 0;
    }
    y = key[(*pos)++];
    y ^= (y >> 11);
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= (y >> 18);
    return y;
}

static double aicc_mt_double(uint32_t *key, size_t *pos)
{
    uint32_t a = aicc_mt_next(key, pos) >> 5, b = aicc_mt_next(key, pos) >> 6;
    return ((double)a * 67108864.0 + (double)b) / 9007199254740992.0;
}
"""


def _training_const(node, g):
    """Compile-time training_mode: False/True, or None when read at run time."""
    if len(node.inputs) < 3 or not node.inputs[2]:
        return False
    v = g.const(node.inputs[2])
    return None if v is None else bool(np.asarray(v).reshape(-1)[0])


@register("Dropout", since=1)
class Dropout(Op):
    """Opset < 12: inference only (the ratio attribute does not matter)."""
    traits = frozenset({HALF_NATIVE})
    attrs = {"ratio": 0.5, "is_test": 0}
    folds = False

    def check(self, node, g):
        # (absent is_test counts as inference, as remove-identity does)
        if g.opset < 7 and int(node.attrs.get("is_test", 1)) == 0:
            return "random in training mode (is_test=0): not reproducible"
        return dtype_reason(g, [node.inputs[0]] + [o for o in node.outputs if o])

    def emit(self, node, ctx):
        _emit_copy(ctx)
        if len(ctx.out) > 1 and ctx.out[1]:
            n = numel(ctx.out_shape(1))
            ctx("/* Dropout mask: all kept in inference */")
            if n:
                with ctx.block(f"for (size_t i = 0; i < {n}u; ++i)"):
                    ct = ctx.out_ctype(1)
                    one = "(uint16_t)0x3C00u" if ctx.out_dtype(1).name == "float16" else f"({ct})1"
                    ctx(f"{ctx.out[1]}[i] = {one};")


def _emit_copy(ctx):
    nbytes = ctx.g.type_of(ctx.node.outputs[0]).nbytes
    ctx("/* Dropout in inference: output = input */")
    if nbytes:
        ctx(f"memcpy({ctx.out[0]}, {ctx.inp[0]}, {nbytes}u);")


@register("Dropout", since=12)
class Dropout12(Op):
    traits = frozenset({HALF_NATIVE})
    attrs = {"seed": None}
    folds = False

    def check(self, node, g):
        why = dtype_reason(g, [i for i in node.inputs if i] + [o for o in node.outputs if o])
        if why:
            return why
        if _training_const(node, g) is False:
            return None
        if self.attr(node, "seed") is None:
            return ("random in training mode: training_mode is not a constant false and the "
                    "node has no seed attribute, so its draws are not reproducible")
        x_dt = g.dtype(node.inputs[0]).name
        r_dt = g.dtype(node.inputs[1]).name if len(node.inputs) > 1 and node.inputs[1] else "float32"
        if x_dt not in ("float32", "float64") or r_dt not in ("float32", "float64"):
            return f"training mode needs float32/float64 data and ratio (got {x_dt}, {r_dt})"
        return None

    def emit(self, node, ctx):
        has_mask = len(ctx.out) > 1 and bool(ctx.out[1])
        n = numel(ctx.in_shape(0))
        train = _training_const(node, ctx.g)
        if train is False or n == 0:
            _emit_copy(ctx)
            if has_mask and n:
                with ctx.block(f"for (size_t i = 0; i < {n}u; ++i)"):
                    ctx(f"{ctx.out[1]}[i] = 1;")
            return
        ctx.helper("dropout.mt19937", _MT)
        x, y = ctx.inp[0], ctx.out[0]
        xt = ctx.in_ctype(0)
        rt = ctx.in_ctype(1) if ctx.has_input(1) else "float"
        ratio = f"{ctx.inp[1]}[0]" if ctx.has_input(1) else "0.5f"
        one = "1.0f" if rt == "float" else "1.0"
        tm = "1" if train else f"{ctx.inp[2]}[0]"
        seed = int(self.attr(node, "seed")) & 0xFFFFFFFF
        ctx("/* Dropout: training mode with ratio > 0 keeps x where numpy's "
            f"RandomState({seed}).uniform >= ratio, scaled by 1/(1-ratio) */")
        ctx(f"const {rt} r = {ratio};")
        with ctx.block(f"if (!{tm} || r == 0)"):
            ctx(f"memcpy({y}, {x}, {n}u * sizeof({xt}));")
            if has_mask:
                with ctx.block(f"for (size_t i = 0; i < {n}u; ++i)"):
                    ctx(f"{ctx.out[1]}[i] = 1;")
            ctx("return;")
        key = ctx.scratch(624 * 4, "uint32_t", "mt")
        ctx(f"const {rt} scale = (r < {one}) ? {one} / ({one} - r) : 0;")
        ctx("size_t pos = 624u;")
        ctx(f"aicc_mt_seed({key}, {seed}u);")
        with ctx.block(f"for (size_t i = 0; i < {n}u; ++i)"):
            ctx(f"const int keep = aicc_mt_double({key}, &pos) >= (double)r;")
            ctx(f"{y}[i] = keep ? ({xt})({x}[i] * ({xt})scale) : ({xt})0;")
            if has_mask:
                ctx(f"{ctx.out[1]}[i] = (uint8_t)keep;")
