"""Padding rules of the data-movement ops: Transpose, reshapes, Concat/Split/Slice, Gather,
Expand/Tile, Pad, DepthToSpace/SpaceToDepth (see padrules.py for the contract)."""
from __future__ import annotations

import numpy as np

from .extent import Compound
from .padrules import PadUnsafe, Res, _all_outputs, _attr, _shape, rule


@rule("Transpose")
def transpose(node, g, pads):
    rank = len(_shape(g, node.inputs[0]))
    perm = _attr(node, g, "perm") or tuple(reversed(range(rank)))
    return Res(out=[{j: pads[0][p] for j, p in enumerate(perm) if p in pads[0]}])


@rule("Reshape", "Flatten", "Squeeze", "Unsqueeze")
def reshape(node, g, pads):
    """An axis keeps its padding when the axes before it hold the same number of elements
    on both sides and it survives whole, merged with axes after it (unpadded: the real part
    is a prefix; padded too: a Compound axis), or split back at a Compound's parts."""
    if any(pads[1:]):
        raise PadUnsafe("padded shape/axes input")
    ish, osh = _shape(g, node.inputs[0]), _shape(g, node.outputs[0])
    out, consumed = {}, set()
    for ax in sorted(pads[0]):
        if ax in consumed:
            continue
        e = pads[0][ax]
        pre = int(np.prod(ish[:ax], dtype=np.int64))
        b, acc = 0, 1
        while b < len(osh) and acc < pre:
            acc *= osh[b]
            b += 1
        while b < len(osh) and osh[b] == 1 and ish[ax] != 1:
            b += 1                       # size-1 axes inserted before it
        if acc != pre or b >= len(osh):
            raise PadUnsafe(f"reshape {list(ish)} -> {list(osh)} moves padded axis {ax}")
        if isinstance(e, Compound):
            out.update(_split_compound(e, osh, b, ish, osh))
            continue
        if osh[b] < ish[ax] and ish[ax] % osh[b] == 0 and e.op == "mul" \
                and e.b % (ish[ax] // osh[b]) == 0:
            # an axis padded as (real) * m split back into [size / m', m']: e.g. the batch of
            # a [batch * heads, ...] tensor when the heads come apart again
            out[b] = e.a * (e.b // (ish[ax] // osh[b]))
            continue
        if osh[b] % ish[ax]:
            raise PadUnsafe(f"reshape {list(ish)} -> {list(osh)} splits padded axis {ax}")
        # the output axis holds the padded axis outermost, times m elements of the axes after
        # it (whole or split): real elements are the prefix e * m; another padded axis among
        # those m makes it a Compound
        inner = osh[b] // ish[ax]
        parts, span, c = [(ish[ax], e)], 1, ax + 1
        while span < inner:
            if c >= len(ish):
                raise PadUnsafe(f"reshape {list(ish)} -> {list(osh)} moves padded axis {ax}")
            take = ish[c] if span * ish[c] <= inner else inner // span
            if take != ish[c] and c in pads[0]:
                raise PadUnsafe(f"reshape splits padded axis {c} inside a merge")
            # (a padded axis of size 1 in this bucket holds only real elements)
            parts.append((take, pads[0].get(c) if take == ish[c] and take > 1 else None))
            consumed.add(c)
            span *= take
            c += 1
        if span != inner:
            raise PadUnsafe(f"reshape {list(ish)} -> {list(osh)} moves padded axis {ax}")
        if any(p is not None for _, p in parts[1:]):
            out[b] = Compound(tuple((s, p) for s, p in _merge_unpadded(parts)))
        else:
            out[b] = e * inner
    return Res(out=[out])


def _merge_unpadded(parts):
    """Adjacent unpadded parts as one (sizes multiply)."""
    res = []
    for s, p in parts:
        if p is None and res and res[-1][1] is None:
            res[-1] = (res[-1][0] * s, None)
        else:
            res.append((s, p))
    return res


def _split_compound(c, osh, b, ish, oshape):
    """Output axes b, b+1, ... taking a Compound's parts back (at part boundaries)."""
    parts, out, j = list(c.parts), {}, b
    while parts:
        if j >= len(osh):
            raise PadUnsafe(f"reshape {list(ish)} -> {list(oshape)} splits a merged padded axis")
        size, acc, k = osh[j], 1, 0
        while k < len(parts) and acc < size:
            acc *= parts[k][0]
            k += 1
        if acc != size:
            raise PadUnsafe(f"reshape {list(ish)} -> {list(oshape)} splits a merged padded "
                            "axis inside one of its parts")
        group = parts[:k]
        padded = [p for p in group if p[1] is not None]
        if len(group) == 1 or not padded:
            if padded:
                out[j] = padded[0][1]
        elif len(padded) == 1 and group[0][1] is not None:
            out[j] = group[0][1] * int(np.prod([s for s, _ in group[1:]], dtype=np.int64))
        else:
            out[j] = Compound(tuple(group))
        parts = parts[k:]
        j += 1
    return out


# -- data movement ----------------------------------------------------------------------------
@rule("Concat")
def concat(node, g, pads):
    rank = len(_shape(g, node.outputs[0]))
    ax = int(_attr(node, g, "axis")) % rank
    out = {}
    for p in pads:
        for a, e in p.items():
            if a == ax:
                raise PadUnsafe("concatenates along the padded axis")
            out.setdefault(a, e)
    return Res(out=[out])


@rule("Split")
def split(node, g, pads):
    rank = len(_shape(g, node.inputs[0]))
    ax = int(_attr(node, g, "axis", 0)) % rank
    if ax in pads[0]:
        raise PadUnsafe("splits along the padded axis")
    return Res(out=_all_outputs(node, pads[0]))


@rule("Slice")
def slice_(node, g, pads):
    if any(pads[1:]):
        raise PadUnsafe("padded starts/ends")
    ish = _shape(g, node.inputs[0])
    consts = [g.const(n) if k < len(node.inputs) and n else None
              for k, n in enumerate(node.inputs)]
    out = dict(pads[0])
    if g.opset < 10:
        starts, ends = _attr(node, g, "starts"), _attr(node, g, "ends")
        axes, steps = _attr(node, g, "axes", None), None
    else:
        if any(c is None for c in consts[1:3]) or (len(consts) > 3 and node.inputs[3] and consts[3] is None):
            raise PadUnsafe("slice bounds given at run time")
        starts, ends = consts[1].reshape(-1), consts[2].reshape(-1)
        axes = consts[3].reshape(-1) if len(consts) > 3 and consts[3] is not None else None
        steps = consts[4].reshape(-1) if len(consts) > 4 and consts[4] is not None else None
    axes = list(range(len(starts))) if axes is None else [int(a) % len(ish) for a in axes]
    for i, a in enumerate(axes):
        if a not in pads[0]:
            continue
        st, en = int(starts[i]), int(ends[i])
        step = int(steps[i]) if steps is not None else 1
        if step == 1 and -ish[a] <= st < 0 and en >= ish[a] and len(axes) == 1:
            # x[..., -k:]: the last k real elements, found at run time
            out.pop(a)
            return Res(out=[out], replace=("TakeFromEnd", {
                "axis": a, "ext": pads[0][a].to_json(), "offset": st, "count": -st}))
        if step != 1 or st < 0 or en < ish[a]:
            raise PadUnsafe(f"slices the padded axis {a} [{st}:{en}:{step}] relative to its end")
        out[a] = pads[0][a] - min(st, ish[a])
    return Res(out=[out])


@rule("Gather")
def gather(node, g, pads):
    data, idx = _shape(g, node.inputs[0]), _shape(g, node.inputs[1])
    ax = int(_attr(node, g, "axis", 0)) % len(data)
    out = {}
    if ax in pads[0]:
        c = g.const(node.inputs[1])
        if c is None:
            raise PadUnsafe("gathers along the padded axis with run-time indices")
        c = np.asarray(c)
        if (c < 0).any():
            if c.size != 1:
                raise PadUnsafe("gathers several indices from the end of the padded axis")
            # x[..., -k, ...]: the element k before the real end, found at run time
            out = {(a if a < ax else a + len(idx) - 1): e for a, e in pads[0].items() if a != ax}
            return Res(out=[out], replace=("TakeFromEnd", {
                "axis": ax, "ext": pads[0][ax].to_json(), "offset": int(c.reshape(-1)[0]),
                "count": 1}))
        # constant non-negative indices select real rows for every length that holds them
    for a, e in pads[0].items():
        if a < ax:
            out[a] = e
        elif a > ax:
            out[a + len(idx) - 1] = e
    for a, e in pads[1].items():
        out[ax + a] = e
    return Res(out=[out])


@rule("GatherND")
def gather_nd(node, g, pads):
    """Data axes past the indexed ones are sliced through: their padding moves to the output
    axis they become. An indexed data axis may be padded when the indices are constants that
    read it at the output's own position along one output axis (idx[..., c] equal to that
    axis' index everywhere: advanced indexing with an arange, as exporters write x[b, arange]):
    each output element then reads real data exactly where its own position is real."""
    bd = int(_attr(node, g, "batch_dims", 0) or 0)
    if len(pads) > 1 and pads[1]:
        raise PadUnsafe("padded indices")
    idx = g.const(node.inputs[1])
    ishape = _shape(g, node.inputs[1])
    m, q = ishape[-1], len(ishape)
    out = {}
    for a, e in pads[0].items():
        if a < bd:
            out[a] = e                              # batch axes pair up position by position
        elif a >= bd + m:
            out[q - 1 + a - bd - m] = e             # sliced through
        else:
            if idx is None:
                raise PadUnsafe("reads the padded axis at run-time indices")
            comp = np.asarray(idx)[..., a - bd]
            grid = np.indices(comp.shape)
            same = [k for k in range(bd, q - 1) if np.array_equal(comp, grid[k])]
            if not same:
                raise PadUnsafe("reads the padded axis at indices other than its own position")
            if same[0] in out and out[same[0]] != e:
                raise PadUnsafe("two padded axes meet on one output axis")
            out[same[0]] = e
    return Res(out=[out])


@rule("Expand", "Tile")
def expand(node, g, pads):
    if any(pads[1:]):
        raise PadUnsafe("padded shape/repeats")
    ish, osh = _shape(g, node.inputs[0]), _shape(g, node.outputs[0])
    off = len(osh) - len(ish)
    out = {}
    for a, e in pads[0].items():
        if osh[a + off] != ish[a]:
            raise PadUnsafe(f"repeats the padded axis {a}")
        out[a + off] = e
    return Res(out=[out])


@rule("Pad")
def pad(node, g, pads):
    mode = _attr(node, g, "mode", "constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode != "constant":
        raise PadUnsafe(f"mode {mode} reflects/repeats at the real end")
    ish = _shape(g, node.inputs[0])
    p = _attr(node, g, "pads", None) if g.opset < 11 else g.const(node.inputs[1])
    if p is None:
        raise PadUnsafe("pads given at run time")
    p = [int(v) for v in np.asarray(p).reshape(-1)]
    axes = list(range(len(ish)))
    if len(node.inputs) > 3 and node.inputs[3]:
        c = g.const(node.inputs[3])
        if c is None:
            raise PadUnsafe("axes given at run time")
        axes = [int(a) % len(ish) for a in np.asarray(c).reshape(-1)]
    cval = 0.0
    if g.opset >= 11 and len(node.inputs) > 2 and node.inputs[2]:
        c = g.const(node.inputs[2])
        if c is None:
            raise PadUnsafe("pad value given at run time")
        cval = float(np.asarray(c).reshape(-1)[0]) if np.asarray(c).size else 0.0
    elif g.opset < 11:
        cval = float(_attr(node, g, "value", 0.0))
    n = len(axes)
    out, sp = {}, {}
    for a, e in pads[0].items():
        if a in axes:
            i = axes.index(a)
            out[a] = e + (p[i] + p[i + n])
            sp[a] = e
        else:
            out[a] = e
    return Res(out=[out], fills=[(0, sp, ("value", cval))] if sp else [])


@rule("DepthToSpace", "SpaceToDepth")
def depth_space(node, g, pads):
    """Blocks of the spatial axes: real extents scale by the block size (SpaceToDepth needs
    real sizes that are multiples of it, as the op itself does)."""
    b = int(_attr(node, g, "blocksize"))
    out = {}
    for ax, e in pads[0].items():
        if ax == 1:
            raise PadUnsafe("padded channel axis")
        if isinstance(e, Compound):
            raise PadUnsafe("merged padded axis")
        out[ax] = e if ax == 0 else (e * b if node.op_type == "DepthToSpace" else e // b)
    return Res(out=[out])
