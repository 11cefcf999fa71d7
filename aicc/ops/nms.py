"""NonMaxSuppression (opset 10, 11): greedy per (batch, class) box selection.

Its output size depends on the data, so the decision of data_dependent.py applies: when the
model declares selected_indices as a static [N, 3] (as the ONNX conformance cases do), the
kernel runs the full selection at run time and writes the first N rows (batch, class, box)
in the reference order (batch, then class, then descending score); if fewer are selected the
remaining rows are filled with -1 (no valid index is negative), extra ones are dropped.
Otherwise check() refuses the node with that reason.

Selection follows onnx.reference / onnxruntime: candidates are the boxes whose score is
> score_threshold (every box when that input is absent or empty), taken by descending score
(ties: lower box index first); a candidate is dropped when its IoU with an already selected
box of the same class is > iou_threshold (IoU is 0 when the intersection or either area is
not positive; corner boxes [y1, x1, y2, x2] may be flipped; center_point_box=1 reads
[x_center, y_center, width, height]). At most max_output_boxes_per_class per class (absent,
empty or <= 0: nothing selected; larger than the box count: every box). The scalar inputs are
read at run time. NaN scores never win against a number and are never > a threshold; NaN
coordinates give IoU comparisons that are false (no suppression). Arithmetic is in the box
type (float32 or float64). Scratch: a used flag and a selected-index slot per box.
"""
from __future__ import annotations

from .base import Op, register
from .data_dependent import _dynamic_reason

_IOU = """/* NonMaxSuppression: does box a suppress box b (IoU > thr)? center: 1 for
   [xc, yc, w, h] boxes, else [y1, x1, y2, x2] in any corner order (onnx reference). */
static int aicc_nms_0_iou_{ct}(const {ct} *a, const {ct} *b, int center, {ct} thr)
{{
    {ct} ax0, ax1, ay0, ay1, bx0, bx1, by0, by1, ix0, ix1, iy0, iy1, inter, ua, ub, uni;
    if (center) {{
        ax0 = a[0] - a[2] / 2; ax1 = a[0] + a[2] / 2; ay0 = a[1] - a[3] / 2; ay1 = a[1] + a[3] / 2;
        bx0 = b[0] - b[2] / 2; bx1 = b[0] + b[2] / 2; by0 = b[1] - b[3] / 2; by1 = b[1] + b[3] / 2;
    }} else {{
        ax0 = a[1] < a[3] ? a[1] : a[3]; ax1 = a[1] < a[3] ? a[3] : a[1];
        ay0 = a[0] < a[2] ? a[0] : a[2]; ay1 = a[0] < a[2] ? a[2] : a[0];
        bx0 = b[1] < b[3] ? b[1] : b[3]; bx1 = b[1] < b[3] ? b[3] : b[1];
        by0 = b[0] < b[2] ? b[0] : b[2]; by1 = b[0] < b[2] ? b[2] : b[0];
    }}
    ix0 = ax0 > bx0 ? ax0 : bx0; ix1 = ax1 < bx1 ? ax1 : bx1;
    if (!(ix1 > ix0)) return 0;
    iy0 = ay0 > by0 ? ay0 : by0; iy1 = ay1 < by1 ? ay1 : by1;
    if (!(iy1 > iy0)) return 0;
    inter = (ix1 - ix0) * (iy1 - iy0);
    if (!(inter > 0)) return 0;
    ua = (ax1 - ax0) * (ay1 - ay0);
    ub = (bx1 - bx0) * (by1 - by0);
    uni = ua + ub - inter;
    if (!(ua > 0) || !(ub > 0) || !(uni > 0)) return 0;
    return inter / uni > thr;
}}"""


