"""ONNX -> Graph. The onnx package does the work: load, check, inline, convert, infer."""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..errors import ModelError
from ..ir import Graph, Node, TensorType
from .infer import InferenceTimeout, infer_without_weights
from .walk import all_nodes

MIN_OPSET = 7          # older models are converted up to this with onnx's version converter


def onnx_dtype(elem_type: int) -> np.dtype:
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except Exception as e:  # noqa: BLE001 - onnx raises KeyError/ValueError here
        raise ModelError(f"unsupported tensor element type {elem_type}") from e


def file_sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def load_model(path, input_shapes: dict | None = None) -> onnx.ModelProto:
    """Load and check a model file; every failure becomes one ModelError line.
    ``input_shapes`` ({input name: [dims]}) pins input shapes before shape inference."""
    path = Path(path)
    if not path.is_file():
        raise ModelError(f"{path}: no such file")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as e:  # noqa: BLE001 - protobuf raises many kinds
        raise ModelError(f"{path.name}: not an ONNX model ({_one_line(e)})") from None
    if not model.graph.node and not model.graph.output:
        raise ModelError(f"{path.name}: not an ONNX model (empty graph)")
    if not model.graph.output:
        raise ModelError(f"{path.name}: the graph declares no outputs (nothing to compute)")
    from .external_data import load_external_data
    load_external_data(model, path.parent)
    if not input_shapes:
        return prepare(model, name=path.name)
    saved = pin_input_shapes(model, input_shapes)
    first = onnx.ModelProto()
    first.CopyFrom(model)
    try:
        out = prepare(first, name=path.name)
    except ModelError:
        if not saved:
            raise
        out = None
    typed = set() if out is None else {
        vi.name for vi in list(out.graph.value_info) + list(out.graph.output)
        if vi.type.tensor_type.HasField("shape")}
    missing = [vi for vi in saved if vi.name not in typed]
    if missing:
        # tensors onnx cannot type (outputs of some function ops): the model's own entries,
        # with the pinned dims substituted
        model.graph.value_info.extend(missing)
        out = prepare(model, name=path.name)
    return out


def pin_input_shapes(model: onnx.ModelProto, shapes: dict) -> list:
    """Pin input shapes in place; returns the model's former value_info entries with the
    pinned symbolic dims substituted (shape inference redoes the rest)."""
    inits = {i.name for i in model.graph.initializer}
    by_name = {i.name: i for i in model.graph.input if i.name not in inits}
    unknown = [n for n in shapes if n not in by_name]
    if unknown:
        raise ModelError(f"--input-shape names unknown input(s) {', '.join(map(repr, unknown))} "
                         f"(inputs: {', '.join(map(repr, by_name))})")
    syms: dict = {}
    for name, dims in shapes.items():
        tt = by_name[name].type.tensor_type
        old = list(tt.shape.dim)
        if old and len(old) != len(dims):
            raise ModelError(f"--input-shape {name}: rank {len(dims)}, the model says {len(old)}")
        if any(int(v) < 0 for v in dims):
            raise ModelError(f"--input-shape {name}: dims must not be negative ({dims})")
        for d, v in zip(old, dims):
            if d.HasField("dim_value") and d.dim_value != v:
                raise ModelError(f"--input-shape {name}: dim {d.dim_value} is fixed by the model, "
                                 f"not {v}")
        for d, v in zip(old, dims):
            if d.HasField("dim_param") and d.dim_param:
                syms[d.dim_param] = int(v)
        tt.shape.Clear()
        for v in dims:
            tt.shape.dim.add().dim_value = int(v)
    # shapes recorded for intermediates were inferred for other input shapes (exporters
    # even record the example's sizes for dynamic dims): shape inference redoes them
    # (an entry left without its shape would stop onnx from filling in the new one)
    saved = []
    for vi in model.graph.value_info:
        if vi.type.WhichOneof("value") != "tensor_type" or not vi.type.tensor_type.HasField("shape"):
            continue
        dims = vi.type.tensor_type.shape.dim
        if all(d.HasField("dim_value") or d.dim_param in syms for d in dims):
            c = onnx.ValueInfoProto()
            c.CopyFrom(vi)
            for d in c.type.tensor_type.shape.dim:
                if not d.HasField("dim_value"):
                    d.dim_value = syms[d.dim_param]
            saved.append(c)
    del model.graph.value_info[:]
    return saved


