"""Reference outputs (onnxruntime, or onnx.reference without it), random inputs, comparison."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import InputError, ModelError
from .ir import dtype_from_name

DEFAULT_RTOL = 1e-4
DEFAULT_ATOL = 1e-5
# scaled comparisons: the absolute tolerance is at least this share of the output's largest
# magnitude. Rounding in a deep float32 network leaves errors of a few 1e-5 of the output's
# range on elements that cancel to ~0 (ResNet-50's logits: 3.9e-5 at a range of 2.1 between
# two float32 engines, each ~3e-5 from float64), while a real error is 1e-3 of it and more.
RANGE_TOL = 5e-5
# scaled comparisons against onnxruntime that fail: the absolute tolerance is raised to this
# many times onnxruntime's own spread on the same inputs (reference_spread). A badly
# conditioned network (ReXNet-1.0 with random weights: squeeze-excite activations in the
# thousands) turns float32 rounding into output differences beyond RANGE_TOL between any two
# float32 evaluations: on its zoo input onnxruntime against itself with its graph
# optimizations off differs by 1.5e-3 at outputs of 6.9 (RANGE_TOL: 3.5e-4), and by 1.8e-3
# with the input moved by half an ulp; aicc by 3.1e-3.
SPREAD_FACTOR = 2.0


# ops that pass integer values through unchanged on the way to a Gather's indices
_VALUE_PRESERVING = {"Cast", "Identity", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Expand"}


def index_bounds(model_path) -> dict:
    """{graph input: n} for integer inputs that reach a Gather's indices (through Cast,
    Reshape and similar), n the smallest size of the axes they index (an embedding table of
    2 rows, BERT's token types): random values must stay below it."""
    import onnx
    model = onnx.load(str(model_path), load_external_data=False)
    g = model.graph
    shapes = {t.name: list(t.dims) for t in g.initializer}
    for vi in list(g.input) + list(g.value_info):
        dims = vi.type.tensor_type.shape.dim
        if vi.name not in shapes and all(d.HasField("dim_value") for d in dims):
            shapes[vi.name] = [d.dim_value for d in dims]
    inits = {t.name for t in g.initializer}
    origin = {i.name: i.name for i in g.input if i.name not in inits}
    bounds: dict = {}
    for n in g.node:                       # nodes are in topological order
        if n.op_type in _VALUE_PRESERVING and n.input and n.input[0] in origin:
            for o in n.output:
                origin[o] = origin[n.input[0]]
        if n.op_type == "Gather" and len(n.input) > 1 and n.input[1] in origin:
            data = shapes.get(n.input[0])
            axis = next((a.i for a in n.attribute if a.name == "axis"), 0)
            if data and -len(data) <= axis < len(data) and data[axis] > 0:
                src = origin[n.input[1]]
                bounds[src] = min(bounds.get(src, data[axis]), data[axis])
    return bounds


def random_inputs(specs: list, seed: int = 0, dims: dict | None = None,
                  bounds: dict | None = None) -> dict:
    """Seeded inputs for manifest input specs: floats ~ N(0, 1), 8-bit integers uniform over
    their whole range (quantized tensors: values in [0, 10) would sit far from a zero point of
    128 and saturate every output, which also hides data-dependent branches from aicc bench),
    other integers in [0, 10) (indices, sizes; below ``bounds[name]`` for inputs indexing a
    smaller table, see index_bounds), bools uniform. dims: values of a dynamic bundle's dims
    (by name)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for s in specs:
        dt = dtype_from_name(s["dtype"])
        if dims is None and "max_shape" in s:       # a dynamic bundle: its largest sizes
            shape = tuple(s["max_shape"])
        else:
            shape = tuple(d if isinstance(d, int) else int(dims[d]) for d in s["shape"])
        if dt.kind == "f":
            feeds[s["name"]] = rng.standard_normal(shape).astype(dt)
        elif dt.kind == "b":
            feeds[s["name"]] = rng.random(shape) < 0.5
        elif dt.itemsize == 1:
            info = np.iinfo(dt)
            feeds[s["name"]] = rng.integers(info.min, int(info.max) + 1, size=shape).astype(dt)
        else:
            top = min(10, (bounds or {}).get(s["name"], 10))
            feeds[s["name"]] = rng.integers(0, top, size=shape).astype(dt)
    return feeds


def dynamic_sizes(dynamic: dict) -> list:
    """Sizes to validate a dynamic bundle at: per dim 1, every bucket size and one past it
    (within the max); dims step through their lists together. -> [{dim: value}]."""
    lists = []
    for d in dynamic["dims"]:
        v = {1}
        for b in d["buckets"]:
            v.update({b, min(b + 1, d["max"])})
        lists.append(sorted(v))
    n = max(len(x) for x in lists)
    return [{d["name"]: x[min(j, len(x) - 1)] for d, x in zip(dynamic["dims"], lists)}
            for j in range(n)]


def load_npz(path) -> dict:
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: no such file")
    try:
        with np.load(p, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except Exception as e:  # noqa: BLE001
        raise InputError(f"{p}: not a readable .npz file ({e})") from None


def ort_session(model):
    """An onnxruntime session on one thread (CPU) for a model file or ModelProto."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    src = model.SerializeToString() if hasattr(model, "SerializeToString") else str(model)
    return ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])


