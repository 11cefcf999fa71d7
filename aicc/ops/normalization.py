"""BatchNormalization (inference), LayerNormalization, InstanceNormalization,
GroupNormalization (opset 18: scale/bias per group; opset 21: per channel).

BatchNormalization is a per-channel affine map ``y = x * mul[c] + add[c]`` with
``mul = scale / sqrt(var + eps)`` and ``add = B - mean * mul`` (onnxruntime's order of
operations). With scale/B/mean/var all constants, mul/add are computed at compile time in the
tensor dtype; otherwise a small helper computes them into step scratch at run time. The aicc
attribute ``aicc_channels_last`` (written by pass layout-nhwc, inference mode with constant
parameters) puts the channel axis last ([N, H, W, C]): the same map, bit for bit.
training_mode=1 (opset >= 14) normalizes with the batch statistics instead: per channel the
mean and the population variance over N and the spatial dims (two passes, tensor dtype),
and writes the optional running_mean/running_var outputs as
``input * momentum + current * (1 - momentum)`` (onnx.reference's formula).

The other three normalize groups of contiguous elements (a row of the trailing axes, one
channel, or one group of channels): two passes per group (mean, then the mean of squared
deviations), both accumulated in the tensor dtype in kernels/vmath/sum16.py's 16-lane order (vectorizable,
the same on every target), then ``(x - mean) * inv * scale + bias``
with ``inv = 1 / sqrt(var + eps)``. LayerNormalization's stash_type is ignored: float32
computes in float32, float64 in float64. Its optional Mean and InvStdDev outputs are written
when they have the input's dtype (float32 input; a float64 input would need float32 stats).
``aicc.LayerNormalization`` is the same op below opset 17 (written by pass fuse-layernorm).

NaN/Inf: a NaN or Inf in a group makes the whole group's output NaN (its mean or variance is
NaN); scale/bias NaN/Inf only affect their own positions. Empty tensors produce no code; an
empty normalized group (e.g. LayerNormalization over a zero-size axis) is rejected by check().
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import c_literal, ctype
from ..emit_c.loops import numel
from ..kernels.isa.registry import ISAS
from ..kernels.isa.x86 import include_vmath, simd_isa
from ..kernels.vmath.sum16 import sum16
from .base import Op, empty_body, float_dtype_reason, register


def _sfx(dt) -> str:
    return "f32" if np.dtype(dt) == np.float32 else "f64"


def _sqrt(dt) -> str:
    return "sqrtf" if np.dtype(dt) == np.float32 else "sqrt"


# -- BatchNormalization ------------------------------------------------------------------

def bn_mul_add(consts, eps: float, dt) -> tuple:
    """(mul, add) in the tensor dtype of an inference batch norm with constant scale, B, mean
    and var: ``mul = scale * (1 / sqrt(var + eps))``, ``add = B - mean * mul``; the map is
    then ``x * mul + add`` (a multiply, then an add). Also the values pass fuse-post-affine
    gives the node it fuses the norm into, so its fused map rounds as the separate node."""
    dt = np.dtype(dt)
    scale, bias, mean, var = (np.asarray(c, dtype=dt).reshape(-1) for c in consts)
    with np.errstate(all="ignore"):
        inv = (dt.type(1) / np.sqrt(var + dt.type(eps))).astype(dt)
        mul = (inv * scale).astype(dt)
        add = (bias - mean * mul).astype(dt)
    return mul, add


# a MatMul's or depthwise ConvNHWC's fused batch norm (pass fuse-post-affine): inputs mul and
# add after its activation, ``y * mul[c] + add[c]`` over the last axis (then + a residual)
POST_AFFINE = "aicc_post_affine"


def post_affine_ref(y, mul, add, resid=None):
    """numpy meaning of a post-affine on y (channels last): a multiply, an add, then the
    residual, each rounded to y's dtype as the BatchNormalization and Add nodes round."""
    y = ((y * np.asarray(mul)).astype(y.dtype) + add).astype(y.dtype)
    return y if resid is None else (y + resid).astype(y.dtype)


