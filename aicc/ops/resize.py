"""Resize (opsets 10, 11, 13, 18, 19) and Upsample (7, 9): nearest, N-D linear, cubic,
antialias, tf_crop_and_resize.

With constant scales (or sizes) all coordinate arithmetic happens at compile time: for every
resized output dim a table maps each output index to source offsets (nearest: one offset;
linear: two offsets and two weights), computed in float32 exactly as onnxruntime does (same
formulas and operation order, so nearest ties resolve identically). The C kernel walks the
output once, adding table entries; dims with scale 1 are identity (as in onnxruntime) and
adjacent identity dims are merged, so NCHW 2-D resizes become (N*C) x H x W loops (float32
bilinear upsampling of the last two dims: by cached rows, kernels/resize/rows.py). Linear mode
interpolates over every resized dim (2^k source reads for k resized dims, k <= 4), clamping
the source coordinate into the input like onnxruntime; it needs float data. Nearest works on
any dtype (bit-exact copies).

Constant scales, and sizes (which only need the static output shape: the scale is out/in),
give compile-time tables. Scales computed at run time (graph inputs), and run-time sizes with
a keep_aspect_ratio_policy other than stretch, are read by the C code, which builds the same
tables in step scratch memory with the same float32 formulas (``aicc_resize_*`` helpers in
kernels/resize/tables.py); the output shape must then be static (inferred or declared by the model).
In that run-time path every dim named by ``axes`` gets a table (dims outside ``axes`` have
scale 1 by the spec and stay identity); when every such dim whose static size is unchanged
has run-time scale 1 (the common NCHW case), a second loop nest that treats those dims as
identity runs instead. A run-time scale that is NaN or not positive is replaced by out/in.
Tables clamp every source index into the input, so run-time values can never cause an
out-of-bounds read.

Opset 10 Resize and Upsample use asymmetric coordinates and onnxruntime's legacy nearest
rounding (floor when upsampling, ceil when downsampling). align_corners (nearest, linear) uses
the integer output length like onnxruntime; the ONNX reference uses in * scale, so the two
disagree when that is fractional (conformance case
test_resize_downsample_scales_linear_align_corners follows the reference and fails here).

Mode cubic (cubic_coeff_a, exclude_outside), antialias (linear and cubic) and
tf_crop_and_resize (roi, extrapolation_value; linear and cubic) go through K-tap tables built
at run time in step scratch (kernels/resize/tables.py: emit_taps), with the ONNX reference formulas in
double precision (output width in * scale, so align_corners / half_pixel_symmetric /
tf_crop_and_resize follow the reference where onnxruntime uses the integer length;
pytorch_half_pixel with one output uses 0 like onnxruntime). Scales may be constant, derived
from sizes, or read at run time; roi may be read at run time. Antialias with run-time scales
sizes its tap count from the static output shape (out / in). They need float32/float64 data;
tf_crop_and_resize with nearest is refused. An output index whose crop coordinate lies
outside the input (in any dim) gets extrapolation_value (NaN extrapolation_value: 0).
NaN in the input propagates through linear weights (a NaN source poisons its
neighbours).
"""
from __future__ import annotations

import numpy as np

from ..emit_c.loops import numel, strides_of
from ..errors import UnsupportedError
from ..kernels.move.copy import _Nest
from ..kernels.resize import rows as resize_rows
from ..kernels.resize.tables import CMODES, NMODES, emit_taps, table_helpers, taps_reason
from .base import Op, dtype_reason, register
from .reshape import is_runtime, static_output_reason

F = np.float32
COORD_MODES = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
               "asymmetric", "tf_half_pixel_for_nn"}
NEAREST_MODES = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}


