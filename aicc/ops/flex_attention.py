"""FlexAttention (ai.onnx.preview, version 1): attention with score_mod/prob_mod subgraphs.

``Y = prob_mod(softmax(score_mod((Q K^T) * scale))) V`` over rank-4 inputs (grouped-query:
query head h uses KV head ``h / (Hq / Hkv)``; scale defaults to ``1/sqrt(head_size)``; as
in the spec's reference, the product is scaled by ``r * r`` with ``r = sqrt(scale)`` computed
in float32 and cast to the input dtype).

The step materializes the ``[B, Hq, L, S]`` scores in step scratch: one helper call for the
scaled products, then the score_mod as an elementwise loop nest written into the step body,
a helper softmax over each row, the prob_mod loop, and a helper for ``P @ V``.

Modifier subgraphs are compiled element by element: every subgraph value that does not
depend on the scores (initializers, Shape of the scores, and anything computed from those,
e.g. Range/Reshape index grids) is evaluated at compile time with onnx.reference; values
that depend on the scores must come from elementwise ops (arithmetic, comparisons, logic,
Where, Cast, Tanh/Exp/Log/Sqrt/Sigmoid/Relu/Abs/Neg/Reciprocal, Max/Min, Pow, Clip with
constant bounds, Identity) whose constant operands broadcast to ``[B, Hq, L, S]``; they
become one C local per node, constants baked in as literals (scalars) or weights read
through broadcast strides. Other modifiers are reported unsupported.

Softmax is the plain formula of the spec (``exp(x - max) / sum``): a row whose scores are
all ``-inf`` becomes NaN, as in onnx.reference. Computed in the input dtype (float32 or
float64); a ``softmax_precision`` other than that dtype is unsupported. float16/bfloat16
FlexAttention is unsupported (the upcast-half pass handles default-domain ops only).
NaN/Inf otherwise follow IEEE arithmetic.
"""
from __future__ import annotations

import math
import re

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from ..emit_c.cwriter import c_literal, ctype
from .base import Op, register

SCORES = """\
/* sc[b][h][i][j] = scale * (q[b][h][i] . k[b][h / (Hq / Hkv)][j]) for [B][Hq][L][E] q and
 * [B][Hkv][S][E] k (contiguous). */
static void aicc_flex_scores_SFX(size_t B, size_t Hq, size_t Hkv, size_t L, size_t S,
    size_t E, const TYPE *restrict q, const TYPE *restrict k, TYPE scale, TYPE *restrict sc)
{
    for (size_t b = 0; b < B; ++b)
        for (size_t h = 0; h < Hq; ++h)
            for (size_t i = 0; i < L; ++i) {
                const TYPE *qi = q + ((b * Hq + h) * L + i) * E;
                const TYPE *kh = k + (b * Hkv + h / (Hq / Hkv)) * S * E;
                TYPE *row = sc + ((b * Hq + h) * L + i) * S;
                for (size_t j = 0; j < S; ++j) {
                    TYPE x = 0;
                    for (size_t c = 0; c < E; ++c)
                        x += qi[c] * kh[j * E + c];
                    row[j] = x * scale;
                }
            }
}"""

SOFTMAX = """\
/* In-place softmax of R rows of S values: exp(x - max) / sum (an all -inf row is NaN). */
static void aicc_flex_softmax_SFX(size_t R, size_t S, TYPE *restrict x)
{
    for (size_t r = 0; r < R; ++r) {
        TYPE *row = x + r * S, mx = row[0], sum = 0;
        for (size_t j = 1; j < S; ++j)
            if (row[j] > mx || row[j] != row[j]) mx = row[j];
        for (size_t j = 0; j < S; ++j) {
            row[j] = EXP(row[j] - mx);
            sum += row[j];
        }
        for (size_t j = 0; j < S; ++j)
            row[j] = row[j] / sum;
    }
}"""

PV = """\
/* y[b][h][i] = sum_j p[b][h][i][j] v[b][h / (Hq / Hkv)][j] ([B][Hkv][S][Ev] v). */
static void aicc_flex_pv_SFX(size_t B, size_t Hq, size_t Hkv, size_t L, size_t S, size_t Ev,
    const TYPE *restrict p, const TYPE *restrict v, TYPE *restrict y)
{
    for (size_t b = 0; b < B; ++b)
        for (size_t h = 0; h < Hq; ++h)
            for (size_t i = 0; i < L; ++i) {
                const TYPE *pi = p + ((b * Hq + h) * L + i) * S;
                const TYPE *vh = v + (b * Hkv + h / (Hq / Hkv)) * S * Ev;
                TYPE *yi = y + ((b * Hq + h) * L + i) * Ev;
                for (size_t c = 0; c < Ev; ++c)
                    yi[c] = 0;
                for (size_t j = 0; j < S; ++j)
                    for (size_t c = 0; c < Ev; ++c)
                        yi[c] += pi[j] * vh[j * Ev + c];
            }
}"""