def emit_post_affine(ctx, rows: int, c: int, mul: str, add: str, resid: str | None = None):
    """The post-affine (and residual) in a pass over the output [rows, c] (float32), where
    the kernel did not apply it per tile: the same roundings as post_affine_ref."""
    y = ctx.out[0]
    ctx("/* fused post-affine (a batch norm after the activation)"
        + (" and residual Add */" if resid else " */"))
    with ctx.block(f"for (size_t i = 0; i < {rows}u; ++i)"):
        with ctx.block(f"for (size_t j = 0; j < {c}u; ++j)"):
            ctx(f"const float v = {y}[i * {c}u + j] * {mul}[j] + {add}[j];")
            ctx(f"{y}[i * {c}u + j] = " + (f"v + {resid}[i * {c}u + j];" if resid else "v;"))


def _affine_helper(ctx, dt) -> str:
    ct = ctype(dt)
    name = f"aicc_affine_ch_{_sfx(dt)}"
    return ctx.helper(name, f"""\
/* Per-channel affine map over [N, C, S]: y = x * mul[c] + add[c] (inference batch norm). */
static void {name}(size_t N, size_t C, size_t S, const {ct} *restrict x,
    const {ct} *restrict mul, const {ct} *restrict add, {ct} *restrict y)
{{
    for (size_t n = 0; n < N; ++n)
        for (size_t c = 0; c < C; ++c) {{
            const {ct} m = mul[c], a = add[c];
            const size_t o = (n * C + c) * S;
            for (size_t s = 0; s < S; ++s) y[o + s] = x[o + s] * m + a;
        }}
}}""")


def _affine_last_helper(ctx, dt) -> str:
    ct = ctype(dt)
    name = f"aicc_affine_last_{_sfx(dt)}"
    return ctx.helper(name, f"""\
/* Per-channel affine map over [R, C], channels last: y = x * mul[c] + add[c]. */
static void {name}(size_t R, size_t C, const {ct} *restrict x, const {ct} *restrict mul,
    const {ct} *restrict add, {ct} *restrict y)
{{
    for (size_t r = 0; r < R; ++r)
        for (size_t c = 0; c < C; ++c) y[r * C + c] = x[r * C + c] * mul[c] + add[c];
}}""")


def _bn_params_helper(ctx, dt) -> str:
    ct = ctype(dt)
    name = f"aicc_bn_params_{_sfx(dt)}"
    one = c_literal(1, dt)
    return ctx.helper(name, f"""\
/* Batch-norm statistics to an affine map: mul = scale / sqrt(var + eps), add = B - mean*mul. */
static void {name}(size_t C, const {ct} *restrict scale, const {ct} *restrict bias,
    const {ct} *restrict mean, const {ct} *restrict var, {ct} eps, {ct} *restrict mul,
    {ct} *restrict add)
{{
    for (size_t c = 0; c < C; ++c) {{
        const {ct} inv = {one} / {_sqrt(dt)}(var[c] + eps);
        mul[c] = inv * scale[c];
        add[c] = bias[c] - mean[c] * mul[c];
    }}
}}""")


def _bn_train_helper(ctx, dt) -> str:
    ct = ctype(dt)
    name = f"aicc_bn_train_{_sfx(dt)}"
    z, one = c_literal(0, dt), c_literal(1, dt)
    return ctx.helper(name, f"""\
/* Training-mode batch statistics over [N, C, S] (N*S > 0): per channel the mean and the
 * population variance (two passes) into mean/var, and the running statistics
 * in * momentum + current * (1 - momentum) into run_mean/run_var (either may be NULL). */
static void {name}(size_t N, size_t C, size_t S, const {ct} *restrict x,
    const {ct} *restrict in_mean, const {ct} *restrict in_var, {ct} momentum,
    {ct} *restrict mean, {ct} *restrict var, {ct} *restrict run_mean, {ct} *restrict run_var)
{{
    const {ct} cnt = ({ct})(N * S);
    for (size_t c = 0; c < C; ++c) {{
        {ct} sum = {z}, ss = {z};
        for (size_t n = 0; n < N; ++n)
            for (size_t s = 0; s < S; ++s) sum += x[(n * C + c) * S + s];
        const {ct} mu = sum / cnt;
        for (size_t n = 0; n < N; ++n)
            for (size_t s = 0; s < S; ++s) {{
                const {ct} t = x[(n * C + c) * S + s] - mu;
                ss += t * t;
            }}
        mean[c] = mu;
        var[c] = ss / cnt;
        if (run_mean) run_mean[c] = in_mean[c] * momentum + mu * ({one} - momentum);
        if (run_var) run_var[c] = in_var[c] * momentum + var[c] * ({one} - momentum);
    }}
}}""")