def prepare(model: onnx.ModelProto, name: str = "model") -> onnx.ModelProto:
    try:
        onnx.checker.check_model(model, full_check=False)
    except Exception as e:  # noqa: BLE001
        raise ModelError(f"{name}: fails the ONNX checker: {_one_line(e)}") from None
    _check_input_dims(model, name)
    _check_einsum(model, name)
    if model.functions:
        from onnx import inliner
        try:
            model = inliner.inline_local_functions(model)
        except Exception as e:  # noqa: BLE001 - onnx raises ValidationError, RuntimeError
            raise ModelError(f"{name}: cannot inline its model-local functions: "
                             f"{_one_line(e)}") from None
        try:        # a function body that does not compute its outputs passed the first check
            onnx.checker.check_model(model, full_check=False)
        except Exception as e:  # noqa: BLE001
            raise ModelError(f"{name}: fails the ONNX checker once its model-local functions "
                             f"are inlined: {_one_line(e)}") from None
    opset = model_opset(model)
    if opset < MIN_OPSET:
        from onnx import version_converter
        try:
            model = version_converter.convert_version(model, MIN_OPSET)
        except Exception as e:  # noqa: BLE001
            raise ModelError(f"{name}: cannot convert opset {opset} to {MIN_OPSET}: "
                             f"{_one_line(e)}") from None
    from .quirks import bind_function_defaults
    bind_function_defaults(model, model_opset(model))
    try:
        model = infer_without_weights(model, strict_mode=True, data_prop=True)
    except InferenceTimeout as e:
        raise ModelError(f"{name}: {e}") from None
    except Exception as e:  # noqa: BLE001
        raise ModelError(f"{name}: shape inference failed: {_one_line(e)}") from None
    return model


def _check_einsum(model: onnx.ModelProto, name: str) -> None:
    """An Einsum term with two ellipses ("i...j...->") sends onnx's shape inference into an
    endless loop: refused before it runs."""
    for n in all_nodes(model):
        if n.op_type != "Einsum" or n.domain not in ("", "ai.onnx"):
            continue
        eq = next((a.s for a in n.attribute if a.name == "equation"), b"")
        eq = eq.decode("utf-8", errors="replace") if isinstance(eq, bytes) else eq
        for term in eq.replace("->", ",").split(","):
            if term.count("...") > 1 or term.replace("...", "").count(".") > 0:
                raise ModelError(f"{name}: Einsum node '{_text(n.name)}': equation {eq!r} has "
                                 f"a malformed ellipsis in {term.strip()!r} (one '...' per term)")


def _check_input_dims(model: onnx.ModelProto, name: str) -> None:
    """A graph input with a negative dim (the checker lets it pass) is refused: its sizes
    would multiply out to a negative or wrong element count in the generated loops."""
    inits = {i.name for i in model.graph.initializer}
    for i in model.graph.input:
        if i.name in inits or i.type.WhichOneof("value") != "tensor_type":
            continue
        dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
                for d in i.type.tensor_type.shape.dim]
        if any(isinstance(d, int) and d < 0 for d in dims):
            raise ModelError(f"{name}: graph input '{_text(i.name)}' has a negative dim "
                             f"(shape {dims})")


def model_opset(model: onnx.ModelProto) -> int:
    """The default-domain opset; a model importing no default-domain opset gets the newest
    (it has no default-domain ops, so nothing depends on the number)."""
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return int(imp.version)
    return int(onnx.defs.onnx_opset_version())


