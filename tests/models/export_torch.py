"""Regenerate the aicc test-model fixtures.

    python tests/models/export_torch.py            # from the repo root

Needs torch (CPU) and onnxscript in addition to onnx/onnxruntime/numpy; torch
is only needed here, never at test time.  The script:

* defines a set of small/standard models in plain PyTorch (no torchvision),
  seeded with ``torch.manual_seed`` (seed = crc32 of the model name),
* gives every BatchNorm realistic but non-trivial statistics: running stats
  are first calibrated on a few random batches (so activations stay well
  scaled), then running_var is scaled by U(0.5, 1.5), running_mean shifted by
  0.1*N(0,1)*sqrt(var), weight ~ U(0.5, 1.5) and bias ~ 0.1*N(0,1), so BN
  folding is really exercised,
* exports each model with the TorchScript exporter (opset 13) to
  ``<name>_ts.onnx`` and with the dynamo exporter (its default opset) to
  ``<name>_dynamo.onnx``, static shapes, input "input" / output "output".
  Both exporters fold Conv+BatchNorm themselves, so models with BatchNorm2d
  are also exported as ``<name>_tsbn.onnx``: TorchScript, opset 13,
  training=PRESERVE (model still in eval mode), which keeps the
  BatchNormalization nodes for the compiler's own BN folding,
* checks every export with onnx.checker and compares onnxruntime against
  torch,
* writes files over 1 MB as structure-only ``<name>_<exporter>.struct.onnx``
  (see fixtures.py: per-output-channel fill statistics for weights,
  per-tensor for 1-D tensors), materializes them again, checks that
  onnxruntime gives finite outputs and prints the output range next to the
  range of the real (unstripped) export on the same seeded input,
* rewrites README.md with a table of the fixtures and of those ranges.

The output is deterministic: rerunning produces byte-identical files.
"""
from __future__ import annotations

import collections
import hashlib
import io
import os
import sys
import tempfile
import traceback
import zlib
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import fixtures  # noqa: E402

SIZE_LIMIT = 1_000_000  # bytes; bigger exports are written structure-only
TS_OPSET = 13


# ==========================================================================
# Models
# ==========================================================================

def conv_bn(cin, cout, k, s=1, p=0, groups=1, act="relu"):
    layers = [nn.Conv2d(cin, cout, k, s, p, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    if act == "relu":
        layers.append(nn.ReLU(inplace=True))
    elif act == "relu6":
        layers.append(nn.ReLU6(inplace=True))
    return nn.Sequential(*layers)


class DSCNN(nn.Module):
    """MLPerf Tiny keyword spotting DS-CNN (small), input [1,1,49,10]."""

    def __init__(self, n_classes=12, ch=64):
        super().__init__()
        # TF 'same' padding with stride 2 gives 25x5; symmetric (5,1) gives the same shape.
        self.conv1 = nn.Conv2d(1, ch, (10, 4), stride=(2, 2), padding=(5, 1), bias=True)
        self.bn1 = nn.BatchNorm2d(ch)
        self.relu = nn.ReLU()
        self.drop1 = nn.Dropout(0.2)
        blocks = []
        for _ in range(4):
            blocks += [
                nn.Conv2d(ch, ch, 3, 1, 1, groups=ch, bias=True), nn.BatchNorm2d(ch), nn.ReLU(),
                nn.Conv2d(ch, ch, 1, bias=True), nn.BatchNorm2d(ch), nn.ReLU(),
            ]
        self.blocks = nn.Sequential(*blocks)
        self.drop2 = nn.Dropout(0.4)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(ch, n_classes)

    def forward(self, x):
        x = self.drop1(self.relu(self.bn1(self.conv1(x))))
        x = self.drop2(self.blocks(x))
        x = torch.flatten(self.pool(x), 1)
        return self.fc(x)


class ResNet8Stack(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Conv2d(cin, cout, 1, stride) if (stride != 1 or cin != cout) else None

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        s = x if self.shortcut is None else self.shortcut(x)
        return F.relu(y + s)


class ResNet8(nn.Module):
    """MLPerf Tiny image classification ResNet-8 (CIFAR-10), input [1,3,32,32]."""

    def __init__(self, n_classes=10):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, 1, 1)
        self.bn = nn.BatchNorm2d(16)
        self.stack1 = ResNet8Stack(16, 16, 1)
        self.stack2 = ResNet8Stack(16, 32, 2)
        self.stack3 = ResNet8Stack(32, 64, 2)
        self.pool = nn.AvgPool2d(8)  # Keras AveragePooling2D(pool_size=8)
        self.fc = nn.Linear(64, n_classes)

    def forward(self, x):
        x = F.relu(self.bn(self.conv(x)))
        x = self.stack3(self.stack2(self.stack1(x)))
        x = torch.flatten(self.pool(x), 1)
        return self.fc(x)


class MobileNetV1(nn.Module):
    """MobileNetV1 (alpha 0.25) for visual wake words, input [1,3,96,96]."""

    def __init__(self, alpha=0.25, n_classes=2):
        super().__init__()
        c = lambda n: int(n * alpha)  # noqa: E731
        cfg = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2),
               (512, 1), (512, 1), (512, 1), (512, 1), (512, 1), (1024, 2), (1024, 1)]
        layers = [conv_bn(3, c(32), 3, 2, 1, act="relu6")]
        cin = c(32)
        for cout, s in cfg:
            layers.append(conv_bn(cin, cin, 3, s, 1, groups=cin, act="relu6"))
            layers.append(conv_bn(cin, c(cout), 1, act="relu6"))
            cin = c(cout)
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.dropout = nn.Dropout(0.1)
        self.fc = nn.Linear(cin, n_classes)

    def forward(self, x):
        x = torch.flatten(self.pool(self.features(x)), 1)
        return self.fc(self.dropout(x))


