"""C helpers of Resize/Upsample with run-time scales: build the per-dim source tables at run
time exactly as resize.py builds them at compile time (original_coords, nearest_index,
linear_taps), in float32 arithmetic with the same operation order (half_pixel_symmetric mixes
float and double like onnxruntime).

A dim whose scale is exactly 1 and whose size is unchanged is an identity table (nearest: the
index itself; linear: both taps on the index with weights 1/2 + 1/2, which returns the value
exactly, Inf and NaN included). A NaN source coordinate (only possible from a NaN scale, which
resize.py replaces first) maps to index 0; every index is clamped into [0, in_len), so the
tables never point outside the input. Float -> integer conversions happen only on values
already clamped into range.
"""
from __future__ import annotations

from ...emit_c.loops import numel, strides_of

CMODES = {"half_pixel": 0, "asymmetric": 1, "pytorch_half_pixel": 2, "align_corners": 3,
          "tf_half_pixel_for_nn": 4, "half_pixel_symmetric": 5}
NMODES = {"simple": 0, "round_prefer_floor": 1, "round_prefer_ceil": 2, "floor": 3, "ceil": 4}

_COORD = """/* Resize: source coordinate of output index x (float32, as onnxruntime): mode 0
   half_pixel, 1 asymmetric, 2 pytorch_half_pixel, 3 align_corners, 4 tf_half_pixel_for_nn,
   5 half_pixel_symmetric. s > 0 (the caller replaces NaN / non-positive scales). */
static float aicc_resize_0_coord(int mode, int64_t x, int64_t out_len, int64_t in_len, float s)
{
    const float xf = (float)x;
    if (mode == 1) return xf / s;
    if (mode == 4) return (xf + 0.5f) / s;
    if (mode == 2) return out_len > 1 ? (xf + 0.5f) / s - 0.5f : 0.0f;
    if (mode == 3) {
        if (out_len == 1) return 0.0f;
        return xf * (float)(in_len - 1) / (float)(out_len - 1);
    }
    if (mode == 5) {
        const float adjustment = (float)out_len / (s * (float)in_len);
        const float offset = ((float)in_len / 2.0f) * (1.0f - adjustment);
        return (float)((double)offset + ((double)xf + 0.5) / (double)s - 0.5);
    }
    return (xf + 0.5f) / s - 0.5f;
}"""

_NEAR = """/* Resize nearest table: t[x] = stride * source index of output index x; nearest mode 0
   simple (legacy: ceil when downsampling, else truncate), 1 round_prefer_floor,
   2 round_prefer_ceil, 3 floor, 4 ceil; the index is clamped into [0, in_len). */
static void aicc_resize_1_near(size_t *t, int64_t out_len, int64_t in_len, size_t stride,
    int cmode, int nmode, float s)
{
    int64_t x;
    for (x = 0; x < out_len; ++x) {
        double v, r;
        if (s == 1.0f && out_len == in_len) {
            t[x] = (size_t)x * stride;
            continue;
        }
        v = (double)aicc_resize_0_coord(cmode, x, out_len, in_len, s);
        r = (v < 0 ? -1.0 : 1.0) * floor(fabs(v) + 0.5);    /* halves away from zero */
        if (nmode == 0) v = s < 1.0f ? ceil(v) : trunc(v);
        else if (nmode == 1) v = v == trunc(v) + 0.5 ? floor(v) : r;
        else if (nmode == 2) v = r;
        else if (nmode == 3) v = floor(v);
        else v = ceil(v);
        if (!(v >= 0.0)) v = 0.0;                            /* NaN too */
        if (v > (double)(in_len - 1)) v = (double)(in_len - 1);
        t[x] = (size_t)v * stride;
    }
}"""

_LIN = """/* Resize linear tables: per output index x the offsets (stride * index) of the two taps
   and their weights, clamping the coordinate into [0, in_len - 1] like onnxruntime. */
static void aicc_resize_1_lin_{ct}(size_t *lo, size_t *hi, {ct} *wl, {ct} *wh, int64_t out_len,
    int64_t in_len, size_t stride, int cmode, float s)
{{
    int64_t x;
    for (x = 0; x < out_len; ++x) {{
        float v, d1, d2;
        int64_t a, b;
        if (s == 1.0f && out_len == in_len) {{
            lo[x] = hi[x] = (size_t)x * stride;
            wl[x] = wh[x] = ({ct})0.5f;
            continue;
        }}
        v = aicc_resize_0_coord(cmode, x, out_len, in_len, s);
        v = v > 0.0f ? v : 0.0f;                              /* NaN too */
        if (v > (float)(in_len - 1)) v = (float)(in_len - 1);
        a = (int64_t)v;
        if (a > in_len - 1) a = in_len - 1;
        b = a + 1 < in_len ? a + 1 : in_len - 1;
        d1 = (float)fabs(v - (float)a);
        d2 = (float)fabs(v - (float)b);
        if (a == b) d1 = d2 = 0.5f;
        lo[x] = (size_t)a * stride;
        hi[x] = (size_t)b * stride;
        wl[x] = ({ct})d2;
        wh[x] = ({ct})d1;
    }}
}}"""