BINARY = {"Add": "({a} + {b})", "Sub": "({a} - {b})", "Mul": "({a} * {b})",
          "Div": "({a} / {b})", "Pow": "POW({a}, {b})",
          "Max": "({a} != {a} || {a} > {b} ? {a} : {b})",
          "Min": "({a} != {a} || {a} < {b} ? {a} : {b})"}
COMPARE = {"Greater": ">", "Less": "<", "Equal": "==", "GreaterOrEqual": ">=",
           "LessOrEqual": "<="}
LOGIC = {"And": "&&", "Or": "||", "Xor": "!="}
UNARY = {"Neg": "(-{x})", "Abs": "FABS({x})", "Exp": "EXP({x})", "Log": "LOG({x})",
         "Tanh": "TANH({x})", "Sqrt": "SQRT({x})", "Reciprocal": "(1 / {x})",
         "Sigmoid": "(1 / (1 + EXP(-{x})))", "Relu": "({x} < 0 ? 0 : {x})", "Identity": "{x}"}


def _const_eval(node, inputs, opset):
    """onnx.reference on one constant node."""
    from onnx.reference import ReferenceEvaluator
    names = [f"i{k}" if n else "" for k, n in enumerate(node.input)]
    n2 = helper.make_node(node.op_type, names, [f"o{k}" for k in range(len(node.output))],
                          domain=node.domain or None)
    n2.attribute.extend(node.attribute)
    ins = [helper.make_tensor_value_info(nm, helper.np_dtype_to_tensor_dtype(v.dtype),
                                         list(v.shape)) for nm, v in zip(names, inputs) if nm]
    outs = [helper.make_value_info(o, helper.TypeProto()) for o in n2.output]
    m = helper.make_model(helper.make_graph([n2], "c", ins, outs),
                          opset_imports=[helper.make_opsetid("", opset)])
    feeds = {nm: v for nm, v in zip(names, inputs) if nm}
    return [np.asarray(r) for r in ReferenceEvaluator(m).run(None, feeds)]


