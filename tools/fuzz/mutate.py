"""Structure-aware mutations: decode a case's model as a ModelProto, edit its structure (dims,
dtypes, attributes, initializer data and external-data entries, If / Loop / Scan subgraphs,
function bodies, op types / domains / opsets, names) or the case's output mode, and encode
it again. Bytes that do not decode, and a fraction of the rest, get libFuzzer's byte-level
mutation (``byte_mutate``, atheris.Mutate under the fuzzer)."""
from __future__ import annotations

import random

import onnx
from onnx import AttributeProto as A
from onnx import TensorProto as T
from onnx import helper

from .harness import OUT_MODES, Case

DIMS = [0, 1, 2, 3, 7, -1, -7, 1 << 20, 1 << 31, 1 << 40, (1 << 63) - 1]
SYMS = ["n", "seq", "batch", "", "a b", "n=2", "ü", "x" * 300, "0"]
INTS = [0, 1, -1, 2, 3, -2, 7, 64, 1 << 16, 1 << 31, -(1 << 31), 1 << 40, (1 << 63) - 1,
        -(1 << 63)]
FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, 1e-30, 1e30, 3.4e38, float("nan"), float("inf"),
          float("-inf")]
STRINGS = [b"", b"SAME_UPPER", b"VALID", b"NOTSET", b"linear", b"nearest", b"cubic", b"constant",
           b"reflect", b"edge", b"i...j...->", b"ij,jk->ik", b"\xff\xfe", b"x" * 1000]
LOCATIONS = ["w.bin", "../secret.bin", "link.bin", "sub", ".", "", "sub/../w.bin",
             "nonexistent.bin", "/etc/passwd", "w\x00.bin", "./w.bin", "w.bin/", "SECRET"]
OPS = ["Relu", "Conv", "Gemm", "MatMul", "Reshape", "Concat", "Slice", "Gather", "Softmax",
       "Resize", "Pad", "Transpose", "Expand", "Tile", "Range", "ConstantOfShape", "Where",
       "Einsum", "Split", "Squeeze", "Unsqueeze", "TopK", "ReduceSum", "ReduceMean", "Cast",
       "CastLike", "Shape", "Size", "NonZero", "Unique", "Loop", "If", "Scan", "LSTM", "GRU",
       "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool", "BatchNormalization",
       "LayerNormalization", "InstanceNormalization", "QuantizeLinear", "DequantizeLinear",
       "QLinearConv", "QLinearMatMul", "MatMulInteger", "ScatterND", "GatherND",
       "GatherElements", "CumSum", "OneHot", "DepthToSpace", "SpaceToDepth", "Trilu",
       "Identity", "Dropout", "Flatten", "Sum", "Mean", "Max", "Min", "Pow", "Mod", "BitShift",
       "StringNormalizer", "SequenceConstruct", "SplitToSequence", "Optional", "Bernoulli",
       "RandomNormal", "Multinomial", "NoSuchOp", "Constant", "Attention",
       "RotaryEmbedding", "Col2Im", "DFT", "STFT", "Compress", "NonMaxSuppression"]
DOMAINS = ["", "ai.onnx", "ai.onnx.ml", "com.microsoft", "aicc", "local", "bogus",
           "ai.onnx.preview.training"]
DTYPES = list(range(0, 27)) + [99, -1]
EXT = {"location": LOCATIONS, "offset": ["0", "4", "60", "-4", "1e3", "x", str(1 << 62)],
       "length": ["0", "4", "16", "64", "256", "-16", str(1 << 31), str(1 << 62), "x"],
       "checksum": ["0" * 40], "basepath": ["/", ".."]}
# Names are set to a marker of this length and rewritten as raw bytes after serializing
# (protobuf refuses to build a str field that is not valid UTF-8)
BAD_NAME = b"\xffNAME\xfe"
MARKER = "\x01NAME\x01"


# ---- walking the model ----

def graphs(model):
    """Every GraphProto of the model (main graph, subgraphs at any depth, in functions too)."""
    out, stack = [], [model.graph.node] + [f.node for f in model.functions]
    out.append(model.graph)
    while stack:
        for n in stack.pop():
            for a in n.attribute:
                for g in ([a.g] if a.type == A.GRAPH else list(a.graphs)
                          if a.type == A.GRAPHS else []):
                    out.append(g)
                    stack.append(g.node)
    return out


