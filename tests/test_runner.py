"""Runners (aicc/runner, docs/EMBEDDED.md): aicc run, validate, golden record/check and bench on
bundles this machine cannot load: arm-neon under qemu-aarch64, cortex-m4 on the emulated MPS2
board (semihosting; bench also cortex-m7 on MPS2 AN500 and cortex-m55 on MPS3 AN547), through
a command template, and on a "device" over ssh (an sshd this test starts on 127.0.0.1).
Outputs are compared with onnxruntime's; exit codes as on the host; instruction counts from
aicc's QEMU plugin (make qemu-plugin)."""
import json
import os
import shutil
import socket
import subprocess
import sys
import time

import numpy as np
import onnx
import pytest

import aicc
from aicc.runner.count import PLUGIN
from aicc.targets import load_target
from tests.dynamic_models import cnn
from tests.oracle import assert_close, reference

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KWS = os.path.join(ROOT, "examples", "kws_dscnn.onnx")
CROSS = ("arm-neon", "cortex-m4")
# aicc bench's instruction counts on every Cortex-M target's board
BENCH = CROSS + ("cortex-m7", "cortex-m55")


def _needs(target):
    missing = load_target(target).missing_tools()
    return pytest.mark.skipif(bool(missing), reason=f"{target}: {', '.join(missing)} not "
                              "installed (make cross-toolchain)")


needs_plugin = pytest.mark.skipif(not PLUGIN.is_file(), reason="make qemu-plugin")


def aicc_cli(*args, env=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "aicc.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, env=env, timeout=600)


def _feeds(model_path, seed=0):
    m = onnx.load(model_path)
    r = np.random.default_rng(seed)
    return {i.name: r.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim])
            .astype(np.float32) for i in m.graph.input}


class _Bundles(dict):
    """target -> the DS-CNN bundle built for it, built on first use."""

    def __init__(self, tmp):
        super().__init__()
        self.tmp = tmp

    def __missing__(self, target):
        self[target] = aicc.build(KWS, target=target, out=self.tmp / target)
        return self[target]


@pytest.fixture(scope="module")
def kws_bundles(tmp_path_factory):
    return _Bundles(tmp_path_factory.mktemp("runner"))


@pytest.mark.parametrize("target", [pytest.param(t, marks=_needs(t)) for t in CROSS])
def test_every_verb_on_a_cross_bundle(kws_bundles, target, tmp_path):
    b = kws_bundles[target]
    feeds = _feeds(KWS)
    np.savez(tmp_path / "in.npz", **feeds)
    r = aicc_cli("run", b, "-i", tmp_path / "in.npz", "-o", tmp_path / "out.npz")
    assert r.returncode == 0, r.stderr
    got = dict(np.load(tmp_path / "out.npz"))
    assert_close(got, reference(onnx.load(KWS), feeds), rtol=1e-4, atol=1e-5)

    r = aicc_cli("validate", KWS, b)
    assert r.returncode == 0, r.stderr
    assert "all 1 output(s) match" in r.stdout

    gold = tmp_path / "gold"
    r = aicc_cli("golden", "record", KWS, b, gold)
    assert r.returncode == 0, r.stderr
    r = aicc_cli("golden", "check", b, gold)
    assert r.returncode == 0, r.stderr
    outs = dict(np.load(gold / "outputs.npz"))
    outs["output"] = outs["output"] + 0.5         # the outputs moved: exit 1, as on the host
    np.savez(gold / "outputs.npz", **outs)
    r = aicc_cli("golden", "check", b, gold)
    assert r.returncode == 1 and "differ beyond" in r.stderr, r.stderr


@pytest.mark.parametrize("target", [pytest.param(t, marks=_needs(t)) for t in CROSS])
def test_validate_mismatch_exits_1(kws_bundles, target, tmp_path):
    m = onnx.load(KWS)
    w = max(m.graph.initializer, key=lambda t: len(t.raw_data))
    arr = onnx.numpy_helper.to_array(w).copy()
    w.CopyFrom(onnx.numpy_helper.from_array(-arr, w.name))
    onnx.save(m, tmp_path / "other.onnx")
    r = aicc_cli("validate", tmp_path / "other.onnx", kws_bundles[target])
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAIL" in r.stdout