class Modifier:
    """A score_mod/prob_mod subgraph compiled to C statements on the element ``x`` at
    indices (b, h, i, j) of a ``shape`` tensor of dtype ``dt``. ``consts`` lists
    (placeholder, array) pairs the emitter turns into weights; raises ValueError."""

    def __init__(self, graph, shape, dt, opset):
        self.shape, self.dt = tuple(shape), np.dtype(dt)
        self.lines, self.consts = [], []
        if len(graph.input) != 1 or len(graph.output) != 1:
            raise ValueError("a modifier needs exactly one input and one output")
        vals = {graph.input[0].name: ("dyn", "x", self.dt)}
        for init in graph.initializer:
            vals[init.name] = ("const", numpy_helper.to_array(init))
        for k, node in enumerate(graph.node):
            if node.domain not in ("", "ai.onnx"):
                raise ValueError(f"modifier op {node.domain}.{node.op_type}")
            ins = []
            for n in node.input:
                if n and n not in vals:
                    raise ValueError(f"modifier reads outer value {n!r}")
                ins.append(vals[n] if n else None)
            if node.op_type in ("Shape", "Size") and ins[0][0] == "dyn":
                ins = [("const", np.zeros(self.shape, np.uint8))]
            if all(v is None or v[0] == "const" for v in ins):
                outs = _const_eval(node, [v[1] for v in ins if v is not None], opset)
                for name, arr in zip(node.output, outs):
                    vals[name] = ("const", arr)
                continue
            if len(node.output) != 1:
                raise ValueError(f"modifier op {node.op_type} with several outputs")
            vals[node.output[0]] = self._elementwise(node, ins, f"t{k}")
        out = vals[graph.output[0].name]
        self.result = self._operand(out, self.dt)
        # keep the statements the result depends on (no unused locals)
        used, kept = set(re.findall(r"\b[a-z]\w*\b", self.result)), []
        for var, line in reversed(self.lines):
            if var in used:
                kept.append(line)
                used |= set(re.findall(r"\b[a-z]\w*\b", line.split("=", 1)[1]))
        self.lines = kept[::-1]
        self.uses_x = "x" in used

    # -- operands ----------------------------------------------------------------------
    def _operand(self, v, dt) -> str:
        """C expression of value v (dyn or const) as dtype dt at element (b, h, i, j)."""
        if v[0] == "dyn":
            if v[2] == dt:
                return v[1]
            return f"({v[1]} != 0)" if dt == np.bool_ else f"(({ctype(dt)}){v[1]})"
        arr = np.asarray(v[1])
        if arr.ndim > 4 or np.broadcast_shapes(arr.shape, self.shape) != self.shape:
            raise ValueError(f"modifier constant of shape {list(arr.shape)} does not "
                             f"broadcast to {list(self.shape)}")
        arr = arr.astype(dt if dt != np.bool_ else np.uint8)
        if arr.size == 1:
            return c_literal(arr.reshape(-1)[0].item(), dt)
        full = (1,) * (4 - arr.ndim) + arr.shape
        st, acc = [], 1
        for d in reversed(full):
            st.append(acc if d != 1 else 0)
            acc *= d
        st.reverse()
        idx = " + ".join(ix if s == 1 else f"{ix} * {s}u" for ix, s in zip("bhij", st) if s) or "0"
        ph = f"@C{len(self.consts)}@"
        self.consts.append((ph, np.ascontiguousarray(arr.reshape(full))))
        return f"{ph}[{idx}]"

    def _elementwise(self, node, ins, var):
        op = node.op_type
        dyn = [v for v in ins if v is not None and v[0] == "dyn"]
        dt = dyn[0][2]
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if op in BINARY and len(ins) == 2:
            expr, rdt = BINARY[op].format(a=self._operand(ins[0], dt),
                                          b=self._operand(ins[1], dt)), dt
        elif op in COMPARE:
            expr = f"({self._operand(ins[0], dt)} {COMPARE[op]} {self._operand(ins[1], dt)})"
            rdt = np.dtype(np.bool_)
        elif op in LOGIC:
            expr = f"({self._operand(ins[0], dt)} {LOGIC[op]} {self._operand(ins[1], dt)})"
            rdt = np.dtype(np.bool_)
        elif op == "Not":
            expr, rdt = f"(!{self._operand(ins[0], np.dtype(np.bool_))})", np.dtype(np.bool_)
        elif op in UNARY and dt != np.bool_:
            expr, rdt = UNARY[op].format(x=self._operand(ins[0], dt)), dt
        elif op == "Where":
            a, b = (v if v[0] == "dyn" else None for v in ins[1:])
            rdt = (a or b)[2] if (a or b) else self.dt
            expr = (f"({self._operand(ins[0], np.dtype(np.bool_))} ? "
                    f"{self._operand(ins[1], rdt)} : {self._operand(ins[2], rdt)})")
        elif op == "Cast":
            to = helper.tensor_dtype_to_np_dtype(int(attrs["to"]))
            if to not in (np.float32, np.float64, np.bool_):
                raise ValueError(f"modifier Cast to {to.name}")
            expr = f"({self._operand(ins[0], dt)} != 0)" if to == np.bool_ else \
                f"(({ctype(to)}){self._operand(ins[0], dt)})"
            rdt = to
        elif op == "Clip" and ins[0][0] == "dyn" and all(v is None or v[0] == "const"
                                                         for v in ins[1:]):
            expr = self._operand(ins[0], dt)
            for k, sym in ((1, "<"), (2, ">")):
                if len(ins) > k and ins[k] is not None:
                    lim = self._operand(ins[k], dt)
                    expr = f"({expr} {sym} {lim} ? {lim} : {expr})"
            rdt = dt
        else:
            raise ValueError(f"modifier op {op} on the scores is not supported")
        if rdt not in (np.float32, np.float64, np.bool_):
            raise ValueError(f"modifier value of dtype {rdt.name}")
        vt = "int" if rdt == np.bool_ else ctype(rdt)
        f32 = rdt == np.float32 or (rdt == np.bool_ and self.dt == np.float32)
        for name in ("EXP", "LOG", "TANH", "SQRT", "FABS", "POW"):
            expr = expr.replace(name, name.lower() + ("f" if f32 else ""))
        self.lines.append((var, f"const {vt} {var} = {expr};"))
        return ("dyn", var, rdt)


def _mods(node, g, shape, dt):
    out = {}
    for key in ("score_mod", "prob_mod"):
        a = node.attrs.get(key)
        if a is not None:
            out[key] = Modifier(a.g, shape, dt, g.opset)
    return out


