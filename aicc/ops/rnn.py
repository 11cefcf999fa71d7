"""RNN, LSTM and GRU (float32, float64): direction forward / reverse / bidirectional,
activations with activation_alpha / activation_beta, clip, sequence_lens, initial_h,
initial_c, peepholes (LSTM), input_forget (LSTM), linear_before_reset (GRU), layout 0 and 1,
any subset of the outputs Y, Y_h, Y_c. Kernels: kernels/rnn/cells.py (one shared driver; the
weights are used in their ONNX layout, constant or fed at run time).

Activations: Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh,
HardSigmoid, Elu, Softsign, Softplus (names case-insensitive), f/g(/h) per direction,
forward direction first. activation_alpha / activation_beta are consumed in order by the
activations that take them (alpha: Affine, LeakyRelu, ThresholdedRelu, ScaledTanh,
HardSigmoid, Elu; beta: Affine, ScaledTanh, HardSigmoid); a missing value defaults to
LeakyRelu 0.01, HardSigmoid 0.2 / 0.5, Elu 1.0, otherwise 0 (as onnxruntime). A bidirectional
node listing one direction's activations uses them for both.

sequence_lens: each batch entry runs its own length L (values clamped to [0, seq_length]);
reverse runs t = L-1 .. 0; Y is zero at t >= L; Y_h/Y_c hold the state after the entry's last
step, zero when L == 0 (not the initial state). As onnxruntime.

clip: gate pre-activations (after biases and peepholes) are clamped to [-clip, clip] before
their activation; a NaN stays NaN. NaN/Inf otherwise follow IEEE arithmetic and math.h.
"""
from __future__ import annotations

import hashlib

import numpy as np

from ..emit_c.cwriter import c_float, ctype, sanitize
from ..kernels.conv.base_c import suffix, typed
from ..kernels.isa.x86 import include, simd_isa
from ..kernels.isa.registry import ISAS
from ..kernels.move.copy import avx_helper, c_helper
from ..kernels.rnn.cells import CELL, DRIVER, PARAMS, linalg, tch
from ..kernels.vmath.act import ACT
from ..kernels.vmath.vector import array_act
from .base import Op, register

FLOATS = ("float32", "float64")

# name (lower case) -> (canonical name, takes alpha, takes beta, default alpha, default beta)
ACTS = {
    "relu": ("Relu", False, False, 0.0, 0.0),
    "tanh": ("Tanh", False, False, 0.0, 0.0),
    "sigmoid": ("Sigmoid", False, False, 0.0, 0.0),
    "affine": ("Affine", True, True, 0.0, 0.0),
    "leakyrelu": ("LeakyRelu", True, False, 0.01, 0.0),
    "thresholdedrelu": ("ThresholdedRelu", True, False, 0.0, 0.0),
    "scaledtanh": ("ScaledTanh", True, True, 0.0, 0.0),
    "hardsigmoid": ("HardSigmoid", True, True, 0.2, 0.5),
    "elu": ("Elu", True, False, 1.0, 0.0),
    "softsign": ("Softsign", False, False, 0.0, 0.0),
    "softplus": ("Softplus", False, False, 0.0, 0.0),
}


def _act_c(name, alpha, beta, x, dt):
    """C expression of an RNN activation of the C variable x."""
    m = (lambda f: f + "f") if dt == np.float32 else (lambda f: f)
    L = lambda v: c_float(v, dt)  # noqa: E731
    if name == "Affine":
        return f"({L(alpha)} * {x} + {L(beta)})"
    if name == "ScaledTanh":
        return f"({L(alpha)} * {m('tanh')}({L(beta)} * {x}))"
    return ACT[name](x, {"alpha": alpha, "beta": beta}, m, L)


