"""Print the sizes table of docs/EMBEDDED.md: the MLPerf-Tiny-class models built for each
target and measured with the target's own `size` (aicc.size.measure, what
`aicc inspect BUNDLE --size` reports).

    .venv/bin/python examples/embedded/size_table.py [-t generic arm-neon cortex-m4]

Run from the repository root (it uses tests/models for the fixtures); targets whose
toolchain is missing are left out with a note.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import aicc  # noqa: E402
from aicc.size import measure  # noqa: E402
from aicc.targets import load_target  # noqa: E402

MODELS = [("DS-CNN (KWS)", None), ("ResNet-8 (IC)", ("resnet8", "ts")),
          ("FC autoencoder (AD)", ("fc_autoencoder", "dynamo")),
          ("MobileNetV1 0.25 (VWW)", ("mobilenetv1_025", "ts"))]


def model_path(spec, tmp: Path) -> Path:
    if spec is None:
        return ROOT / "examples" / "kws_dscnn.onnx"
    from tests.models.fixtures import load_fixture
    return Path(load_fixture(*spec, out_dir=tmp))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-t", "--targets", nargs="+", default=["generic", "arm-neon", "cortex-m4"])
    a = ap.parse_args(argv)
    print("| model | target | code | rodata (weights) | data | bss | arena | flash | RAM | "
          "runtime code |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    notes = []
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        for label, spec in MODELS:
            path = model_path(spec, t)
            for target in a.targets:
                missing = load_target(target).missing_tools()
                if missing:
                    notes.append(f"{target}: {', '.join(missing)} missing")
                    continue
                b = aicc.build(path, target=target, out=t / f"{path.stem}-{target}")
                r = measure(b)
                tot, w = r["total"], r["objects"]["model_weights.o"]["rodata"]
                print(f"| {label} | {target} | {tot['code']} | {tot['rodata']} ({w}) | "
                      f"{tot['data']} | {tot['bss']} | {r['arena_bytes']} | {r['flash_bytes']} | "
                      f"{r['ram_bytes']} | {r['runtime_code_bytes']} |")
    for n in sorted(set(notes)):
        print(f"\nnot measured: {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