def original_coords(mode, out_len, in_len, scale):
    """Source coordinate (float32) of every output index, per coordinate_transformation_mode."""
    x = np.arange(out_len, dtype=F)
    s, h = F(scale), F(0.5)
    with np.errstate(all="ignore"):
        if mode == "asymmetric":
            return x / s
        if mode == "tf_half_pixel_for_nn":
            return (x + h) / s
        if mode == "pytorch_half_pixel":
            return (x + h) / s - h if out_len > 1 else np.zeros(out_len, F)
        if mode == "align_corners":
            if out_len == 1:
                return np.zeros(1, F)
            return x * F(in_len - 1) / F(out_len - 1)
        if mode == "half_pixel_symmetric":           # onnxruntime mixes float and double here
            adjustment = F(out_len) / (s * F(in_len))
            offset = (F(in_len) / F(2)) * (F(1) - adjustment)
            orig = np.float64(offset) + (x.astype(np.float64) + 0.5) / np.float64(s) - 0.5
            return orig.astype(F)
        return (x + h) / s - h                         # half_pixel


def nearest_index(x, mode, scale, in_len):
    x64 = x.astype(np.float64)
    rnd = np.sign(x64) * np.floor(np.abs(x64) + 0.5)   # std::round: halves away from zero
    if mode == "simple":
        idx = np.ceil(x64) if scale < 1 else np.trunc(x64)
    elif mode == "round_prefer_floor":
        idx = np.where(x64 == np.trunc(x64) + 0.5, np.floor(x64), rnd)
    elif mode == "round_prefer_ceil":
        idx = rnd
    elif mode == "floor":
        idx = np.floor(x64)
    else:
        idx = np.ceil(x64)
    return np.clip(idx, 0, in_len - 1).astype(np.int64)


def linear_taps(x, in_len):
    """(lo, hi, weight of lo, weight of hi) per output index, onnxruntime's clamping."""
    v = np.minimum(np.maximum(x, F(0)), F(in_len - 1)).astype(F)
    lo = np.minimum(v.astype(np.int64), in_len - 1)
    hi = np.minimum(lo + 1, in_len - 1)
    d1 = np.abs(v - lo.astype(F)).astype(F)
    d2 = np.abs(v - hi.astype(F)).astype(F)
    same = lo == hi
    d1[same], d2[same] = F(0.5), F(0.5)
    return lo, hi, d2, d1