@needs_plugin
@pytest.mark.parametrize("target", [pytest.param(t, marks=_needs(t)) for t in BENCH])
def test_bench_counts_instructions(kws_bundles, target):
    b = kws_bundles[target]
    r = aicc_cli("bench", b, "--json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    n = res["aicc"]["instructions"]
    assert "not time" in res["counter"]
    run = load_target(target).run
    if "-M" in run:                                      # counted on the target's board
        assert res["emulator"] == f"qemu-system-arm -M {run[run.index('-M') + 1]} -cpu {target}"
    # DS-CNN: 2.66 M multiply-adds; at least one instruction per 4 of them, and far below
    # what ten instructions per multiply-add would be
    assert 2.66e6 / 4 < n < 2.66e7
    again = json.loads(aicc_cli("bench", b, "--json").stdout)
    assert again["aicc"]["instructions"] == n            # exact: independent of the load
    r = aicc_cli("bench", b, "--profile", "0", "--json")
    assert r.returncode == 0, r.stderr
    prof = json.loads(r.stdout)
    steps = prof["steps"]
    assert len(steps) == len(json.load(open(b / "manifest.json"))["steps"])
    assert all(s["instructions"] > 0 for s in steps)
    # the steps are the run, but for the runtime's own few instructions around them
    assert 0.99 * prof["instructions"] < prof["sum_instructions"] <= prof["instructions"]
    convs = sum(s["instructions"] for s in steps if s["op"] == "Conv")
    assert convs > 0.5 * prof["sum_instructions"]
    text = aicc_cli("bench", b).stdout
    assert "instructions per inference" in text and "not time" in text


@pytest.mark.skipif(bool(load_target("arm-neon").missing_tools()), reason="make cross-toolchain")
def test_dynamic_bundle_under_the_emulator(tmp_path):
    """A bundle with buckets: the harness passes the dims; validate runs 1, each bucket and
    one past it, each against onnxruntime."""
    path = tmp_path / "cnn.onnx"
    onnx.save(cnn(), path)
    out = aicc.build(path, target="arm-neon", out=tmp_path / "b", buckets={"batch": [1, 2, 4]})
    r = aicc_cli("validate", path, out)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "batch=3" in r.stdout and "batch=4" in r.stdout
    from aicc.runner import open_bundle
    x = np.random.default_rng(1).standard_normal((3, 3, 12, 12)).astype(np.float32)
    got = open_bundle(out).run({"x": x})
    assert got["y"].shape == (3, 10)
    assert_close(got, reference(onnx.load(path), {"x": x}), rtol=1e-4, atol=1e-5)


@pytest.mark.skipif(bool(load_target("cortex-m4").missing_tools()), reason="make cross-toolchain")
def test_weights_file_and_io_in_arena_on_the_board(tmp_path):
    """--weights-file: the harness links weights.bin in and passes it; memory.io_in_arena:
    inputs are copied into the arena and outputs read from it."""
    cfg = tmp_path / "io.yaml"
    cfg.write_text("memory:\n  io_in_arena: true\n")
    for extra, kw in ((("--weights-file",), {}), (("-c", cfg), {})):
        out = tmp_path / f"b{len(kw)}{extra[0].strip('-')}"
        r = aicc_cli("build", KWS, "-t", "cortex-m4", "-o", out, *extra)
        assert r.returncode == 0, r.stderr
        r = aicc_cli("validate", KWS, out)
        assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.skipif(bool(load_target("arm-neon").missing_tools()), reason="make cross-toolchain")
def test_command_template_runner(kws_bundles, tmp_path):
    b = kws_bundles["arm-neon"]
    qemu = "cmd:qemu-aarch64 -cpu cortex-a72 -L /usr/aarch64-linux-gnu {exe}"
    r = aicc_cli("validate", KWS, b, "--runner", qemu)
    assert r.returncode == 0, r.stderr
    # a device that returns truncated output: one line, exit 2, no outputs file written
    np.savez(tmp_path / "in.npz", **_feeds(KWS))
    r = aicc_cli("run", b, "-i", tmp_path / "in.npz", "-o", tmp_path / "out.npz",
                 "--runner", qemu + " | head -c 60")
    assert r.returncode == 2 and "truncated" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out.npz").exists()
    r = aicc_cli("validate", KWS, b, "--runner", qemu + " | sed 's/^x ../x zz/'")
    assert r.returncode == 2 and "garbled" in r.stderr, r.stderr
    r = aicc_cli("validate", KWS, b, "--runner", "cmd:true {exe}")   # prints nothing
    assert r.returncode == 2 and "truncated" in r.stderr, r.stderr
    r = aicc_cli("validate", KWS, b, "--runner", "cmd:qemu-aarch64")
    assert r.returncode == 2 and "{exe}" in r.stderr, r.stderr
    r = aicc_cli("validate", KWS, b, "--runner", "telnet://board")
    assert r.returncode == 2 and "unknown runner" in r.stderr, r.stderr


@pytest.mark.skipif(bool(load_target("arm-neon").missing_tools()), reason="make cross-toolchain")
def test_missing_tools_and_timeouts_say_what(kws_bundles, tmp_path):
    b = kws_bundles["arm-neon"]
    bindir = tmp_path / "bin"          # a PATH with the cross compiler but no emulator
    bindir.mkdir()
    for tool in ("aarch64-linux-gnu-gcc", "aarch64-linux-gnu-ar", "make", "cc"):
        os.symlink(shutil.which(tool), bindir / tool)
    env = {**os.environ, "PATH": str(bindir)}
    r = aicc_cli("validate", KWS, b, env=env)
    assert r.returncode == 2, r.stderr
    assert "qemu-aarch64 is not installed" in r.stderr and "make cross-toolchain" in r.stderr
    os.unlink(bindir / "aarch64-linux-gnu-gcc")
    r = aicc_cli("validate", KWS, b, env=env)
    assert r.returncode == 2 and "aarch64-linux-gnu-gcc is not installed" in r.stderr, r.stderr
    # an emulator that hangs: the local runner's timeout
    os.symlink(shutil.which("aarch64-linux-gnu-gcc"), bindir / "aarch64-linux-gnu-gcc")
    (bindir / "qemu-aarch64").write_text("#!/bin/sh\nexec sleep 30\n")
    os.chmod(bindir / "qemu-aarch64", 0o755)
    os.symlink(shutil.which("sleep"), bindir / "sleep")
    r = aicc_cli("validate", KWS, b, "--runner-timeout", "1", env=env)
    assert r.returncode == 2 and "timed out after 1 s" in r.stderr, r.stderr
    r = aicc_cli("validate", KWS, b, "--runner", "cmd:sleep 5; {exe}", "--runner-timeout", "1")
    assert r.returncode == 2 and "timed out after 1 s" in r.stderr, r.stderr


@pytest.mark.skipif(bool(load_target("cortex-m4").missing_tools()), reason="make cross-toolchain")
def test_bare_metal_bench_through_a_device_runner_says_why(kws_bundles):
    b = kws_bundles["cortex-m4"]
    t = load_target("cortex-m4")
    r = aicc_cli("bench", b, "--runner", "cmd:" + " ".join(t.run_command("{exe}")))
    assert r.returncode == 2 and "cycle counter" in r.stderr, r.stderr


# -- ssh: a device over the network, here an sshd on 127.0.0.1 --------------------------------

def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    """An sshd on 127.0.0.1 with its own host key and one authorized client key; yields
    (ssh://user@127.0.0.1:port/folder, AICC_SSH_OPTS); stopped afterwards."""
    exe = shutil.which("sshd") or "/usr/sbin/sshd"
    if not (os.path.isfile(exe) and shutil.which("ssh-keygen")):
        pytest.skip("openssh-server not installed (make cross-toolchain)")
    d = tmp_path_factory.mktemp("sshd")
    for name in ("host", "client"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", d / name],
                       check=True)
    shutil.copy(d / "client.pub", d / "authorized_keys")
    os.chmod(d / "authorized_keys", 0o600)
    port = _free_port()
    (d / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d / 'host'}\n"
        f"AuthorizedKeysFile {d / 'authorized_keys'}\nPidFile {d / 'sshd.pid'}\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
        "StrictModes no\nPermitRootLogin prohibit-password\n")
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", exist_ok=True)        # its privilege separation folder
    proc = subprocess.Popen([exe, "-D", "-e", "-f", d / "sshd_config"], stderr=subprocess.PIPE)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            assert proc.poll() is None, proc.stderr.read().decode()
            time.sleep(0.05)
    remote = d / "device"
    remote.mkdir()
    opts = (f"-i {d / 'client'} -o StrictHostKeyChecking=no "
            f"-o UserKnownHostsFile={d / 'known_hosts'} -o LogLevel=ERROR")
    import getpass
    yield f"ssh://{getpass.getuser()}@127.0.0.1:{port}{remote}", opts, remote
    proc.terminate()
    proc.wait(10)


