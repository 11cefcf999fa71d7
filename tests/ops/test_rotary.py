"""RotaryEmbedding (opset 23): compiled C vs onnxruntime."""
import numpy as np
import pytest

from tests.oracle import check_node, rng


def _caches(r, rows, half, dt=np.float32):
    ang = r.uniform(0, 6.3, size=rows + (half,))
    return np.cos(ang).astype(dt), np.sin(ang).astype(dt)


SHAPES_4D = [(2, 4, 3, 8), (1, 1, 1, 2), (3, 2, 7, 6), (1, 3, 17, 16)]


@pytest.mark.parametrize("shape,rdim", [(s, r) for s in SHAPES_4D for r in (0, 2, 4)
                                        if r <= s[3]])
@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_4d(shape, interleaved, rdim, tmp_path):
    b, h, s, d = shape
    r_ = rdim or d
    r = rng(sum(shape) + rdim + interleaved)
    cos, sin = _caches(r, (50,), r_ // 2)
    pos = r.integers(0, 50, size=(b, s)).astype(np.int64)
    x = r.normal(size=shape).astype(np.float32)
    check_node("RotaryEmbedding", {"x": x, "cos": cos, "sin": sin, "pos": pos}, tmp_path,
               attrs={"interleaved": interleaved, "rotary_embedding_dim": rdim}, opset=23)


@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("heads,d", [(4, 8), (3, 10), (1, 2)])
def test_rotary_3d(interleaved, heads, d, tmp_path):
    r = rng(heads * d + interleaved)
    b, s = 2, 5
    cos, sin = _caches(r, (20,), d // 2)
    pos = r.integers(0, 20, size=(b, s)).astype(np.int64)
    x = r.normal(size=(b, s, heads * d)).astype(np.float32)
    check_node("RotaryEmbedding", {"x": x, "cos": cos, "sin": sin, "pos": pos}, tmp_path,
               attrs={"interleaved": interleaved, "num_heads": heads}, opset=23)


@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("rdim", [0, 4])
@pytest.mark.parametrize("rank", [3, 4])
def test_rotary_no_position_ids(interleaved, rdim, rank, tmp_path):
    r = rng(rdim + interleaved + rank)
    b, h, s, d = 2, 3, 4, 8
    cos, sin = _caches(r, (b, s), (rdim or d) // 2)
    if rank == 4:
        x = r.normal(size=(b, h, s, d)).astype(np.float32)
        attrs = {}
    else:
        x = r.normal(size=(b, s, h * d)).astype(np.float32)
        attrs = {"num_heads": h}
    attrs.update(interleaved=interleaved, rotary_embedding_dim=rdim)
    check_node("RotaryEmbedding", {"x": x, "cos": cos, "sin": sin}, tmp_path, attrs=attrs,
               opset=23)


def test_rotary_const_caches(tmp_path):
    """Caches as initializers (the usual export), position ids fed at run time."""
    r = rng(7)
    cos, sin = _caches(r, (64,), 4)
    x = r.normal(size=(1, 2, 6, 8)).astype(np.float32)
    pos = np.array([[0, 1, 2, 3, 62, 63]], dtype=np.int64)
    check_node("RotaryEmbedding", {"x": x, "pos": pos}, tmp_path,
               initializers={"cos": cos, "sin": sin}, input_order=["x", "cos", "sin", "pos"],
               opset=23)


def test_rotary_float16(tmp_path):
    """float16 runs in float32 through the upcast-half pass."""
    r = rng(8)
    cos, sin = _caches(r, (10,), 4, np.float16)
    x = r.normal(size=(1, 2, 3, 8)).astype(np.float16)
    pos = r.integers(0, 10, size=(1, 3)).astype(np.int64)
    check_node("RotaryEmbedding", {"x": x, "cos": cos, "sin": sin, "pos": pos}, tmp_path,
               opset=23, rtol=2e-3, atol=2e-3)


def test_rotary_position_ids_clamped(tmp_path):
    """Out-of-range position ids read the first/last cache row (documented clamp)."""
    from onnx import helper

    from tests.oracle import assert_close, compile_and_run, make_model, reference
    r = rng(9)
    cos, sin = _caches(r, (6,), 4)
    x = r.normal(size=(1, 2, 4, 8)).astype(np.float32)
    pos = np.array([[-5, 2, 6, 1 << 62]], dtype=np.int64)
    node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"])
    feeds = {"x": x, "cos": cos, "sin": sin, "pos": pos}
    model = make_model([node], feeds, ["y"], opset=23)
    got = compile_and_run(model, feeds, tmp_path)
    want = reference(model, dict(feeds, pos=np.clip(pos, 0, 5)))
    assert_close(got, want)