class _Resize(Op):
    attrs = {"mode": "nearest", "coordinate_transformation_mode": "half_pixel",
             "nearest_mode": "round_prefer_floor", "cubic_coeff_a": -0.75, "exclude_outside": 0,
             "extrapolation_value": 0.0, "antialias": 0, "axes": None,
             "keep_aspect_ratio_policy": "stretch", "scales": None}

    def legacy(self, g) -> bool:
        return self.op_type == "Upsample" or g.opset < 11

    def check(self, node, g):
        mode = self.attr(node, "mode")
        legacy = self.legacy(g)
        if mode not in ("nearest", "linear", "cubic") and not (legacy and mode == "bilinear"):
            return f"mode {mode!r} not supported"
        if not legacy:
            ct = self.attr(node, "coordinate_transformation_mode")
            if self.taps(node, g):
                return (dtype_reason(g, node.inputs[:1]) or static_output_reason(
                    node, g, "the run-time scales/sizes") or taps_reason(self, node, g))
            if ct not in COORD_MODES:
                return f"coordinate_transformation_mode {ct!r} not supported"
            if mode == "nearest" and self.attr(node, "nearest_mode") not in NEAREST_MODES:
                return f"nearest_mode {self.attr(node, 'nearest_mode')!r} not supported"
        if mode != "nearest" and g.dtype(node.inputs[0]).kind != "f":
            return "linear mode needs float data"
        if mode != "nearest" and g.dtype(node.inputs[0]).name == "float16":
            return "linear mode on float16 not supported"
        why = dtype_reason(g, node.inputs[:1]) or static_output_reason(
            node, g, "the run-time scales/sizes")
        if why:
            return why
        if mode != "nearest" and self.runtime_kind(node, g):
            r = len(g.shape(node.inputs[0]))
            axes = self.axes(node, g, r)
            if len(axes) > 4:
                return (f"linear mode with run-time scales over {len(axes)} axes (max 4); "
                        "make the scales constant or give axes")
        return None

    def taps(self, node, g) -> bool:
        """Cubic, antialias and tf_crop_and_resize use K-tap tables (kernels/resize/tables.py)."""
        if self.legacy(g):
            return False
        return (self.attr(node, "mode") == "cubic" or bool(self.attr(node, "antialias")
                and self.attr(node, "mode") != "nearest")
                or self.attr(node, "coordinate_transformation_mode") == "tf_crop_and_resize")

    def axes(self, node, g, r):
        axes = self.attr(node, "axes") if not self.legacy(g) else None
        return list(range(r)) if axes is None else [int(a) + r if int(a) < 0 else int(a)
                                                    for a in axes]

    def runtime_kind(self, node, g):
        """"scales" / "sizes" when the scale comes from a run-time input, else None."""
        if self.op_type == "Upsample" and self.attr(node, "scales") is not None:
            return None
        k = 1 if self.legacy(g) else 2
        if is_runtime(node, g, k) and all(isinstance(d, int) for d in g.shape(node.inputs[k])) \
                and numel(g.shape(node.inputs[k])):
            return "scales"
        if not self.legacy(g) and is_runtime(node, g, 3) and self.attr(
                node, "keep_aspect_ratio_policy") in ("not_larger", "not_smaller"):
            return "sizes"
        return None

    def scales(self, node, ctx, shape, out):
        """float32 scale per dim, as onnxruntime derives it."""
        r = len(shape)
        if self.op_type == "Upsample" and self.attr(node, "scales") is not None:
            given = [float(s) for s in self.attr(node, "scales")]
        else:
            k = 1 if self.legacy(ctx.g) else 2
            given = None
            if ctx.has_input(k):
                v = ctx.in_const(k)
                if v is None and numel(ctx.in_shape(k)) == 0:
                    v = np.zeros(0, F)              # an empty run-time scales: sizes decide
                if v is None:
                    raise UnsupportedError(f"{node.op_type} {node.name}: scales input is not a "
                                           "compile-time constant")
                given = v.reshape(-1).tolist() if v.size else None
        axes = self.axes(node, ctx.g, r)
        sc = [F(1)] * r
        if given is not None:
            for a, s in zip(axes, given):
                sc[a] = F(s)
            return sc
        policy = self.attr(node, "keep_aspect_ratio_policy")
        if policy in ("not_larger", "not_smaller"):     # the requested sizes, not the output
            v = ctx.in_const(3)
            if v is None:
                raise UnsupportedError(f"{node.op_type} {node.name}: keep_aspect_ratio_policy "
                                       "needs constant sizes")
            out = list(shape)
            for a, z in zip(axes, v.reshape(-1).tolist()):
                out[a] = int(z)
        for a in axes:
            sc[a] = F(out[a]) / F(shape[a]) if shape[a] else F(1)
        if policy in ("not_larger", "not_smaller") and axes:
            s = (min if policy == "not_larger" else max)(sc[a] for a in axes)
            for a in axes:
                sc[a] = s
        return sc

    def emit(self, node, ctx):
        shape, out = ctx.in_shape(0), ctx.out_shape(0)
        r = len(shape)
        if numel(out) == 0:
            ctx(f"(void){ctx.out[0]};  /* empty output */")
            return
        if numel(shape) == 0:
            raise UnsupportedError(f"{node.op_type} {node.name}: empty input, non-empty output")
        if self.taps(node, ctx.g):
            return emit_taps(self, node, ctx)
        legacy = self.legacy(ctx.g)
        linear = self.attr(node, "mode") != "nearest"
        coord = "asymmetric" if legacy else self.attr(node, "coordinate_transformation_mode")
        near = "simple" if legacy else self.attr(node, "nearest_mode")
        ist = strides_of(shape)
        dt = ctx.out_dtype(0)
        wdt = np.float64 if dt == np.float64 else np.float32
        itype = np.uint32 if numel(shape) < 2 ** 32 else np.uint64
        what = "linear" if linear else f"nearest ({near})"
        if self.runtime_kind(node, ctx.g):
            return self.emit_runtime(node, ctx, linear, coord, near, what, wdt)
        sc = self.scales(node, ctx, shape, out)
        tables: dict = {}

        def table(arr, hint):               # one weights entry per distinct table
            key = (arr.dtype.str, arr.tobytes())
            if key not in tables:
                tables[key] = ctx.const(arr, hint=hint)
            return tables[key]
        # per output dim: ("id", stride, n) | ("near", table) | ("lin", lo, hi, wlo, whi)
        plan = []
        for d in range(r):
            if sc[d] == F(1) and out[d] == shape[d]:
                _identity(plan, ist[d], out[d])
                continue
            x = original_coords(coord, out[d], shape[d], sc[d])
            if linear:
                lo, hi, wl, wh = linear_taps(x, shape[d])
                plan.append(("lin", out[d], table((lo * ist[d]).astype(itype), f"lo{d}_"),
                             table((hi * ist[d]).astype(itype), f"hi{d}_"),
                             table(wl.astype(wdt), f"wlo{d}_"), table(wh.astype(wdt), f"whi{d}_")))
            else:
                idx = nearest_index(x, near, sc[d], shape[d]) * ist[d]
                plan.append(("near", out[d], table(idx.astype(itype), f"near{d}_")))
        k = sum(p[0] == "lin" for p in plan)
        if k > 4:
            raise UnsupportedError(f"{node.op_type} {node.name}: linear over {k} dims (max 4)")
        ctx(f"/* {node.op_type} {what}, {coord}: scales [{', '.join(str(s) for s in sc)}]; "
            "per-dim source tables */")
        ct = "uint32_t" if itype == np.uint32 else "uint64_t"
        if resize_rows.applies(plan, shape, out, ctx.out_ctype(0)):
            resize_rows.emit(ctx, plan, shape, ct)
        else:
            _emit_nest(ctx, plan)

    def emit_runtime(self, node, ctx, linear, coord, near, what, wdt):
        """Scales (or keep-aspect-ratio sizes) read at run time: tables built in scratch."""
        shape, out = ctx.in_shape(0), ctx.out_shape(0)
        r = len(shape)
        g = ctx.g
        axes = self.axes(node, g, r)
        ist = strides_of(shape)
        kind = self.runtime_kind(node, g)
        wct = "double" if wdt == np.float64 else "float"
        fill = table_helpers(ctx, linear, wct)
        ctx(f"/* {node.op_type} {what}, {coord}: {kind} read at run time, per-dim source "
            "tables built in scratch */")
        if kind == "scales":
            k = 1 if self.legacy(g) else 2
            n = numel(ctx.in_shape(k))
            for i, a in enumerate(axes[:n]):
                ctx(f"float s{a} = {ctx.inp[k]}[{i}];")
                ctx(f"if (!(s{a} > 0.0f)) s{a} = (float){out[a]} / (float){shape[a]};"
                    "  /* NaN or <= 0 */")
            axes = axes[:n]
        else:
            policy = self.attr(node, "keep_aspect_ratio_policy")
            pick = "<" if policy == "not_larger" else ">"
            ctx("float s = 0.0f;")
            for i, a in enumerate(axes):
                ctx(f"const float z{a} = (float){ctx.inp[3]}[{i}] / (float){shape[a]};")
                ctx(f"if (z{a} {pick} s) s = z{a};" if i else f"s = z{a};")
            ctx(f"if (!(s > 0.0f)) s = (float){out[axes[0]]} / (float){shape[axes[0]]};"
                "  /* NaN or <= 0 */" if axes else "(void)s;")
            for a in axes:
                ctx(f"const float s{a} = s;")
        cm = CMODES[coord]
        general, fast, cand = [], [], []
        for d in range(r):
            if d not in axes:
                _identity(general, ist[d], out[d])
                _identity(fast, ist[d], out[d])
                continue
            if linear:
                lo = ctx.scratch(out[d] * 8, "size_t", f"lo{d}_")
                hi = ctx.scratch(out[d] * 8, "size_t", f"hi{d}_")
                wl = ctx.scratch(out[d] * 8, wct, f"wlo{d}_")
                wh = ctx.scratch(out[d] * 8, wct, f"whi{d}_")
                ctx(f"{fill}({lo}, {hi}, {wl}, {wh}, {out[d]}, {shape[d]}, {ist[d]}u, {cm}, s{d});")
                entry = ("lin", out[d], lo, hi, wl, wh)
            else:
                t = ctx.scratch(out[d] * 8, "size_t", f"near{d}_")
                ctx(f"{fill}({t}, {out[d]}, {shape[d]}, {ist[d]}u, {cm}, {NMODES[near]}, s{d});")
                entry = ("near", out[d], t)
            general.append(entry)
            if out[d] == shape[d]:
                cand.append(d)
                _identity(fast, ist[d], out[d])
            else:
                fast.append(entry)
        if cand:
            with ctx.block(f"if ({' && '.join(f's{d} == 1.0f' for d in cand)})"):
                ctx("/* unchanged dims with scale 1 are identity */")
                _emit_nest(ctx, fast)
            with ctx.block("else"):
                _emit_nest(ctx, general)
        else:
            _emit_nest(ctx, general)


