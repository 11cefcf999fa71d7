"""infer-shapes: re-run onnx shape inference on the current graph (after folding, shapes
that came from shape subgraphs become known)."""
from __future__ import annotations

from ..frontend.infer import infer_limited
from ..frontend.onnx_export import to_onnx
from ..frontend.onnx_import import _value_info_type
from .registry import graph_pass


@graph_pass("infer-shapes")
def infer_shapes(g):
    """Fill or refine tensor types with onnx shape inference. Only valid on graphs of
    standard ONNX ops (run it before fusion passes). A failure leaves the graph unchanged."""
    if any(n.domain not in ("", "ai.onnx") or any(k.startswith("aicc_") for k in n.attrs)
           for n in g.nodes):
        return g
    try:
        m = infer_limited(to_onnx(g, with_types=False, light=True), strict_mode=False,
                          data_prop=True)
    except Exception:  # noqa: BLE001
        return g
    g = g.copy()
    for vi in list(m.graph.value_info) + list(m.graph.output):
        t = _value_info_type(vi)
        if t is None or vi.name in g.constants:
            continue
        old = g.types.get(vi.name)
        if old is None or (t.is_static and not old.is_static):
            g.types[vi.name] = t
    return g


def _settled(g) -> tuple:
    return (len(g.nodes), len(g.constants), sum(1 for t in g.types.values() if t.is_static))


@graph_pass("settle-shapes")
def settle_shapes(g, *, rounds: int = 16, max_bytes: int = 256 << 20):
    """fold-constants and infer-shapes in turn until neither changes the graph (at most
    ``rounds`` times): a fold makes a shape input constant, re-inference types what it
    feeds, and a Shape of that folds in the next round. A TorchScript BERT with pinned inputs
    needs three: its position embeddings fold, then the LayerNorm after them gets its batch
    dim, then the Shape -> Range -> Gather chain of the attention mask folds and its Reshape
    / Expand get static shapes."""
    from .fold_constants import fold_constants
    for _ in range(rounds):
        before = _settled(g)
        g = fold_constants(g, max_bytes=max_bytes)
        if all(t.is_static for t in g.types.values()):
            break                   # nothing left for inference to refine (static models)
        g = infer_shapes(g)
        if _settled(g) == before:
            break
    return g
