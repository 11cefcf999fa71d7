"""Test-model fixtures for aicc (no torch needed at test time).

Fixtures live next to this file as ``<name>_<exporter>.onnx`` (complete model)
or ``<name>_<exporter>.struct.onnx`` ("structure-only": every float
initializer with more than ``STRIP_MIN_ELEMS`` elements has had its data
removed and replaced by a deterministic fill recipe, JSON in the tensor's
``doc_string``).  Two recipe forms exist:

* 1-D tensors (biases, BatchNormalization parameters), per-tensor statistics::

    {"aicc_fill": "normal", "seed": <crc32 of the name>, "mean": m, "std": s,
     "min": lo, "max": hi}

  filled with ``np.random.default_rng(seed).normal(mean, std, dims)``
  clipped to ``[min, max]``.

* tensors with ndim >= 2 (Conv/ConvTranspose/Gemm/MatMul weights),
  per-output-channel statistics::

    {"aicc_fill": "normal_per_axis", "seed": <crc32 of the name>, "axis": k,
     "mean": [m_0, ...], "std": [s_0, ...], "min": [lo_0, ...], "max": [hi_0, ...]}

  one list entry per index ``i`` of axis ``k`` (rounded to 7 significant
  digits).  ``z = np.random.default_rng(seed).standard_normal(dims)`` is
  standardized per slice along ``k`` (sample mean 0, sample std 1; all zero
  for a constant slice), and slice ``i`` is ``mean[i] + std[i] * z`` clipped
  to ``[min[i], max[i]]``, so each slice has (before clipping) exactly its
  recorded mean and std.
  ``k`` is the output-channel axis of the consuming node: 0 for Conv weights
  ``[Cout, Cin/g, ...]`` and Gemm ``B`` with ``transB=1``, 1 for
  ConvTranspose weights ``[Cin, Cout/g, ...]`` and Gemm ``B`` with
  ``transB=0``, ``ndim-1`` for MatMul ``B`` (``ndim-2`` for MatMul ``A``),
  0 otherwise.  This keeps the per-channel scale and mean that the
  exporters' Conv+BN folding bakes into each output channel, so activations
  and outputs keep roughly the magnitude of the real model.

``materialize`` turns a structure-only file back into a runnable model by
filling each stripped tensor as above (float32).  The values are random, so
outputs are not those of the exported torch model, but they are finite and
sanely scaled.  A structure-only file itself fails ``onnx.checker`` (tensors
without data); materialize it first.

Typical use from a test::

    from tests.models.fixtures import load_fixture
    path = load_fixture("resnet8", "ts")          # ready-to-use .onnx path

Regenerate all fixtures with ``python tests/models/export_torch.py``
(needs torch; see README.md).
"""
from __future__ import annotations

import json
import os
import tempfile
import zlib
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

__all__ = [
    "FIXTURE_DIR",
    "EXPORTERS",
    "STRIP_MIN_ELEMS",
    "list_fixtures",
    "fixture_path",
    "is_structure_only",
    "strip_model",
    "materialize",
    "load_fixture",
]

FIXTURE_DIR = Path(__file__).resolve().parent
EXPORTERS = ("ts", "dynamo", "tsbn")  # tsbn: TorchScript with BatchNormalization kept
STRIP_MIN_ELEMS = 64  # float tensors with more elements than this get stripped
FILL_KEY = "aicc_fill"
FILL_NORMAL = "normal"  # per-tensor statistics (1-D tensors)
FILL_PER_AXIS = "normal_per_axis"  # per-slice statistics along "axis" (ndim >= 2)
STRUCT_SUFFIX = ".struct.onnx"

_FLOAT_TYPES = {TensorProto.FLOAT: np.float32}


def _name_seed(name: str) -> int:
    return zlib.crc32(name.encode("utf-8")) & 0xFFFFFFFF


# --------------------------------------------------------------------------
# Locating fixtures
# --------------------------------------------------------------------------

def list_fixtures() -> list[tuple[str, str]]:
    """All (name, exporter) pairs present in FIXTURE_DIR, sorted (static-shape fixtures; the
    dynamic-shape ``dyn_*`` ones are tested by tests/test_dynamic.py)."""
    out = set()
    for p in FIXTURE_DIR.glob("*.onnx"):
        if p.name.startswith("dyn_"):
            continue
        stem = p.name[: -len(STRUCT_SUFFIX)] if p.name.endswith(STRUCT_SUFFIX) else p.stem
        name, _, exporter = stem.rpartition("_")
        if name and exporter in EXPORTERS:
            out.add((name, exporter))
    return sorted(out)