def node_lists(model):
    """Every repeated node field: the graphs' and the functions' bodies."""
    return [g.node for g in graphs(model)] + [f.node for f in model.functions]


def nodes(model):
    return [n for ns in node_lists(model) for n in ns]


def value_infos(model):
    return [v for g in graphs(model) for v in (*g.input, *g.output, *g.value_info)]


def tensors(model):
    """Initializers and tensor attributes (Constant values, sparse values)."""
    out = [t for g in graphs(model) for t in g.initializer]
    for n in nodes(model):
        for a in n.attribute:
            if a.type == A.TENSOR:
                out.append(a.t)
            elif a.type == A.TENSORS:
                out.extend(a.tensors)
            elif a.type == A.SPARSE_TENSOR:
                out.extend((a.sparse_tensor.values, a.sparse_tensor.indices))
    return out


def tensor_names(model):
    names = set()
    for g in graphs(model):
        names.update(v.name for v in (*g.input, *g.output, *g.value_info, *g.initializer))
    for n in nodes(model):
        names.update(n.input)
        names.update(n.output)
    return sorted((x for x in names - {""} if isinstance(x, str)), key=repr)  # not bytes


# ---- mutations: each edits the model in place; False when it does not apply ----

def m_dims(model, rng):
    vis = [v for v in value_infos(model) if v.type.HasField("tensor_type")]
    if not vis:
        return False
    t = rng.choice(vis).type.tensor_type
    r = rng.random()
    if r < 0.1:                                     # rank change
        if t.shape.dim and rng.random() < 0.5:
            del t.shape.dim[rng.randrange(len(t.shape.dim))]
        else:
            for _ in range(rng.choice([1, 1, 2, 8])):
                t.shape.dim.add().dim_value = rng.choice([1, 2])
    elif r < 0.15:
        t.ClearField("shape")                       # unknown rank
    elif t.shape.dim:
        d = rng.choice(list(t.shape.dim))
        if r < 0.4:
            d.dim_param = rng.choice(SYMS)
        elif r < 0.45:
            d.Clear()                               # unknown dim
        else:
            d.dim_value = rng.choice(DIMS)
    else:
        return False
    return True


def m_dtype(model, rng):
    r = rng.random()
    if r < 0.4:
        vis = [v for v in value_infos(model) if v.type.HasField("tensor_type")]
        if not vis:
            return False
        rng.choice(vis).type.tensor_type.elem_type = rng.choice(DTYPES)
    elif r < 0.7:
        ts = tensors(model)
        if not ts:
            return False
        rng.choice(ts).data_type = rng.choice(DTYPES)
    else:
        attrs = [a for n in nodes(model) for a in n.attribute
                 if a.name in ("to", "dtype", "output_dtype", "stash_type")]
        if attrs:
            rng.choice(attrs).i = rng.choice(DTYPES)
        else:
            n = rng.choice(nodes(model) or [None])
            if n is None:
                return False
            n.attribute.append(helper.make_attribute("to", rng.choice(DTYPES)))
    return True