def reference_outputs(model, feeds: dict, output_names: list | None = None) -> tuple:
    """(outputs, which reference) for the original model (a file or a ModelProto): the
    file is read only when onnxruntime cannot run it or the output names are needed."""
    import onnx

    def proto():
        return model if hasattr(model, "graph") else onnx.load(str(model))
    names = output_names or [o.name for o in proto().graph.output]
    try:
        import onnxruntime as ort
        outs = ort_session(model).run(names, feeds)
        return dict(zip(names, outs)), f"onnxruntime {ort.__version__}"
    except Exception:  # noqa: BLE001 - no onnxruntime, or it refuses: onnx.reference
        pass
    from onnx.reference import ReferenceEvaluator
    try:
        outs = ReferenceEvaluator(proto()).run(names, feeds)
    except Exception as e:  # noqa: BLE001
        raise ModelError(f"no reference could run the model: {e}") from None
    return dict(zip(names, outs)), f"onnx.reference {onnx.__version__}"


def _perturbed(feeds: dict, seed: int) -> dict:
    """feeds with every float element moved by a random relative amount below 2^-24 (half a
    float32 ulp: the input's own rounding), other inputs as they are."""
    rng = np.random.default_rng(seed)
    out = {}
    for k, v in feeds.items():
        v = np.asarray(v)
        if v.dtype.kind == "f" and v.size:
            u = rng.uniform(-1.0, 1.0, v.shape) * 2.0 ** -24
            v = (v.astype(np.float64) * (1.0 + u)).astype(v.dtype)
        out[k] = v
    return out


def reference_spread(model, feeds: dict, names: list) -> dict:
    """{output: largest |a - b|} over onnxruntime's outputs against its default run: with its
    graph optimizations off (other kernels and orders: im2col GEMM against NCHWc convs,
    unfused activations) and on inputs moved by their own rounding (two seeded draws,
    _perturbed); float outputs only: how far float32 evaluations of the model lie apart on
    these inputs. {} without onnxruntime."""
    try:
        import onnxruntime as ort
    except ImportError:
        return {}
    src = model.SerializeToString() if hasattr(model, "SerializeToString") else str(model)
    sess = {}
    for level in (ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
                  ort.GraphOptimizationLevel.ORT_ENABLE_ALL):
        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        so.graph_optimization_level = level
        sess[level] = ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
    off, on = sess.values()
    base = dict(zip(names, on.run(names, feeds)))
    runs = [off.run(names, feeds)] + [on.run(names, _perturbed(feeds, s)) for s in (1, 2)]
    out = {}
    for n in names:
        a = np.asarray(base[n])
        if a.dtype.kind != "f" or not a.size:
            continue
        worst = 0.0
        for r in runs:
            b = np.asarray(dict(zip(names, r))[n])
            if b.shape == a.shape:
                d = np.abs(a.astype(np.float64) - b.astype(np.float64))
                d = d[np.isfinite(d)]
                worst = max(worst, float(d.max()) if d.size else 0.0)
        out[n] = worst
    return out


@dataclass
class Comparison:
    name: str
    ok: bool
    max_abs: float
    max_rel: float
    detail: str
    cosine: float = 1.0         # cosine similarity of got and want (finite elements)
    rel_l2: float = 0.0         # ||got - want|| / ||want|| (finite elements)
    atol: float = 0.0           # the absolute tolerance applied

    def metrics(self) -> str:
        return (f"max abs err {self.max_abs:.3g}, max rel err {self.max_rel:.3g}, "
                f"cosine {self.cosine:.9f}, rel L2 err {self.rel_l2:.3g}")