def table_helpers(ctx, linear: bool, wct: str) -> str:
    """Register the helpers; returns the name of the table builder for this mode."""
    ctx.helper("aicc_resize_0_coord", _COORD)
    if linear:
        return ctx.helper(f"aicc_resize_1_lin_{wct}", _LIN.format(ct=wct))
    return ctx.helper("aicc_resize_1_near", _NEAR)


# -- cubic, antialias, tf_crop_and_resize: K taps per output index (onnx reference formulas) --
KERNELS = {"linear": 0, "cubic": 1, "linear_aa": 2, "cubic_aa": 3}
CMODES_TAPS = dict(CMODES, tf_crop_and_resize=6)

_TAPS = """/* Resize K-tap tables (cubic, antialias, tf_crop_and_resize), following the ONNX reference
   in double precision: source coordinate per mode (6 tf_crop_and_resize, using roi r0..r1 and
   flagging coordinates outside [0, in_len - 1] in ext), ratio in (0, 1], kernel 0 linear,
   1 cubic (coefficient A), 2 linear antialias, 3 cubic antialias (both normalised), the n
   taps nearest the coordinate (ties to the smaller index) with edge replication (indices
   clamped into [0, in_len)); exclude_outside zeroes taps outside the input and renormalises.
   A kernel wider than K (impossible for a consistent static output shape) is cut to K taps;
   a narrower one is padded with zero weights. NaN/Inf coordinates become 0 and coordinates
   are clamped to +-2^40 first, so the float->integer conversions are always defined. */
static void aicc_resize_2_taps_{ct}(size_t *off, {ct} *w, uint8_t *ext, int64_t out_len,
    int64_t in_len, size_t stride, int cmode, double s, double r0, double r1, int kernel,
    double A, int excl, int64_t K)
{{
    const double in_w = (double)in_len, out_w = s * (double)in_len;
    const double sc = s < 1.0 ? s : 1.0;
    double c[64];
    int64_t x, n, i;
    if (kernel == 0) n = 2;
    else if (kernel == 1) n = 4;
    else if (kernel == 2) n = 2 - 2 * ((int64_t)floor(-1.0 / sc) + 1);
    else n = 2 - 2 * ((int64_t)floor(-2.0 / sc) + 1);
    if (n > K) n = K;
    if (n > 64) n = 64;
    for (x = 0; x < out_len; ++x) {{
        const double xd = (double)x;
        double v, ratio, sum = 0.0, xp, fr;
        int64_t start, p, pad = (n + 1) / 2;
        ext[x] = 0;
        if (cmode == 3) v = out_w == 1.0 ? 0.0 : xd * (in_w - 1.0) / (out_w - 1.0);
        else if (cmode == 1) v = xd / s;
        else if (cmode == 4) v = (xd + 0.5) / s;
        else if (cmode == 6) {{
            v = out_w == 1.0 ? (r1 - r0) * (in_w - 1.0) / 2.0
                             : xd * (r1 - r0) * (in_w - 1.0) / (out_w - 1.0);
            v += r0 * (in_w - 1.0);
            ext[x] = (uint8_t)(v < 0.0 || v > in_w - 1.0);
        }}
        else if (cmode == 2) v = out_len > 1 ? (xd + 0.5) / s - 0.5 : 0.0;  /* onnxruntime */
        else if (cmode == 5) {{
            const double adj = (double)out_len / out_w;
            v = (in_w / 2.0) * (1.0 - adj) + (xd + 0.5) / s - 0.5;
        }}
        else v = (xd + 0.5) / s - 0.5;
        if (!(v == v) || v > 1e300 || v < -1e300) v = 0.0;
        if (v > 1099511627776.0) v = 1099511627776.0;
        if (v < -1099511627776.0) v = -1099511627776.0;
        ratio = v == floor(v) ? 1.0 : v - floor(v);
        for (i = 0; i < n; ++i) {{
            double t, a;
            if (kernel == 0) c[i] = i == 0 ? 1.0 - ratio : ratio;
            else if (kernel == 1) {{
                t = i == 0 ? ratio + 1.0 : i == 1 ? ratio : i == 2 ? 1.0 - ratio : 2.0 - ratio;
                c[i] = t <= 1.0 ? ((A + 2.0) * t - (A + 3.0)) * t * t + 1.0
                                : ((A * t - 5.0 * A) * t + 8.0 * A) * t - 4.0 * A;
            }}
            else if (kernel == 2) {{
                a = fabs(((double)(i - (n - 2) / 2)) - ratio) * sc;
                c[i] = a < 1.0 ? 1.0 - a : 0.0;
            }}
            else {{
                a = fabs(sc * ((double)(i - (n - 2) / 2) - ratio));
                c[i] = a <= 1.0 ? ((A + 2.0) * a - (A + 3.0)) * a * a + 1.0
                     : a < 2.0 ? ((A * a - 5.0 * A) * a + 8.0 * A) * a - 4.0 * A : 0.0;
            }}
            sum += c[i];
        }}
        if (kernel >= 2 && sum != 0.0)
            for (i = 0; i < n; ++i) c[i] /= sum;
        xp = v + (double)pad;
        p = (int64_t)floor(xp);
        fr = xp - (double)p;
        if (n % 2 == 0) start = p + (fr == 0.0 ? -(n / 2) : -(n / 2) + 1);
        else start = p + (fr <= 0.5 ? -((n - 1) / 2) : -((n - 1) / 2) + 1);
        start -= pad;
        if (excl) {{
            sum = 0.0;
            for (i = 0; i < n; ++i) {{
                if (start + i < 0 || start + i >= in_len) c[i] = 0.0;
                sum += c[i];
            }}
            if (sum == 0.0) sum = 1.0;
            for (i = 0; i < n; ++i) c[i] /= sum;
        }}
        for (i = 0; i < K; ++i) {{
            int64_t j = start + (i < n ? i : 0);
            j = j < 0 ? 0 : j > in_len - 1 ? in_len - 1 : j;
            off[x * K + i] = (size_t)j * stride;
            w[x * K + i] = i < n ? ({ct})c[i] : ({ct})0;
        }}
    }}
}}"""


