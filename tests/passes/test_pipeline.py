"""The pipeline runner and configuration, and the default pipeline end to end."""
import numpy as np
import onnx
import pytest

import aicc
from aicc.config import Options
from aicc.errors import ConfigError, UnsupportedError
from aicc.frontend import import_model
from aicc.ops import ops_with
from aicc.ops.traits import ACTIVATION
from aicc.passes import PASSES, load_all, run_pipeline
from tests.models.fixtures import load_fixture
from tests.oracle import check, make_model, reference
from tests.passes.helpers import (assert_same_outputs, build, node, ops, rand, run_graph,
                                  run_pass)

DEFAULT = Options.load().pipeline
FUSABLE = set(ops_with(ACTIVATION))


def test_default_pipeline_names_and_order():
    load_all()
    names = [n for n, _ in DEFAULT]
    assert all(n in PASSES for n in names)
    assert names.index("fold-batchnorm") < names.index("fuse-bias") < \
        names.index("fuse-activation") < names.index("fuse-binary-activation") < \
        names.index("materialize-outputs")
    assert names[-1] == "materialize-outputs"


def test_passes_have_contracts():
    load_all()
    for name, fn in PASSES.items():
        assert fn.__doc__ and len(fn.__doc__.split()) > 5, name
        assert fn.pass_name == name


def test_unknown_pass():
    g = build([node("Relu", ["x"], ["y"])], {"x": rand(2)}, ["y"])
    with pytest.raises(ConfigError,
                       match=r"unknown pass 'fuse-everything' \(known: .*fold-batchnorm"):
        run_pipeline(g, [("fold-constants", {}), ("fuse-everything", {})])


@pytest.mark.parametrize("opts,bad", [({"max_byte": 1}, "max_byte"), ({"g": 1}, "g")])
def test_unknown_option(opts, bad):
    g = build([node("Relu", ["x"], ["y"])], {"x": rand(2)}, ["y"])
    with pytest.raises(ConfigError, match=f"pass 'fold-constants': unknown option\\(s\\) {bad}"):
        run_pipeline(g, [("fold-constants", opts)])
    with pytest.raises(ConfigError, match="pass 'fuse-bias': unknown option"):
        run_pipeline(g, [("fuse-bias", {"aggressive": True})])


def test_trace_and_check():
    g = build([node("Identity", ["x"], ["a"]), node("Relu", ["a"], ["y"])], {"x": rand(2)}, ["y"])
    seen = []
    out = run_pipeline(g, DEFAULT, check=True, trace=lambda name, gr: seen.append((name, ops(gr))))
    assert [s[0] for s in seen] == [n for n, _ in DEFAULT]
    names = [s[0] for s in seen]
    assert seen[names.index("remove-identity")] == ("remove-identity", ["Relu"])
    assert ops(out) == ["Relu"]


def test_user_yaml_overrides_pipeline(tmp_path):
    cfg = tmp_path / "my.yaml"
    cfg.write_text("pipeline:\n  - fold-constants: {max_bytes: 64}\n  - remove-identity\n"
                   "memory:\n  alignment: 16\n")
    o = Options.load(config=cfg)
    assert o.pipeline == [("fold-constants", {"max_bytes": 64}), ("remove-identity", {})]
    assert o.memory["alignment"] == 16 and o.memory["planner"] == "search"  # merged


@pytest.mark.parametrize("text,msg", [
    ("pipeline: fold-constants\n", "must be a list"),
    ("pipeline:\n  - {a: 1, b: 2}\n", "bad pipeline entry"),
    ("pipelines: []\n", "unknown section"),
    ("- a\n", "mapping at the top"),
])
def test_bad_config(tmp_path, text, msg):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(text)
    with pytest.raises(ConfigError, match=msg):
        Options.load(config=cfg)


def _identity_model():
    return make_model([node("Identity", ["x"], ["a"]), node("Relu", ["a"], ["y"])],
                      {"x": rand(2, 3)}, ["y"])


def test_build_with_user_pipeline(tmp_path):
    """The user's pipeline replaces the default one: without remove-identity the Identity
    stays a step of its own; the result is the same."""
    model = _identity_model()
    cfg = tmp_path / "p.yaml"
    cfg.write_text("pipeline:\n  - fold-constants\n  - materialize-outputs\n")
    check(model, {"x": rand(2, 3)}, tmp_path, config=cfg)
    mpath = tmp_path / "m.onnx"
    onnx.save(model, str(mpath))
    import io
    dump = io.StringIO()
    aicc.build(mpath, out=tmp_path / "b", config=cfg, dump_ir=dump)
    text = dump.getvalue()
    assert "# after fold-constants" in text and "# after remove-identity" not in text
    assert "Identity(x)" in text.split("# after materialize-outputs")[1]