def _set_attr(a, rng):
    """A new value for A, of its type or (sometimes) of another type."""
    if rng.random() < 0.15:                         # change the type, keep the name
        kind = rng.choice(["i", "f", "s", "ints", "floats", "t"])
        name = a.name
        a.Clear()
        a.name = name
        if kind == "i":
            a.type, a.i = A.INT, rng.choice(INTS)
        elif kind == "f":
            a.type, a.f = A.FLOAT, rng.choice(FLOATS)
        elif kind == "s":
            a.type, a.s = A.STRING, rng.choice(STRINGS)
        elif kind == "ints":
            a.type = A.INTS
            a.ints.extend(rng.choice(INTS) for _ in range(rng.randrange(0, 5)))
        elif kind == "floats":
            a.type = A.FLOATS
            a.floats.extend(rng.choice(FLOATS) for _ in range(rng.randrange(0, 5)))
        else:
            a.type = A.TENSOR
            a.t.CopyFrom(helper.make_tensor("v", T.FLOAT, [2], [1.0, 2.0]))
        return
    if a.type == A.INT:
        a.i = rng.choice(INTS)
    elif a.type == A.FLOAT:
        a.f = rng.choice(FLOATS)
    elif a.type == A.STRING:
        a.s = rng.choice(STRINGS)
    elif a.type == A.INTS:
        r = rng.random()
        if a.ints and r < 0.6:
            a.ints[rng.randrange(len(a.ints))] = rng.choice(INTS)
        elif a.ints and r < 0.8:
            del a.ints[rng.randrange(len(a.ints))]
        else:
            a.ints.append(rng.choice(INTS))
    elif a.type == A.FLOATS:
        if a.floats and rng.random() < 0.7:
            a.floats[rng.randrange(len(a.floats))] = rng.choice(FLOATS)
        else:
            a.floats.append(rng.choice(FLOATS))
    elif a.type == A.STRINGS:
        a.strings.append(rng.choice(STRINGS))
    elif a.type == A.TENSOR:
        _mutate_tensor(a.t, rng)
    elif a.type == A.GRAPH:
        _mutate_subgraph(a.g, rng)
    else:
        a.ref_attr_name = rng.choice(["alpha", "nope", ""])


def m_attribute(model, rng):
    ns = nodes(model)
    if not ns:
        return False
    n = rng.choice(ns)
    r = rng.random()
    if n.attribute and r < 0.65:
        _set_attr(rng.choice(list(n.attribute)), rng)
    elif n.attribute and r < 0.8:
        del n.attribute[rng.randrange(len(n.attribute))]
    elif n.attribute and r < 0.85:
        n.attribute.append(n.attribute[rng.randrange(len(n.attribute))])     # duplicate
    else:
        name = rng.choice(["axis", "axes", "perm", "keepdims", "group", "pads", "strides",
                           "dilations", "kernel_shape", "auto_pad", "mode", "alpha", "equation",
                           "body", "value", "to", "split", "transB", "bogus"])
        value = rng.choice([rng.choice(INTS), rng.choice(FLOATS), rng.choice(STRINGS),
                            [rng.choice(INTS) for _ in range(rng.randrange(1, 5))]])
        n.attribute.append(helper.make_attribute(name, value))
        if rng.random() < 0.2:                      # a reference to a function attribute
            n.attribute[-1].ref_attr_name = "alpha"
    return True


