"""`aicc build -o DIR` never deletes what aicc did not write (aicc/bundle/outdir.py).

Every refusal is tried on temporary folders only: the home case with a temporary HOME, the
root case through check_out alone (it raises before anything could be written)."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

import aicc
from aicc.bundle.outdir import check_out
from aicc.errors import OutputError
from tests.test_cli import aicc as run_cli
from tests.test_cli import small_model


def _tree(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None
            for p in sorted(folder.rglob("*"))}


def _refused(r, what):
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert what in r.stderr, r.stderr


def _no_leftovers(folder: Path):
    left = [p.name for p in folder.iterdir() if ".tmp-" in p.name or ".old-" in p.name]
    assert not left, left


def test_new_and_empty_folders_take_a_bundle(tmp_path):
    m, x = small_model(tmp_path)
    (tmp_path / "empty").mkdir()
    for out in (tmp_path / "new" / "deeper", tmp_path / "empty"):
        r = run_cli("build", m, "-o", out)
        assert r.returncode == 0, r.stderr
        got = aicc.load(out).run({"x": x})["y"]
        assert got.shape == x.shape
    _no_leftovers(tmp_path)


def test_user_folder_is_refused_and_kept(tmp_path):
    m, _ = small_model(tmp_path)
    proj = tmp_path / "myproject"
    (proj / "src").mkdir(parents=True)
    (proj / "main.c").write_text("int main(void) { return 0; }\n")
    (proj / "src" / "a.h").write_text("/* mine */\n")
    before = _tree(tmp_path)
    _refused(run_cli("build", m, "-o", proj), "holds no aicc bundle")
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("where", [".", "..", "sub/..", "sub/../.."])
def test_current_folder_and_its_parents_are_refused(tmp_path, where):
    top = tmp_path / "top"
    cwd = top / "work"
    (cwd / "sub").mkdir(parents=True)
    m, _ = small_model(cwd)
    (top / "notes.txt").write_text("keep me\n")
    before = _tree(tmp_path)
    r = run_cli("build", m.name, "-o", where, cwd=cwd)
    _refused(r, "current folder or a parent")
    assert _tree(tmp_path) == before


def test_parent_of_another_folder_is_refused(tmp_path):
    """-o X/.. names X's parent: not empty, no bundle, so refused before compiling."""
    m, _ = small_model(tmp_path)
    (tmp_path / "x").mkdir()
    before = _tree(tmp_path)
    _refused(run_cli("build", m, "-o", tmp_path / "x" / ".."), "holds no aicc bundle")
    assert _tree(tmp_path) == before


def test_file_and_symlink_are_refused(tmp_path):
    m, _ = small_model(tmp_path)
    f = tmp_path / "file.txt"
    f.write_text("data\n")
    target = tmp_path / "real"
    target.mkdir()
    link = tmp_path / "link"
    link.symlink_to(target, target_is_directory=True)
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    before = _tree(tmp_path)
    r = run_cli("build", m, "-o", f)
    assert r.returncode == 2 and f.read_text() == "data\n", r.stderr
    _refused(run_cli("build", m, "-o", link), "symbolic link")
    _refused(run_cli("build", m, "-o", dangling), "symbolic link")
    assert _tree(tmp_path) == before and not (tmp_path / "nowhere").exists()


def test_home_folder_is_refused(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    m, _ = small_model(tmp_path)
    env = dict(os.environ, HOME=str(home))
    r = subprocess.run([sys.executable, "-m", "aicc.cli", "build", str(m), "-o", str(home)],
                       capture_output=True, text=True, env=env)
    _refused(r, "home folder")
    assert list(home.iterdir()) == []
    r = subprocess.run([sys.executable, "-m", "aicc.cli", "build", str(m), "-o", "~"],
                       capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr          # "~" unexpanded is a folder named "~" here
    assert (tmp_path / "~" / "manifest.json").is_file() and list(home.iterdir()) == []


def test_root_is_refused():
    with pytest.raises(OutputError, match="root folder"):
        check_out(Path("/"))
    with pytest.raises(OutputError, match="root folder"):
        check_out(Path("/tmp/.."))


def test_rebuild_replaces_bundle_and_its_build_products(tmp_path):
    m, x = small_model(tmp_path)
    out = tmp_path / "b"
    assert run_cli("build", m, "-o", out).returncode == 0
    subprocess.run(["make", "-C", str(out)], check=True, capture_output=True)
    assert (out / "libmodel.a").is_file()
    m2, _ = small_model(tmp_path, "Sub", "sub.onnx")
    r = run_cli("build", m2, "-o", out, "--name", "other")
    assert r.returncode == 0, r.stderr
    assert not (out / "libmodel.a").exists() and not (out / "model.c").exists()
    assert (out / "other.c").is_file()
    _no_leftovers(tmp_path)


def test_bundle_with_user_files_is_refused_and_kept(tmp_path):
    m, _ = small_model(tmp_path)
    out = tmp_path / "b"
    assert run_cli("build", m, "-o", out).returncode == 0
    (out / "notes.md").write_text("mine\n")
    (out / "sub").mkdir()
    before = _tree(tmp_path)
    _refused(run_cli("build", m, "-o", out), "files aicc did not write ('notes.md', 'sub')")
    assert _tree(tmp_path) == before


def test_concurrent_builds_into_one_folder(tmp_path):
    m, x = small_model(tmp_path)
    out = tmp_path / "b"
    procs = [subprocess.Popen([sys.executable, "-m", "aicc.cli", "build", str(m), "-o", str(out)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(6)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    got = aicc.load(out).run({"x": x})["y"]
    b = onnx.numpy_helper.to_array(onnx.load(m).graph.initializer[0])
    np.testing.assert_allclose(got, np.maximum(x + b, 0), rtol=1e-6)
    _no_leftovers(tmp_path)


def test_rebuild_without_rename_exchange(tmp_path, monkeypatch):
    """Where renameat2 cannot exchange, the earlier bundle is renamed aside, then removed."""
    from aicc.bundle import outdir
    monkeypatch.setattr(outdir, "_exchange", lambda a, b: False)
    m, x = small_model(tmp_path)
    out = tmp_path / "b"
    aicc.build(m, out=out)
    (out / "libmodel.a").write_bytes(b"stale")
    aicc.build(m, out=out)
    assert not (out / "libmodel.a").exists() and (out / "manifest.json").is_file()
    b = onnx.numpy_helper.to_array(onnx.load(m).graph.initializer[0])
    np.testing.assert_allclose(aicc.load(out).run({"x": x})["y"], np.maximum(x + b, 0),
                               rtol=1e-6)
    _no_leftovers(tmp_path)