def test_build_unknown_pass_in_yaml(tmp_path):
    cfg = tmp_path / "p.yaml"
    cfg.write_text("pipeline:\n  - fold-constants\n  - fold-everything\n")
    mpath = tmp_path / "m.onnx"
    onnx.save(_identity_model(), str(mpath))
    with pytest.raises(ConfigError, match="unknown pass 'fold-everything'"):
        aicc.build(mpath, out=tmp_path / "b", config=cfg)


# -- the default pipeline on small models ----------------------------------------------

def _bn(c, seed, p):
    r = np.random.default_rng(seed)
    return {f"{p}s": r.uniform(0.5, 2, c).astype(np.float32),
            f"{p}b": r.normal(size=c).astype(np.float32),
            f"{p}m": r.normal(size=c).astype(np.float32),
            f"{p}v": r.uniform(0.1, 2, c).astype(np.float32)}


def conv_bn_relu_mlp():
    """Conv -> BN -> Relu -> Flatten -> MatMul -> Add -> Clip(0, 6) -> Gemm -> BN -> Sigmoid."""
    inits = {"W": rand(4, 3, 3, 3, seed=1), **_bn(4, 2, "a"), "shp": np.array([2, -1], np.int64),
             "M": rand(64, 8, seed=3), "mb": rand(8, seed=4), "lo": np.array(0, np.float32),
             "hi": np.array(6, np.float32), "G": rand(5, 8, seed=5), "GC": rand(5, seed=6),
             **_bn(5, 7, "g")}
    nodes = [
        node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]),
        node("BatchNormalization", ["c", "as", "ab", "am", "av"], ["cb"]),
        node("Relu", ["cb"], ["cr"]),
        node("Reshape", ["cr", "shp"], ["f"]),
        node("MatMul", ["f", "M"], ["m"]),
        node("Add", ["mb", "m"], ["ma"]),
        node("Clip", ["ma", "lo", "hi"], ["mc"]),
        node("Gemm", ["mc", "G", "GC"], ["gm"], transB=1, beta=0.5),
        node("BatchNormalization", ["gm", "gs", "gb", "gm_", "gv"], ["gb_"]),
        node("Sigmoid", ["gb_"], ["y"]),
    ]
    inits["gm_"] = inits.pop("gm")
    inits["gb_"] = None
    del inits["gb_"]
    feeds = {"x": rand(2, 3, 4, 4, seed=8)}
    return make_model(nodes, feeds, ["y"], inits), feeds


def test_default_pipeline_structure_and_numerics():
    model, feeds = conv_bn_relu_mlp()
    from aicc.frontend import prepare, to_graph
    before = to_graph(prepare(model))
    after = run_pipeline(before, DEFAULT, check=True)
    assert ops(after) == ["Conv", "Reshape", "MatMul", "Gemm"]
    conv, _, mm, gemm = after.nodes
    assert conv.attrs["aicc_act"] == "Relu" and len(conv.inputs) == 3
    assert mm.attrs["aicc_act"] == "Clip" and mm.attrs["aicc_act_params"] == {"min": 0, "max": 6}
    assert len(mm.inputs) == 3
    assert gemm.attrs["aicc_act"] == "Sigmoid" and gemm.outputs == ["y"]
    # the folded-away originals are dead
    assert not {"W", "G", "GC", "as", "gs"} & set(after.constants)
    assert_same_outputs(before, after, feeds)


def test_default_pipeline_compiles(tmp_path):
    model, feeds = conv_bn_relu_mlp()
    try:
        check(model, feeds, tmp_path)
    except UnsupportedError as e:       # an op module not there yet
        pytest.skip(str(e))


