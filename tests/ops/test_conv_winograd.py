"""Winograd conv (kernels/winograd/simd.py, ``algo: winograd``) on the x86 SIMD targets against
onnxruntime: F(2x2,3x3) and F(4x4,3x3) forced (``wino_m``), awkward shapes (output sizes 1..9,
odd / non-square planes, channel counts off the vector width and row tiles, C = 1), paddings
(0, 1, asymmetric, SAME_UPPER), batch 2, fused Relu / Clip / scalar-pass activations, bias or
none, small tile blocks (several blocks, vectors of tiles crossing tile rows), K blocks; the
``auto`` choice; refused geometries; NaN/Inf. Several convs share one compiled model (one
graph input and output each) to keep the file fast. Targets the host cannot run are skipped."""
import zlib
from fractions import Fraction

import numpy as np
import onnx
import pytest
from onnx import helper

from aicc.bundle.writer import write_bundle
from aicc.compiler import compile_graph
from aicc.config import Options
from aicc.frontend import import_model
from aicc.kernels.winograd.transforms import cook_toom
from aicc.runner import open_bundle
from aicc.targets import runnable_targets
from tests.oracle import CHECKED, STRICT_CFLAGS, assert_close, make_model, reference, rng

TARGETS = [t for t in runnable_targets() if t in ("x86-avx2", "x86-avx512")]


