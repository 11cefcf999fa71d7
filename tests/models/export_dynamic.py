"""Regenerate the dynamic-shape PyTorch fixtures (tests/models/dyn_*.onnx).

    .venv/bin/python tests/models/export_dynamic.py      # from the repo root; needs torch

Four small models in plain PyTorch (seeded), each exported with the TorchScript exporter
(opset 17, ``dynamic_axes``) and the dynamo exporter (``dynamic_shapes`` with named Dims):

* ``dyn_encoder``: token ids + attention mask [1, seq] -> a 2-layer transformer encoder
  (learned positions sliced to the length, additive mask, GELU, LayerNorm) -> hidden
  [1, seq, 32] and the first token's vector [1, 32];
* ``dyn_sdpa``: x [batch, seq, 16] + key mask [batch, seq] -> F.scaled_dot_product_attention
  (both dims dynamic);
* ``dyn_tel``: nn.TransformerEncoderLayer with a key padding mask, batch and sequence dynamic
  (dynamo only: the TorchScript exporter bakes the example's length into reshapes);
* ``dyn_lstm``: frames [1, frames, 10] (batch first) -> 2-layer LSTM -> the last frame of the
  output sequence (``out[:, -1]``) and the last layer's final state, through a Linear;
* ``dyn_cnn``: images [batch, 3, 16, 16] -> Conv/BN/ReLU/MaxPool/Conv/avg pool/Linear;
* ``dyn_fcn``: images [1, 3, h, w] -> Conv/ReLU/MaxPool/Conv/nearest upsample x2/Conv.

Every export is checked against torch at two sizes with onnxruntime. Deterministic.
"""
from __future__ import annotations

import io
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from export_torch import _clean  # noqa: E402


class Encoder(nn.Module):
    def __init__(self, vocab=60, d=32, heads=2, ffn=64, layers=2, maxpos=64):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(maxpos, d) * 0.5)
        self.heads = heads
        self.layers = nn.ModuleList()
        for _ in range(layers):
            self.layers.append(nn.ModuleDict({
                "qkv": nn.Linear(d, 3 * d), "o": nn.Linear(d, d), "ln1": nn.LayerNorm(d),
                "f1": nn.Linear(d, ffn), "f2": nn.Linear(ffn, d), "ln2": nn.LayerNorm(d)}))

    def forward(self, ids, mask):
        b, s = ids.shape
        x = self.emb(ids) + self.pos[:s]
        bias = (1.0 - mask[:, None, None, :].to(torch.float32)) * -1e4
        d = x.shape[-1]
        hd = d // self.heads
        for L in self.layers:
            q, k, v = L["qkv"](x).split(d, dim=-1)
            q = q.reshape(b, s, self.heads, hd).transpose(1, 2)
            k = k.reshape(b, s, self.heads, hd).transpose(1, 2)
            v = v.reshape(b, s, self.heads, hd).transpose(1, 2)
            a = torch.softmax(q @ k.transpose(-1, -2) / hd ** 0.5 + bias, dim=-1)
            c = (a @ v).transpose(1, 2).reshape(b, s, d)
            x = L["ln1"](x + L["o"](c))
            x = L["ln2"](x + L["f2"](F.gelu(L["f1"](x))))
        return x, x[:, 0]


class Sdpa(nn.Module):
    """Self-attention through F.scaled_dot_product_attention with a boolean key mask."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.o = nn.Linear(d, d)
        self.heads = heads

    def forward(self, x, mask):
        b, n, d = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None, None, :].bool())
        return self.o(a.transpose(1, 2).reshape(b, n, d))


class Tel(nn.Module):
    """nn.TransformerEncoderLayer (batch first) with a key padding mask. Only the dynamo
    export: the TorchScript exporter bakes the example's length into its reshapes."""

    def __init__(self, d=32):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(d, 2, 64, dropout=0.0, batch_first=True)

    def forward(self, x, mask):
        return self.layer(x, src_key_padding_mask=mask == 0)


class Lstm(nn.Module):
    def __init__(self, feat=10, hidden=16, out=5):
        super().__init__()
        self.rnn = nn.LSTM(feat, hidden, num_layers=2, batch_first=True)
        self.fc = nn.Linear(2 * hidden, out)

    def forward(self, x):
        y, (h, _) = self.rnn(x)
        return self.fc(torch.cat([y[:, -1], h[-1]], dim=-1))


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.c1(x))), 2)
        x = F.relu(self.c2(x))
        return self.fc(x.mean(dim=(2, 3)))


