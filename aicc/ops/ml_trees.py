"""ai.onnx.ml tree ensembles: TreeEnsemble (opset 5) and TreeEnsembleRegressor (opset 1/3),
post_transform NONE only (others, and TreeEnsembleClassifier, are unsupported).

Both are normalised at compile time into one table (nodes with feature, threshold, mode,
missing-value flag, member set, true/false references; leaves as lists of (weight, target))
that is validated (indices in range, every tree acyclic, features < x.shape[1], targets <
n_targets) and baked into the weights image; one C helper walks every tree for every row.
Comparisons are in double (x and thresholds converted exactly).

NaN features: TreeEnsemble follows the true branch when nodes_missing_value_tracks_true is
set, else the comparison itself decides (NaN <= t is false, NaN != t is true), as
onnx.reference does; TreeEnsembleRegressor always takes the missing-value branch (true if
the flag is set, else false), as its onnx.reference does.

Aggregation in the output dtype, trees in order: SUM adds each weight (rounded to the output
type after each add); AVERAGE adds weight / n_trees (TreeEnsemble) or divides the sum by the
number of trees at the end (Regressor); MIN / MAX start from +-FLT_MAX (DBL_MAX) like
onnx.reference, so a target no leaf reaches keeps that value; base_values are added last,
to every target (onnxruntime skips the base value of a target no leaf contributed to).
"""
from __future__ import annotations

import numpy as np

from ..emit_c.cwriter import c_float, ctype
from .base import Op, register
from .ml import ML

AGG = {"AVERAGE": 0, "SUM": 1, "MIN": 2, "MAX": 3}
MODES = {"BRANCH_LEQ": 0, "BRANCH_LT": 1, "BRANCH_GTE": 2, "BRANCH_GT": 3, "BRANCH_EQ": 4,
         "BRANCH_NEQ": 5, "BRANCH_MEMBER": 6}

HELPER = """\
/* A tree ensemble baked at compile time (aicc/ops/ml_trees.py). References: a node index
 * >= 0, or a leaf -(l + 1); leaf l owns entries [lr[2l], lr[2l + 1]) of (lw, lt). */
typedef struct {
    size_t ntrees, nnodes, ntargets;
    const int32_t *roots, *kids, *mr, *lr;
    const int64_t *feat, *lt;
    const double *split, *mem, *lw;
    const uint8_t *mode, *miss;
    int nan_missing;          /* 1: a NaN feature always takes the missing-value branch */
} aicc_trees;

/* Does feature value v take node nd's true branch? */
static int aicc_tree_take(const aicc_trees *t, int32_t nd, double v)
{
    const double s = t->split[nd];
    if (v != v && (t->nan_missing || t->miss[nd]))
        return t->miss[nd];
    switch (t->mode[nd]) {
    case 0: return v <= s;
    case 1: return v < s;
    case 2: return v >= s;
    case 3: return v > s;
    case 4: return v == s;
    case 5: return v != s;
    default:
        for (int32_t m = t->mr[2 * nd]; m < t->mr[2 * nd + 1]; ++m)
            if (v == t->mem[m])
                return 1;
        return 0;
    }
}

/* The leaf of each tree for row x. The tables are acyclic (checked at compile time); the
 * step bound is a second guard. */
static int32_t aicc_tree_leaf(const aicc_trees *t, size_t tree, const double *x)
{
    int32_t r = t->roots[tree];
    for (size_t s = 0; r >= 0 && s <= t->nnodes; ++s)
        r = t->kids[2 * r + (aicc_tree_take(t, r, x[t->feat[r]]) ? 0 : 1)];
    return r >= 0 ? -1 : -r - 1;
}"""