def test_ssh_runner(sshd, tmp_path):
    url, opts, remote = sshd
    env = {**os.environ, "AICC_SSH_OPTS": opts}
    out = aicc.build(KWS, target="generic", out=tmp_path / "b")
    r = aicc_cli("validate", KWS, out, "--runner", url, env=env)
    assert r.returncode == 0, r.stderr
    feeds = _feeds(KWS, seed=3)
    np.savez(tmp_path / "in.npz", **feeds)
    r = aicc_cli("run", out, "-i", tmp_path / "in.npz", "-o", tmp_path / "out.npz",
                 "--runner", url, env=env)
    assert r.returncode == 0, r.stderr
    assert_close(dict(np.load(tmp_path / "out.npz")), reference(onnx.load(KWS), feeds),
                 rtol=1e-4, atol=1e-5)
    r = aicc_cli("bench", out, "--runner", url, "--json", env=env)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)["aicc"]
    assert res["runs"] == 10 and 0 < res["median_ms"] < 1000
    assert os.listdir(remote) == []               # the program is removed after each run
    port = _free_port()                           # nothing listens there
    r = aicc_cli("validate", KWS, out, "--runner", f"ssh://127.0.0.1:{port}", env=env)
    assert r.returncode == 2, r.stderr
    assert "running the program on ssh://127.0.0.1" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