def _cosine_l2(g, w) -> tuple:
    nw, ng = float(np.linalg.norm(w)), float(np.linalg.norm(g))
    cos = float(np.dot(g, w) / (nw * ng)) if nw > 0 and ng > 0 else float(nw == ng)
    rel = float(np.linalg.norm(g - w) / nw) if nw > 0 else float(np.linalg.norm(g) > 0)
    return cos, rel


def compare(got: dict, want: dict, rtol=DEFAULT_RTOL, atol=DEFAULT_ATOL,
            scaled: bool = False, spread: dict | None = None) -> list:
    """|got - want| <= atol + rtol * |want| elementwise (NaN must match NaN); exact for
    integers and bools. ``scaled``: atol is relative to the output's magnitude (times the
    root mean square of its finite values when that is above 1, and at least RANGE_TOL times
    their largest magnitude, and with ``spread`` at least SPREAD_FACTOR times spread[name],
    the reference's own spread from reference_spread): rounding in a sum grows with the size
    of its terms, so a near-zero element of a large output (a logit that cancels out) may
    differ by rounding far above 1e-5 while a real error stays far above that. Each float
    output also gets its cosine similarity and relative L2 error."""
    res = []
    for name, w in want.items():
        w = np.asarray(w)
        if name not in got:
            res.append(Comparison(name, False, float("nan"), float("nan"), "missing"))
            continue
        g = np.asarray(got[name])
        if g.shape != w.shape:
            res.append(Comparison(name, False, float("nan"), float("nan"),
                                  f"shape {list(g.shape)} != {list(w.shape)}"))
            continue
        if g.size == 0:
            res.append(Comparison(name, True, 0.0, 0.0, "empty"))
            continue
        if w.dtype.kind in "fc":
            g64, w64 = g.astype(np.float64), w.astype(np.float64)
            nan_ok = np.array_equal(np.isnan(g64), np.isnan(w64))
            fin = np.isfinite(w64) & np.isfinite(g64)
            inf_ok = np.array_equal(np.where(np.isinf(w64), w64, 0), np.where(np.isinf(g64), g64, 0))
            diff = np.abs(g64 - w64)[fin]
            rel = diff / np.maximum(np.abs(w64[fin]), 1e-30)
            a = atol
            if scaled and fin.any():
                a = max(atol * max(1.0, float(np.sqrt(np.mean(np.square(w64[fin]))))),
                        RANGE_TOL * float(np.abs(w64[fin]).max()),
                        SPREAD_FACTOR * (spread or {}).get(name, 0.0))
            within = bool(np.all(diff <= a + rtol * np.abs(w64[fin])))
            ma = float(diff.max()) if diff.size else 0.0
            mr = float(rel.max()) if rel.size else 0.0
            ok = nan_ok and inf_ok and within
            detail = "" if ok else ("NaN positions differ" if not nan_ok else
                                    "Inf positions differ" if not inf_ok else
                                    f"{int(np.sum(diff > a + rtol * np.abs(w64[fin])))} "
                                    f"of {w.size} elements out of tolerance")
            cos, l2 = _cosine_l2(g64[fin], w64[fin])
            res.append(Comparison(name, ok, ma, mr, detail, cos, l2, a))
        else:
            eq = np.array_equal(g, w)
            bad = int(np.sum(g != w))
            res.append(Comparison(name, eq, float(bad), 0.0, "" if eq else f"{bad} elements differ"))
    return res


def compare_reference(model, feeds: dict, got: dict, want: dict, which: str, rtol=DEFAULT_RTOL,
                      atol=DEFAULT_ATOL, scaled: bool = False) -> tuple:
    """(compare(got, want, ...), spread): when a scaled comparison against onnxruntime
    fails, it is made again with onnxruntime's own spread on these inputs
    (reference_spread; spread {} otherwise)."""
    res = compare(got, want, rtol, atol, scaled)
    if scaled and not all(r.ok for r in res) and which.startswith("onnxruntime"):
        spread = reference_spread(model, feeds, list(want))
        if spread:
            return compare(got, want, rtol, atol, scaled, spread), spread
    return res, {}