def _mutate_tensor(t, rng):
    r = rng.random()
    if r < 0.3 and t.dims:
        t.dims[rng.randrange(len(t.dims))] = rng.choice(DIMS)
    elif r < 0.4:
        t.dims.append(rng.choice([0, 1, 2, 1 << 40]))
    elif r < 0.55:
        raw = t.raw_data
        t.raw_data = rng.choice([raw[:len(raw) // 2], raw + raw, b"", b"\xff" * 7,
                                 raw[:-1] if raw else b"\x00"])
    elif r < 0.65:
        t.float_data.extend([rng.choice(FLOATS)] * rng.randrange(1, 5))
    elif r < 0.75:
        t.int64_data.extend([rng.choice(INTS)] * rng.randrange(1, 5))
    elif r < 0.8:
        t.string_data.append(rng.choice(STRINGS))
    elif r < 0.85:
        t.data_type = rng.choice(DTYPES)
    else:
        _external(t, rng)


def _external(t, rng):
    """Move T's data to an external-data entry (hostile or not)."""
    t.data_location = T.EXTERNAL if rng.random() < 0.9 else T.DEFAULT
    del t.external_data[:]
    keys = ["location", "offset", "length"]
    if rng.random() < 0.2:
        keys.append(rng.choice(["checksum", "basepath", "location"]))
    if rng.random() < 0.1:
        keys.remove(rng.choice(keys))
    for k in keys:
        e = t.external_data.add()
        e.key = k
        e.value = rng.choice(EXT[k])
    if rng.random() < 0.8:
        for field in ("raw_data", "float_data", "int32_data", "int64_data", "double_data"):
            t.ClearField(field)


def m_tensor(model, rng):
    ts = tensors(model)
    if not ts:
        return False
    _mutate_tensor(rng.choice(ts), rng)
    return True


def m_sparse(model, rng):
    """Move an initializer to the graph's sparse initializers (indices in range or not)."""
    g = rng.choice(graphs(model))
    if not g.initializer:
        return False
    t = g.initializer[rng.randrange(len(g.initializer))]
    n = max(1, min(4, int(t.dims[0]) if t.dims else 1))
    idx = helper.make_tensor(t.name + "_idx", T.INT64, [n],
                             [rng.choice([0, 1, 2, -1, 1 << 40]) for _ in range(n)])
    vals = helper.make_tensor(t.name, t.data_type or T.FLOAT, [n], [1.0] * n)
    sp = helper.make_sparse_tensor(vals, idx, list(t.dims))
    g.sparse_initializer.append(sp)
    g.initializer.remove(t)
    return True


def m_external(model, rng):
    ts = tensors(model)
    if not ts:
        return False
    _external(rng.choice(ts), rng)
    return True


def _mutate_subgraph(g, rng):
    r = rng.random()
    if r < 0.3 and g.node:
        del g.node[rng.randrange(len(g.node))]
    elif r < 0.5 and g.output:
        del g.output[rng.randrange(len(g.output))]
    elif r < 0.7:
        g.input.append(helper.make_tensor_value_info(rng.choice(["extra", "x", ""]), T.FLOAT,
                                                     [rng.choice(DIMS)]))
    elif r < 0.85 and g.node:
        g.node[rng.randrange(len(g.node))].input.append(rng.choice(["x", "ghost", "M", ""]))
    else:
        g.output.append(helper.make_tensor_value_info("x", T.FLOAT, None))  # outer name


def _wrap(n, kind, rng):
    """A node of KIND (If / Loop / Scan) whose subgraph holds a copy of N."""
    vi = helper.make_tensor_value_info
    inner = onnx.NodeProto()
    inner.CopyFrom(n)
    outs = list(n.output) or ["o"]
    if kind == "If":
        def branch(k):
            b = onnx.NodeProto()
            b.CopyFrom(inner)
            b.output[:] = [f"{o}_{k}" for o in outs] if b.output else []
            return helper.make_graph([b], k, [], [vi(f"{o}_{k}", 0, None) for o in outs])
        cond = helper.make_node("Constant", [], [f"{outs[0]}_cond"],
                                value=helper.make_tensor("c", T.BOOL, [], [rng.random() < 0.5]))
        return [cond, helper.make_node("If", [cond.output[0]], outs, then_branch=branch("then"),
                                       else_branch=branch("else"))]
    if kind == "Loop":
        inner.output[:] = [f"{o}_b" for o in outs]
        body = helper.make_graph(
            [helper.make_node("Identity", ["c_in"], ["c_out"]), inner], "body",
            [vi("it", T.INT64, []), vi("c_in", T.BOOL, [])],
            [vi("c_out", T.BOOL, [])] + [vi(o, 0, None) for o in inner.output])
        trip = helper.make_node("Constant", [], [f"{outs[0]}_trip"],
                                value=helper.make_tensor("t", T.INT64, [],
                                                         [rng.choice([0, 1, 3, 1 << 20, -1])]))
        return [trip, helper.make_node("Loop", [trip.output[0], ""], outs, body=body)]
    body = helper.make_graph([inner], "sbody", [vi(i, 0, None) for i in inner.input[:1]],
                             [vi(o, 0, None) for o in inner.output])
    return [helper.make_node("Scan", list(n.input[:1]), outs, body=body,
                             num_scan_inputs=rng.choice([1, 0, 2]))]


def m_subgraph(model, rng):
    """Wrap a node in If / Loop / Scan (nesting when it already is one), drop a subgraph,
    swap two subgraphs, or edit one."""
    lists = [ns for ns in node_lists(model) if len(ns)]
    if not lists:
        return False
    ns = rng.choice(lists)
    with_g = [n for n in nodes(model) if any(a.type in (A.GRAPH, A.GRAPHS)
                                             for a in n.attribute)]
    r = rng.random()
    if r < 0.45 or not with_g:
        i = rng.randrange(len(ns))
        new = _wrap(ns[i], rng.choice(["If", "Loop", "Scan"]), rng)
        del ns[i]
        for k, n in enumerate(new):
            ns.insert(i + k, n)
        return True
    n = rng.choice(with_g)
    ga = [a for a in n.attribute if a.type == A.GRAPH]
    if r < 0.6 and ga:
        n.attribute.remove(rng.choice(ga))                              # drop
    elif r < 0.75 and len(ga) >= 2:                                     # swap then/else
        a, b = rng.sample(ga, 2)
        ta = onnx.GraphProto()
        ta.CopyFrom(a.g)
        a.g.CopyFrom(b.g)
        b.g.CopyFrom(ta)
    elif r < 0.85 and ga and len(with_g) >= 2:                          # swap between nodes
        other = [a for m in with_g if m is not n for a in m.attribute if a.type == A.GRAPH]
        if other:       # through a copy: the source may hold the destination (upb crashes)
            src = onnx.GraphProto.FromString(rng.choice(other).g.SerializeToString())
            rng.choice(ga).g.CopyFrom(src)
    elif ga:
        _mutate_subgraph(rng.choice(ga).g, rng)
    return True


def m_function(model, rng):
    """Move a node into a model-local function (called in its place), edit a function body,
    or make a function call itself."""
    r = rng.random()
    if model.functions and r < 0.5:
        f = rng.choice(list(model.functions))
        k = rng.random()
        if k < 0.2:                                  # recursion
            f.node.append(helper.make_node(f.name, list(f.input), ["rec"], domain=f.domain))
        elif k < 0.4 and f.node:
            del f.node[rng.randrange(len(f.node))]
        elif k < 0.55:
            del f.opset_import[:]
        elif k < 0.7:
            f.output.append(rng.choice(["ghost", f.input[0] if f.input else ""]))
        elif k < 0.8:
            model.functions.append(f)                # duplicate definition
        elif f.node:
            n = rng.choice(list(f.node))
            if n.attribute:
                _set_attr(rng.choice(list(n.attribute)), rng)
            else:
                n.op_type = rng.choice(OPS)
        return True
    g = model.graph
    if not g.node:
        return False
    i = rng.randrange(len(g.node))
    n = g.node[i]
    name = f"F{len(model.functions)}"
    body = onnx.NodeProto()
    body.CopyFrom(n)
    fn = helper.make_function("local", name, [x for x in n.input], list(n.output), [body],
                              opset_imports=[helper.make_opsetid("", _opset(model))])
    model.functions.append(fn)
    call = helper.make_node(name, list(n.input), list(n.output), domain="local")
    g.node.remove(n)
    g.node.insert(i, call)
    if not any(o.domain == "local" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("local", 1))
    return True


def _opset(model):
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 17)