PREDICT = """\
/* Scores y[N][ntargets] of rows x[N][F]: agg 0 AVERAGE, 1 SUM, 2 MIN, 3 MAX; avg_end: AVERAGE
 * divides at the end (Regressor) instead of per weight; base: NULL or ntargets values.
 * row: F doubles of scratch. */
static void aicc_trees_SFX(const aicc_trees *t, size_t N, size_t F, const XT *x, YT *y,
                           int agg, int avg_end, const double *base, double *row)
{
    for (size_t n = 0; n < N; ++n) {
        YT *yr = y + n * t->ntargets;
        for (size_t f = 0; f < F; ++f)
            row[f] = (double)x[n * F + f];
        for (size_t k = 0; k < t->ntargets; ++k)
            yr[k] = agg == 2 ? YMAX : (agg == 3 ? -YMAX : (YT)0);
        for (size_t tr = 0; tr < t->ntrees; ++tr) {
            const int32_t l = aicc_tree_leaf(t, tr, row);
            if (l < 0)
                continue;
            for (int32_t e = t->lr[2 * l]; e < t->lr[2 * l + 1]; ++e) {
                const double w = t->lw[e];
                YT *o = yr + t->lt[e];
                if (agg == 1 || (agg == 0 && avg_end))
                    *o = (YT)((double)*o + w);
                else if (agg == 0)
                    *o = (YT)((double)*o + w / (double)t->ntrees);
                else if (agg == 2 ? w < (double)*o : w > (double)*o)
                    *o = (YT)w;
            }
        }
        for (size_t k = 0; k < t->ntargets; ++k) {
            if (agg == 0 && avg_end)
                yr[k] = yr[k] / (YT)t->ntrees;
            if (base)
                yr[k] = (YT)(yr[k] + (YT)base[k]);
        }
    }
}"""


class Table:
    def __init__(self):
        self.feat, self.split, self.mode, self.miss, self.kids = [], [], [], [], []
        self.members, self.mr, self.leaves, self.roots = [], [], [], []
        self.ntargets = 1

    def validate(self, nfeat, ntargets):
        nn, nl = len(self.feat), len(self.leaves)
        for r in self.kids + self.roots:
            if (r >= 0 and r >= nn) or (r < 0 and -r - 1 >= nl):
                raise ValueError("a node reference is out of range")
        if any(not 0 <= f < nfeat for f in self.feat):
            raise ValueError(f"a feature id is outside [0, {nfeat})")
        if any(not 0 <= t < ntargets for lf in self.leaves for _, t in lf):
            raise ValueError(f"a target id is outside [0, {ntargets})")
        state = [0] * nn              # 0 new, 1 on stack, 2 done: iterative cycle check
        for root in self.roots:
            stack = [(root, 0)]
            while stack:
                r, i = stack.pop()
                if r < 0 or state[r] == 2:
                    continue
                if i == 2:
                    state[r] = 2
                    continue
                if i == 0:
                    if state[r] == 1:
                        raise ValueError("a tree has a cycle")
                    state[r] = 1
                stack.append((r, i + 1))
                child = self.kids[2 * r + i]
                if child >= 0 and state[child] == 1:
                    raise ValueError("a tree has a cycle")
                stack.append((child, 0))

    def emit(self, ctx, nan_missing):
        def L(a, dt):
            return ctx.const(np.asarray(a, dt).reshape(-1) if len(a) else np.zeros(1, dt))
        lr, lw, lt = [], [], []
        for lf in self.leaves:
            lr += [len(lw), len(lw) + len(lf)]
            lw += [w for w, _ in lf]
            lt += [t for _, t in lf]
        ctx("const aicc_trees tr = {")
        ctx(f"    {len(self.roots)}u, {len(self.feat)}u, {self.ntargets}u,")
        ctx(f"    {L(self.roots, np.int32)}, {L(self.kids, np.int32)}, {L(self.mr, np.int32)}, "
            f"{L(lr, np.int32)},")
        ctx(f"    {L(self.feat, np.int64)}, {L(lt, np.int64)},")
        ctx(f"    {L(self.split, np.float64)}, {L(self.members, np.float64)}, {L(lw, np.float64)},")
        ctx(f"    {L(self.mode, np.uint8)}, {L(self.miss, np.uint8)}, {int(nan_missing)}")
        ctx("};")


def _list(a, k, default=()):
    v = a.get(k)
    return list(np.asarray(v).reshape(-1).tolist()) if v is not None else list(default)