def fixture_path(name: str, exporter: str = "ts") -> Path:
    """Path of the committed fixture file (complete or structure-only)."""
    if exporter not in EXPORTERS:
        raise ValueError(f"exporter must be one of {EXPORTERS}, got {exporter!r}")
    full = FIXTURE_DIR / f"{name}_{exporter}.onnx"
    if full.exists():
        return full
    struct = FIXTURE_DIR / f"{name}_{exporter}{STRUCT_SUFFIX}"
    if struct.exists():
        return struct
    raise FileNotFoundError(f"no fixture {name!r} for exporter {exporter!r} in {FIXTURE_DIR}")


def _iter_tensors(graph: onnx.GraphProto):
    """Initializers and Constant-node tensors of a graph and its subgraphs."""
    yield from graph.initializer
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.TENSOR:
                yield attr.t
            elif attr.type == onnx.AttributeProto.GRAPH:
                yield from _iter_tensors(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    yield from _iter_tensors(g)


def _recipe(t: TensorProto) -> dict | None:
    if not t.doc_string:
        return None
    try:
        d = json.loads(t.doc_string)
    except ValueError:
        return None
    return d if isinstance(d, dict) and FILL_KEY in d else None


def is_structure_only(model: onnx.ModelProto) -> bool:
    return any(_recipe(t) is not None for t in _iter_tensors(model.graph))


# --------------------------------------------------------------------------
# Stripping (used by export_torch.py) and materializing
# --------------------------------------------------------------------------

def _iter_named_tensors(graph: onnx.GraphProto):
    """(tensor, value name) for initializers and Constant-node tensors of a
    graph and its subgraphs (same order as ``_iter_tensors``)."""
    for t in graph.initializer:
        yield t, t.name
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.TENSOR:
                yield attr.t, (node.output[0] if node.op_type == "Constant" and node.output else attr.t.name)
            elif attr.type == onnx.AttributeProto.GRAPH:
                yield from _iter_named_tensors(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    yield from _iter_named_tensors(g)


def _channel_axes(graph: onnx.GraphProto, out: dict | None = None) -> dict:
    """value name -> (op_type, input index, attrs) of its first consumer."""
    out = {} if out is None else out
    for node in graph.node:
        attrs = {a.name: a.i for a in node.attribute if a.type == onnx.AttributeProto.INT}
        for i, x in enumerate(node.input):
            if x and x not in out:
                out[x] = (node.op_type if node.domain in ("", "ai.onnx") else None, i, attrs)
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                _channel_axes(attr.g, out)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    _channel_axes(g, out)
    return out


def _output_axis(consumer, ndim: int) -> int:
    """Output-channel axis of a weight with ``ndim`` >= 2 dims, given how it
    is consumed (see the module docstring)."""
    if consumer is None:
        return 0
    op, idx, attrs = consumer
    if op == "Conv" and idx == 1:
        return 0
    if op == "ConvTranspose" and idx == 1:
        return 1
    if op == "Gemm" and ndim == 2:
        if idx == 1:
            return 0 if attrs.get("transB", 0) else 1
        if idx == 0:
            return 1 if attrs.get("transA", 0) else 0
    if op == "MatMul":
        return ndim - 1 if idx == 1 else ndim - 2
    return 0


def _r7(x) -> float:
    """Round to 7 significant digits (about float32 precision, short JSON)."""
    return float(f"{float(x):.7g}")


def strip_model(model: onnx.ModelProto, min_elems: int = STRIP_MIN_ELEMS) -> onnx.ModelProto:
    """Return a copy with large float tensors replaced by fill recipes."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    consumers = _channel_axes(m.graph)
    for idx, (t, vname) in enumerate(_iter_named_tensors(m.graph)):
        if t.data_type not in _FLOAT_TYPES or t.data_location == TensorProto.EXTERNAL:
            continue
        n = int(np.prod(t.dims)) if len(t.dims) else 1
        if n <= min_elems:
            continue
        a = numpy_helper.to_array(t).astype(np.float64)
        key = t.name or f"__const_{idx}"
        if a.ndim >= 2:
            axis = _output_axis(consumers.get(vname), a.ndim)
            s = np.moveaxis(a, axis, 0).reshape(a.shape[axis], -1)
            recipe = {
                FILL_KEY: FILL_PER_AXIS,
                "seed": _name_seed(key),
                "axis": axis,
                "mean": [_r7(v) for v in s.mean(axis=1)],
                "std": [_r7(v) for v in s.std(axis=1)],
                "min": [_r7(v) for v in s.min(axis=1)],
                "max": [_r7(v) for v in s.max(axis=1)],
            }
            doc = json.dumps(recipe, sort_keys=True, separators=(",", ":"))
        else:
            recipe = {
                FILL_KEY: FILL_NORMAL,
                "seed": _name_seed(key),
                "mean": float(np.float32(a.mean())),
                "std": float(np.float32(a.std())),
                "min": float(a.min()),
                "max": float(a.max()),
            }
            doc = json.dumps(recipe, sort_keys=True)
        t.ClearField("raw_data")
        t.ClearField("float_data")
        t.doc_string = doc
    return m


def _fill(recipe: dict, dims) -> np.ndarray:
    kind = recipe[FILL_KEY]
    dims = tuple(int(d) for d in dims)
    rng = np.random.default_rng(int(recipe["seed"]))
    if kind == FILL_NORMAL:
        a = rng.normal(recipe["mean"], recipe["std"], dims)
        return a.clip(recipe["min"], recipe["max"]).astype(np.float32)
    if kind == FILL_PER_AXIS:
        axis = int(recipe["axis"])
        if not -len(dims) <= axis < len(dims):
            raise ValueError(f"fill axis {axis} out of range for dims {dims}")
        axis %= len(dims)
        c = dims[axis]
        stats = {}
        for k in ("mean", "std", "min", "max"):
            v = np.asarray(recipe[k], dtype=np.float64)
            if v.shape != (c,):
                raise ValueError(f"fill {k!r} has {v.size} entries, axis {axis} of {dims} has {c}")
            stats[k] = v.reshape(c, 1)
        # one row per slice; standardize each row's sample so the slice gets
        # exactly the recorded mean/std (the mean matters: with random sample
        # means the folded biases no longer cancel the channel means and
        # activations grow layer by layer)
        moved = (c,) + dims[:axis] + dims[axis + 1:]
        z = np.moveaxis(rng.standard_normal(dims), axis, 0).reshape(c, -1)
        z = z - z.mean(axis=1, keepdims=True)
        zs = z.std(axis=1, keepdims=True)
        z = np.divide(z, zs, out=np.zeros_like(z), where=zs > 0)
        a = np.clip(stats["mean"] + stats["std"] * z, stats["min"], stats["max"])
        return np.moveaxis(a.reshape(moved), 0, axis).astype(np.float32)
    raise ValueError(f"unknown fill recipe {kind!r}")


def materialize(path, out_path=None):
    """Load a fixture and fill every stripped tensor.

    Returns the ``onnx.ModelProto``; if ``out_path`` is given the model is also
    saved there (weights inline) and ``out_path`` is returned instead.
    Complete models are returned as they are.
    """
    model = onnx.load(str(path), load_external_data=True)
    for t in _iter_tensors(model.graph):
        r = _recipe(t)
        if r is None:
            continue
        arr = _fill(r, t.dims)
        t.ClearField("raw_data")
        t.ClearField("float_data")
        t.raw_data = arr.tobytes()
        t.doc_string = ""
    if out_path is not None:
        out_path = Path(out_path)
        out_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = out_path.with_name(out_path.name + f".tmp{os.getpid()}")
        onnx.save(model, str(tmp))
        os.replace(tmp, out_path)
        return out_path
    return model


def load_fixture(name: str, exporter: str = "ts", out_dir=None) -> Path:
    """Path of a ready-to-use, complete .onnx for a fixture.

    Complete fixtures are returned in place.  Structure-only ones are
    materialized once into ``out_dir`` (default: ``$TMPDIR/aicc_fixtures``)
    and reused afterwards (the cache key includes the source file's CRC).
    """
    src = fixture_path(name, exporter)
    if not src.name.endswith(STRUCT_SUFFIX):
        if out_dir is None:
            return src
        dst = Path(out_dir) / src.name
        if not dst.exists():
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(src.read_bytes())
        return dst
    crc = zlib.crc32(src.read_bytes()) & 0xFFFFFFFF
    out_dir = Path(out_dir) if out_dir is not None else Path(tempfile.gettempdir()) / "aicc_fixtures"
    dst = out_dir / f"{name}_{exporter}.{crc:08x}.onnx"
    if not dst.exists():
        materialize(src, dst)
    return dst


if __name__ == "__main__":  # quick smoke check: python tests/models/fixtures.py
    import onnxruntime as ort

    for name, exp in list_fixtures():
        p = load_fixture(name, exp)
        sess = ort.InferenceSession(str(p), providers=["CPUExecutionProvider"])
        inp = sess.get_inputs()[0]
        x = np.random.default_rng(0).standard_normal(inp.shape).astype(np.float32)
        y = sess.run(None, {inp.name: x})[0]
        print(f"{name:18s} {exp:6s} out{list(y.shape)} finite={bool(np.isfinite(y).all())} "
              f"range=[{y.min():.4g}, {y.max():.4g}]")