def m_op(model, rng):
    r = rng.random()
    if r < 0.35:
        ns = nodes(model)
        if not ns:
            return False
        rng.choice(ns).op_type = rng.choice(OPS)
    elif r < 0.5:
        ns = nodes(model)
        if not ns:
            return False
        rng.choice(ns).domain = rng.choice(DOMAINS)
    elif r < 0.8:
        if model.opset_import and rng.random() < 0.8:
            o = rng.choice(list(model.opset_import))
            o.version = rng.choice([0, 1, 5, 6, 7, 9, 11, 13, 17, 18, 21, 22, 23, 24, 25, 99,
                                    -1, 1 << 40])
        elif model.opset_import and rng.random() < 0.5:
            del model.opset_import[rng.randrange(len(model.opset_import))]
        else:
            model.opset_import.append(helper.make_opsetid(rng.choice(DOMAINS),
                                                          rng.choice([1, 17, 99])))
    elif r < 0.9:
        model.ir_version = rng.choice([0, 1, 3, 4, 7, 8, 9, 10, 11, 99, -1])
    else:                                            # structure of the graph
        ns = rng.choice([x for x in node_lists(model)] or [None])
        if ns is None or not len(ns):
            return False
        k = rng.random()
        if k < 0.3:
            del ns[rng.randrange(len(ns))]
        elif k < 0.5:
            ns.append(ns[rng.randrange(len(ns))])                # a second producer
        elif k < 0.7:
            order = list(ns)
            rng.shuffle(order)
            del ns[:]
            ns.extend(order)
        else:                                                    # rewire an input
            n = ns[rng.randrange(len(ns))]
            names = tensor_names(model) + ["", "ghost"]
            if n.input and rng.random() < 0.6:
                n.input[rng.randrange(len(n.input))] = rng.choice(names)
            elif n.input and rng.random() < 0.5:
                del n.input[rng.randrange(len(n.input))]
            else:
                n.input.append(rng.choice(names))
    return True


