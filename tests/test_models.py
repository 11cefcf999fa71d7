"""Real architectures exported from PyTorch (both exporters; tests/models/) compile for every
target and match onnxruntime within rtol 1e-4, atol 1e-5 on seeded inputs."""
import numpy as np
import onnx
import pytest

import aicc
from aicc.targets import runnable_targets
from tests.models.fixtures import list_fixtures, load_fixture
from tests.oracle import STRICT_CFLAGS, assert_close, reference

FIXTURES = [f for f in list_fixtures()]


def _id(f):
    return f"{f[0]}-{f[1]}"


@pytest.mark.parametrize("target", runnable_targets(derived=False))
@pytest.mark.parametrize("fixture", FIXTURES, ids=_id)
def test_model_matches_onnxruntime(fixture, target, tmp_path):
    name, exporter = fixture
    path = load_fixture(name, exporter, out_dir=tmp_path)
    model = onnx.load(str(path))
    rng = np.random.default_rng(0)
    inits = {i.name for i in model.graph.initializer}
    feeds = {}
    for i in model.graph.input:
        if i.name in inits:
            continue
        shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
        feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
    want = reference(model, feeds)
    out = aicc.build(path, target=target, out=tmp_path / "b")
    got = aicc.load(out, cflags=STRICT_CFLAGS).run(feeds)
    assert_close(got, want, rtol=1e-4, atol=1e-5)