class FCAutoencoder(nn.Module):
    """MLPerf Tiny anomaly detection (ToyADMOS) dense autoencoder, input [1,640]."""

    def __init__(self):
        super().__init__()
        dims = [640, 128, 128, 128, 128, 8, 128, 128, 128, 128]
        layers = []
        for a, b in zip(dims[:-1], dims[1:]):
            layers += [nn.Linear(a, b), nn.BatchNorm1d(b), nn.ReLU()]
        layers.append(nn.Linear(128, 640))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = cin * expand
        self.use_res = stride == 1 and cin == cout
        layers = []
        if expand != 1:
            layers.append(conv_bn(cin, hidden, 1, act="relu6"))
        layers += [
            conv_bn(hidden, hidden, 3, stride, 1, groups=hidden, act="relu6"),
            conv_bn(hidden, cout, 1, act=None),
        ]
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.conv(x) if self.use_res else self.conv(x)


class MobileNetV2(nn.Module):
    """Standard MobileNetV2 (width 1.0), input [1,3,224,224], 1000 classes."""

    def __init__(self, n_classes=1000):
        super().__init__()
        cfg = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
               (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]
        layers = [conv_bn(3, 32, 3, 2, 1, act="relu6")]
        cin = 32
        for t, c, n, s in cfg:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers.append(conv_bn(cin, 1280, 1, act="relu6"))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, n_classes))

    def forward(self, x):
        x = torch.flatten(self.pool(self.features(x)), 1)
        return self.classifier(x)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        s = x if self.downsample is None else self.downsample(x)
        return F.relu(y + s)