def m_name(model, rng):
    """Rename a tensor everywhere, or one use of it: to an empty, duplicate, long, C-hostile
    or not-UTF-8 name."""
    names = tensor_names(model)
    if not names:
        return False
    old = rng.choice(names)
    new = rng.choice(["", MARKER, MARKER, "a" * 5000, 'q"*/\\\n#x', "1x", "int", "main",
                      "model_run", old + " ", old.upper(), rng.choice(names), "a.b", "a_b",
                      "aicc_rt", "\u00e9"])
    everywhere = rng.random() < 0.6
    for g in graphs(model):
        for v in (*g.input, *g.output, *g.value_info, *g.initializer):
            if v.name == old and (everywhere or rng.random() < 0.5):
                v.name = new
    for n in nodes(model):
        for field in (n.input, n.output):
            for i, x in enumerate(field):
                if x == old and (everywhere or rng.random() < 0.5):
                    field[i] = new
    if rng.random() < 0.1 and nodes(model):
        rng.choice(nodes(model)).name = rng.choice([MARKER, "", "dup"])
    return True


MUTATIONS = [(m_dims, 3), (m_dtype, 2), (m_attribute, 3), (m_tensor, 2), (m_external, 2),
             (m_sparse, 1),
             (m_subgraph, 2), (m_function, 2), (m_op, 3), (m_name, 2)]


def mutate_model(model, rng) -> bool:
    """1-3 structural edits; False when one failed (a name protobuf holds as bytes, a dtype
    onnx's helpers do not know): the caller mutates bytes instead."""
    fns, weights = zip(*MUTATIONS)
    try:
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            for _ in range(5):
                if rng.choices(fns, weights)[0](model, rng):
                    break
    except Exception:  # noqa: BLE001 - helper functions refuse the values a fuzzer makes
        return False
    return True


BYTE_MUTATOR = None        # atheris.Mutate, set by the fuzzing process


def byte_mutate(data: bytes, max_size: int) -> bytes:
    """libFuzzer's mutation under atheris, else a few random byte edits."""
    if BYTE_MUTATOR is not None:
        return BYTE_MUTATOR(data, max_size)
    rng = random.Random(hash(data))
    b = bytearray(data or b"\x00")
    for _ in range(rng.randrange(1, 8)):
        b[rng.randrange(len(b))] = rng.randrange(256)
    return bytes(b[:max_size])


def mutate(data: bytes, max_size: int, seed: int, seeds: list) -> bytes:
    """The custom mutator: a case (header byte + model) in, a mutated case out."""
    rng = random.Random(seed)
    case = Case.decode(data)
    model = None
    if case.model:
        try:
            model = onnx.load_from_string(case.model)
        except Exception:  # noqa: BLE001 - bytes the byte mutation made
            model = None
    r = rng.random()
    if model is None and (r < 0.5 or not case.model):
        model = onnx.load_from_string(rng.choice(seeds))        # start over from a seed
    if r < 0.1:                                                 # the output mode / flags
        case.out = rng.choice(OUT_MODES)
        case.weights_file = rng.random() < 0.3
        return case.encode()[:max_size]
    if model is None or r < 0.2:                                # bytes
        return (case.encode()[:1] + byte_mutate(case.model, max(1, max_size - 1)))[:max_size]
    if not mutate_model(model, rng):
        return (case.encode()[:1] + byte_mutate(case.model, max(1, max_size - 1)))[:max_size]
    try:
        raw = model.SerializeToString()
    except Exception:  # noqa: BLE001 - a mutation protobuf cannot encode
        return case.encode()[:max_size]
    raw = raw.replace(MARKER.encode(), BAD_NAME)
    return (case.encode()[:1] + raw)[:max_size]
