"""fuse-pw-dw: Before -> Expected structure (layout-nhwc's MatMul + depthwise ConvNHWC become
one aicc.PwDwNHWC), the unchanged cases, and the numpy interpreter's values of the fused graph
(PwDwNHWC.reference) against the unfused one."""
import pytest

from tests.passes.helpers import assert_same_outputs, assert_unchanged, build, node, ops, rand, \
    run_pass


def chain(c=12, k=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1), dil=(1, 1), pw_act="Relu",
          dw_act=None, pw_bias=True, dw_bias=True, extra_out=False):
    """x [1, 5, 9, 7] -> 1x1 conv (5 -> c) [-> pw_act] -> depthwise k [-> dw_act] -> 1x1 (-> 4)."""
    feeds = {"x": rand(1, 5, 9, 7, seed=1)}
    inits = {"w0": rand(c, 5, 1, 1, seed=2), "w1": rand(c, 1, *k, seed=3),
             "w2": rand(4, c, 1, 1, seed=4)}
    ins0, ins1 = ["x", "w0"], ["e", "w1"]
    if pw_bias:
        inits["b0"] = rand(c, seed=5)
        ins0.append("b0")
    if dw_bias:
        inits["b1"] = rand(c, seed=6)
        ins1.append("b1")
    nodes = [node("Conv", ins0, ["e0" if pw_act else "e"])]
    if pw_act:
        nodes.append(node(pw_act, ["e0"], ["e"]))
    nodes.append(node("Conv", ins1, ["d0" if dw_act else "d"], group=c, strides=list(strides),
                      pads=list(pads), dilations=list(dil)))
    if dw_act:
        nodes.append(node(dw_act, ["d0"], ["d"]))
    nodes.append(node("Conv", ["d", "w2"], ["y"]))
    return build(nodes, feeds, ["y", "e"] if extra_out else ["y"], inits), feeds


def channel_last(g):
    """The graph as the default pipeline has it before fuse-pw-dw (everything channel-last)."""
    for name in ("fuse-bias", "fuse-activation"):
        g = run_pass(name, g)
    return run_pass("eliminate-dead-nodes", run_pass("layout-nhwc", g, mode="all"))


@pytest.mark.parametrize("pw_act", [None, "Relu", "Sigmoid"])
@pytest.mark.parametrize("dw_act", [None, "Relu", "Sigmoid"])
@pytest.mark.parametrize("bias", [(True, True), (False, False), (False, True)])
def test_fused(pw_act, dw_act, bias):
    g, feeds = chain(pw_act=pw_act, dw_act=dw_act, pw_bias=bias[0], dw_bias=bias[1])
    before = channel_last(g)
    assert ops(before).count("MatMul") == 2 and "ConvNHWC" in ops(before), ops(before)
    after = run_pass("fuse-pw-dw", before, mode="auto", min_kb=0)
    assert ops(after).count("PwDwNHWC") == 1 and ops(after).count("MatMul") == 1, ops(after)
    mm = next(n for n in before.nodes if n.op_type == "MatMul")
    dw = next(n for n in before.nodes if n.op_type == "ConvNHWC")
    f = next(n for n in after.nodes if n.op_type == "PwDwNHWC")
    assert f.domain == "aicc" and f.name == dw.name and f.outputs == dw.outputs
    mins = list(mm.inputs) + [""] * (3 - len(mm.inputs))
    dins = list(dw.inputs) + [""] * (3 - len(dw.inputs))
    assert f.inputs == mins[:3] + dins[1:3]
    assert f.attrs.get("aicc_act") == dw.attrs.get("aicc_act")
    assert f.attrs.get("aicc_pw_act") == mm.attrs.get("aicc_act")
    assert dw.inputs[0] not in after.types           # the expanded tensor is gone
    assert_same_outputs(before, after, feeds)


@pytest.mark.parametrize("why, kw, opts", [
    ("mode off", {}, {"mode": "off"}),
    ("smaller than min_kb", {}, {"mode": "auto", "min_kb": 64}),
    ("dilated depthwise", {"dil": (2, 2), "pads": (2, 2, 2, 2)}, {"mode": "auto", "min_kb": 0}),
    ("pad as tall as the kernel", {"k": (1, 3), "pads": (1, 1, 1, 1)},
     {"mode": "auto", "min_kb": 0}),
    ("expanded tensor is a graph output", {"extra_out": True}, {"mode": "auto", "min_kb": 0}),
])
def test_not_fused(why, kw, opts):
    before = channel_last(chain(**kw)[0])
    after = run_pass("fuse-pw-dw", before, **opts)
    assert_unchanged(before, after)


def test_keep_names_a_node():
    before = channel_last(chain()[0])
    dw = next(n for n in before.nodes if n.op_type == "ConvNHWC")
    mm = next(n for n in before.nodes if n.op_type == "MatMul")
    for name in (dw.name, mm.name):
        assert_unchanged(before, run_pass("fuse-pw-dw", before, mode="auto", min_kb=0,
                                          keep=[name]))


def test_bad_mode():
    from aicc.errors import ConfigError
    with pytest.raises(ConfigError, match="mode 'on'"):
        run_pass("fuse-pw-dw", channel_last(chain()[0]), mode="on")


def test_second_run_unchanged():
    once = run_pass("fuse-pw-dw", channel_last(chain()[0]), mode="auto", min_kb=0)
    assert_unchanged(once, run_pass("fuse-pw-dw", once, mode="auto", min_kb=0))