class ResNet18(nn.Module):
    """Standard ResNet-18, input [1,3,224,224], 1000 classes."""

    def __init__(self, n_classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        layers, cin = [], 64
        for cout, s in [(64, 1), (128, 2), (256, 2), (512, 2)]:
            layers.append(nn.Sequential(BasicBlock(cin, cout, s), BasicBlock(cout, cout, 1)))
            cin = cout
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, n_classes)

    def forward(self, x):
        x = self.maxpool(F.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def double_conv(cin, cout):
    return nn.Sequential(conv_bn(cin, cout, 3, 1, 1), conv_bn(cout, cout, 3, 1, 1))


class UNetSmall(nn.Module):
    """Small UNet, input [1,3,64,64], 2 output classes (sigmoid).

    Decoder levels use three upsampling styles: ConvTranspose2d(k=2, s=2),
    nn.Upsample(bilinear, align_corners=False) + conv, F.interpolate(nearest) + conv.
    """

    def __init__(self, cin=3, n_classes=2):
        super().__init__()
        self.enc1 = double_conv(cin, 16)
        self.enc2 = double_conv(16, 32)
        self.enc3 = double_conv(32, 64)
        self.pool = nn.MaxPool2d(2)
        self.bottleneck = double_conv(64, 128)
        self.up3 = nn.ConvTranspose2d(128, 64, 2, 2)
        self.dec3 = double_conv(128, 64)
        self.up2 = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.up2_conv = nn.Conv2d(64, 32, 3, 1, 1)
        self.dec2 = double_conv(64, 32)
        self.up1_conv = nn.Conv2d(32, 16, 3, 1, 1)
        self.dec1 = double_conv(32, 16)
        self.head = nn.Conv2d(16, n_classes, 1)

    def forward(self, x):
        e1 = self.enc1(x)                       # 16 x 64 x 64
        e2 = self.enc2(self.pool(e1))           # 32 x 32 x 32
        e3 = self.enc3(self.pool(e2))           # 64 x 16 x 16
        b = self.bottleneck(self.pool(e3))      # 128 x 8 x 8
        d3 = self.dec3(torch.cat([self.up3(b), e3], dim=1))
        d2 = self.dec2(torch.cat([self.up2_conv(self.up2(d3)), e2], dim=1))
        u1 = F.interpolate(d2, scale_factor=2, mode="nearest")
        d1 = self.dec1(torch.cat([self.up1_conv(u1), e1], dim=1))
        return torch.sigmoid(self.head(d1))


class MLPGeluLN(nn.Module):
    """Tiny transformer-style MLP block, input [2,16,32]."""

    def __init__(self, d=32, hidden=64):
        super().__init__()
        self.fc1 = nn.Linear(d, hidden)
        self.act = nn.GELU()  # exact (erf)
        self.fc2 = nn.Linear(hidden, d)
        self.ln = nn.LayerNorm(d)

    def forward(self, x):
        y = self.ln(x + self.fc2(self.act(self.fc1(x))))
        return torch.softmax(y, dim=-1)


MODELS = {
    # name: (constructor, input shape)
    "dscnn": (DSCNN, (1, 1, 49, 10)),
    "resnet8": (ResNet8, (1, 3, 32, 32)),
    "mobilenetv1_025": (MobileNetV1, (1, 3, 96, 96)),
    "fc_autoencoder": (FCAutoencoder, (1, 640)),
    "mobilenetv2": (MobileNetV2, (1, 3, 224, 224)),
    "resnet18": (ResNet18, (1, 3, 224, 224)),
    "unet_small": (UNetSmall, (1, 3, 64, 64)),
    "mlp_gelu_ln": (MLPGeluLN, (2, 16, 32)),
}


# ==========================================================================
# Building
# ==========================================================================

def _seed(name: str) -> int:
    return zlib.crc32(name.encode()) & 0x7FFFFFFF


def build(name: str) -> tuple[nn.Module, torch.Tensor]:
    ctor, shape = MODELS[name]
    torch.manual_seed(_seed(name))
    model = ctor()
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if bns:
        # 1) calibrate running stats on random data (cumulative average)
        for m in bns:
            m.reset_running_stats()
            m.momentum = None
        model.train()
        calib_shape = (max(8, shape[0]),) + tuple(shape[1:]) if len(shape) == 2 else (2,) + tuple(shape[1:])
        with torch.no_grad():
            for _ in range(2):
                model(torch.randn(calib_shape))
        # 2) perturb so the stats are not "perfect" and BN folding matters
        with torch.no_grad():
            for m in bns:
                c = m.num_features
                m.running_var.mul_(torch.empty(c).uniform_(0.5, 1.5))
                m.running_mean.add_(torch.randn(c) * 0.1 * m.running_var.sqrt())
                m.weight.copy_(torch.empty(c).uniform_(0.5, 1.5))
                m.bias.copy_(torch.randn(c) * 0.1)
                m.momentum = 0.1
    for m in model.modules():
        if isinstance(m, nn.LayerNorm):
            with torch.no_grad():
                m.weight.copy_(torch.empty(m.normalized_shape).uniform_(0.5, 1.5))
                m.bias.copy_(torch.randn(m.normalized_shape) * 0.1)
    model.eval()
    x = torch.randn(shape)
    return model, x


# ==========================================================================
# Exporting
# ==========================================================================

def _clean(model: onnx.ModelProto) -> onnx.ModelProto:
    """Drop per-node debug metadata (stack traces, file paths) for small,
    machine-independent files."""

    def clean_graph(g):
        g.doc_string = ""
        del g.metadata_props[:]
        for n in g.node:
            n.doc_string = ""
            del n.metadata_props[:]
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    clean_graph(a.g)
                elif a.type == onnx.AttributeProto.GRAPHS:
                    for sg in a.graphs:
                        clean_graph(sg)
        for vi in list(g.input) + list(g.output) + list(g.value_info):
            vi.doc_string = ""
            del vi.metadata_props[:]
        for t in g.initializer:
            del t.metadata_props[:]

    clean_graph(model.graph)
    for f in model.functions:
        for n in f.node:
            n.doc_string = ""
            del n.metadata_props[:]
    model.doc_string = ""
    del model.metadata_props[:]
    return model


def export_ts(model, x) -> onnx.ModelProto:
    buf = io.BytesIO()
    torch.onnx.export(model, (x,), buf, dynamo=False, opset_version=TS_OPSET,
                      input_names=["input"], output_names=["output"],
                      do_constant_folding=True)
    return onnx.load_from_string(buf.getvalue())


def export_dynamo(model, x) -> onnx.ModelProto:
    with tempfile.TemporaryDirectory() as td:
        p = os.path.join(td, "m.onnx")
        torch.onnx.export(model, (x,), p, dynamo=True, external_data=False,
                          input_names=["input"], output_names=["output"],
                          optimize=True, verify=False, report=False)
        return onnx.load(p, load_external_data=True)


def export_tsbn(model, x) -> onnx.ModelProto:
    """TorchScript exporter with training=PRESERVE (model still in eval mode):
    skips the exporter's Conv+BN fusion, so BatchNormalization nodes stay."""
    buf = io.BytesIO()
    torch.onnx.export(model, (x,), buf, dynamo=False, opset_version=TS_OPSET,
                      input_names=["input"], output_names=["output"],
                      training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False)
    return onnx.load_from_string(buf.getvalue())


EXPORTERS = {"ts": export_ts, "dynamo": export_dynamo, "tsbn": export_tsbn}


def wants(exp: str, model: nn.Module) -> bool:
    # tsbn only where the ts/dynamo exporters would fold BN away (Conv+BN2d)
    return exp != "tsbn" or any(isinstance(m, nn.BatchNorm2d) for m in model.modules())


def run_ort(model_or_bytes, x: np.ndarray) -> np.ndarray:
    data = model_or_bytes if isinstance(model_or_bytes, bytes) else model_or_bytes.SerializeToString()
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})[0]