@register("BatchNormalization", since=7)
class BatchNormalization(Op):
    attrs = {"epsilon": 1e-5, "momentum": 0.9, "spatial": 1, "training_mode": 0}

    def _training(self, node, g) -> bool:
        return g.opset >= 14 and bool(self.attr(node, "training_mode"))

    @staticmethod
    def _last(node) -> bool:
        return bool(node.attrs.get("aicc_channels_last", 0))

    def check(self, node, g):
        if self._training(node, g):
            shape = g.shape(node.inputs[0])
            if numel(shape) == 0:
                return "empty input in training mode"
            if len(shape) >= 2 and numel(g.shape(node.inputs[1])) != int(shape[1]):
                return "training mode needs per-channel parameters"
            for o in node.outputs[1:]:
                if o and g.dtype(o) != g.dtype(node.inputs[0]):
                    return "running mean/var of a dtype other than the input's"
        elif self.attr(node, "training_mode"):
            return "training_mode=1"
        elif any(o for o in node.outputs[1:]):
            return "running mean/var outputs (training mode)"
        r = float_dtype_reason(g.dtype(i) for i in node.inputs[:5])
        if r:
            return r
        shape = g.shape(node.inputs[0])
        if len(shape) < 2:
            return "input of rank < 2"
        ch = numel(g.shape(node.inputs[1]))
        if any(numel(g.shape(i)) != ch for i in node.inputs[1:5]):
            return "scale/B/mean/var of different sizes"
        if self._last(node):
            if self._training(node, g) or any(g.const(i) is None for i in node.inputs[1:5]):
                return "channels last with training mode or run-time parameters"
            if int(shape[-1]) != ch:
                return f"channels last: parameters of size {ch}, last axis {shape[-1]}"
        if ch == 0 or numel(shape[1:]) % ch:
            return f"parameters of size {ch} do not match input {list(shape)}"
        return None

    def reference(self, node, g, inputs):
        """Inference mode (onnx.reference reads a momentum attribute at opsets 9-13 as
        training mode, so it is not used here); training mode at opset >= 14."""
        x, scale, b, mean, var = (np.asarray(v) for v in inputs[:5])
        eps = float(self.attr(node, "epsilon"))
        if self._training(node, g):
            axes = tuple(a for a in range(x.ndim) if a != 1)
            mom = float(self.attr(node, "momentum"))
            cm, cv = x.mean(axis=axes), x.var(axis=axes)
            shp = (1, -1) + (1,) * (x.ndim - 2)
            y = (x - cm.reshape(shp)) / np.sqrt(cv.reshape(shp) + eps) * scale.reshape(shp) \
                + b.reshape(shp)
            outs = [y, mean * mom + cm * (1 - mom), var * mom + cv * (1 - mom)]
            return [o.astype(x.dtype) for o in outs[:len(node.outputs)]]
        ch = scale.size
        per = numel(x.shape[1:]) // ch          # spatial=0 (opset < 9) uses C*H*W params
        shp = (1, ch) + (1,) * (x.ndim - 2) if per == numel(x.shape[2:]) else (1,) + x.shape[1:]
        if self._last(node):
            shp = (1,) * (x.ndim - 1) + (ch,)
        inv = (scale / np.sqrt(var + eps)).astype(x.dtype)
        y = (x - mean.reshape(shp)) * inv.reshape(shp) + b.reshape(shp)
        return [y.astype(x.dtype)]

    def emit(self, node, ctx):
        dt = ctx.out_dtype(0)
        shape = ctx.in_shape(0)
        ch = numel(ctx.in_shape(1))
        n, s = shape[0], numel(shape[1:]) // ch
        if numel(shape) == 0:
            empty_body(ctx)
            return
        eps = float(self.attr(node, "epsilon"))
        consts = [ctx.in_const(k) for k in range(1, 5)]
        if self._training(node, ctx.g):
            ct = ctype(dt)
            ws = ctx.scratch(4 * ch * dt.itemsize, ct, "ws")
            i = ctx.inp
            outs = [ctx.out[k] if len(ctx.out) > k and ctx.out[k] else "NULL" for k in (1, 2)]
            mom = c_literal(float(self.attr(node, "momentum")), dt)
            ctx(f"{_bn_train_helper(ctx, dt)}({n}u, {ch}u, {s}u, {i[0]}, {i[3]}, {i[4]}, {mom}, "
                f"{ws}, {ws} + {ch}u, {outs[0]}, {outs[1]});")
            mvar, avar = f"{ws} + {2 * ch}u", f"{ws} + {3 * ch}u"
            ctx(f"{_bn_params_helper(ctx, dt)}({ch}u, {i[1]}, {i[2]}, {ws}, {ws} + {ch}u, "
                f"{c_literal(eps, dt)}, {mvar}, {avar});")
        elif all(c is not None for c in consts):
            mul, add = bn_mul_add(consts, eps, dt)
            mvar, avar = ctx.const(mul, "mul"), ctx.const(add, "add")
        else:
            ct = ctype(dt)
            ws = ctx.scratch(2 * ch * dt.itemsize, ct, "ws")
            mvar, avar = ws, f"{ws} + {ch}u"
            i = ctx.inp
            ctx(f"{_bn_params_helper(ctx, dt)}({ch}u, {i[1]}, {i[2]}, {i[3]}, {i[4]}, "
                f"{c_literal(eps, dt)}, {mvar}, {avar});")
        if self._last(node):
            ctx(f"{_affine_last_helper(ctx, dt)}({numel(shape) // ch}u, {ch}u, {ctx.inp[0]}, "
                f"{mvar}, {avar}, {ctx.out[0]});")
            return
        ctx(f"{_affine_helper(ctx, dt)}({n}u, {ch}u, {s}u, {ctx.inp[0]}, {mvar}, {avar}, "
            f"{ctx.out[0]});")