def _text(x) -> str:
    """A protobuf string field as text. protobuf hands over bytes when the file holds invalid
    UTF-8: such a name is refused (decoded with replacement characters, b'\\xff' and b'\\xfe'
    would become one tensor)."""
    if isinstance(x, bytes):
        try:
            return x.decode("utf-8")
        except UnicodeDecodeError:
            raise ModelError(f"the name {x!r} is not valid UTF-8 (ONNX names are UTF-8 "
                             "strings)") from None
    return x


def _one_line(e: Exception) -> str:
    s = " ".join(str(e).split())
    return s[:400] + ("..." if len(s) > 400 else "")


def _value_info_type(vi) -> TensorType | None:
    t = vi.type
    if t.WhichOneof("value") != "tensor_type":
        return None
    tt = t.tensor_type
    if not tt.HasField("shape"):
        return None
    dims = []
    for k, d in enumerate(tt.shape.dim):
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        elif d.HasField("dim_param") and d.dim_param:
            dims.append(_text(d.dim_param))
        else:
            dims.append(f"?{_text(vi.name)}:{k}")
    return TensorType(onnx_dtype(tt.elem_type), tuple(dims))


def _attr_value(a: onnx.AttributeProto):
    if a.ref_attr_name:
        raise ModelError(f"refers to a function's attribute '{_text(a.ref_attr_name)}' outside "
                         "a function")
    v = helper.get_attribute_value(a)
    if isinstance(v, onnx.TensorProto):
        return numpy_helper.to_array(v)
    if isinstance(v, bytes):
        return v.decode("utf-8", errors="replace")
    if isinstance(v, list) and v and isinstance(v[0], bytes):
        return [x.decode("utf-8", errors="replace") for x in v]
    if isinstance(v, list):
        return tuple(v)
    return v


def to_graph(model: onnx.ModelProto) -> Graph:
    """Import a checked, shape-inferred model into our IR."""
    g = model.graph
    constants = {}
    for init in g.initializer:
        try:
            constants[_text(init.name)] = numpy_helper.to_array(init)
        except Exception as e:  # noqa: BLE001
            raise ModelError(f"initializer '{_text(init.name)}': {_one_line(e)}") from None
    types = {}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        t = _value_info_type(vi)
        if t is not None:
            types[_text(vi.name)] = t
    nodes = []
    for k, n in enumerate(g.node):
        attrs = {}
        for a in n.attribute:
            if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
                attrs[a.name] = a  # kept raw; ops with subgraphs are unsupported for now
            else:
                try:
                    attrs[a.name] = _attr_value(a)
                except Exception as e:  # noqa: BLE001 - tensor data that does not match its dims
                    raise ModelError(f"node '{_text(n.name) or _text(n.op_type)}': attribute "
                                     f"'{_text(a.name)}': {_one_line(e)}") from None
        op_type = _text(n.op_type)
        nodes.append(Node(op_type, [_text(x) for x in n.input], [_text(x) for x in n.output],
                          attrs, name=_text(n.name) or f"{op_type}_{k}",
                          domain=_text(n.domain) or ""))
    # tensors onnx typed without a shape (shape set by a run-time value): shapes flowing back
    # from typed consumers through shape-preserving unary ops (backprop_shapes.py)
    untyped = {_text(vi.name): onnx_dtype(vi.type.tensor_type.elem_type) for vi in g.value_info
               if _text(vi.name) not in types and vi.type.WhichOneof("value") == "tensor_type"
               and vi.type.tensor_type.elem_type}
    if untyped:
        from .backprop_shapes import backprop_shapes
        backprop_shapes(nodes, types, untyped)
    inputs = [_text(i.name) for i in g.input if _text(i.name) not in constants]
    for i in inputs:
        if i not in types:
            raise ModelError(f"graph input '{i}' has no tensor type")
    return Graph(nodes=nodes, inputs=inputs, outputs=[_text(o.name) for o in g.output],
                 types=types, constants=constants, opset=model_opset(model),
                 name=_text(g.name) or "model")


def import_model(path, input_shapes: dict | None = None) -> Graph:
    return to_graph(load_model(path, input_shapes))
