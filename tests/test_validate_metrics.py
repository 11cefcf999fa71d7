"""aicc validate's comparison: metrics (max abs / rel, cosine, relative L2), the default
absolute tolerance scaled to each output's magnitude, and widened to onnxruntime's own spread
when a scaled comparison against it fails."""
import numpy as np
import onnx
from onnx import helper

from aicc.validate import compare, reference_spread
from tests.oracle import make_model, rng
from tests.test_cli import aicc as cli
from tests.test_cli import small_model


def _large_output():
    """Logits of rms ~100 and their float32 rounding-level perturbation, plus one element
    that cancels to ~0 and carries an absolute rounding error of 4e-4."""
    w = (rng(0).normal(size=1000) * 100).astype(np.float64)
    w[7] = 1e-3
    g = w * (1 + rng(1).uniform(-5e-8, 5e-8, size=w.size))
    g[7] = w[7] + 4e-4
    return g, w


def test_rounding_on_a_large_output_passes_when_scaled():
    g, w = _large_output()
    plain = compare({"y": g}, {"y": w})[0]
    scaled = compare({"y": g}, {"y": w}, scaled=True)[0]
    assert not plain.ok and "1 of 1000 elements" in plain.detail
    assert scaled.ok and 5e-4 < scaled.atol < 5e-5 * np.abs(w).max() * 1.01


def test_a_real_error_fails_when_scaled():
    g, w = _large_output()
    g[100] += 0.01 * np.sqrt(np.mean(w ** 2))          # 1% of the output's rms
    r = compare({"y": g}, {"y": w}, scaled=True)[0]
    assert not r.ok and "1 of 1000 elements" in r.detail


def test_deep_network_rounding_passes_when_scaled():
    """Logits of range ~2 (rms < 1) whose near-zero elements carry 4e-5 of rounding (ResNet-50
    between two float32 engines): within RANGE_TOL of the range; 1e-3 of it is not."""
    w = rng(3).normal(size=1000) * 0.5
    w[[0, 1]] = [2.1, 1e-4]
    g = w.copy()
    g[1] += 4e-5
    assert not compare({"y": g}, {"y": w})[0].ok
    assert compare({"y": g}, {"y": w}, scaled=True)[0].ok
    g[1] = w[1] + 2.1e-3
    assert not compare({"y": g}, {"y": w}, scaled=True)[0].ok


def test_small_outputs_keep_the_absolute_tolerance():
    w = rng(2).normal(size=100) * 0.01
    g = w + 2e-5
    assert not compare({"y": g}, {"y": w}, scaled=True)[0].ok      # rms < 1: atol stays 1e-5
    assert compare({"y": w + 5e-6}, {"y": w}, scaled=True)[0].ok


def test_cosine_and_relative_l2():
    w = rng(3).normal(size=(4, 50))
    g = w + rng(4).normal(size=w.shape) * 1e-3
    r = compare({"y": g}, {"y": w})[0]
    gw, ww = g.ravel(), w.ravel()
    assert np.isclose(r.cosine, gw @ ww / np.linalg.norm(gw) / np.linalg.norm(ww), rtol=1e-12)
    assert np.isclose(r.rel_l2, np.linalg.norm(gw - ww) / np.linalg.norm(ww), rtol=1e-12)
    assert 1e-4 < r.rel_l2 < 1e-2 and 0.99999 < r.cosine < 1
    assert np.isclose(r.max_abs, np.abs(gw - ww).max())


def test_validate_prints_the_metrics(tmp_path):
    model, _ = small_model(tmp_path)
    r = cli("build", model, "-o", tmp_path / "b")
    assert r.returncode == 0, r.stderr
    r = cli("validate", model, tmp_path / "b")
    assert r.returncode == 0, r.stderr
    assert "cosine" in r.stdout and "rel L2 err" in r.stdout and "max rel err" in r.stdout
    assert "x the output's rms" in r.stdout
    r = cli("validate", model, tmp_path / "b", "--atol", "1e-6")
    assert r.returncode == 0 and "atol 1e-06)" in r.stdout, r.stdout


def test_spread_widens_the_scaled_tolerance():
    w = rng(5).normal(size=1000)
    g = w.copy()
    g[3] += 6e-4                        # above RANGE_TOL x max|w| (~1.6e-4)
    assert not compare({"y": g}, {"y": w}, scaled=True)[0].ok
    assert compare({"y": g}, {"y": w}, scaled=True, spread={"y": 4e-4})[0].ok
    assert not compare({"y": g}, {"y": w}, scaled=True, spread={"y": 1e-4})[0].ok
    assert not compare({"y": g}, {"y": w}, spread={"y": 4e-4})[0].ok     # explicit atol


def _rounding_amplifier(tmp_path, shift=0.0):
    """A conv (8 channels, 3x3: onnxruntime's two kernels round it differently) minus its own
    float32-rounded exact value, times 1e5: an output that is float32 rounding, amplified,
    as in a badly conditioned network. shift: added to one element of the subtracted value."""
    r = rng(6)
    x = r.normal(size=(1, 8, 18, 18)).astype(np.float32)
    w = (r.normal(size=(32, 8, 3, 3)) * np.sqrt(2 / 72)).astype(np.float32)
    t = np.zeros((1, 32, 16, 16))
    for i in range(3):
        for j in range(3):
            t += np.einsum("nchw,kc->nkhw", x[:, :, i:i + 16, j:j + 16].astype(np.float64),
                           w[:, :, i, j].astype(np.float64))
    c = t.astype(np.float32)
    c[0, 0, 0, 0] += shift
    nodes = [helper.make_node("Conv", ["x", "w"], ["z"]),
             helper.make_node("Sub", ["z", "c"], ["d"]),
             helper.make_node("Mul", ["d", "s"], ["y"])]
    m = make_model(nodes, {"x": x}, ["y"], {"w": w, "c": c, "s": np.array(1e5, np.float32)})
    p = tmp_path / f"amp{shift:g}.onnx"
    onnx.save(m, p)
    np.savez(tmp_path / "in.npz", x=x)
    return p


def test_validate_allows_onnxruntimes_own_spread(tmp_path):
    model = _rounding_amplifier(tmp_path)
    assert reference_spread(model, dict(np.load(tmp_path / "in.npz")), ["y"])["y"] > 0.01
    r = cli("build", model, "-o", tmp_path / "b")
    assert r.returncode == 0, r.stderr
    r = cli("validate", model, tmp_path / "b", "-i", tmp_path / "in.npz")
    assert r.returncode == 0 and "onnxruntime's own spread" in r.stdout, r.stdout + r.stderr
    # an error well above the spread still fails: the bundle of a model one constant off
    wrong = _rounding_amplifier(tmp_path, shift=1e-4)
    r = cli("build", wrong, "-o", tmp_path / "w")
    assert r.returncode == 0, r.stderr
    r = cli("validate", model, tmp_path / "w", "-i", tmp_path / "in.npz")
    assert r.returncode == 1 and "FAIL" in r.stdout, r.stdout + r.stderr