@register("FlexAttention", since=1, domain="ai.onnx.preview")
class FlexAttention(Op):
    attrs = {"scale": None, "softmax_precision": None, "score_mod": None, "prob_mod": None}

    def _dims(self, node, g):
        q, k, v = (tuple(int(d) for d in g.shape(node.inputs[i])) for i in range(3))
        if len(q) != 4 or len(k) != 4 or len(v) != 4:
            raise ValueError("Q, K, V must be 4-D")
        B, Hq, L, E = q
        if k[0] != B or v[0] != B or k[3] != E or k[1] != v[1] or k[2] != v[2] \
                or k[1] <= 0 or Hq % k[1]:
            raise ValueError(f"inconsistent Q/K/V shapes {q}, {k}, {v}")
        return B, Hq, k[1], L, k[2], E, v[3]

    def check(self, node, g):
        dts = {g.dtype(node.inputs[k]).name for k in (0, 1, 2)}
        if dts & {"float16", "bfloat16"}:
            return f"dtype {'/'.join(sorted(dts))}: float32/float64 only (the upcast-half " \
                   "pass does not cover the ai.onnx.preview domain)"
        if len(dts) != 1 or next(iter(dts)) not in ("float32", "float64"):
            return f"dtype {'/'.join(sorted(dts))} not supported (float32/float64)"
        dt = g.dtype(node.inputs[0])
        sp = self.attr(node, "softmax_precision")
        if sp is not None and helper.tensor_dtype_to_np_dtype(int(sp)) != dt:
            return f"softmax_precision {TensorProto.DataType.Name(int(sp))} differs from " \
                   f"the input dtype {dt.name}"
        try:
            B, Hq, Hkv, L, S, E, Ev = self._dims(node, g)
            _mods(node, g, (B, Hq, L, S), dt)
        except ValueError as e:
            return str(e)
        return None

    def emit(self, node, ctx):
        dt = ctx.in_dtype(0)
        ct = ctype(dt)
        B, Hq, Hkv, L, S, E, Ev = self._dims(node, ctx.g)
        if B * Hq * L * Ev == 0:
            ctx(f"(void){ctx.out[0]};  /* empty output: nothing to do */")
            return
        f32 = dt == np.float32
        sfx = "_f32" if f32 else "_f64"
        for key, code in (("0_scores", SCORES), ("1_softmax", SOFTMAX), ("2_pv", PV)):
            ctx.helper(f"aicc_flex_{key}{sfx}", code.replace("TYPE", ct).replace("_SFX", sfx)
                       .replace("EXP", "expf" if f32 else "exp"))
        scale = self.attr(node, "scale")
        if scale is None:
            scale = 1.0 / math.sqrt(E) if E else 1.0
        scale = float(scale)
        # the spec scales Q and K by sqrt(scale) computed in float32 (then cast to the dtype)
        root = float(np.asarray(np.sqrt(np.float32(scale)), dtype=dt))
        scale = root * root
        sc = ctx.scratch(max(B * Hq * L * S, 1) * dt.itemsize, ct, "scores")
        ctx(f"aicc_flex_scores{sfx}({B}u, {Hq}u, {Hkv}u, {L}u, {S}u, {E}u, {ctx.inp[0]}, "
            f"{ctx.inp[1]}, {c_literal(scale, dt)}, {sc});")
        mods = _mods(node, ctx.g, (B, Hq, L, S), dt)
        self._emit_mod(ctx, mods.get("score_mod"), "score_mod", sc, (B, Hq, L, S))
        ctx(f"aicc_flex_softmax{sfx}({B * Hq * L}u, {S}u, {sc});")
        self._emit_mod(ctx, mods.get("prob_mod"), "prob_mod", sc, (B, Hq, L, S))
        ctx(f"aicc_flex_pv{sfx}({B}u, {Hq}u, {Hkv}u, {L}u, {S}u, {Ev}u, {sc}, {ctx.inp[2]}, "
            f"{ctx.out[0]});")

    @staticmethod
    def _emit_mod(ctx, mod, what, sc, shape):
        if mod is None:
            return
        names = {}
        for ph, arr in mod.consts:
            names[ph] = ctx.const(arr, "mod")
        sub = lambda s: _subst(s, names)  # noqa: E731
        B, H, L, S = shape
        ctx(f"/* {what}, element by element over [{B}, {H}, {L}, {S}] */")
        with ctx.block(f"for (size_t b = 0; b < {B}u; ++b)"), \
                ctx.block(f"for (size_t h = 0; h < {H}u; ++h)"), \
                ctx.block(f"for (size_t i = 0; i < {L}u; ++i)"), \
                ctx.block(f"for (size_t j = 0; j < {S}u; ++j)"):
            ctx(f"{ctype(mod.dt)} *px = {sc} + ((b * {H}u + h) * {L}u + i) * {S}u + j;")
            if mod.uses_x:
                ctx(f"const {ctype(mod.dt)} x = *px;")
            for line in mod.lines:
                ctx(sub(line))
            ctx(f"*px = {sub(mod.result)};")


def _subst(s, names):
    for ph, var in names.items():
        s = s.replace(ph, var)
    return s