def _identity(plan, stride, n):
    """Append an identity dim, merged with a preceding identity dim."""
    if plan and plan[-1][0] == "id":
        plan[-1] = ("id", stride, plan[-1][2] * n)
    else:
        plan.append(("id", stride, n))


def _emit_nest(ctx, plan) -> None:
    """The output walk: per dim an identity stride, a nearest offset table or linear tables
    (lo/hi offsets and weights); linear dims multiply the source reads (2^k corners)."""
    ctx("size_t o = 0;")
    corners = ["0u"]
    lerps = []                          # (wlo var, whi var) per lin level
    with _Nest(ctx.w) as nest:
        for d, p in enumerate(plan):
            n = p[2] if p[0] == "id" else p[1]
            nest.open(f"for (size_t i{d} = 0; i{d} < {n}u; ++i{d})")
            if p[0] == "id":
                adds = [f"i{d}" + (f" * {p[1]}u" if p[1] != 1 else "")]
            elif p[0] == "near":
                adds = [f"{p[2]}[i{d}]"]
            else:
                _, _, tl, th, wl, wh = p
                ctx(f"const {ctx.out_ctype(0)} a{d} = {wl}[i{d}], b{d} = {wh}[i{d}];")
                lerps.append((f"a{d}", f"b{d}"))
                adds = [f"{tl}[i{d}]", f"{th}[i{d}]"]
            new = []
            for c in corners:
                for a in adds:
                    new.append(a if c == "0u" else f"{c} + {a}")
            names = []
            for j, e in enumerate(new):
                v = f"q{d}_{j}" if len(new) > 1 else f"q{d}"
                ctx(f"const size_t {v} = {e};")
                names.append(v)
            corners = names

        def expr(level, c):
            if level == len(lerps):
                return f"{ctx.inp[0]}[{corners[c]}]"
            a, b = lerps[level]
            lo, hi = expr(level + 1, 2 * c), expr(level + 1, 2 * c + 1)
            if level + 1 < len(lerps):
                lo, hi = f"({lo})", f"({hi})"
            return f"{a} * {lo} + {b} * {hi}"
        ctx(f"{ctx.out[0]}[o++] = {expr(0, 0)};")


@register("Resize", since=10)
class Resize(_Resize):
    pass


@register("Upsample", since=1)
class Upsample(_Resize):
    pass