def op_counts(model: onnx.ModelProto) -> collections.Counter:
    c = collections.Counter()

    def walk(g):
        for n in g.node:
            c[n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}::{n.op_type}"] += 1
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g)

    walk(model.graph)
    return c


def opset_of(model: onnx.ModelProto) -> int:
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


def main() -> int:
    torch.set_num_threads(1)  # deterministic reductions during BN calibration
    only = set(sys.argv[1:])
    rows, failures = [], []
    for f in HERE.glob("*.onnx"):
        if not only or any(f.name.startswith(n + "_") for n in only):
            f.unlink()
    for name, (_, shape) in MODELS.items():
        if only and name not in only:
            continue
        model, x = build(name)
        with torch.no_grad():
            ref = model(x).numpy()
        for exp, fn in EXPORTERS.items():
            if not wants(exp, model):
                continue
            tag = f"{name}_{exp}"
            try:
                m = _clean(fn(model, x))
                onnx.checker.check_model(m, full_check=True)
                got = run_ort(m, x.numpy())
                err = float(np.abs(got - ref).max())
                if not err < 1e-3 * max(1.0, float(np.abs(ref).max())):
                    raise RuntimeError(f"onnxruntime disagrees with torch: max abs err {err}")
            except Exception as e:  # record and go on
                msg = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
                print(f"[FAIL] {tag}: {msg}")
                traceback.print_exc(limit=3)
                failures.append((tag, msg))
                continue
            data = m.SerializeToString()
            full_size = len(data)
            if full_size > SIZE_LIMIT:
                sm = fixtures.strip_model(m)
                data = sm.SerializeToString()
                out = HERE / f"{tag}{fixtures.STRUCT_SUFFIX}"
                kind = "structure-only"
            else:
                out = HERE / f"{tag}.onnx"
                kind = "complete"
            out.write_bytes(data)
            # round trip through the fixtures API
            mm = fixtures.materialize(out)
            onnx.checker.check_model(mm)
            rng = np.random.default_rng(_seed(name))
            xin = rng.standard_normal(shape).astype(np.float32)
            y = run_ort(mm, xin)
            if not np.isfinite(y).all():
                raise RuntimeError(f"{tag}: non-finite outputs after materialize")
            y_real = run_ort(m, xin)  # the real export on the same input
            print(f"[ok] {out.name:36s} {kind:14s} opset {opset_of(m):2d} "
                  f"{len(data)/1024:8.1f} KiB (full {full_size/1024:8.1f} KiB) "
                  f"torch-err {err:.2e}  out{list(y.shape)} range [{y.min():.4g}, {y.max():.4g}] std {y.std():.4g}"
                  + ("" if kind == "complete" else
                     f"  (real: range [{y_real.min():.4g}, {y_real.max():.4g}] std {y_real.std():.4g})"))
            rows.append(dict(name=name, exporter=exp, file=out.name, opset=opset_of(m),
                             shape=list(shape), ops=op_counts(m), size=len(data),
                             full_size=full_size, kind=kind,
                             real_range=(float(y_real.min()), float(y_real.max()), float(y_real.std())),
                             mat_range=(float(y.min()), float(y.max()), float(y.std())),
                             sha=hashlib.sha256(data).hexdigest()[:12]))
    if not only:
        write_readme(rows, failures)
    print(f"\n{len(rows)} fixtures written, {len(failures)} export failures")
    total = sum(r["size"] for r in rows)
    print(f"total size {total/1e6:.2f} MB")
    return 0