# -- LayerNormalization ------------------------------------------------------------------

def _stats_code(ctx, dt, row, length) -> str:
    """C statements: mean ``mu`` and ``inv`` = 1/sqrt(var + eps) of ``row[0:length]`` (two
    passes, each a sum in sum16's order)."""
    ct = ctype(dt)
    return f"""\
        const {ct} mu = {sum16(ctx, dt)}({row}, {length}) / ({ct}){length};
        const {ct} ss = {sum16(ctx, dt, 'sqdev')}({row}, {length}, mu);
        const {ct} inv = {c_literal(1, dt)} / {_sqrt(dt)}(ss / ({ct}){length} + eps);"""


def _layernorm_helper(ctx, dt) -> str:
    ct = ctype(dt)
    name = f"aicc_layernorm_{_sfx(dt)}"
    stats = _stats_code(ctx, dt, "xr", "D")
    return ctx.helper(name, f"""\
/* Layer norm of R rows of D: y = (x - mean) * inv * scale[d*ss] (+ bias[d*bs]), two-pass
 * statistics per row; bias, mean_out and inv_out may be NULL. */
static void {name}(size_t R, size_t D, const {ct} *restrict x,
    const {ct} *restrict scale, size_t ss_, const {ct} *restrict bias, size_t bs, {ct} eps,
    {ct} *restrict y, {ct} *restrict mean_out, {ct} *restrict inv_out)
{{
    for (size_t r = 0; r < R; ++r) {{
        const {ct} *restrict xr = x + r * D;
        {ct} *restrict yr = y + r * D;
{stats}
        if (bias) {{
            for (size_t d = 0; d < D; ++d)
                yr[d] = (xr[d] - mu) * inv * scale[d * ss_] + bias[d * bs];
        }} else {{
            for (size_t d = 0; d < D; ++d) yr[d] = (xr[d] - mu) * inv * scale[d * ss_];
        }}
        if (mean_out) mean_out[r] = mu;
        if (inv_out) inv_out[r] = inv;
    }}
}}""")


