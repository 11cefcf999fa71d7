"""Target files (configs/targets/*.yaml) that ``extends`` another: flags appended, schedule
and pass options merged per op family / pass, other keys replaced; loops and bad values are
configuration errors naming the file."""
import pytest

from aicc import targets
from aicc.errors import ConfigError
from aicc.targets import load_target


def _write(d, name, text):
    (d / f"{name}.yaml").write_text(text)


@pytest.fixture
def tdir(tmp_path, monkeypatch):
    monkeypatch.setattr(targets, "TARGETS_DIR", tmp_path)
    _write(tmp_path, "base", """name: base
cflags: [-mone]
cpu_flags: [one]
kernels: [avx512, generic]
schedule:
  gemm: {mr: 12, kc: 256}
  conv: {algo: auto}
pass_options:
  layout-nhwc: {mode: auto}
""")
    return tmp_path


def test_extends_merges_per_family(tdir):
    _write(tdir, "child", """name: child
extends: base
cflags_add: [-mtwo]
cpu_flags_add: [two]
kernels: [generic]
schedule:
  gemm: {mr: 14}
pass_options:
  fuse-qdq: {mode: on}
""")
    t = load_target("child")
    assert t.base == "base" and t.cflags == ("-mone", "-mtwo") and t.cpu_flags == ("one", "two")
    assert t.kernels == ("generic",)                                   # replaced whole
    assert t.schedule == {"gemm": {"mr": 14, "kc": 256}, "conv": {"algo": "auto"}}
    assert t.pass_options == {"layout-nhwc": {"mode": "auto"}, "fuse-qdq": {"mode": True}}
    assert load_target("base").schedule["gemm"] == {"mr": 12, "kc": 256}   # parent untouched


def test_extends_loop_and_bad_schedule(tdir):
    _write(tdir, "a", "name: a\nextends: b\n")
    _write(tdir, "b", "name: b\nextends: a\n")
    with pytest.raises(ConfigError, match="loops"):
        load_target("a")
    _write(tdir, "c", "name: c\nextends: base\nschedule: [1, 2]\n")
    with pytest.raises(ConfigError, match="c.yaml: 'schedule' must be a mapping"):
        load_target("c")


def test_shipped_x86_targets():
    amx, vnni, avx512 = (load_target(n) for n in ("x86-avx512-amx", "x86-avx512-vnni",
                                                   "x86-avx512"))
    assert amx.base == "x86-avx512-vnni" and vnni.base == "x86-avx512"
    assert amx.cflags[:len(vnni.cflags)] == vnni.cflags and "-mamx-int8" in amx.cflags
    assert amx.schedule["gemm"]["mr"] == 14 and vnni.schedule["gemm"] == avx512.schedule["gemm"]
    assert amx.schedule["conv"] == avx512.schedule["conv"]
    for t in (amx, vnni):
        assert t.pass_options == {**avx512.pass_options, "fuse-qdq": {"mode": True}}


def test_yaml_on_off_modes(tdir, tmp_path_factory):
    """YAML 1.1 reads ``{mode: off}`` / ``{mode: on}`` as booleans: a build config's pipeline
    entries and a target's pass_options reach the passes as "off" / "on" (layout-nhwc and
    fuse-pw-dw rejected False as a mode)."""
    from aicc.config import Options
    _write(tdir, "child", "name: child\nextends: base\npass_options:\n  fuse-qdq: {mode: on}\n")
    cfg = tmp_path_factory.mktemp("cfg") / "c.yaml"
    cfg.write_text("pipeline:\n  - fuse-qdq\n  - layout-nhwc: {mode: off}\n"
                   "  - fuse-pw-dw: {mode: off, min_kb: 64}\n")
    opts = dict(Options.load("child", cfg).pipeline)
    assert opts == {"fuse-qdq": {"mode": "on"}, "layout-nhwc": {"mode": "off"},
                    "fuse-pw-dw": {"mode": "off", "min_kb": 64}}
    cfg.write_text("pipeline:\n  - layout-nhwc: [off]\n")
    with pytest.raises(ConfigError, match="'layout-nhwc': options must be a mapping"):
        Options.load("child", cfg)


def test_requant_follows_double_fpu_unless_set(tdir):
    """``requant``: the int8 kernels' requantization; "integer" by default without a
    double-precision FPU, "float" with one; a child may set it (cortex-m7, cortex-m55)."""
    _write(tdir, "nodp", "name: nodp\nextends: base\ndouble_fpu: false\n")
    _write(tdir, "dp", "name: dp\nextends: nodp\ndouble_fpu: true\n")
    _write(tdir, "dpint", "name: dpint\nextends: dp\nrequant: integer\n")
    _write(tdir, "bad", "name: bad\nextends: base\nrequant: fixed\n")
    assert load_target("base").requant == "float" and load_target("nodp").requant == "integer"
    assert load_target("dp").requant == "float" and load_target("dpint").requant == "integer"
    with pytest.raises(ConfigError, match="bad.yaml: requant 'fixed'"):
        load_target("bad")
