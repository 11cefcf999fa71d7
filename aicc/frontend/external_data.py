"""External tensor data, read only from inside the model's folder: one resolver for every
tensor of the model (graph, subgraphs, functions, sparse constants), each range checked
against the file and the size limit before anything is read."""
from __future__ import annotations

import os
from pathlib import Path

import onnx

from ..errors import ModelError
from .walk import all_graphs, all_nodes

MAX_TENSOR_BYTES = (1 << 31) - 1     # protobuf's bytes field: a larger raw_data cannot exist


def _tensors(model):
    """Every tensor of the model that may hold external data: initializers (dense and
    sparse) of the graph and its subgraphs, and the tensor / tensors / sparse attributes of
    every node (graph, subgraphs at any depth, model-local functions)."""
    for g in all_graphs(model):
        yield from g.initializer
        for sp in g.sparse_initializer:
            yield from (sp.values, sp.indices)
    for n in all_nodes(model):
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                yield a.t
            elif a.type == onnx.AttributeProto.TENSORS:
                yield from a.tensors
            elif a.type == onnx.AttributeProto.SPARSE_TENSOR:
                yield from (a.sparse_tensor.values, a.sparse_tensor.indices)
            elif a.type == onnx.AttributeProto.SPARSE_TENSORS:
                for sp in a.sparse_tensors:
                    yield from (sp.values, sp.indices)


def load_external_data(model: onnx.ModelProto, base_dir: Path) -> None:
    """Fill external tensors in place. Paths must stay inside base_dir (no absolute
    paths, no '..', no symlink leading out); offset and length are checked."""
    base = Path(base_dir).resolve()
    for t in _tensors(model):
        if t.data_location != onnx.TensorProto.EXTERNAL:
            continue
        info = {e.key: e.value for e in t.external_data}
        loc = info.get("location", "")
        if not isinstance(loc, str) or not loc or "\x00" in loc or os.path.isabs(loc) or \
                ".." in Path(loc).parts:        # bytes: the file holds invalid UTF-8
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
        if length > MAX_TENSOR_BYTES:
            raise ModelError(f"tensor '{t.name}': {length} bytes of external data; one tensor "
                             f"holds at most {MAX_TENSOR_BYTES}")
        with open(target, "rb") as f:
            f.seek(offset)
            t.raw_data = f.read(length)
        del t.external_data[:]
        t.data_location = onnx.TensorProto.DEFAULT
