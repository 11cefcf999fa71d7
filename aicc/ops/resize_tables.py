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
