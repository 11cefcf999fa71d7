"""upcast-half: run float16/bfloat16 arithmetic in float32.

Ops that only move data (reshape, transpose, gather, ...: trait HALF_NATIVE) handle half
types as raw bits; every other node that reads or writes a float16/bfloat16 tensor is
wrapped: its half inputs are converted to float32 (constants at compile time, run-time
tensors by a Cast node), it computes in float32, and each half output is rounded back by a Cast node (nearest even).
This is how onnxruntime's CPU kernels treat most half-precision ops (compute in float32,
round each op's result), so results agree within half precision.

Ops whose value commutes with that rounding (trait ROUNDING_COMMUTES: maxima, minima and
sign changes of their inputs; RNE rounding is monotonic and symmetric, so
R(round(t)) = round(R(t))) read the float32 result of a wrapped producer itself instead of its rounded half converted back:
the same values, one Cast pair less, and Conv -> Relu stays a pair that fuse-activation
fuses; layout-nhwc then runs the convs channel-last through the Casts between them (float16
DS-CNN, ratio to onnxruntime, x86-avx512 1.03 -> 0.63, x86-avx2 1.41 -> 0.98; MobileNetV1
0.80 -> 0.40). Their own outputs are still rounded; the producer's rounded output stays where
something else reads it. A rounded result that only such float32 computations read (no
half tensor is needed) is one ``aicc.RoundHalf`` step, float32 to float32, instead of a Cast
to half and one back: the same bits, one pass over the data (float16 MobileNetV2,
x86-avx512, ratio to onnxruntime 0.72-0.75 -> 0.62-0.63).

The 8-bit floats (float8_e4m3fn/e4m3fnuz/e5m2/e5m2fnuz) and float4_e2m1fn are treated the
same way (their Casts round to nearest even, saturating), except in QuantizeLinear and
DequantizeLinear (trait LOWP_NATIVE), which read/write them directly. 4-bit and 2-bit integers are not wrapped:
data movement copies their bytes; other ops must handle or refuse them.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
from onnx import TensorProto

from ..ir import Node, TensorType
from ..ops import has_trait
from ..ops.traits import HALF_NATIVE, LOWP_NATIVE, ROUNDING_COMMUTES
from .registry import graph_pass

HALF = {"float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16,
        # 8-bit and 4-bit floats (one byte per element) are treated like half types
        "float8_e4m3fn": TensorProto.FLOAT8E4M3FN, "float8_e4m3fnuz": TensorProto.FLOAT8E4M3FNUZ,
        "float8_e5m2": TensorProto.FLOAT8E5M2, "float8_e5m2fnuz": TensorProto.FLOAT8E5M2FNUZ,
        "float4_e2m1fn": TensorProto.FLOAT4E2M1, "float8_e8m0fnu": TensorProto.FLOAT8E8M0}
LOWP = set(HALF) - {"float16", "bfloat16"}


def _commutes(n, half: str) -> bool:
    """R(round(t)) == round(R(t)) for every float32 t under rounding to ``half`` (nearest
    even: monotonic and symmetric), for ops declaring ROUNDING_COMMUTES; Clip only with bounds
    of the half type (inputs of it, or attributes it represents). Not for the 8-bit floats
    (saturating, unsigned zeros)."""
    if not has_trait(n, ROUNDING_COMMUTES) or (n.op_type == "MaxPool" and len(n.outputs) > 1) \
            or half not in ("float16", "bfloat16"):
        return False
    ht = np.float16 if half == "float16" else ml_dtypes.bfloat16
    bounds = [float(n.attrs[k]) for k in ("min", "max") if k in n.attrs]
    return all(float(ht(b)) == b for b in bounds)


def _half_name(g, name) -> str:
    return np.dtype(g.types[name].dtype).name


def _is_half(g, name, node=None) -> bool:
    if not name:
        return False
    if name in g.constants:
        dt = g.constants[name].dtype.name
    else:
        t = g.types.get(name)
        if t is None:
            return False
        dt = np.dtype(t.dtype).name
    if dt in LOWP and node is not None and has_trait(node, LOWP_NATIVE):
        return False
    return dt in HALF


@graph_pass("upcast-half")
def upcast_half(g, *, commute: bool = True, round_op: bool = True):
    """Wrap every non-native node touching float16/bfloat16 tensors in Casts to and from
    float32 (see the module docstring; ``commute``: ROUNDING_COMMUTES ops read their producers'
    float32 values; ``round_op``: a rounding read only in float32 is one aicc.RoundHalf).
    Graph inputs, outputs and names are unchanged."""
    if not any(_is_half(g, t) for n in g.nodes for t in list(n.inputs) + list(n.outputs)):
        return g
    g = g.copy()
    up = {}            # half tensor -> its float32 twin
    exact = {}         # half output of a wrapped node -> the float32 value it rounds
    downs_made = set()
    gone = set()       # half tensors nobody reads as half (RoundHalf instead of two Casts)
    nodes = []

    def wrapped(n):
        return n.domain in ("", "ai.onnx", "ai.onnx.preview") and not has_trait(n, HALF_NATIVE)
    readers = {}
    for n in g.nodes:
        for i in n.inputs:
            readers.setdefault(i, []).append(n)
    outputs = set(g.outputs)
    for n in g.nodes:
        if not wrapped(n):
            nodes.append(n)
            continue
        ins = [i for i in n.inputs if _is_half(g, i, n)]
        outs = [o for o in n.outputs if _is_half(g, o, n)]
        if not ins and not outs:
            nodes.append(n)
            continue
        new_inputs = []
        for i in n.inputs:
            if not _is_half(g, i, n):
                new_inputs.append(i)
                continue
            if commute and i in exact and _commutes(n, _half_name(g, i)):
                new_inputs.append(exact[i])
                continue
            if i not in up:
                twin = f"{i}__aicc_f32"
                up[i] = twin
                if i in g.constants:
                    g.constants[twin] = g.constants[i].astype(np.float32)
                else:
                    g.types[twin] = TensorType(np.dtype(np.float32), g.types[i].shape)
                    nodes.append(Node("Cast", [i], [twin], {"to": TensorProto.FLOAT},
                                      f"{n.name}__aicc_up{len(up)}"))
            new_inputs.append(up[i])
        downs = []
        new_outputs = []
        for o in n.outputs:
            if not _is_half(g, o, n):
                new_outputs.append(o)
                continue
            t = g.types[o]
            half = _half_name(g, o)
            tmp = f"{o}__aicc_f32out"
            g.types[tmp] = TensorType(np.dtype(np.float32), t.shape)
            new_outputs.append(tmp)
            exact[o] = tmp
            if round_op and o not in outputs and half in ("float16", "bfloat16") and \
                    all(wrapped(r) for r in readers.get(o, [])):
                # read only in float32: round in float32, no half tensor (aicc.RoundHalf)
                up[o] = f"{o}__aicc_f32"
                g.types[up[o]] = TensorType(np.dtype(np.float32), t.shape)
                downs.append(Node("RoundHalf", [tmp], [up[o]], {"to": HALF[half]},
                                  f"{n.name}__aicc_round{len(downs)}", "aicc"))
                gone.add(o)
                continue
            downs.append(Node("Cast", [tmp], [o], {"to": HALF[half]},
                              f"{n.name}__aicc_down{len(downs)}"))
        m = Node(n.op_type, new_inputs, new_outputs, dict(n.attrs), n.name, n.domain)
        nodes.append(m)
        nodes.extend(downs)
        downs_made.update(d.outputs[0] for d in downs)
    # a rounding that only a ROUNDING_COMMUTES op read (it reads the float32 value now) goes
    read = {i for n in nodes for i in n.inputs} | set(g.outputs)
    g.nodes = [n for n in nodes if n.outputs[0] not in downs_made or n.outputs[0] in read]
    for o in gone:
        del g.types[o]
    return g
