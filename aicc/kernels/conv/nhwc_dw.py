"""SIMD kernel (AVX2+FMA, AVX-512F) of the channel-last depthwise ``aicc.ConvNHWC``
(conv_nhwc.py): X ``[N, H, W, C]``, weights ``[C, 1, kh, kw]``, Y ``[N, OH, OW, C]``.

Per node one C driver specialized to its geometry (every size, stride and offset a literal)
and its register-block kernels:

* Weights are transposed at compile time to ``wt[tap][Cp]`` and the bias padded to ``[Cp]``
  (Cp: C rounded up to the vector width L; zero fill; absent bias: zeros). A position's
  channels are NV = Cp / L vectors; x86-avx512 nodes with C <= 8 use 8-lane ymm vectors
  (AVX-512VL masks), the others 16-lane zmm. A C that is not a multiple of L masks the last
  vector's input loads and output stores (lanes past C are never read or written).
* A block kernel computes PB adjacent output positions of one row x VB channel vectors:
  PB * VB accumulators start from zero and stay in registers over all taps, then + bias, the
  clamp and one store each. Per tap row, the VB * kw weight vectors are loaded once and every
  input vector of the block's window once, feeding the FMAs of all (position, kx) that read
  it (stride 1: PB + kw - 1 loads for PB * kw FMAs). The kx loop is unrolled at compile
  time with each position's valid taps, so border columns (taps in the left / right
  padding) are blocks like the interior ones, only with taps left out; tap rows are clipped
  to the input per output row (the ky loop runs over the valid rows). Taps outside the input
  are skipped, never multiplied. An output row is cut into balanced blocks of at most PB
  positions; equal interior blocks run in a loop.
* TUNE (nhwc_dw_gen.py, with the generator) gives VB and PB per flavor (small C: 1 vector x
  8-12 positions; AVX-512 and C > 16: 2 vectors x 8 positions) and an L1 budget: when the kh
  input rows of an output row exceed it, the channels are processed in strips of at least a
  cache line (all rows of the image per strip) so the rows a strip reads stay in L1 while
  the next output rows reuse them.
* Post-affine (ops/conv_nhwc.py, after a Relu / Clip or none): before the store, ``v * pm[c]
  + pa[c]`` (a multiply, then an add) and then ``+ r`` (the residual at the output's
  position), pm / pa padded to whole vectors, the residual's tail vector loaded masked.
* Fused activation: Relu / Clip as ``min(hi, max(lo, v))`` in registers, only the finite sides
  (Relu: the max alone; max / min return the second operand when one is NaN, so NaN passes as
  in the activation table's ``v < lo ? lo : v``); other activations through
  conv_kernels.epilogue's scalar helper over each finished output row (OW * C contiguous
  floats; with several strips over each finished batch item).

Rounding: each output is ``fma(x, w, acc)`` over the taps inside the input in (ky, kx)
order starting from +0, then + bias (also +0 without bias): one rounding per tap and one for
the bias, as onnxruntime's depthwise kernels; chains started from the bias round coarser
(kernels/conv/depthwise.py). NaN/Inf: IEEE (Inf * 0 weight = NaN); zero padding is skipped,
so it never meets an Inf weight.
"""
from __future__ import annotations

import numpy as np

from ..gemm.simd import _header, flit
from ..gemm.clamp import clamp_sides
from ..isa.registry import ISAS, isa_for
from ..isa.x86 import include, pin
from .base_c import epilogue
from .nhwc_dw_gen import _Gen
from .simd_gemm import clamp_of


def supports(geo, isa) -> bool:
    return isa in ISAS and "nhwc_dw" in ISAS[isa].conv_kernels and geo.depthwise


def isa_of(ctx):
    """The SIMD ISA of ctx's node whose description has this kernel (its conv table's
    ``nhwc_dw``), or None (the portable loops)."""
    return isa_for(ctx, {n: i for n, i in ISAS.items() if "nhwc_dw" in i.conv_kernels})


def flavor(geo, isa: str) -> str:
    """isa's flavor, or its narrow one for at most its ``cmax`` channels."""
    narrow = ISAS[isa].conv_kernels.get("nhwc_dw_narrow")
    return narrow["name"] if narrow is not None and geo.cin <= narrow["cmax"] else isa


def operands(ctx, geo, isa: str, wk: int = 1, bk: int = 2) -> tuple:
    """(wt, bp): C names of the tap-major weights [tap][Cp] (from the constant input wk) and
    the padded bias [Cp] (input bk: a constant, a run-time bias copied into scratch, or
    zeros when absent)."""
    gen = _Gen(flavor(geo, isa), geo)
    C, T, cp = geo.cin, geo.kh * geo.kw, gen.cp
    wt = np.zeros((T, cp), np.float32)
    wt[:, :C] = np.asarray(ctx.in_const(wk), np.float32).reshape(C, T).T
    wv = ctx.const(wt, "wtap")
    has_b = ctx.has_input(bk)
    bconst = ctx.in_const(bk) if has_b else None
    if has_b and bconst is None:        # run-time bias: padded copy in scratch
        bv = ctx.scratch(cp * 4, "float", "bpad")
        ctx(f"for (size_t c = 0; c < {cp}u; ++c) {bv}[c] = c < {C}u ? {ctx.inp[bk]}[c] : 0.0f;")
    else:
        bp = np.zeros(cp, np.float32)
        if has_b:
            bp[:C] = np.asarray(bconst, np.float32).reshape(C)
        bv = ctx.const(bp, "bpad")
    return wv, bv


def driver(ctx, geo, isa: str, gen: _Gen | None = None, clamp: tuple = (True, True),
           post: tuple = (False, False)) -> str:
    """Name of the C driver ``f(x, wt, bp, y, [pm, pa, [r,]] lo, hi, ep)`` of this geometry,
    clamp sides and post-affine / residual (registered once per all three; gen: another
    form's generator, qconv_nhwc.py's)."""
    gen = gen or _Gen(flavor(geo, isa), geo, clamp, post)
    if gen.pinned:
        pin(ctx)
    if not ISAS[gen.f["isa"]].masked and gen.tail != gen.L:
        _header(ctx, gen.f["isa"])      # the include and the lane mask table (mdecl's)
    else:
        include(ctx, isa)
    ctx.helper(f"{gen.hkey}.{gen.name}", gen.text())
    return gen.name


def emit(ctx, node, geo, isa: str, post=None, resid=None) -> bool:
    """The step's call; post: the C names of the padded (mul, add) of a post-affine, resid
    the residual's (ops/conv_nhwc.py), applied in the kernels when the activation is a clamp.
    Returns whether they were."""
    wv, bv = operands(ctx, geo, isa)
    lo, hi, act = clamp_of(node)
    ep = epilogue(ctx, node, "float32") if act else "NULL"
    inner = post is not None and act is None
    name = driver(ctx, geo, isa, clamp=clamp_sides(lo, hi),
                  post=(inner, inner and resid is not None))
    ctx.kernel = isa
    extra = ""
    if inner:
        extra = f"{post[0]}, {post[1]}, " + (f"{resid}, " if resid is not None else "")
    ctx(f"/* ConvNHWC {geo.describe()}: {flavor(geo, isa)} register-blocked channel-last "
        "kernel" + (", then the post-affine" + (" and the residual" if resid else "")
                    if inner else "") + " */")
    ctx(f"{name}({ctx.inp[0]}, {wv}, {bv}, {ctx.out[0]}, {extra}{flit(lo)}, {flit(hi)}, {ep});")
    return inner