def convs(tmp_path, target, cases, sched=None, runtime_w=False, marker="Winograd",
          absent=None, check=True):
    """Compile one model holding a Conv per case (x shape, w shape, attrs, options: act,
    params, bias, scale, x; sched, marker, absent: that case's own) with aicc_schedule = sched
    (updated by the case's sched; and aicc_act from the options) on every Conv; each step must
    contain marker (and not absent); run it (under the target's emulator for a cross target)
    and compare each output with onnxruntime on Conv (-> activation). Returns (outputs,
    reference)."""
    feeds, inits, nodes, ref_nodes, acts = {}, {}, [], [], {}
    for i, (xs, ws, attrs, o) in enumerate(cases):
        seed = repr((xs, ws, attrs, sorted((k, v) for k, v in o.items() if k != "x")))
        r = rng(zlib.crc32(seed.encode()) % 1000)
        x = r.normal(size=xs) * o.get("scale", 1)
        feeds[f"x{i}"] = (o["x"] if "x" in o else x).astype(np.float32)
        w = (r.normal(size=ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
        (feeds if runtime_w else inits)[f"w{i}"] = w
        names = [f"x{i}", f"w{i}"]
        if o.get("bias", True):
            inits[f"b{i}"] = r.normal(size=(ws[0],)).astype(np.float32)
            names.append(f"b{i}")
        nodes.append(helper.make_node("Conv", names, [f"y{i}"], **attrs))
        act = o.get("act")
        if not act:
            ref_nodes.append(nodes[-1])
            continue
        params = dict(o.get("params", {}))
        acts[f"y{i}"] = (act, params)
        ref_nodes.append(helper.make_node("Conv", names, [f"t{i}"], **attrs))
        extra = []
        if act == "Clip":
            inits[f"lo{i}"] = np.array(params["min"], np.float32)
            inits[f"hi{i}"] = np.array(params["max"], np.float32)
            extra = [f"lo{i}", f"hi{i}"]
        ref_nodes.append(helper.make_node(act, [f"t{i}"] + extra, [f"y{i}"],
                                          **({} if act == "Clip" else params)))
    outs = [f"y{i}" for i in range(len(cases))]
    graph_in = {k: v for k, v in feeds.items()}
    base = make_model(nodes, graph_in, outs, {k: v for k, v in inits.items()
                                              if not k.startswith(("lo", "hi"))}, opset=17)
    want = reference(make_model(ref_nodes, graph_in, outs, inits, opset=17), feeds)
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "m.onnx"
    onnx.save(base, str(path))
    g = import_model(path)
    for n in g.nodes:
        if n.op_type == "Conv":
            own = cases[int(n.outputs[0][1:])][3].get("sched", {})
            if sched or own:
                n.attrs["aicc_schedule"] = {**(sched or {}), **own}
            if n.outputs[0] in acts:
                n.attrs["aicc_act"], n.attrs["aicc_act_params"] = acts[n.outputs[0]]
    opts = Options.load(target, overrides={"memory": {"checked": True}} if CHECKED else None)
    _, prog = compile_graph(g, opts)
    bodies = [s.body for s in prog.steps if "Conv" in s.body]
    assert len(bodies) == len(cases), bodies
    for (*_, o), b in zip(cases, bodies):
        mk, ab = o.get("marker", marker), o.get("absent", absent)
        assert not mk or mk in b, b
        assert not ab or ab not in b, b
    out = write_bundle(prog, tmp_path / "b", name=opts.name, target=opts.target, opts=opts,
                       model_sha="0" * 64,
                       original_inputs=[{"name": k, "shape": list(v.shape)}
                                        for k, v in feeds.items()])
    got = open_bundle(out, cflags=STRICT_CFLAGS).run(feeds)
    if check:
        assert_close(got, want)
    return got, want


P1 = {"pads": [1, 1, 1, 1]}
SHAPES = [   # (x, w, attrs, options): output sizes 1..9, odd / non-square, C and K odd, C = 1
    ((1, 3, 1, 1), (5, 3, 3, 3), P1, {}),
    ((1, 1, 2, 3), (1, 1, 3, 3), P1, {}),
    ((1, 4, 3, 9), (7, 4, 3, 3), P1, {"act": "Relu"}),
    ((1, 5, 9, 7), (13, 5, 3, 3), P1, {"bias": False}),
    ((1, 2, 5, 6), (3, 2, 3, 3), {"pads": [0, 0, 0, 0]}, {}),
    ((1, 3, 8, 11), (4, 3, 3, 3), {"pads": [2, 0, 1, 1]}, {"act": "Clip",
                                                           "params": {"min": -0.5, "max": 0.5}}),
    ((2, 6, 7, 10), (9, 6, 3, 3), {"auto_pad": "SAME_UPPER"}, {}),
    ((1, 17, 13, 40), (19, 17, 3, 3), P1, {"act": "LeakyRelu", "params": {"alpha": 0.1}}),
    ((2, 1, 35, 9), (2, 1, 3, 3), {"pads": [1, 0, 0, 1]}, {"act": "Sigmoid"}),
    ((1, 33, 6, 37), (40, 33, 3, 3), P1, {"act": "Relu", "bias": False}),
    ((1, 3, 4, 4), (1, 3, 3, 3), {"auto_pad": "VALID"}, {}),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("chan", [0, 2], ids=["tiles", "channels"])
def test_winograd_shapes(chan, m, target, tmp_path):
    """Both forms: tiles vectorized (kernels/winograd/simd.py) and output channels vectorized
    (kernels/winograd/chan.py, forced here; auto takes it for few tiles)."""
    cases = SHAPES + ([((1, 5, 3, 5), (37, 5, 3, 3), {"pads": [1, 0, 1, 1]}, {}),
                       ((2, 19, 6, 5), (33, 19, 3, 3), P1, {"act": "Clip",
                                                            "params": {"min": 0.0, "max": 6.0}})]
                      if chan else [])
    convs(tmp_path, target, cases, sched={"algo": "winograd", "wino_m": m, "wino_chan": chan},
          marker="channels vectorized" if chan else "in blocks of")


BLOCKS = [   # several tile blocks (wino_kb 1: NR tiles per block), rows of tiles crossing vectors
    ((1, 8, 29, 31), (11, 8, 3, 3), P1, {"act": "Relu"}),
    ((2, 13, 18, 66), (6, 13, 3, 3), {"pads": [1, 0, 1, 2]}, {"act": "Tanh"}),
    ((1, 3, 70, 5), (4, 3, 3, 3), P1, {}),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("sched", [{"wino_kb": 1, "mr": 3}, {"wino_kb": 40, "kc": 5, "mr": 1},
                                   {"wino_kb": 1, "wino_chan": 2}, {"wino_kb": 30, "wino_chan": 2}],
                         ids=["kb1_mr3", "kb40_kc5_mr1", "chan_kb1", "chan_kb30"])
def test_winograd_blocks(sched, m, target, tmp_path):
    """Tiles vectorized: conv schedule keys; channels vectorized: the gemm schedule's mr."""
    chan = sched.get("wino_chan", 0)
    convs(tmp_path, target, BLOCKS, sched={"algo": "winograd", "wino_m": m, "wino_chan": chan,
                                           **sched},
          marker="per block of tiles" if chan else "in blocks of")


NARROW = [   # planes narrower than a vector of tiles (x86-avx512: kernels/winograd/rows.py for
    # TW = 8, 4, 2 tiles per row): full vectors of 2..8 tile rows, tails, bottom rows past OH
    # and right edges past OW (the general helpers take those vectors' outputs), batch 2
    ((1, 8, 10, 32), (9, 8, 3, 3), P1, {"act": "Relu"}),
    ((2, 5, 18, 16), (6, 5, 3, 3), P1, {"act": "Clip", "params": {"min": -0.5, "max": 0.5}}),
    ((2, 7, 33, 8), (4, 7, 3, 3), P1, {"bias": False}),
    ((1, 6, 14, 16), (11, 6, 3, 3), P1, {}),
    ((1, 9, 12, 30), (5, 9, 3, 3), P1, {"act": "Relu"}),
    ((1, 4, 9, 15), (3, 4, 3, 3), P1, {"act": "Sigmoid"}),
    ((1, 3, 20, 4), (7, 3, 3, 3), P1, {}),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("kb", [768, 1], ids=["kb768", "kb1"])
def test_winograd_narrow_planes(kb, m, target, tmp_path):
    """Tiles vectorized on planes of fewer tiles per row than a vector holds; on x86-avx512
    the TW-specialized transforms (their helpers must be in the code)."""
    got, _ = convs(tmp_path, target, NARROW, sched={"algo": "winograd", "wino_m": m,
                                                    "wino_chan": 0, "wino_kb": kb},
                   marker="in blocks of")
    if target == "x86-avx512":
        code = (tmp_path / "b" / "model.c").read_text()
        for tw in (8, 4, 2):
            assert f"aicc_wg{m}_in_avx512_tw{tw}(" in code, tw
            assert f"aicc_wg{m}_out_avx512_tw{tw}_" in code, tw     # + its M strides


@pytest.mark.parametrize("target", TARGETS)
def test_winograd_auto_resnet_layers(target, tmp_path):
    """auto picks F(2,3) for ResNet-style layers at every channel count (F(4,3) is less
    accurate than onnxruntime through whole networks: docs/ACCURACY.md; realistic scale:
    ReLU'd inputs, He-scaled weights, C up to 256), within the suite's tolerances."""
    layers = [((1, 64, 28, 28), (64, 64, 3, 3), P1, {"act": "Relu"}),
              ((1, 16, 32, 32), (16, 16, 3, 3), P1, {"act": "Relu", "scale": 3}),
              ((1, 32, 16, 16), (32, 32, 3, 3), P1, {"act": "Relu"}),
              ((1, 3, 32, 32), (16, 3, 3, 3), P1, {"act": "Relu"}),     # a first layer
              ((1, 16, 20, 20), (8, 16, 3, 3), P1, {}),
              ((1, 256, 12, 12), (256, 256, 3, 3), P1, {}),
              ((1, 128, 7, 7), (128, 128, 3, 3), P1, {"act": "Relu"}),
              ((1, 65, 14, 14), (64, 65, 3, 3), P1, {"act": "Relu"})]
    convs(tmp_path / "m2", target, layers, marker="Winograd F(2x2, 3x3)")


@pytest.mark.parametrize("target", TARGETS)
def test_winograd_auto_skips(target, tmp_path):
    """auto keeps the GEMM paths for what winograd does not take or would lose on: stride 2,
    groups, 1x1, dilation, few output channels, few input channels on small planes, one input
    channel, tiny planes, run-time weights."""
    cases = [((1, 16, 16, 16), (16, 16, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}, {}),
             ((1, 16, 16, 16), (16, 8, 3, 3), {"pads": [1, 1, 1, 1], "group": 2}, {}),
             ((1, 16, 16, 16), (16, 16, 1, 1), {}, {}),
             ((1, 16, 16, 16), (16, 16, 3, 3), {"pads": [2, 2, 2, 2], "dilations": [2, 2]}, {}),
             ((1, 4, 32, 32), (4, 4, 3, 3), P1, {}),
             ((1, 3, 8, 8), (16, 3, 3, 3), P1, {}),
             ((1, 1, 32, 32), (16, 1, 3, 3), P1, {}),
             ((1, 64, 1, 9), (64, 64, 3, 3), P1, {})]
    convs(tmp_path / "a", target, cases, marker=None, absent="Winograd")
    convs(tmp_path / "b", target, [((1, 32, 16, 16), (32, 32, 3, 3), P1, {})], runtime_w=True,
          marker=None, absent="Winograd")


REFUSED = ["stride2", "group2", "dilation2", "1d", "5x5", "runtime_w"]


def refused(case: str) -> tuple:
    """(x shape, w shape, attrs) of a conv Winograd cannot take (REFUSED; runtime_w: the
    weights are a graph input)."""
    x, w, attrs = (1, 4, 9, 9), (4, 4, 3, 3), dict(P1)
    if case == "stride2":
        attrs["strides"] = [2, 2]
    elif case == "group2":
        attrs["group"], w = 2, (4, 2, 3, 3)
    elif case == "dilation2":
        attrs["dilations"] = [2, 2]
    elif case == "1d":
        x, w, attrs = (1, 4, 9), (4, 4, 3), {"pads": [1, 1]}
    elif case == "5x5":
        w = (4, 4, 5, 5)
    return x, w, attrs


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", REFUSED)
def test_winograd_forced_refused(case, target, tmp_path):
    x, w, attrs = refused(case)
    with pytest.raises(Exception, match="winograd"):
        convs(tmp_path, target, [(x, w, attrs, {})], sched={"algo": "winograd"},
              runtime_w=case == "runtime_w")


@pytest.mark.parametrize("target", TARGETS)
def test_winograd_bad_tile(target, tmp_path):
    with pytest.raises(Exception, match="wino_m"):
        convs(tmp_path, target, SHAPES[:1], sched={"algo": "winograd", "wino_m": 3})


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("m", [2, 4])
def test_winograd_nan_inf(m, target, tmp_path):
    """Documented: a NaN/Inf input makes at least the outputs non-finite that onnxruntime
    makes non-finite (an Inf may come out as NaN), and only outputs of tiles whose patches
    contain it; all other outputs match."""
    x = rng(4).normal(size=(1, 3, 13, 14)).astype(np.float32)
    bad = [(0, 2, 3, np.nan), (1, 9, 9, np.inf), (2, 12, 0, -np.inf)]
    for c, i, j, v in bad:
        x[0, c, i, j] = v
    got, want = convs(tmp_path, target, [(x.shape, (4, 3, 3, 3), P1, {"act": "Relu", "x": x})],
                      sched={"algo": "winograd", "wino_m": m}, check=False)
    g, w = got["y0"][0], want["y0"][0]
    near = np.zeros(g.shape[1:], bool)      # outputs of the tiles whose patch holds a bad input
    for _, i, j, _ in bad:
        py, px = i + 1, j + 1                   # padded coordinates
        for ty in range(-(-g.shape[1] // m)):
            for tx in range(-(-g.shape[2] // m)):
                if ty * m <= py < ty * m + m + 2 and tx * m <= px < tx * m + m + 2:
                    near[ty * m:ty * m + m, tx * m:tx * m + m] = True
    assert (~np.isfinite(w)).any()
    assert np.all(~np.isfinite(g[~np.isfinite(w)]))
    assert not np.any(~np.isfinite(g) & ~near)
    np.testing.assert_allclose(g[:, ~near], w[:, ~near], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("m", [2, 4])
def test_cook_toom_identity(m):
    """A^T [(G g) * (B^T d)] is the correlation, exactly (Fractions)."""
    bt, g, at = cook_toom(m)
    t = m + 2
    r = np.random.default_rng(m)
    for _ in range(5):
        d = [Fraction(int(v)) for v in r.integers(-9, 10, t)]
        k = [Fraction(int(v)) for v in r.integers(-9, 10, 3)]
        u = [sum(g[i][j] * k[j] for j in range(3)) for i in range(t)]
        v = [sum(bt[i][j] * d[j] for j in range(t)) for i in range(t)]
        y = [sum(at[i][j] * u[j] * v[j] for j in range(t)) for i in range(m)]
        assert y == [sum(d[i + j] * k[j] for j in range(3)) for i in range(m)]


def test_transform_programs():
    """F(4,3)'s B^T and A^T have shared-subexpression programs (conv_winograd_prog), each
    exactly its matrix; a matrix they do not compute gets none (one combination per row)."""
    from aicc.kernels.winograd import prog
    bt, _, at = cook_toom(4)
    for mat, n_steps in ((bt, 16), (at, 9)):
        steps = prog.program(mat)
        assert steps is not None and len(steps) == n_steps
        env = prog._evaluate(steps, len(mat[0]))
        assert [list(env[f"o{i}"]) for i in range(len(mat))] == [list(r) for r in mat]
    wrong = [list(r) for r in bt]
    wrong[3][1] += Fraction(1, 4)
    assert prog.program(wrong) is None
    assert prog.program(cook_toom(2)[0]) is None
    lines = prog.emit(lambda isa, out, terms, ind: out, "avx512", bt,
                      [f"x{i}" for i in range(6)], [f"y{i}" for i in range(6)], "t", "")
    assert len(lines) == 16 and set(lines[-1:] + lines[4:5]) <= {f"y{i}" for i in range(6)}
