"""Test-model fixtures for aicc (no torch needed at test time).

Fixtures live next to this file as ``<name>_<exporter>.onnx`` (complete model)
or ``<name>_<exporter>.struct.onnx`` ("structure-only": every float
initializer with more than ``STRIP_MIN_ELEMS`` elements has had its data
removed and replaced by a deterministic fill recipe, JSON in the tensor's
``doc_string``)::

    {"aicc_fill": "normal", "seed": <crc32 of the name>, "mean": m, "std": s,
     "min": lo, "max": hi}

``materialize`` turns a structure-only file back into a runnable model by
filling each stripped tensor with
``np.random.default_rng(seed).normal(mean, std, dims).clip(min, max)``
as float32.  The values are random but keep each tensor's scale, so the
network produces finite, sanely scaled outputs.
A structure-only file itself fails ``onnx.checker`` (tensors without data);
materialize it first.

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
STRUCT_SUFFIX = ".struct.onnx"

_FLOAT_TYPES = {TensorProto.FLOAT: np.float32}


def _name_seed(name: str) -> int:
    return zlib.crc32(name.encode("utf-8")) & 0xFFFFFFFF


# --------------------------------------------------------------------------
# Locating fixtures
# --------------------------------------------------------------------------

def list_fixtures() -> list[tuple[str, str]]:
    """All (name, exporter) pairs present in FIXTURE_DIR, sorted."""
    out = set()
    for p in FIXTURE_DIR.glob("*.onnx"):
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

def strip_model(model: onnx.ModelProto, min_elems: int = STRIP_MIN_ELEMS) -> onnx.ModelProto:
    """Return a copy with large float tensors replaced by fill recipes."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for idx, t in enumerate(_iter_tensors(m.graph)):
        if t.data_type not in _FLOAT_TYPES or t.data_location == TensorProto.EXTERNAL:
            continue
        n = int(np.prod(t.dims)) if len(t.dims) else 1
        if n <= min_elems:
            continue
        a = numpy_helper.to_array(t).astype(np.float64)
        key = t.name or f"__const_{idx}"
        recipe = {
            FILL_KEY: "normal",
            "seed": _name_seed(key),
            "mean": float(np.float32(a.mean())),
            "std": float(np.float32(a.std())),
            "min": float(a.min()),
            "max": float(a.max()),
        }
        t.ClearField("raw_data")
        t.ClearField("float_data")
        t.doc_string = json.dumps(recipe, sort_keys=True)
    return m


def _fill(recipe: dict, dims) -> np.ndarray:
    if recipe[FILL_KEY] != "normal":
        raise ValueError(f"unknown fill recipe {recipe[FILL_KEY]!r}")
    rng = np.random.default_rng(int(recipe["seed"]))
    a = rng.normal(recipe["mean"], recipe["std"], tuple(int(d) for d in dims))
    return a.clip(recipe["min"], recipe["max"]).astype(np.float32)


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