def _param_stride(shape, inner_shape) -> int | None:
    """0 for a single value, 1 for a full [inner] parameter, None if unsupported."""
    s = tuple(int(d) for d in shape)
    while s and s[0] == 1 and len(s) > len(inner_shape):
        s = s[1:]
    if numel(s) == 1:
        return 0
    pad = (1,) * (len(inner_shape) - len(s)) + s
    if len(pad) == len(inner_shape) and numel(pad) == numel(inner_shape) and \
            all(a == b or a == 1 for a, b in zip(pad, inner_shape)):
        return 1
    return None


@register("LayerNormalization", since=17)
class LayerNormalization(Op):
    attrs = {"axis": -1, "epsilon": 1e-5, "stash_type": 1}

    def _split(self, node, shape):
        """(axis, rows, row length): the input as rows normalised from ``axis`` on."""
        ax = int(self.attr(node, "axis"))
        ax = ax + len(shape) if ax < 0 else ax
        return ax, numel(shape[:ax]), numel(shape[ax:])

    def check(self, node, g):
        r = float_dtype_reason(g.dtype(i) for i in node.inputs if i)
        if r:
            return r
        shape = g.shape(node.inputs[0])
        ax = int(self.attr(node, "axis"))
        if not -len(shape) <= ax < len(shape):
            return f"axis {ax} out of range for rank {len(shape)}"
        ax, rows, d = self._split(node, shape)
        if d == 0 and rows:
            return "empty normalized axes"
        for k in (1, 2):
            if len(node.inputs) > k and node.inputs[k]:
                if _param_stride(g.shape(node.inputs[k]), shape[ax:]) is None:
                    return f"scale/bias of shape {list(g.shape(node.inputs[k]))} for " \
                           f"normalized shape {list(shape[ax:])}"
        for o in node.outputs[1:]:
            if o and g.dtype(o) != g.dtype(node.inputs[0]):
                return "Mean/InvStdDev outputs of a dtype other than the input's"
        return None

    def emit(self, node, ctx):
        dt = ctx.out_dtype(0)
        shape = ctx.in_shape(0)
        ax, rows, d = self._split(node, shape)
        if rows * d == 0:
            empty_body(ctx)
            return
        inner = shape[ax:]
        ss = _param_stride(ctx.in_shape(1), inner)
        bias, bs = "NULL", 0
        if ctx.has_input(2):
            bias, bs = ctx.inp[2], _param_stride(ctx.in_shape(2), inner)
        outs = [ctx.out[k] if len(ctx.out) > k and ctx.out[k] else "NULL" for k in (1, 2)]
        fn = _layernorm_helper(ctx, dt)
        isa = simd_isa(ctx) if np.dtype(dt) == np.float32 else None
        if isa and ISAS[isa].vmath.get("layernorm"):     # an ISA's rows (the same bits)
            ctx.kernel = isa
            include_vmath(ctx, isa)
            fn = ISAS[isa].vmath["layernorm"](ctx, fn)
        ctx(f"{fn}({rows}u, {d}u, {ctx.inp[0]}, {ctx.inp[1]}, {ss}u, "
            f"{bias}, {bs}u, {c_literal(float(self.attr(node, 'epsilon')), dt)}, {ctx.out[0]}, "
            f"{outs[0]}, {outs[1]});")