def write_readme(rows, failures):
    L = []
    L.append("# Test-model fixtures\n")
    L.append("ONNX models used by the aicc tests. Generated by `export_torch.py` (plain PyTorch, "
             "no torchvision, seeded, eval mode, BatchNorm statistics/affine randomized so BN "
             "folding is exercised). Regenerate from the repo root with:\n")
    L.append("```sh\n.venv/bin/pip install torch==2.13.0 onnxscript   # only needed to regenerate\n"
             ".venv/bin/python tests/models/export_torch.py\n```\n")
    L.append("The script is deterministic (rerunning gives byte-identical files). "
             "It rewrites this README.\n")
    L.append("## Using them\n")
    L.append("```python\nfrom tests.models.fixtures import load_fixture, list_fixtures\n"
             "path = load_fixture(\"resnet18\", \"dynamo\")   # path to a complete, runnable .onnx\n```\n")
    L.append("Exports over 1 MB are committed *structure-only* (`*.struct.onnx`): each float "
             "tensor with more than 64 elements has its data removed and a JSON fill recipe "
             "in its `doc_string`, with statistics taken from the real values and "
             "`seed = crc32(tensor name)`. `fixtures.materialize()` / `load_fixture()` fill them "
             "(float32) as follows:\n")
    L.append("- 1-D tensors (biases, BatchNormalization parameters): per-tensor "
             "`{\"aicc_fill\": \"normal\", \"seed\", \"mean\", \"std\", \"min\", \"max\"}`, "
             "filled with `np.random.default_rng(seed).normal(mean, std, dims).clip(min, max)`.")
    L.append("- Tensors with ndim >= 2 (Conv/ConvTranspose/Gemm/MatMul weights): per-output-channel "
             "`{\"aicc_fill\": \"normal_per_axis\", \"seed\", \"axis\", \"mean\": [...], \"std\": [...], "
             "\"min\": [...], \"max\": [...]}` with one entry (7 significant digits) per index `i` of "
             "`axis`; `z = np.random.default_rng(seed).standard_normal(dims)` is standardized per "
             "slice along `axis` (sample mean 0, std 1) and slice `i` is `mean[i] + std[i] * z` "
             "clipped to `[min[i], max[i]]`, so each slice has exactly its recorded mean and std "
             "(an exact mean matters: otherwise the folded biases stop cancelling the channel "
             "means and activations grow with depth). `axis` is the output-channel "
             "axis of the consuming node: 0 for Conv `W` [Cout, Cin/g, k...] and Gemm `B` with "
             "transB=1, 1 for ConvTranspose `W` [Cin, Cout/g, k...] and Gemm `B` with transB=0, "
             "last for MatMul `B`, else 0. This keeps the per-channel scale and mean that Conv+BN "
             "folding bakes into the weights, so activations and outputs keep roughly the magnitude of the "
             "real model (see the table below).\n")
    L.append("Outputs of materialized models are finite and realistically scaled but not those of "
             "the exported torch model. Complete fixtures are bit-exact exports; "
             "torch outputs for them matched onnxruntime at export time. "
             "Structure-only files do not pass `onnx.checker` or load in onnxruntime until "
             "materialized.\n")
    L.append("Exporters: `ts` = TorchScript exporter (`torch.onnx.export(..., dynamo=False, "
             f"opset_version={TS_OPSET})`, which folds Conv+BN in eval mode); `dynamo` = "
             "`torch.onnx.export(..., dynamo=True)` with its default opset and onnxscript "
             "optimization; `tsbn` = TorchScript exporter, opset 13, with `training=TrainingMode.PRESERVE` (model in eval mode) so Conv+BatchNormalization stays unfolded (only for models with BatchNorm2d, since both other exporters fold it away). Input is named `input`, output `output`; static shapes. "
             f"Versions: torch {torch.__version__.split('+')[0]}, onnx {onnx.__version__}.\n")
    L.append("## Fixtures\n")
    L.append("| model | exporter | file | opset | input shape | size | kind | op types (count) |")
    L.append("|---|---|---|---|---|---|---|---|")
    for r in rows:
        ops = ", ".join(f"{k} {v}" for k, v in sorted(r["ops"].items()))
        size = f"{r['size']/1024:.1f} KiB"
        if r["kind"] != "complete":
            size += f" (full {r['full_size']/1e6:.1f} MB)"
        L.append(f"| {r['name']} | {r['exporter']} | `{r['file']}` | {r['opset']} | "
                 f"{'x'.join(map(str, r['shape']))} | {size} | {r['kind']} | {ops} |")
    L.append("")
    struct_rows = [r for r in rows if r["kind"] != "complete"]
    if struct_rows:
        L.append("Output range (min, max, std) under onnxruntime for a seeded standard-normal input "
                 "(`np.random.default_rng(crc32(model name)).standard_normal(shape)`): the real "
                 "export vs the materialized structure-only file.\n")
        L.append("| file | real export | materialized |")
        L.append("|---|---|---|")
        fmt = lambda t: f"[{t[0]:.3g}, {t[1]:.3g}], std {t[2]:.3g}"  # noqa: E731
        for r in struct_rows:
            L.append(f"| `{r['file']}` | {fmt(r['real_range'])} | {fmt(r['mat_range'])} |")
        L.append("")
    for exp in EXPORTERS:
        allops = sorted({k for r in rows if r["exporter"] == exp for k in r["ops"]})
        L.append(f"All op types, `{exp}`: {', '.join(allops)}\n")
    L.append("## Exporter failures\n")
    if failures:
        for tag, msg in failures:
            L.append(f"- `{tag}`: {msg}")
    else:
        L.append("None: every model exported with every exporter.")
    L.append("")
    (HERE / "README.md").write_text("\n".join(L))


if __name__ == "__main__":
    sys.exit(main())
