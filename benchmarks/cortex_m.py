"""The MLPerf Tiny models on the Cortex-M targets: executed instructions per inference under
the target's emulated board (QEMU TCG plugin: exact, not time), code, read-only data, weights
and arena, float32 and int8, and for int8 the ratio to CMSIS-NN's counts.

    python -m benchmarks.cortex_m [-t cortex-m4 ...] [--write]

Models: the float32 fixtures (tests/models, the dynamo exports) and the same quantized by
onnxruntime's static quantizer in QDQ form (per-channel int8 weights, int8 activations,
calibrated on 8 seeded random inputs: benchmarks/models.py). Every bundle's outputs are
checked against onnxruntime on a seeded input: the largest absolute difference, and whether
it is within aicc validate's default tolerance (int8 models differ where onnxruntime's
float32 rounding of a requantization crosses a half-integer: docs/EMBEDDED.md). ``--write`` puts the table in docs/EMBEDDED.md (the ``bench:cortex-m`` section).
"""
from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = [("DS-CNN (KWS)", "dscnn"), ("ResNet-8 (IC)", "resnet8"),
          ("MobileNetV1 0.25 (VWW)", "mobilenetv1_025"), ("FC autoencoder (AD)", "fc_autoencoder")]
# CMSIS-NN's s8 kernels on the same layers, same board, plugin and flags (the build)
CMSIS_NN = {"dscnn": 7.70e6, "resnet8": 29.83e6, "mobilenetv1_025": 24.10e6,
            "fc_autoencoder": 0.58e6}
TARGETS = ["cortex-m4", "cortex-m7", "cortex-m55"]


def quantized_params(model: Path) -> tuple:
    """(bytes of the int8 weight tensors, bytes of their per-channel parameters) of a QDQ
    model: the weights are the int8 initializers of rank >= 2; the per-channel parameters
    are the int32 biases and the scales and zero points of those weights' DequantizeLinear."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    m = onnx.load(str(model))
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    weights = {n for n, a in inits.items() if a.dtype == np.int8 and a.ndim >= 2}
    params = {n for n, a in inits.items() if a.dtype == np.int32}
    for node in m.graph.node:
        if node.op_type == "DequantizeLinear" and node.input[0] in weights:
            params.update(x for x in node.input[1:] if x in inits)
    return (sum(inits[n].nbytes for n in weights), sum(inits[n].nbytes for n in params))


def row(model: Path, target: str, tmp: Path) -> dict:
    import aicc
    from aicc.runner import open_bundle
    from aicc.size import measure
    from aicc.validate import DEFAULT_ATOL, DEFAULT_RTOL, compare, random_inputs, reference_outputs
    out = aicc.build(model, target=target, out=tmp / f"{model.stem}.{target}")
    b = open_bundle(out)
    feeds = random_inputs(b.inputs, 0)
    c = b.counts(feeds)
    got = b.run(feeds)
    want, _ = reference_outputs(model, feeds)
    cmp = compare(got, want, DEFAULT_RTOL, DEFAULT_ATOL, scaled=True)
    s = measure(out)
    return {"instructions": c["instructions"], "code": s["total"]["code"],
            "rodata": s["total"]["rodata"],
            "weights": int(json.loads((out / "manifest.json").read_text())["weights_bytes"]),
            "arena": s["arena_bytes"], "match": all(x.ok for x in cmp),
            "max_abs": max(x.max_abs for x in cmp), "cosine": min(x.cosine for x in cmp)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-t", "--targets", nargs="*", default=None)
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args(argv)
    from aicc.targets import load_target
    from .models import fixture, quantized_qdq
    targets = []
    for t in a.targets or TARGETS:
        try:
            tg = load_target(t)
        except Exception:  # noqa: BLE001 - a target this checkout does not have
            continue
        if not tg.missing_tools():
            targets.append(t)
    rows = []
    with tempfile.TemporaryDirectory(prefix="aicc-cm-") as d:
        tmp = Path(d)
        for label, name in MODELS:
            f32 = fixture(name, "dynamo", tmp)
            i8 = quantized_qdq(f32, tmp / f"{name}_int8.onnx", per_channel=True,
                               activations="int8")
            for kind, path in (("int8", i8), ("float32", f32)):
                for t in targets:
                    r = row(path, t, tmp)
                    r.update(model=label, name=name, kind=kind, target=t)
                    if kind == "int8":
                        r["int8_weights"], r["per_channel"] = quantized_params(path)
                    print(r, flush=True)
                    rows.append(r)
    text = ["Executed instructions per inference under each target's board in QEMU (the TCG "
            "plugin: exact counts, not time), and sizes in bytes (code and read-only data of "
            "model.o + aicc_rt.o by the target's `size`; weights: the weights image; arena: "
            "the one caller-owned buffer). int8: per-channel int8 weights, int8 activations "
            "(onnxruntime's QDQ quantizer); CMSIS-NN: its s8 kernels (DSP extension) on the same "
            "layers, Cortex-M4 board, same flags; the cortex-m7 and cortex-m55 rows divide by "
            "the same counts (not by CMSIS-NN's own builds for those cores). int8 weights: "
            "the model's int8 weight tensors; per-channel: their int32 biases, scales and "
            "zero points in the model; / int8 w: weights image / int8 weights. "
            "`python -m benchmarks.cortex_m --write`.", "",
            "| model | type | target | instructions | / CMSIS-NN | code | rodata | weights | "
            "int8 weights | per-channel | / int8 w | arena | max abs diff vs onnxruntime |",
            "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        q = r["kind"] == "int8"
        ratio = f"{r['instructions'] / CMSIS_NN[r['name']]:.2f}" if q else ""
        w8 = (f"{r['int8_weights']} | {r['per_channel']} | "
              f"{r['weights'] / r['int8_weights']:.2f}" if q else " | | ")
        text.append(f"| {r['model']} | {r['kind']} | {r['target']} | "
                    f"{r['instructions'] / 1e6:.2f}M | {ratio} | {r['code']} | {r['rodata']} | "
                    f"{r['weights']} | {w8} | {r['arena']} | {r['max_abs']:.2g}"
                    f"{'' if r['match'] else ' (beyond validate tolerance)'} |")
    section = "\n".join(text)
    print(section)
    if a.write:
        from .run import write_section
        write_section(ROOT / "docs" / "EMBEDDED.md", "cortex-m", section)
    return 0 if all(r["match"] for r in rows if r["kind"] == "float32") else 1


if __name__ == "__main__":
    raise SystemExit(main())