@register("NonMaxSuppression", since=10)
class NonMaxSuppression(Op):
    attrs = {"center_point_box": 0}
    folds = False

    def check(self, node, g):
        why = _dynamic_reason(node, g, "the number of selected boxes")
        if why:
            return why
        out = list(g.shape(node.outputs[0]))
        if len(out) != 2 or out[1] != 3:
            return f"declared output shape {out} is not [count, 3]"
        dt = g.dtype(node.inputs[0]).name
        if dt not in ("float32", "float64") or g.dtype(node.inputs[1]).name != dt:
            return f"boxes and scores must be float32 or float64 (got {dt})"
        for k in (3, 4):
            if len(node.inputs) > k and node.inputs[k] and \
                    g.dtype(node.inputs[k]).name not in ("float32", "float64"):
                return "thresholds must be float32 or float64"
        b, n, four = g.shape(node.inputs[0])
        bs, c, ns = g.shape(node.inputs[1])
        if four != 4 or bs != b or ns != n:
            return f"boxes {[b, n, four]} and scores {[bs, c, ns]} do not match"
        return None

    def emit(self, node, ctx):
        from ..emit_c.loops import numel
        b, n, _ = ctx.in_shape(0)
        c = ctx.in_shape(1)[1]
        rows = ctx.out_shape(0)[0]
        y = ctx.out[0]
        if rows == 0:
            ctx(f"(void){y};  /* empty output */")
            return
        ct = ctx.in_ctype(0)
        iou = ctx.helper(f"aicc_nms_0_iou_{ct}", _IOU.format(ct=ct))

        def scalar(k, default, cast):
            if ctx.has_input(k) and numel(ctx.in_shape(k)):
                return f"({cast}){ctx.inp[k]}[0]"
            return default
        center = 1 if int(self.attr(node, "center_point_box")) else 0
        ctx(f"/* NonMaxSuppression: {b} batch(es) x {c} class(es) x {n} boxes, the first "
            f"{rows} selections (the declared count); missing rows are -1 */")
        ctx(f"const int64_t mo = {scalar(2, '0', 'int64_t')};")
        ctx(f"const size_t max_out = mo <= 0 ? 0u : mo > {n} ? {n}u : (size_t)mo;")
        ctx(f"const {ct} iou_thr = {scalar(3, '0', ct)};")
        has_thr = ctx.has_input(4) and numel(ctx.in_shape(4)) > 0
        if has_thr:
            ctx(f"const {ct} score_thr = {scalar(4, '0', ct)};")
        used = ctx.scratch(max(n, 1), "uint8_t", "used")
        sel = ctx.scratch(max(n, 1) * 8, "size_t", "sel")
        ctx("size_t r = 0;")
        with ctx.block(f"for (size_t bi = 0; bi < {b}u && max_out > 0; ++bi)"):
            with ctx.block(f"for (size_t ci = 0; ci < {c}u; ++ci)"):
                ctx(f"const {ct} *sc = {ctx.inp[1]} + (bi * {c}u + ci) * {n}u;")
                ctx(f"const {ct} *bx = {ctx.inp[0]} + bi * {n * 4}u;")
                ctx("size_t ns = 0;")
                with ctx.block(f"for (size_t i = 0; i < {n}u; ++i)"):
                    ctx(f"{used}[i] = {'!(sc[i] > score_thr)' if has_thr else '0'};")
                with ctx.block("while (ns < max_out)"):
                    ctx("size_t best = (size_t)-1, k;")
                    ctx("int keep = 1;")
                    with ctx.block(f"for (size_t i = 0; i < {n}u; ++i)"):
                        ctx(f"if (!{used}[i] && (best == (size_t)-1 || sc[i] > sc[best] || "
                            "(sc[best] != sc[best] && sc[i] == sc[i]))) best = i;")
                    ctx("if (best == (size_t)-1) break;")
                    ctx(f"{used}[best] = 1;")
                    with ctx.block("for (k = 0; k < ns && keep; ++k)"):
                        ctx(f"if ({iou}(bx + best * 4u, bx + {sel}[k] * 4u, {center}, iou_thr)) "
                            "keep = 0;")
                    ctx("if (!keep) continue;")
                    ctx(f"{sel}[ns++] = best;")
                    with ctx.block(f"if (r < {rows}u)"):
                        ctx(f"{y}[r * 3u] = (int64_t)bi;")
                        ctx(f"{y}[r * 3u + 1u] = (int64_t)ci;")
                        ctx(f"{y}[r * 3u + 2u] = (int64_t)best;")
                    ctx("++r;")
        with ctx.block(f"for (; r < {rows}u; ++r)"):
            ctx(f"{y}[r * 3u] = {y}[r * 3u + 1u] = {y}[r * 3u + 2u] = -1;")