class _TreesBase(Op):
    nan_missing = 0

    def table(self, node, g) -> tuple:
        raise NotImplementedError

    def check(self, node, g):
        xdt, ydt = g.dtype(node.inputs[0]), g.dtype(node.outputs[0])
        if xdt.name not in ("float32", "float64", "int64", "int32") or \
                ydt.name not in ("float32", "float64"):
            return f"dtypes {xdt.name} -> {ydt.name} not supported"
        xs = tuple(g.shape(node.inputs[0]))
        if len(xs) not in (1, 2):
            return f"input of rank {len(xs)} (1 or 2 only)"
        try:
            t, agg, avg_end, base = self.table(node, g)
            t.validate(int(xs[-1]), t.ntargets)
        except (ValueError, KeyError, IndexError, StopIteration) as e:
            return str(e) or type(e).__name__
        ys = tuple(g.shape(node.outputs[0]))
        n = xs[0] if len(xs) == 2 else 1
        if numel_(ys) != n * t.ntargets:
            return f"output shape {list(ys)} is not [{n}, {t.ntargets}]"
        return None

    def emit(self, node, ctx):
        t, agg, avg_end, base = self.table(node, ctx.g)
        xs = ctx.in_shape(0)
        N, F = (xs[0], xs[1]) if len(xs) == 2 else (1, xs[0])
        xdt, ydt = ctx.in_dtype(0), ctx.out_dtype(0)
        if N * t.ntargets == 0:
            ctx(f"(void){ctx.out[0]};  /* empty output */")
            return
        sfx = f"_{ctype(xdt)}_{ctype(ydt)}"
        ctx.helper("ml_trees.0.walk", HELPER)
        ymax = c_float(np.finfo(ydt).max, ydt)
        ctx.helper(f"ml_trees.1.predict{sfx}", PREDICT.replace("_SFX", sfx)
                   .replace("XT", ctype(xdt)).replace("YT", ctype(ydt)).replace("YMAX", ymax))
        row = ctx.scratch(max(F, 1) * 8, "double", "row")
        ctx(f"/* {self.op_type}: {len(t.roots)} trees, {len(t.feat)} nodes, {len(t.leaves)} "
            f"leaves, {t.ntargets} targets */")
        t.emit(ctx, self.nan_missing)
        bv = ctx.const(np.asarray(base, np.float64)) if base is not None else "NULL"
        ctx(f"aicc_trees{sfx}(&tr, {N}u, {F}u, {ctx.inp[0]}, {ctx.out[0]}, {agg}, {int(avg_end)}, "
            f"{bv}, {row});")


