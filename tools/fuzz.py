"""Fuzz the compiler front to back: arbitrary bytes and mutated valid models go into
aicc.build (and the bundle into the C compiler). Any outcome other than a bundle that
compiles or an AiccError is a crash; each crash is saved to tests/fuzz_corpus/ and becomes a
regression test (tests/test_fuzz_corpus.py).

    python -m tools.fuzz --seconds 60          # make fuzz (FUZZ_SECONDS=...)

Cases run in a worker process that writes each case to disk before trying it, so a hard
crash (a segfault in a native library) is caught too: the parent restarts the worker.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "fuzz_corpus"
SEEDS = ([ROOT / "tests" / "golden" / d / "model.onnx" for d in ("mlp", "tiny_cnn", "seg_head")]
         + [ROOT / "tests" / "models" / f"dyn_{d}_ts.onnx" for d in ("cnn", "lstm", "fcn")])


def _mutate_structured(model, rng):
    """One random structural edit of a ModelProto (in place)."""
    import onnx
    from onnx import helper
    g = model.graph
    choice = rng.randrange(10)
    if choice == 0 and g.input:                              # dims: 0, huge, symbolic
        t = rng.choice(list(g.input)).type.tensor_type
        if t.shape.dim:
            d = rng.choice(list(t.shape.dim))
            if rng.random() < 0.3:
                d.dim_param = rng.choice(["n", "seq", "h"])
            else:
                d.dim_value = rng.choice([0, 1, 3, 1 << 20, 1 << 40, 7])
    elif choice == 1 and g.node:                             # attribute values
        n = rng.choice(list(g.node))
        if n.attribute:
            a = rng.choice(list(n.attribute))
            if a.type == onnx.AttributeProto.INT:
                a.i = rng.choice([-1, 0, 1, 2, 1 << 31, -(1 << 40), 99])
            elif a.type == onnx.AttributeProto.INTS and a.ints:
                a.ints[rng.randrange(len(a.ints))] = rng.choice([-5, 0, 1, 100, 1 << 33])
            elif a.type == onnx.AttributeProto.FLOAT:
                a.f = rng.choice([float("nan"), float("inf"), -1.0, 0.0, 1e30])
    elif choice == 2 and g.node:                             # op type swap
        n = rng.choice(list(g.node))
        n.op_type = rng.choice(["Relu", "Conv", "Gemm", "MatMul", "Reshape", "Concat", "Slice",
                                "Gather", "Softmax", "Resize", "Pad", "NoSuchOp"])
    elif choice == 3 and g.node:                             # drop or add an input
        n = rng.choice(list(g.node))
        if n.input and rng.random() < 0.5:
            del n.input[rng.randrange(len(n.input))]
        else:
            n.input.append(rng.choice([x.name for x in g.initializer] + ["", "ghost"]))
    elif choice == 4 and g.initializer:                      # initializer dims / dtype
        t = rng.choice(list(g.initializer))
        if t.dims:
            t.dims[rng.randrange(len(t.dims))] = rng.choice([0, 1, 2, 1000])
        else:
            t.data_type = rng.choice([1, 6, 7, 10, 11])
    elif choice == 5 and g.node:                             # duplicate a node (2 producers)
        g.node.append(g.node[rng.randrange(len(g.node))])
    elif choice == 6:                                        # opset
        model.opset_import[0].version = rng.choice([1, 5, 7, 9, 11, 13, 17, 21, 25, 99])
    elif choice == 7 and g.node:                             # rename an output (dangling)
        n = rng.choice(list(g.node))
        if n.output:
            n.output[0] = rng.choice(["ZQX*/", "", n.input[0] if n.input else "q"])
    elif choice == 8 and g.initializer:                      # external data, hostile path
        t = rng.choice(list(g.initializer))
        t.data_location = onnx.TensorProto.EXTERNAL
        del t.external_data[:]
        for k, v in (("location", rng.choice(["../../etc/passwd", "/etc/passwd", "nope.bin"])),
                     ("offset", str(rng.choice([0, -5, 1 << 40]))), ("length", "16")):
            e = t.external_data.add()
            e.key, e.value = k, v
        t.ClearField("raw_data")
    elif g.node:                                             # reorder nodes (cycle/order)
        nodes = list(g.node)
        rng.shuffle(nodes)
        del g.node[:]
        g.node.extend(nodes)
    _ = helper
    return model


def make_case(rng) -> bytes:
    import onnx
    seed = onnx.load(str(rng.choice(SEEDS)))
    kind = rng.random()
    if kind < 0.15:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400)))
    if kind < 0.35:
        data = bytearray(seed.SerializeToString())
        for _ in range(rng.randrange(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        if rng.random() < 0.3:
            data = data[:rng.randrange(len(data))]
        return bytes(data)
    for _ in range(rng.randrange(1, 4)):
        _mutate_structured(seed, rng)
    return seed.SerializeToString()


def try_case(data: bytes, tmp: Path) -> str | None:
    """None when the outcome is acceptable, else a crash description."""
    import aicc
    from aicc.errors import AiccError, BuildError
    import shutil
    p = tmp / "case.onnx"
    p.write_bytes(data)
    out = tmp / "bundle"
    shutil.rmtree(out, ignore_errors=True)
    try:
        b = aicc.build(p, out=out, buckets=_buckets(data))
        from aicc.bundle.loader import build_bundle
        build_bundle(b, "-O0 -std=c99 -Wall -Wextra -pedantic -Werror")
    except BuildError as e:
        return f"generated C does not compile: {e}"
    except AiccError:
        if out.exists():
            return "failed build left an output folder"
        return None
    except RecursionError as e:
        return f"RecursionError: {e}"
    except Exception as e:  # noqa: BLE001 - this is what we are looking for
        return f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
    return None


def _buckets(data: bytes) -> dict:
    """Buckets for the symbolic input dims a case has (so dynamic models are compiled)."""
    import onnx
    try:
        m = onnx.load_from_string(data)
    except Exception:  # noqa: BLE001 - not a model: aicc reports it
        return {}
    names = {d.dim_param for i in m.graph.input for d in i.type.tensor_type.shape.dim
             if d.dim_param}
    return {n: [2, 5] for n in sorted(names, key=repr)}   # names may arrive as bytes


def worker(seed: int, n: int, out_dir: Path):
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="aicc-fuzz-") as t:
        tmp = Path(t)
        log = open(out_dir / f"worker-{seed}.jsonl", "a")
        for i in range(n):
            data = make_case(rng)
            (out_dir / f"current-{seed}.onnx").write_bytes(data)
            res = try_case(data, tmp)
            log.write(json.dumps({"i": i, "crash": res}) + "\n")
            log.flush()
            if res:
                save_crash(data, res)


def save_crash(data: bytes, why: str) -> Path:
    CORPUS.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256(data).hexdigest()[:16]
    p = CORPUS / f"crash-{h}.onnx"
    p.write_bytes(data)
    (CORPUS / f"crash-{h}.txt").write_text(why + "\n")
    return p


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("-n", type=int, default=200, help=argparse.SUPPRESS)
    ap.add_argument("--dir", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        worker(a.seed, a.n, Path(a.dir))
        return 0
    t_end = time.time() + a.seconds
    tried = crashes = 0
    seed = a.seed
    with tempfile.TemporaryDirectory(prefix="aicc-fuzzrun-") as d:
        while time.time() < t_end:
            p = subprocess.Popen([sys.executable, "-m", "tools.fuzz", "--worker", "--seed",
                                  str(seed), "-n", "50", "--dir", d], cwd=ROOT,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 env=dict(os.environ, PYTHONHASHSEED="0"))
            while p.poll() is None:
                if time.time() > t_end + 120:
                    p.kill()
                time.sleep(0.2)
            log = Path(d) / f"worker-{seed}.jsonl"
            rows = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
            tried += len(rows)
            crashes += sum(1 for r in rows if r["crash"])
            if p.returncode not in (0, None) and (Path(d) / f"current-{seed}.onnx").exists():
                save_crash((Path(d) / f"current-{seed}.onnx").read_bytes(),
                           f"worker died (exit {p.returncode})")
                crashes += 1
                tried += 1
            seed += 1
    print(f"fuzz: {tried} cases in {a.seconds:.0f} s, {crashes} crashes"
          + (f" (saved in {CORPUS.relative_to(ROOT)})" if crashes else ""))
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
