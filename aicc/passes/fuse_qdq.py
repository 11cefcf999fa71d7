"""fuse-qdq: QDQ-format quantized convolutions and matrix products (onnxruntime's default
quantization format, PyTorch's quantized exports) become QLinearConv / QLinearMatMul, which
run on the integer GEMMs of the x86 targets (kernels/qgemm/simd.py) instead of float kernels
between DequantizeLinear and QuantizeLinear.

Contract. ``y = QuantizeLinear(Conv(DequantizeLinear(xq), DequantizeLinear(wq)[, DQ(bq)]))``
and the same with MatMul (no bias), standard domain, are replaced by one QLinearConv /
QLinearMatMul with the operands' integer tensors, scales and zero points, keeping y's name,
when:

* the Conv / MatMul output is read by that QuantizeLinear only and is not a graph output;
* xq (aq) is uint8 / int8 with one constant float32 scale and zero point; wq (b) is a
  uint8 / int8 constant with a constant float32 scale and zero point per tensor or per
  output channel (Conv: axis 0; MatMul: per column, the last axis of a matrix b);
* the QuantizeLinear has one constant float32 scale and zero point and a uint8 / int8 output;
* a Conv bias is DequantizeLinear of an int32 constant with zero point 0 and scale
  x_scale * w_scale (as float32 products, per tensor or per channel; the quantizers write it
  so), which is then QLinearConv's bias.

A Gemm (alpha = beta = 1, transA 0, any transB: b transposed at build time) in the same place
becomes QLinearMatMul, or with such a bias (one value per column, or one broadcast to all)
aicc.QGemm (ops/qgemm.py): a QDQ model's fully connected layer in one integer step instead of
MatMulInteger and four float steps (FC autoencoder int8 on cortex-m4: 0.41M instructions
against 0.44M for the unfused chain).

Float outputs: ``y = Gemm(DequantizeLinear(xq), DequantizeLinear(wq)[, c])`` (alpha = beta = 1,
transA 0, any transB) and ``MatMul(DequantizeLinear(xq), DequantizeLinear(wq))`` with no
QuantizeLinear after them (a quantized model's classifier: onnxruntime runs it as QGemm)
become ``MatMulInteger(xq, wq (transposed at build time for transB), xz, wz)``, Cast to float,
times the float32 product x_scale * w_scale [, + c], with the same conditions on xq and wq.
Rounding: the integer sum is exact and rounded once to float (above 2^24), then one product
and the bias add; the float chain rounds every product and partial sum. The weights stay
1 byte each (MobileNetV2 int8's 1280 -> 1000 classifier: 1.3 MB instead of 5.1 MB of float
weights streamed per run).

The DequantizeLinear nodes stay for any other reader (eliminate-dead-nodes removes the rest).
Anything else is left unchanged. It must run before fold-constants, which would turn the
constant weights' DequantizeLinear into float weights.

Rounding: the float chain computes ``rint(sum((x - xz) sx (w - wz) sw + b sx sw) / sy)`` with
float32 products and sums; the fused op computes the sum exactly in integers, then
``rint(acc * (sx sw / sy))`` (ops/qlinear.py). The two agree except where the float chain's
rounding moves a value across a rounding boundary: outputs differ by at most one quantization
step there, as with onnxruntime, which fuses the same patterns (its requantization is in
float32). Off by default; on for x86-avx512-vnni and x86-avx512-amx (their pass_options),
where the integer kernels are faster than the float chain (ResNet-8 quantized: 0.20 -> 0.12
ms), and for generic, arm-neon and cortex-m4 (kernels/qgemm/portable.py's portable kernels,
cortex-m4 kernels/qgemm/pairs.py's SMLAD kernels; generic:
ResNet-8 quantized 2.6 -> 1.0 ms, MobileNetV2 86 -> 34 ms; the weights stay 1 byte each
instead of being folded to float32). ``auto`` (x86-avx2, x86-avx512: no VNNI) fuses depthwise
and 1x1 convs and the matrix products only (``_auto_conv``).
"""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from ..ir import Node, TensorType
from .absorb import fresh_name, sole_use, std_domain, taken_names
from .registry import graph_pass

INT8 = ("uint8", "int8")


def _dq(prod, name):
    n = prod.get(name)
    if n is None or n.op_type != "DequantizeLinear" or not std_domain(n) or len(n.inputs) < 2:
        return None
    return n


def _const_f32(g, name):
    c = g.const(name)
    return None if c is None or np.asarray(c).dtype != np.float32 else np.asarray(c)


def _zp(g, n):
    """Zero point of QuantizeLinear / DequantizeLinear n: (input name or "" when omitted,
    its constant value, 0 when omitted; None when not constant)."""
    name = n.inputs[2] if len(n.inputs) > 2 else ""
    return name, (g.const(name) if name else np.zeros((), np.int64))