class Fcn(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)
        self.c3 = nn.Conv2d(8, 2, 1)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.relu(self.c2(x))
        return self.c3(F.interpolate(x, scale_factor=2.0, mode="nearest"))


def _calibrate_bn(model, x):
    model.train()
    with torch.no_grad():
        for _ in range(3):
            model(torch.randn_like(x))
    model.eval()


D = torch.export.Dim
SPECS = {
    # name: (module, example inputs, input names, output names, dynamic axes {input: {axis: dim}})
    "dyn_encoder": (Encoder, lambda: (torch.randint(0, 60, (1, 7)), torch.ones(1, 7, dtype=torch.int64)),
                    ["ids", "mask"], ["hidden", "first"], {"ids": {1: "seq"}, "mask": {1: "seq"}}),
    "dyn_sdpa": (Sdpa, lambda: (torch.randn(2, 7, 16), torch.ones(2, 7, dtype=torch.int64)),
                 ["x", "mask"], ["y"], {"x": {0: "batch", 1: "seq"}, "mask": {0: "batch", 1: "seq"}}),
    "dyn_tel": (Tel, lambda: (torch.randn(2, 7, 32), torch.ones(2, 7, dtype=torch.int64)),
                ["x", "mask"], ["y"], {"x": {0: "batch", 1: "seq"}, "mask": {0: "batch", 1: "seq"}}),
    "dyn_lstm": (Lstm, lambda: (torch.randn(1, 9, 10),), ["frames"], ["y"], {"frames": {1: "frames"}}),
    "dyn_cnn": (Cnn, lambda: (torch.randn(3, 3, 16, 16),), ["images"], ["logits"],
                {"images": {0: "batch"}}),
    "dyn_fcn": (Fcn, lambda: (torch.randn(1, 3, 12, 10),), ["image"], ["mask"],
                {"image": {2: "h", 3: "w"}}),
}
MAX = {"seq": 64, "frames": 64, "batch": 16, "h": 64, "w": 64}


def export(name, exporter):
    cls, make, ins, outs, dyn = SPECS[name]
    torch.manual_seed(sum(map(ord, name)))
    model = cls().eval()
    args = make()
    if name == "dyn_cnn":
        _calibrate_bn(model, args[0])
    if exporter == "ts":
        buf = io.BytesIO()
        torch.onnx.export(model, args, buf, dynamo=False, opset_version=17, input_names=ins,
                          output_names=outs, dynamic_axes=dyn, do_constant_folding=True)
        m = onnx.load_from_string(buf.getvalue())
    else:
        shapes = tuple({ax: D(dn, min=2, max=MAX[dn]) for ax, dn in dyn[i].items()} for i in ins)
        dims = {}
        shapes = tuple({ax: dims.setdefault(d.__name__, d) for ax, d in s.items()} for s in shapes)
        with tempfile.TemporaryDirectory() as td:
            p = os.path.join(td, "m.onnx")
            torch.onnx.export(model, args, p, dynamo=True, external_data=False, input_names=ins,
                              output_names=outs, dynamic_shapes=shapes, optimize=True,
                              verify=False, report=False)
            m = onnx.load(p, load_external_data=True)
    m = _clean(m)
    onnx.checker.check_model(m)
    # check against torch at a second size
    for scale in (1, 2):
        a2 = []
        for i, t in zip(ins, args):
            shape = list(t.shape)
            for ax in dyn[i]:
                shape[ax] = max(2, shape[ax] * scale - 1)
            a2.append(torch.randint(0, 60, shape) if t.dtype == torch.int64 and i == "ids"
                      else torch.ones(shape, dtype=t.dtype) if t.dtype == torch.int64
                      else torch.randn(shape))
        with torch.no_grad():
            want = model(*a2)
        want = want if isinstance(want, tuple) else (want,)
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        got = sess.run(None, {i: t.numpy() for i, t in zip(ins, a2)})
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-3, atol=1e-4)
    return m


def main():
    for name in SPECS:
        for exporter in ("dynamo",) if name == "dyn_tel" else ("ts", "dynamo"):
            m = export(name, exporter)
            path = HERE / f"{name}_{exporter}.onnx"
            onnx.save(m, path)
            dims = [[d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]
                    for i in m.graph.input]
            print(f"{path.name}: {path.stat().st_size} bytes, inputs {dims}")


if __name__ == "__main__":
    main()
