"""The zoo's architectures (benchmarks/zoo.py): public models from torchvision, timm and
transformers built with random weights (torch.manual_seed(0) before each constructor, so
exports are reproducible), plus small front-end models written here. Each entry makes
(module, example inputs, input names, dynamic dims or None); ``dynamic`` maps an input name
to {axis: dim name} and the zoo builds those with ``--buckets``.

The packages are the ``zoo`` extra (pyproject.toml): torch, torchvision, timm, transformers,
onnxscript. None of this is imported by aicc or by the tests.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


@dataclass
class Arch:
    name: str
    family: str
    make: Callable          # () -> (module, inputs tuple, input names)
    dynamic: dict | None = None        # {input name: {axis: dim name}}
    buckets: dict = field(default_factory=dict)   # {dim name: "a,b,c"} for a dynamic build
    exporters: tuple = ("dynamo", "torchscript")


def _image(n=1, c=3, h=224, w=None, seed=1):
    import torch
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, c, h, w or h, generator=g)


def _calibrated(m, size):
    """The module with its batch norms' running statistics taken from one forward pass on a
    batch of 2 random images (a freshly built network keeps mean 0 / variance 1, which shrinks
    or blows up activations layer after layer: outputs of 1e-20 or 1e+3 measure nothing), and
    linear layers built with all-zero weights given random ones (torchvision's ViT head: a
    zero output measures no error)."""
    import torch
    for lin in m.modules():
        if isinstance(lin, torch.nn.Linear) and not torch.any(lin.weight):
            with torch.no_grad():
                torch.nn.init.normal_(lin.weight, std=lin.in_features ** -0.5)
    bns = [x for x in m.modules() if isinstance(x, torch.nn.modules.batchnorm._BatchNorm)]
    if bns:
        for bn in bns:
            bn.reset_running_stats()
            bn.momentum = None          # cumulative average: the one batch's statistics
        m.train()
        with torch.no_grad():
            m(_image(n=2, h=size, seed=2))
    return m.eval()


def _tv(name, size=224, **kw):
    def make():
        import torch
        import torchvision.models as tvm
        torch.manual_seed(0)
        m = _calibrated(getattr(tvm, name)(weights=None, **kw), size)
        return m, (_image(h=size),), ["image"]
    return make


def _tv_seg(name, size=224):
    def make():
        import torch
        import torchvision.models.segmentation as seg

        class Out(torch.nn.Module):
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, x):
                return self.m(x)["out"]
        torch.manual_seed(0)
        m = getattr(seg, name)(weights=None, weights_backbone=None, aux_loss=None)
        return _calibrated(Out(m), size), (_image(h=size),), ["image"]
    return make


def _timm(name, size=224, **kw):
    def make():
        import timm
        import torch
        torch.manual_seed(0)
        m = _calibrated(timm.create_model(name, pretrained=False, **kw), size)
        return m, (_image(h=size),), ["image"]
    return make


def _hf(kind, cfg: dict, seq=128, first=True):
    """A transformers model from a small config; the first output (last hidden state or
    logits) only."""
    def make():
        import torch
        import transformers as tr

        class First(torch.nn.Module):
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, *a):
                return self.m(*a, return_dict=False)[0]
        torch.manual_seed(0)
        config = getattr(tr, kind + "Config")(**cfg)
        model_cls = getattr(tr, {"Bert": "BertModel", "DistilBert": "DistilBertModel",
                                 "GPT2": "GPT2Model", "Roberta": "RobertaModel",
                                 "ViT": "ViTModel", "Albert": "AlbertModel",
                                 "T5": "T5EncoderModel", "Wav2Vec2": "Wav2Vec2Model",
                                 "Whisper": "WhisperModel"}[kind])
        m = model_cls(config)
        g = torch.Generator().manual_seed(1)
        if kind == "ViT":
            return First(m), (_image(h=cfg.get("image_size", 224)),), ["pixel_values"]
        if kind == "Wav2Vec2":
            return First(m), (torch.randn(1, 16000, generator=g),), ["audio"]
        ids = torch.randint(0, cfg.get("vocab_size", 1000), (1, seq), generator=g)
        return First(m), (ids,), ["input_ids"]
    return make


def _stft_cnn():
    """A small CNN over an STFT magnitude front end (audio classification)."""
    import torch

    class StftCnn(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("win", torch.hann_window(256))
            self.body = torch.nn.Sequential(
                torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(),
                torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10))

        def forward(self, x):
            s = torch.stft(x, 256, 128, window=self.win, return_complex=False, center=False)
            mag = (s[..., 0] ** 2 + s[..., 1] ** 2 + 1e-6).log()
            return self.body(mag.unsqueeze(1))
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    return StftCnn(), (torch.randn(1, 16000, generator=g),), ["audio"]


def _conv1d_kws():
    """A 1-D conv keyword spotter over MFCC-like features (dilated temporal convs)."""
    import torch
    layers, c = [], 40
    for i, d in enumerate((1, 2, 4, 8)):
        layers += [torch.nn.Conv1d(c, 64, 3, padding=d, dilation=d), torch.nn.BatchNorm1d(64),
                   torch.nn.ReLU()]
        c = 64
    torch.manual_seed(0)
    m = torch.nn.Sequential(*layers, torch.nn.AdaptiveAvgPool1d(1), torch.nn.Flatten(),
                            torch.nn.Linear(64, 12))
    g = torch.Generator().manual_seed(1)
    return m, (torch.randn(1, 40, 101, generator=g),), ["features"]


def _tv_dyn_batch():
    m, x, names = _tv("mobilenet_v2")()
    return m, x, names


SMALL_BERT = dict(vocab_size=1000, hidden_size=256, num_hidden_layers=4,
                  num_attention_heads=4, intermediate_size=1024, max_position_embeddings=256)

ARCHS = [
    Arch("resnet18", "torchvision", _tv("resnet18")),
    Arch("resnet50", "torchvision", _tv("resnet50")),
    Arch("mobilenet_v2", "torchvision", _tv("mobilenet_v2")),
    Arch("mobilenet_v3_small", "torchvision", _tv("mobilenet_v3_small")),
    Arch("mobilenet_v3_large", "torchvision", _tv("mobilenet_v3_large")),
    Arch("efficientnet_b0", "torchvision", _tv("efficientnet_b0")),
    Arch("regnet_y_400mf", "torchvision", _tv("regnet_y_400mf")),
    Arch("regnet_x_400mf", "torchvision", _tv("regnet_x_400mf")),
    Arch("shufflenet_v2_x1_0", "torchvision", _tv("shufflenet_v2_x1_0")),
    Arch("squeezenet1_1", "torchvision", _tv("squeezenet1_1")),
    Arch("densenet121", "torchvision", _tv("densenet121")),
    Arch("googlenet", "torchvision", _tv("googlenet", aux_logits=False, init_weights=True)),
    Arch("mnasnet1_0", "torchvision", _tv("mnasnet1_0")),
    Arch("convnext_tiny", "torchvision", _tv("convnext_tiny")),
    Arch("swin_t", "torchvision", _tv("swin_t")),
    Arch("vit_b_16", "torchvision", _tv("vit_b_16")),
    Arch("deeplabv3_mobilenet_v3_large", "torchvision",
         _tv_seg("deeplabv3_mobilenet_v3_large", 256)),
    Arch("lraspp_mobilenet_v3_large", "torchvision", _tv_seg("lraspp_mobilenet_v3_large", 256)),
    Arch("mobilenet_v2_dynbatch", "torchvision", _tv_dyn_batch,
         dynamic={"image": {0: "batch"}}, buckets={"batch": "1,4"}, exporters=("torchscript",)),
    Arch("repvgg_a0", "timm", _timm("repvgg_a0")),
    Arch("poolformer_s12", "timm", _timm("poolformer_s12")),
    Arch("mobilevitv2_050", "timm", _timm("mobilevitv2_050", 256)),
    Arch("efficientformer_l1", "timm", _timm("efficientformer_l1")),
    Arch("ghostnet_100", "timm", _timm("ghostnet_100")),
    Arch("deit_tiny", "timm", _timm("deit_tiny_patch16_224")),
    Arch("edgenext_xx_small", "timm", _timm("edgenext_xx_small", 256)),
    Arch("fastvit_t8", "timm", _timm("fastvit_t8", 256)),
    Arch("lcnet_050", "timm", _timm("lcnet_050")),
    Arch("mobileone_s0", "timm", _timm("mobileone_s0")),
    Arch("dla34", "timm", _timm("dla34")),
    Arch("cspresnet50", "timm", _timm("cspresnet50")),
    Arch("resnest14d", "timm", _timm("resnest14d")),
    Arch("hrnet_w18_small", "timm", _timm("hrnet_w18_small")),
    Arch("mixnet_s", "timm", _timm("mixnet_s")),
    Arch("rexnet_100", "timm", _timm("rexnet_100")),
    Arch("tinynet_a", "timm", _timm("tinynet_a", 192)),
    Arch("mobilenetv4_conv_small", "timm", _timm("mobilenetv4_conv_small")),
    Arch("convmixer_768_32", "timm", _timm("convmixer_768_32")),
    Arch("efficientvit_b0", "timm", _timm("efficientvit_b0")),
    Arch("inception_v3", "timm", _timm("inception_v3", 299)),
    Arch("xception41", "timm", _timm("xception41", 299)),
    Arch("bert_small", "transformers", _hf("Bert", SMALL_BERT)),
    Arch("bert_small_dynseq", "transformers", _hf("Bert", SMALL_BERT),
         dynamic={"input_ids": {1: "seq"}}, buckets={"seq": "64,128"},
         exporters=("torchscript",)),
    Arch("distilbert_small", "transformers",
         _hf("DistilBert", dict(vocab_size=1000, dim=256, n_layers=4, n_heads=4,
                                hidden_dim=1024, max_position_embeddings=256))),
    Arch("roberta_small", "transformers",
         _hf("Roberta", {**SMALL_BERT, "max_position_embeddings": 260})),
    Arch("albert_small", "transformers", _hf("Albert", {**SMALL_BERT, "embedding_size": 128})),
    Arch("gpt2_small", "transformers",
         _hf("GPT2", dict(vocab_size=1000, n_embd=256, n_layer=4, n_head=4, n_positions=256))),
    Arch("t5_encoder_small", "transformers",
         _hf("T5", dict(vocab_size=1000, d_model=256, d_kv=64, d_ff=1024, num_layers=4,
                        num_heads=4))),
    Arch("vit_small_hf", "transformers",
         _hf("ViT", dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                         intermediate_size=1024, image_size=224, patch_size=16))),
    Arch("wav2vec2_small", "transformers",
         _hf("Wav2Vec2", dict(hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
                              intermediate_size=1024, vocab_size=32))),
    Arch("stft_cnn", "front end", _stft_cnn),
    Arch("conv1d_kws", "front end", _conv1d_kws),
]
