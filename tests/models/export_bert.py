"""Export the tiny TorchScript BERT fixture (dyn_bert_tiny_ts.onnx): transformers' BertModel with
random weights (seed 0), 1 layer, hidden 16, 2 heads, vocabulary 50, dynamic batch and
sequence. Its attention-mask and position chains (Shape -> Range -> Gather -> Reshape ->
Expand) only settle after several rounds of folding and shape inference. Regenerate from the
repo root (transformers is only needed here):

    pip install torch==2.13.0 transformers && python tests/models/export_bert.py
"""
from pathlib import Path

import torch
from transformers import BertConfig, BertModel


class _Outputs(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, ids, mask, types):
        o = self.m(input_ids=ids, attention_mask=mask, token_type_ids=types)
        return o.last_hidden_state, o.pooler_output


def main():
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=32)
    m = _Outputs(BertModel(cfg).eval())
    ids = torch.randint(0, 50, (1, 8))
    dims = {0: "batch", 1: "seq"}
    with torch.no_grad():
        torch.onnx.export(m, (ids, torch.ones_like(ids), torch.zeros_like(ids)),
                          str(Path(__file__).parent / "dyn_bert_tiny_ts.onnx"), dynamo=False,
                          opset_version=17,
                          input_names=["input_ids", "attention_mask", "token_type_ids"],
                          output_names=["last_hidden_state", "pooler_output"],
                          dynamic_axes={"input_ids": dims, "attention_mask": dims,
                                        "token_type_ids": dims})


if __name__ == "__main__":
    main()