@register("LayerNormalization", domain="aicc")
class AiccLayerNormalization(LayerNormalization):
    """aicc.LayerNormalization: LayerNormalization for graphs below opset 17 (pass
    fuse-layernorm writes it for the LayerNorm chain of TorchScript exports); numpy reference,
    as onnx.reference cannot run the aicc domain."""

    def reference(self, node, g, inputs):
        x = np.asarray(inputs[0])
        ax = int(self.attr(node, "axis")) % max(x.ndim, 1)
        axes = tuple(range(ax, x.ndim))
        eps = x.dtype.type(float(self.attr(node, "epsilon")))
        with np.errstate(all="ignore"):
            mean = x.mean(axis=axes, keepdims=True)
            inv = x.dtype.type(1) / np.sqrt(((x - mean) ** 2).mean(axis=axes, keepdims=True) + eps)
            y = (x - mean) * inv * np.asarray(inputs[1])
            if len(inputs) > 2 and inputs[2] is not None:
                y = y + np.asarray(inputs[2])
        outs = [y.astype(x.dtype), mean.astype(x.dtype), inv.astype(x.dtype)]
        return outs[:len(node.outputs)]


# -- Instance / Group normalization --------------------------------------------------------

def _groupnorm_helper(ctx, dt) -> str:
    ct = ctype(dt)
    name = f"aicc_groupnorm_{_sfx(dt)}"
    stats = _stats_code(ctx, dt, "xg", "D")
    return ctx.helper(name, f"""\
/* Group norm over [N, G*CG, S]: each group of CG channels (D = CG*S contiguous values) is
 * normalized with its two-pass mean/variance, then channel c = g*CG + j is scaled by
 * scale[c / pdiv] and shifted by bias[c / pdiv] (pdiv = 1: per channel, CG: per group). */
static void {name}(size_t N, size_t G, size_t CG, size_t S,
    const {ct} *restrict x, const {ct} *restrict scale, const {ct} *restrict bias,
    size_t pdiv, {ct} eps, {ct} *restrict y)
{{
    const size_t D = CG * S;
    for (size_t ng = 0; ng < N * G; ++ng) {{
        const {ct} *restrict xg = x + ng * D;
        {ct} *restrict yg = y + ng * D;
{stats}
        for (size_t j = 0; j < CG; ++j) {{
            const size_t c = (ng % G) * CG + j;
            const {ct} m = inv * scale[c / pdiv], b = bias[c / pdiv];
            for (size_t s = 0; s < S; ++s) yg[j * S + s] = (xg[j * S + s] - mu) * m + b;
        }}
    }}
}}""")


class _GroupLike(Op):
    def check(self, node, g):
        r = float_dtype_reason(g.dtype(i) for i in node.inputs[:3])
        if r:
            return r
        shape = g.shape(node.inputs[0])
        if len(shape) < 2:
            return "input of rank < 2"
        groups, per = self._groups(node, g)
        if groups <= 0 or int(shape[1]) % groups:
            return f"{shape[1]} channels not divisible into {groups} groups"
        if numel(shape[2:]) == 0 and numel(shape):
            return "empty spatial axes"
        for k in (1, 2):
            if numel(g.shape(node.inputs[k])) != per:
                return f"scale/bias of size {numel(g.shape(node.inputs[k]))}, expected {per}"
        return None

    def emit(self, node, ctx):
        dt = ctx.out_dtype(0)
        shape = ctx.in_shape(0)
        if numel(shape) == 0:
            empty_body(ctx)
            return
        groups, per = self._groups(node, ctx.g)
        c, s = shape[1], numel(shape[2:])
        cg = c // groups
        pdiv = 1 if per == c else cg
        eps = c_literal(float(self.attr(node, "epsilon")), dt)
        ctx(f"{_groupnorm_helper(ctx, dt)}({shape[0]}u, {groups}u, {cg}u, {s}u, {ctx.inp[0]}, "
            f"{ctx.inp[1]}, {ctx.inp[2]}, {pdiv}u, {eps}, {ctx.out[0]});")


@register("InstanceNormalization", since=6)
class InstanceNormalization(_GroupLike):
    attrs = {"epsilon": 1e-5}

    def _groups(self, node, g):
        c = int(g.shape(node.inputs[0])[1])
        return c, c


@register("GroupNormalization", since=18)
class GroupNormalization(_GroupLike):
    attrs = {"epsilon": 1e-5, "num_groups": None, "stash_type": 1}

    def _groups(self, node, g):
        groups = int(self.attr(node, "num_groups"))
        per = int(g.shape(node.inputs[0])[1]) if g.opset >= 21 else groups
        return groups, per
