"""External tensor data, read only from inside the model's folder."""
from __future__ import annotations

import os
from pathlib import Path

import onnx

from ..errors import ModelError


def _tensors(graph):
    yield from graph.initializer
    for n in graph.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                yield a.t
            elif a.type == onnx.AttributeProto.GRAPH:
                yield from _tensors(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for sub in a.graphs:
                    yield from _tensors(sub)


def load_external_data(model: onnx.ModelProto, base_dir: Path) -> None:
    """Fill external tensors in place. Paths must stay inside base_dir (no absolute
    paths, no '..', no symlink leading out); offset and length are checked."""
    base = Path(base_dir).resolve()
    for t in _tensors(model.graph):
        if t.data_location != onnx.TensorProto.EXTERNAL:
            continue
        info = {e.key: e.value for e in t.external_data}
        loc = info.get("location", "")
        if not loc or os.path.isabs(loc) or ".." in Path(loc).parts:
            raise ModelError(f"tensor '{t.name}': external data path {loc!r} is not a "
                             "relative path inside the model's folder")
        target = (base / loc).resolve()
        if base not in target.parents or not target.is_file():
            raise ModelError(f"tensor '{t.name}': external data file {loc!r} is missing "
                             "or outside the model's folder")
        size = target.stat().st_size
        try:
            offset = int(info.get("offset", 0))
            length = int(info["length"]) if "length" in info else size - offset
        except ValueError:
            raise ModelError(f"tensor '{t.name}': bad external data offset/length") from None
        if offset < 0 or length < 0 or offset + length > size:
            raise ModelError(f"tensor '{t.name}': external data range "
                             f"[{offset}, {offset + length}) outside {loc!r} ({size} bytes)")
        with open(target, "rb") as f:
            f.seek(offset)
            t.raw_data = f.read(length)
        del t.external_data[:]
        t.data_location = onnx.TensorProto.DEFAULT
