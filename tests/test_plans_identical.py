"""A no-reuse memory plan and the optimized plan (views, in-place steps, search planner,
memory-aware order) give bit-identical outputs on real models: sharing memory never changes
a result."""
import numpy as np
import onnx
import pytest

import aicc
from tests.models.fixtures import load_fixture
from tests.oracle import STRICT_CFLAGS

NO_REUSE = """
memory: {planner: no-reuse, inplace: false}
pipeline: [fold-constants, infer-shapes, remove-identity, eliminate-dead-nodes, upcast-half,
           fold-batchnorm, fuse-bias, fuse-activation, eliminate-dead-nodes, materialize-outputs]
"""


@pytest.mark.parametrize("name,exporter", [("mobilenetv2", "dynamo"), ("unet_small", "ts"),
                                           ("resnet8", "tsbn"), ("mlp_gelu_ln", "dynamo")])
def test_no_reuse_and_optimized_plans_agree_bitwise(name, exporter, tmp_path):
    path = load_fixture(name, exporter, out_dir=tmp_path)
    cfg = tmp_path / "noreuse.yaml"
    cfg.write_text(NO_REUSE)
    m = onnx.load(str(path))
    shape = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
    feeds = {m.graph.input[0].name: np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
    a = aicc.load(aicc.build(path, out=tmp_path / "opt"), cflags=STRICT_CFLAGS)
    b = aicc.load(aicc.build(path, out=tmp_path / "flat", config=cfg), cflags=STRICT_CFLAGS)
    assert b.manifest["arena_bytes"] > a.manifest["arena_bytes"]
    ra, rb = a.run(feeds), b.run(feeds)
    for k in ra:
        assert ra[k].tobytes() == rb[k].tobytes(), k
