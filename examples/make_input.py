"""Write a seeded random inputs.npz for a model: python examples/make_input.py MODEL OUT.npz"""
import sys

import numpy as np
import onnx
from onnx import helper

model = onnx.load(sys.argv[1])
inits = {i.name for i in model.graph.initializer}
rng = np.random.default_rng(0)
feeds = {}
for i in model.graph.input:
    if i.name in inits:
        continue
    tt = i.type.tensor_type
    shape = [d.dim_value for d in tt.shape.dim]
    feeds[i.name] = rng.standard_normal(shape).astype(helper.tensor_dtype_to_np_dtype(tt.elem_type))
np.savez(sys.argv[2], **feeds)
print(f"wrote {sys.argv[2]}: " + ", ".join(f"{k} {list(v.shape)}" for k, v in feeds.items()))