def _scalar_q(g, n, qname):
    """(scale, zero point name or "", quantized dtype) when QDQ node n has one constant float32
    scale and zero point and its quantized tensor qname is uint8 / int8, else None."""
    s = _const_f32(g, n.inputs[1])
    zname, z = _zp(g, n)
    if s is None or s.size != 1 or z is None or z.size != 1 or (
            qname not in g.types and qname not in g.constants):
        return None
    dt = g.dtype(qname)
    return (s, zname, dt) if dt.name in INT8 else None


@graph_pass("fuse-qdq")
def fuse_qdq(g, *, mode: str = "off"):
    """DequantizeLinear -> Conv / MatMul -> QuantizeLinear -> QLinearConv / QLinearMatMul;
    Gemm / MatMul of DequantizeLinear operands with a float output -> MatMulInteger, Cast,
    Mul [, Add] (see the module docstring for the exact conditions)."""
    if mode not in ("off", "on", "auto"):
        raise ConfigError(f"pass 'fuse-qdq': mode {mode!r} (off, on or auto)")
    if mode == "off":
        return g
    g = g.copy()
    prod, cons, outs = g.producers(), g.consumers(), set(g.outputs)
    taken = taken_names(g)
    drop, replace = set(), {}

    def zero_point(name, dtype, base):
        if name:
            return name
        z = fresh_name(taken, base)
        g.constants[z] = np.zeros((), dtype)
        return z

    for q in g.nodes:
        if q.op_type != "QuantizeLinear" or not std_domain(q) or len(q.inputs) < 2:
            continue
        v, y = q.inputs[0], q.outputs[0]
        op = prod.get(v)
        if op is None or op.op_type not in ("Conv", "MatMul", "Gemm") or not std_domain(op) \
                or not sole_use(v, q, cons, outs) or id(op) in drop:
            continue
        qy = _scalar_q(g, q, y)
        dx, dw = _dq(prod, op.inputs[0]), _dq(prod, op.inputs[1])
        if qy is None or dx is None or dw is None:
            continue
        qx = _scalar_q(g, dx, dx.inputs[0])
        conv, gemm = op.op_type == "Conv", op.op_type == "Gemm"
        trans = gemm and int(op.attrs.get("transB", 0)) == 1
        if gemm and not _plain_gemm(op):
            continue
        # per-tensor, or per output channel: Conv axis 0, MatMul the last axis of a matrix
        # (of b transposed for a Gemm with transB)
        w = _weight_q(g, dw, last=not (conv or trans))
        if qx is None or w is None:
            continue
        wq, sw, zwname = w
        if mode == "auto" and conv and not _auto_conv(op, wq):
            continue
        if not conv and (wq.ndim != 2 or (not gemm and len(op.inputs) != 2)):
            continue
        bias = None
        if (conv or gemm) and len(op.inputs) > 2 and op.inputs[2]:
            bias = _int_bias(g, prod, op.inputs[2], qx[0], sw)
            n = wq.shape[0 if trans else 1]
            if gemm and bias is not None and g.const(bias).shape != (n,):
                bq = g.const(bias)      # Gemm's C broadcasts: one value per column only
                if bq.size not in (1, n) or (bq.size == n and bq.shape[-1] != n):
                    continue
                bias = fresh_name(taken, f"{op.name or y}_bias")
                g.constants[bias] = np.ascontiguousarray(np.broadcast_to(bq.reshape(-1), (n,)))
            if bias is None:
                continue
        wname = dw.inputs[0]
        if trans:
            wname = fresh_name(taken, f"{op.name or y}_wq_t")
            g.constants[wname] = np.ascontiguousarray(wq.T)
        ins = [dx.inputs[0], dx.inputs[1], zero_point(qx[1], qx[2], f"{op.name}_xzp"),
               wname, dw.inputs[1], zero_point(zwname, wq.dtype, f"{op.name}_wzp"),
               q.inputs[1], zero_point(qy[1], qy[2], f"{op.name}_yzp")]
        if bias:
            ins.append(bias)
        attrs = dict(op.attrs) if conv else {}
        kind, domain = (("QLinearConv", "") if conv else ("QGemm", "aicc") if bias
                        else ("QLinearMatMul", ""))
        replace[id(q)] = Node(kind, ins, [y], attrs, op.name, domain)
        drop.add(id(op))
        g.types.pop(v, None)
    for op in g.nodes:
        if id(op) not in drop and op.op_type in ("Gemm", "MatMul") and std_domain(op):
            nodes = _float_out(g, op, prod, taken, zero_point)
            if nodes:
                replace[id(op)] = nodes
    out = []
    for n in g.nodes:
        if id(n) not in drop:
            r = replace.get(id(n), n)
            out.extend(r if isinstance(r, list) else [r])
    g.nodes = out
    return g