def taps_count(kernel: str, scale_min: float) -> int:
    """Taps per output index (the widest for antialias over scales >= scale_min)."""
    import math
    sc = min(max(scale_min, 1e-6), 1.0)
    if kernel == "linear":
        return 2
    if kernel == "cubic":
        return 4
    if kernel == "linear_aa":
        return min(64, 2 - 2 * (math.floor(-1.0 / sc) + 1))
    return min(64, 2 - 2 * (math.floor(-2.0 / sc) + 1))


def taps_helper(ctx, wct: str) -> str:
    return ctx.helper(f"aicc_resize_2_taps_{wct}", _TAPS.format(ct=wct))


def emit_taps_nest(ctx, plan, extrap: str) -> None:
    """Output walk for K-tap dims: plan entries ("id", stride, n) or ("taps", n, K, off, w,
    ext). Tap dims are summed separably, innermost resized dim first (as the reference), in
    double; an output index flagged outside the crop box in any dim gets ``extrap``."""
    ct = ctx.out_ctype(0)
    x, y = ctx.inp[0], ctx.out[0]
    ctx("size_t o = 0;")
    depth = 0
    taps = [(d, p) for d, p in enumerate(plan) if p[0] == "taps"]
    for d, p in enumerate(plan):
        n = p[2] if p[0] == "id" else p[1]
        ctx(f"for (size_t i{d} = 0; i{d} < {n}u; ++i{d}) {{")
        ctx.w.level += 1
        depth += 1
    base = " + ".join(f"i{d}" + (f" * {p[1]}u" if p[1] != 1 else "")
                      for d, p in enumerate(plan) if p[0] == "id") or "0u"
    ctx(f"const size_t b = {base};")
    flags = " | ".join(f"{p[5]}[i{d}]" for d, p in taps)
    ctx(f"if ({flags}) {{ {y}[o++] = ({ct}){extrap}; continue; }}")

    def level(k, off):
        d, p = taps[k]
        _, _, K, to, tw, _ = p
        acc = f"acc{k}"
        ctx(f"double {acc} = 0.0;")
        with ctx.block(f"for (size_t t{k} = 0; t{k} < {K}u; ++t{k})"):
            idx = f"i{d} * {K}u + t{k}"
            o = f"{off} + {to}[{idx}]"
            if k + 1 < len(taps):
                level(k + 1, o)
                ctx(f"{acc} += (double){tw}[{idx}] * acc{k + 1};")
            else:
                ctx(f"{acc} += (double){tw}[{idx}] * (double){x}[{o}];")
    level(0, "b")
    ctx(f"{y}[o++] = ({ct})acc0;")
    for _ in range(depth):
        ctx.w.level -= 1
        ctx("}")