def numel_(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


@register("TreeEnsemble", since=5, domain=ML)
class TreeEnsemble(_TreesBase):
    attrs = {"aggregate_function": 1, "post_transform": 0}

    def table(self, node, g):
        a = node.attrs
        if int(a.get("post_transform", 0)) != 0:
            raise ValueError(f"post_transform {a['post_transform']} not supported (NONE only)")
        agg = int(a.get("aggregate_function", 1))
        if agg not in (0, 1, 2, 3):
            raise ValueError(f"aggregate_function {agg}")
        t = Table()
        modes = _list(a, "nodes_modes")
        nn = len(modes)
        feat, splits = _list(a, "nodes_featureids"), _list(a, "nodes_splits", [0.0] * nn)
        tid, fid = _list(a, "nodes_truenodeids"), _list(a, "nodes_falsenodeids")
        tl, fl = _list(a, "nodes_trueleafs"), _list(a, "nodes_falseleafs")
        miss = _list(a, "nodes_missing_value_tracks_true", [0] * nn)
        if not all(len(v) == nn for v in (feat, splits, tid, fid, tl, fl, miss)):
            raise ValueError("nodes_* attributes of different lengths")
        mem = iter(_list(a, "membership_values"))
        for k in range(nn):
            t.feat.append(int(feat[k]))
            t.split.append(float(splits[k]))
            t.mode.append(int(modes[k]))
            t.miss.append(1 if miss[k] else 0)
            t.kids += [(-int(tid[k]) - 1) if tl[k] else int(tid[k]),
                       (-int(fid[k]) - 1) if fl[k] else int(fid[k])]
            start = len(t.members)
            if int(modes[k]) == 6:
                for v in mem:               # the set ends at the next NaN
                    if v != v:
                        break
                    t.members.append(float(v))
            elif int(modes[k]) > 6:
                raise ValueError(f"node mode {modes[k]}")
            t.mr += [start, len(t.members)]
        weights, targets = _list(a, "leaf_weights"), _list(a, "leaf_targetids")
        if len(weights) != len(targets):
            raise ValueError("leaf_weights and leaf_targetids differ in length")
        t.leaves = [[(float(w), int(tg))] for w, tg in zip(weights, targets)]
        t.roots = [int(r) for r in _list(a, "tree_roots")]
        t.ntargets = int(a.get("n_targets", 1))
        return t, agg, False, None


@register("TreeEnsembleRegressor", since=1, domain=ML)
class TreeEnsembleRegressor(_TreesBase):
    attrs = {"aggregate_function": "SUM", "post_transform": "NONE", "n_targets": 1}
    nan_missing = 1

    def table(self, node, g):
        a = node.attrs
        if a.get("post_transform", "NONE") != "NONE":
            raise ValueError(f"post_transform {a['post_transform']} not supported (NONE only)")
        agg = AGG[a.get("aggregate_function", "SUM")]
        tree_ids, node_ids = _list(a, "nodes_treeids"), _list(a, "nodes_nodeids")
        modes = list(a.get("nodes_modes", ()))
        vals = _list(a, "nodes_values_as_tensor") or _list(a, "nodes_values", [0.0] * len(modes))
        feat = _list(a, "nodes_featureids")
        tid, fid = _list(a, "nodes_truenodeids"), _list(a, "nodes_falsenodeids")
        miss = _list(a, "nodes_missing_value_tracks_true", [0] * len(modes))
        nn = len(modes)
        if not all(len(v) == nn for v in (tree_ids, node_ids, vals, feat, tid, fid, miss)):
            raise ValueError("nodes_* attributes of different lengths")
        index = {(tr, nd): k for k, (tr, nd) in enumerate(zip(tree_ids, node_ids))}
        # leaves become leaf entries; branches get dense node indices
        dense, leaf_of = {}, {}
        for k in range(nn):
            if modes[k] == "LEAF":
                leaf_of[k] = len(leaf_of)
            else:
                dense[k] = len(dense)
        t = Table()
        t.leaves = [[] for _ in leaf_of]
        weights = _list(a, "target_weights_as_tensor") or _list(a, "target_weights")
        for tr, nd, tg, w in zip(_list(a, "target_treeids"), _list(a, "target_nodeids"),
                                 _list(a, "target_ids"), weights):
            k = index[(tr, nd)]
            if k not in leaf_of:
                raise ValueError(f"target on a non-leaf node ({tr}, {nd})")
            t.leaves[leaf_of[k]].append((float(w), int(tg)))

        def ref(k):
            return dense[k] if k in dense else -leaf_of[k] - 1
        for k in sorted(dense, key=dense.get):
            if modes[k] not in MODES or modes[k] == "BRANCH_MEMBER":
                raise ValueError(f"node mode {modes[k]} not supported")
            t.feat.append(int(feat[k]))
            t.split.append(float(vals[k]))
            t.mode.append(MODES[modes[k]])
            t.miss.append(1 if miss[k] else 0)
            t.mr += [0, 0]
            t.kids += [ref(index[(tree_ids[k], tid[k])]), ref(index[(tree_ids[k], fid[k])])]
        roots = {}
        for k, tr in enumerate(tree_ids):
            roots.setdefault(tr, k)           # a tree's first node is its root
        t.roots = [ref(roots[tr]) for tr in sorted(roots)]
        t.ntargets = int(a.get("n_targets", 1))
        base = _list(a, "base_values_as_tensor") or _list(a, "base_values") or None
        if base is not None and len(base) != t.ntargets:
            raise ValueError(f"{len(base)} base_values for {t.ntargets} targets")
        if base is not None:
            base = [float(np.float32(b)) for b in base]
        return t, agg, True, base