@pytest.mark.parametrize("fixture", ["dscnn", "resnet8", "mobilenetv1_025"])
def test_tsbn_fixture_fully_fused(fixture, tmp_path):
    """TorchScript exports with BatchNormalization kept: after the default pipeline no BN is
    left, no Relu directly after a Conv/Gemm, and (dscnn, through the numpy interpreter) the
    outputs match onnxruntime on the original model."""
    path = load_fixture(fixture, "tsbn", out_dir=tmp_path)
    before = import_model(path)
    after = run_pipeline(before, DEFAULT, check=True)
    kinds = ops(after)
    assert "BatchNormalization" not in kinds
    prod = after.producers()
    for n in after.nodes:
        if n.op_type in FUSABLE and n.inputs[0] in prod:
            assert prod[n.inputs[0]].op_type not in ("Conv", "Gemm", "MatMul")
    assert kinds.count("Conv") == ops(before).count("Conv")
    n_act = sum(n.op_type in FUSABLE for n in before.nodes) - sum(k in FUSABLE for k in kinds)
    assert n_act > 0 and sum("aicc_act" in n.attrs for n in after.nodes) == n_act
    if fixture == "dscnn":
        feeds = {before.inputs[0]: rand(*before.shape(before.inputs[0]), seed=3)}
        want = reference(onnx.load(str(path)), feeds)
        got = run_graph(after, feeds)
        for k in want:
            np.testing.assert_allclose(got[k], want[k], rtol=1e-4, atol=1e-4)


def test_pass_is_pure_on_fixture(tmp_path):
    """Each default pass leaves its input graph untouched (run_pass checks that)."""
    g = import_model(load_fixture("dscnn", "tsbn", out_dir=tmp_path))
    for name, opts in DEFAULT:
        g = run_pass(name, g, **opts)


# -- end to end: onnxruntime on the original model vs the compiled bundle ---------------

def _e2e_cases():
    r = np.random.default_rng(11)

    def f(*s):
        return r.normal(size=s).astype(np.float32)

    bn = _bn(6, 12, "n")
    yield "conv-add-clip", [node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]),
                            node("Add", ["c", "cb"], ["a"]),
                            node("Clip", ["a", "lo", "hi"], ["y"])], \
        {"x": f(1, 3, 6, 6)}, {"W": f(6, 3, 3, 3), "cb": f(6, 1, 1),
                               "lo": np.array(-0.5, np.float32), "hi": np.array(0.5, np.float32)}
    yield "convT-bn-leaky", [node("ConvTranspose", ["x", "W"], ["c"], group=2, strides=[2, 2]),
                             node("BatchNormalization", ["c", "ns", "nb", "nm", "nv"], ["b"]),
                             node("LeakyRelu", ["b"], ["y"], alpha=0.2)], \
        {"x": f(1, 4, 3, 3)}, {"W": f(4, 3, 3, 3), **bn}
    yield "gemm-bn-hardswish", [node("Gemm", ["x", "W", "C"], ["g"], transB=1, beta=0.5),
                                node("BatchNormalization", ["g", "ns", "nb", "nm", "nv"], ["b"]),
                                node("HardSwish", ["b"], ["y"])], \
        {"x": f(3, 4)}, {"W": f(6, 4), "C": f(3, 1), **bn}
    yield "matmul-add-sigmoid", [node("MatMul", ["x", "W"], ["m"]),
                                 node("Add", ["cb", "m"], ["a"]), node("Sigmoid", ["a"], ["y"])], \
        {"x": f(2, 3, 4)}, {"W": f(4, 5), "cb": f(1, 1, 5)}
    yield "matmul-bn-tanh", [node("MatMul", ["x", "W"], ["m"]),
                             node("BatchNormalization", ["m", "ns", "nb", "nm", "nv"], ["b"]),
                             node("Tanh", ["b"], ["y"])], \
        {"x": f(3, 4)}, {"W": f(4, 6), **bn}
    yield "gemm-add-hardsigmoid", [node("Gemm", ["x", "W"], ["g"], alpha=0.5),
                                   node("Add", ["g", "cb"], ["a"]),
                                   node("HardSigmoid", ["a"], ["y"], alpha=0.3, beta=0.4)], \
        {"x": f(3, 4)}, {"W": f(4, 5), "cb": f(3, 5)}


@pytest.mark.parametrize("case", list(_e2e_cases()), ids=lambda c: c[0])
def test_fused_end_to_end(case, tmp_path):
    _, nodes, feeds, inits = case
    model = make_model(nodes, feeds, ["y"], inits)
    from aicc.frontend import prepare, to_graph
    g = run_pipeline(to_graph(prepare(model)), DEFAULT, check=True)
    assert len(g.nodes) == 1 and "aicc_act" in g.nodes[0].attrs      # fully fused
    try:
        check(model, feeds, tmp_path)
    except UnsupportedError as e:       # an op module not there yet
        pytest.skip(str(e))