def taps_reason(op, node, g) -> str | None:
    """check() of the K-tap path (cubic, antialias, tf_crop_and_resize)."""
    dt = g.dtype(node.inputs[0]).name
    if dt not in ("float32", "float64"):
        return f"mode {op.attr(node, 'mode')} needs float32/float64 data (got {dt})"
    if op.attr(node, "mode") == "nearest":
        return "tf_crop_and_resize with mode nearest not supported (linear and cubic are)"
    if op.runtime_kind(node, g) == "sizes":
        return ("keep_aspect_ratio_policy with run-time sizes not supported for cubic, "
                "antialias or tf_crop_and_resize")
    if op.attr(node, "antialias") and op.attr(node, "mode") != "nearest":
        import math
        ins, outs = g.shape(node.inputs[0]), g.shape(node.outputs[0])
        for a, b in zip(ins, outs):
            if a and b and b < a:
                w = 2.0 if op.attr(node, "mode") == "cubic" else 1.0
                if 2 - 2 * (math.floor(-w * a / b) + 1) > 64:
                    return f"antialias downsampling {a} -> {b} needs more than 64 taps"
    if op.attr(node, "coordinate_transformation_mode") == "tf_crop_and_resize":
        if not (len(node.inputs) > 1 and node.inputs[1]):
            return "tf_crop_and_resize needs the roi input"
        if g.const(node.inputs[1]) is None and g.dtype(node.inputs[1]).name not in ("float32", "float64"):
            return "run-time roi must be float32 or float64"
    return None


def emit_taps(op, node, ctx) -> None:
    """Resize through K-tap tables built at run time in scratch (cubic, antialias,
    tf_crop_and_resize): scales constant, from sizes, or read at run time."""
    shape, out = ctx.in_shape(0), ctx.out_shape(0)
    r = len(shape)
    g = ctx.g
    axes = op.axes(node, g, r)
    ist = strides_of(shape)
    wct = "double" if ctx.out_dtype(0).name == "float64" else "float"
    mode = op.attr(node, "mode")
    aa = bool(op.attr(node, "antialias"))
    coord = op.attr(node, "coordinate_transformation_mode")
    kind = op.runtime_kind(node, g)
    ctx(f"/* Resize {mode}{' antialias' if aa else ''}, {coord}: K-tap tables built at run "
        "time (onnx reference formulas) */")
    if kind == "scales":
        n = numel(ctx.in_shape(2))
        for i, a in enumerate(axes[:n]):
            ctx(f"double s{a} = (double){ctx.inp[2]}[{i}];")
            ctx(f"if (!(s{a} > 0.0)) s{a} = (double){out[a]} / (double){shape[a]};"
                "  /* NaN or <= 0 */")
        axes = axes[:n]
        smin = {a: out[a] / shape[a] * (1 - 1e-6) for a in axes}
    else:
        sc = op.scales(node, ctx, shape, out)
        smin = {a: float(sc[a]) for a in axes}
    crop = coord == "tf_crop_and_resize"
    roi = ctx.in_const(1) if crop else None
    na = len(axes)
    plan = []
    for d in range(r):
        if d not in axes or (not crop and out[d] == shape[d] and kind != "scales"
                             and smin[d] == 1.0):
            if plan and plan[-1][0] == "id":
                plan[-1] = ("id", ist[d], plan[-1][2] * out[d])
            else:
                plan.append(("id", ist[d], out[d]))
            continue
        k = ("cubic" if mode == "cubic" else "linear") + ("_aa" if aa else "")
        K = taps_count(k, smin[d])
        i = axes.index(d)
        if not crop:
            r0, r1 = "0.0", "1.0"
        elif roi is not None:
            rv = roi.reshape(-1).astype(float)
            r0, r1 = repr(float(rv[i])), repr(float(rv[na + i]))
        else:
            r0, r1 = f"(double){ctx.inp[1]}[{i}]", f"(double){ctx.inp[1]}[{na + i}]"
        fill = taps_helper(ctx, wct)
        off = ctx.scratch(out[d] * K * 8, "size_t", f"off{d}_")
        w = ctx.scratch(out[d] * K * 8, wct, f"w{d}_")
        ext = ctx.scratch(out[d], "uint8_t", f"ext{d}_")
        sd = f"s{d}" if kind == "scales" else repr(float(sc[d]))
        ctx(f"{fill}({off}, {w}, {ext}, {out[d]}, {shape[d]}, {ist[d]}u, "
            f"{CMODES_TAPS[coord]}, {sd}, {r0}, {r1}, {KERNELS[k]}, "
            f"{float(op.attr(node, 'cubic_coeff_a'))!r}, {int(op.attr(node, 'exclude_outside'))}, "
            f"{K});")
        plan.append(("taps", out[d], K, off, w, ext))
    if not any(p[0] == "taps" for p in plan):
        ctx(f"memcpy({ctx.out[0]}, {ctx.inp[0]}, {numel(out)}u * sizeof({wct}));")
        return
    ev = float(op.attr(node, "extrapolation_value"))
    emit_taps_nest(ctx, plan, repr(ev) if ev == ev else "0.0")