class _Recurrent(Op):
    kind = 0            # 0 RNN, 1 LSTM, 2 GRU
    gates = 1
    default_acts = ("Tanh",)
    attrs = {"activation_alpha": None, "activation_beta": None, "activations": None,
             "clip": None, "direction": "forward", "hidden_size": None, "layout": 0}

    # -- attributes ------------------------------------------------------------------
    def _ndir(self, node):
        d = self.attr(node, "direction") or "forward"
        if d not in ("forward", "reverse", "bidirectional"):
            raise ValueError(f"direction {d!r}")
        return 2 if d == "bidirectional" else 1

    def activations(self, node) -> list:
        """[(canonical name, alpha, beta)] per direction and gate function."""
        ndir, nact = self._ndir(node), len(self.default_acts)
        names = list(self.attr(node, "activations") or []) or list(self.default_acts) * ndir
        if len(names) == nact and ndir == 2:
            names = names * 2
        if len(names) != nact * ndir:
            raise ValueError(f"{len(names)} activations (need {nact} per direction)")
        alphas = [float(v) for v in (self.attr(node, "activation_alpha") or [])]
        betas = [float(v) for v in (self.attr(node, "activation_beta") or [])]
        out = []
        for n in names:
            key = str(n).lower()
            if key not in ACTS:
                raise ValueError(f"activation {n!r} not supported")
            name, ta, tb, da, db = ACTS[key]
            a = (alphas.pop(0) if alphas else da) if ta else 0.0
            b = (betas.pop(0) if betas else db) if tb else 0.0
            out.append((name, a, b))
        return out

    def _dims(self, node, shape_of):
        """(seq, batch, input, hidden, ndir) from the shapes; raises ValueError."""
        x = shape_of(0)
        if len(x) != 3:
            raise ValueError(f"X of rank {len(x)} (need 3)")
        layout = int(self.attr(node, "layout") or 0)
        if layout not in (0, 1):
            raise ValueError(f"layout {layout}")
        seq, batch = (x[1], x[0]) if layout else (x[0], x[1])
        ndir = self._ndir(node)
        w = shape_of(1)
        hidden = self.attr(node, "hidden_size")
        hidden = int(hidden) if hidden is not None else w[1] // self.gates
        G = self.gates
        state = (batch, ndir, hidden) if layout else (ndir, batch, hidden)
        want = {1: (ndir, G * hidden, x[2]), 2: (ndir, G * hidden, hidden),
                3: (ndir, 2 * G * hidden), 4: (batch,), 5: state}
        if self.kind == 1:      # LSTM: initial_c, peepholes
            want.update({6: state, 7: (ndir, 3 * hidden)})
        for k, s in want.items():
            if k < len(node.inputs) and node.inputs[k] and tuple(shape_of(k)) != s:
                raise ValueError(f"input {k} has shape {list(shape_of(k))}, expected {list(s)}")
        return seq, batch, x[2], hidden, ndir, layout

    # -- support ----------------------------------------------------------------------
    def check(self, node, g):
        dt = g.dtype(node.inputs[0])
        if dt.name not in FLOATS:
            return f"dtype {dt.name} not supported (float32, float64)"
        if len(node.inputs) > 4 and node.inputs[4] and g.dtype(node.inputs[4]).name != "int32":
            return "sequence_lens must be int32"
        try:
            self.activations(node)
            seq, batch, _, hidden, ndir, layout = self._dims(
                node, lambda k: tuple(int(d) for d in g.shape(node.inputs[k])))
        except (ValueError, TypeError) as e:
            return str(e)
        clip = self.attr(node, "clip")
        if clip is not None and not float(clip) > 0:
            return f"clip {clip} (must be positive)"
        outs = [(seq, ndir, batch, hidden) if not layout else (batch, seq, ndir, hidden),
                (ndir, batch, hidden) if not layout else (batch, ndir, hidden)]
        outs.append(outs[1])
        for k, o in enumerate(node.outputs[:3]):
            if o and tuple(g.shape(o)) != outs[k]:
                return f"output {k} shape {list(g.shape(o))}, expected {list(outs[k])}"
        return None

    # -- C ----------------------------------------------------------------------------
    def _act_helper(self, ctx, dt, name, a, b) -> str:
        if dt == np.float32:           # Sigmoid / Tanh: exp_simd's vector pass on SIMD targets
            vec = array_act(ctx, name, {})
            if vec is not None:
                return vec
        tag = sanitize(name, 16)
        if a or b:
            tag += "_" + hashlib.sha1(repr((a, b)).encode()).hexdigest()[:8]
        fn = f"aicc_rnnact{suffix(dt)}_{tag}"
        code = (f"/* RNN activation {name}(alpha={a}, beta={b}) in place on n values */\n"
                f"static void {fn}(TYPE *v, size_t n)\n{{\n"
                "    for (size_t i = 0; i < n; ++i) {\n"
                "        const TYPE x = v[i];\n"
                f"        v[i] = {_act_c(name, a, b, 'x', dt)};\n"
                "    }\n}")
        ctx.helper(f"rnn.2.{fn}", typed(code, dt))
        return fn

    def _transposed(self, ctx, isa, ndir, GH, inp, hidden):
        """W [D][GH][I] and R [D][GH][H] as [D][I][GH] and [D][H][GH] (the SIMD products):
        derived constants, or transposed into step scratch at run time (kernels/move/copy.py's
        AVX transposition where ``isa`` describes vector moves, else its portable one)."""
        out = []
        for k, n in ((1, inp), (2, hidden)):
            c = ctx.in_const(k)
            if c is not None:
                out.append(ctx.const(np.ascontiguousarray(
                    np.asarray(c, np.float32).transpose(0, 2, 1)), "rnnt"))
                continue
            t = ctx.scratch(ndir * GH * n * 4, "float", "rnnt")
            tr = avx_helper(ctx) if ISAS[isa].move else c_helper(ctx, "float")
            ctx(f"for (size_t d = 0; d < {ndir}u; ++d)   /* transposed for the GEMM products */")
            ctx(f"    {tr}({GH}u, {n}u, {ctx.inp[k]} + d * {GH * n}u, {n}u, {t} + d * {GH * n}u, "
                f"{GH}u);")
            out.append(t)
        return out

    def emit(self, node, ctx):
        dt = ctx.in_dtype(0)
        isa = simd_isa(ctx) if dt == np.float32 else None
        if isa:         # the GEMM products on transposed weights: the kernels named per ISA
            include(ctx, isa)
            ctx.kernel = isa
        tag = f"_SFX_{isa}" if isa else "_SFX"
        sfx = suffix(dt) + (f"_{isa}" if isa else "")
        seq, batch, inp, hidden, ndir, layout = self._dims(node, ctx.in_shape)
        acts = [self._act_helper(ctx, dt, *a) for a in self.activations(node)]
        ctx.helper("rnn.0.params", PARAMS)
        driver = DRIVER.replace("TCHu", f"{tch(isa)}u").replace("TCH", str(tch(isa)))
        for key, text in (("1.linalg", linalg(isa)), ("3.cell", CELL), ("4.driver", driver)):
            ctx.helper(f"rnn.{key}{sfx}", typed(text.replace("_SFX", tag), dt))
        outs = [ctx.out[k] if k < len(ctx.out) and ctx.out[k] else "NULL" for k in range(3)]
        if all(o == "NULL" for o in outs):
            ctx("/* no output to compute */")
            return
        G = self.gates
        clip = self.attr(node, "clip")
        direction = self.attr(node, "direction") or "forward"
        ws = ctx.scratch(((tch(isa) + 1) * G * hidden + 3 * hidden) * dt.itemsize, ctype(dt), "ws")
        w, r = ctx.inp[1], ctx.inp[2]
        if isa:
            w, r = self._transposed(ctx, isa, ndir, G * hidden, inp, hidden)

        def opt(k):
            return ctx.inp[k] if k < len(ctx.inp) and ctx.inp[k] else "NULL"
        extra = ""
        if self.kind == 1:
            extra = f", input_forget {int(self.attr(node, 'input_forget') or 0)}"
        if self.kind == 2:
            extra = f", linear_before_reset {int(self.attr(node, 'linear_before_reset') or 0)}"
        ctx(f"/* {self.op_type} {direction}, seq {seq}, batch {batch}, input {inp}, hidden "
            f"{hidden}, layout {layout}{extra}; activations "
            f"{', '.join(a[0] for a in self.activations(node))} */")
        ctx("static const aicc_rnn_params prm = {")
        ctx(f"    {seq}u, {batch}u, {inp}u, {hidden}u, {ndir}u,")
        ctx(f"    {self.kind}, {1 if direction == 'reverse' else 0}, {layout}, "
            f"{0 if clip is None else 1}, {0.0 if clip is None else float(clip)!r},")
        ctx(f"    {int(self.attr(node, 'input_forget') or 0) if self.kind == 1 else 0}, "
            f"{int(self.attr(node, 'linear_before_reset') or 0) if self.kind == 2 else 0}")
        ctx("};")
        ctx(f"static const aicc_rnn_fn{sfx} acts[{len(acts)}] = {{ {', '.join(acts)} }};")
        h0, c0, pp = opt(5), (opt(6) if self.kind == 1 else "NULL"), \
            (opt(7) if self.kind == 1 else "NULL")
        ctx(f"aicc_rnn{sfx}(&prm, acts, {ctx.inp[0]}, {w}, {r}, {opt(3)}, "
            f"{opt(4)}, {h0}, {c0}, {pp}, {outs[0]}, {outs[1]}, {outs[2]}, {ws});")


@register("RNN", since=1)
class RNN(_Recurrent):
    kind, gates, default_acts = 0, 1, ("Tanh",)


@register("GRU", since=1)
class GRU(_Recurrent):
    kind, gates, default_acts = 2, 3, ("Sigmoid", "Tanh")
    attrs = {**_Recurrent.attrs, "linear_before_reset": 0}


@register("LSTM", since=1)
class LSTM(_Recurrent):
    kind, gates, default_acts = 1, 4, ("Sigmoid", "Tanh", "Tanh")
    attrs = {**_Recurrent.attrs, "input_forget": 0}