def _weight_q(g, dw, last):
    """(wq, scale, zero point name or "") of the weight's DequantizeLinear dw when wq is a
    uint8 / int8 constant with a constant float32 scale and zero point, per tensor or per
    output channel (wq's last axis when ``last``, else axis 0), else None."""
    wq = g.const(dw.inputs[0])
    sw = _const_f32(g, dw.inputs[1])
    zwname, zw = _zp(g, dw)
    if wq is None or wq.dtype.name not in INT8 or sw is None or zw is None:
        return None
    axis = wq.ndim - 1 if last else 0
    if sw.size != 1 and not (wq.ndim >= 2 and int(dw.attrs.get("axis", 1)) % wq.ndim == axis
                             and sw.shape == (wq.shape[axis],)):
        return None
    if zw.size not in (1, sw.size):
        return None
    return wq, sw, zwname


def _plain_gemm(op) -> bool:
    """A Gemm that is a matrix product plus bias: alpha = beta = 1, a not transposed."""
    return (float(op.attrs.get("alpha", 1.0)) == 1.0 and float(op.attrs.get("beta", 1.0)) == 1.0
            and int(op.attrs.get("transA", 0)) == 0)


def _int_bias(g, prod, name, sx, sw):
    """The int32 constant behind a bias ``DequantizeLinear(bq, sx * sw, 0)`` (per tensor or
    per output channel, as the quantizers write it), else None."""
    db = _dq(prod, name)
    bq = g.const(db.inputs[0]) if db is not None else None
    sb = _const_f32(g, db.inputs[1]) if db is not None else None
    zb = _zp(g, db)[1] if db is not None else None
    want = (sx.astype(np.float32) * sw.astype(np.float32)).reshape(-1)
    if bq is None or bq.dtype != np.int32 or sb is None or zb is None or np.any(zb) \
            or not np.allclose(np.broadcast_to(sb.reshape(-1), want.shape), want,
                               rtol=1e-6, atol=0):
        return None
    return db.inputs[0]


def _auto_conv(op, wq) -> bool:
    """mode auto (targets without VNNI): depthwise and 1x1 convs only. Their integer kernels
    beat the float chain there (MobileNetV2 int8: x86-avx512 10.1 -> 7.6 ms, x86-avx2 13.3 ->
    11.2); dense 3 x 3 convs run faster as float Winograd / im2col than on the pair-form
    integer GEMM (ResNet-8 int8 with every conv fused: avx512 0.197 -> 0.210 ms, avx2 0.276 ->
    0.338; with auto: unchanged)."""
    depthwise = int(op.attrs.get("group", 1)) > 1 and wq.shape[1] == 1
    return depthwise or all(int(k) == 1 for k in wq.shape[2:])


def _float_out(g, op, prod, taken, zero_point):
    """The nodes that replace a Gemm / MatMul of DequantizeLinear operands with a float output
    (module docstring), or None when the conditions do not hold."""
    gemm = op.op_type == "Gemm"
    if gemm and not _plain_gemm(op):
        return None
    if not gemm and len(op.inputs) != 2:
        return None
    dx, dw = _dq(prod, op.inputs[0]), _dq(prod, op.inputs[1])
    if dx is None or dw is None:
        return None
    qx = _scalar_q(g, dx, dx.inputs[0])
    trans = gemm and int(op.attrs.get("transB", 0)) == 1
    w = _weight_q(g, dw, last=not trans)
    if qx is None or w is None or w[0].ndim != 2:
        return None
    wq, sw, zwname = w
    name = op.name or op.outputs[0]
    wname = dw.inputs[0]
    if trans:
        wname = fresh_name(taken, f"{name}_wq_t")
        g.constants[wname] = np.ascontiguousarray(wq.T)
    acc, accf = fresh_name(taken, f"{name}_acc"), fresh_name(taken, f"{name}_accf")
    sname = fresh_name(taken, f"{name}_scale")
    g.constants[sname] = (qx[0].astype(np.float32) * sw.astype(np.float32)).astype(np.float32)
    y = op.outputs[0]
    bias = op.inputs[2] if gemm and len(op.inputs) > 2 and op.inputs[2] else ""
    scaled = fresh_name(taken, f"{name}_scaled") if bias else y
    if y in g.types:                  # the product's shape, int32 then float32
        g.types[acc] = TensorType(np.dtype(np.int32), g.types[y].shape)
        for t in (accf, scaled):
            g.types[t] = TensorType(np.dtype(np.float32), g.types[y].shape)
    nodes = [Node("MatMulInteger", [dx.inputs[0], wname, zero_point(qx[1], qx[2], f"{name}_xzp"),
                                    zero_point(zwname, wq.dtype, f"{name}_wzp")], [acc], {},
                  f"{name}_int", ""),
             Node("Cast", [acc], [accf], {"to": 1}, f"{name}_float", ""),
             Node("Mul", [accf, sname], [scaled], {}, f"{name}_scale", "")]
    if bias:
        nodes.append(Node("Add", [scaled, bias], [y], {}, f"{name}_bias", ""))
    return nodes
