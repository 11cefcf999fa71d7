"""Golden-output regression files: inputs.npz, outputs.npz and golden.json in a folder."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from . import __version__
from .bundle.loader import BundleInfo
from .errors import InputError, ValidationMismatch
from .validate import compare, index_bounds, load_npz, random_inputs, reference_outputs


def _opened(bundle):
    if isinstance(bundle, BundleInfo):
        return bundle
    from .runner import open_bundle
    return open_bundle(bundle)


def record(model, bundle, golden_dir, *, inputs=None, seed=0, rtol=1e-4, atol=1e-5) -> str:
    """Run the bundle (a folder, or a bundle opened by aicc.runner.open_bundle), check it
    against the reference (onnxruntime when installed), and store inputs, the bundle's
    outputs and the tolerance for ``check``."""
    b = _opened(bundle)
    feeds = (load_npz(inputs) if inputs
             else random_inputs(b.inputs, seed, bounds=index_bounds(model)))
    got = b.run(feeds)
    want, which = reference_outputs(model, feeds, [o["name"] for o in b.outputs])
    res = compare(got, want, rtol, atol)
    if not all(r.ok for r in res):
        bad = ", ".join(f"{r.name} ({r.detail})" for r in res if not r.ok)
        raise ValidationMismatch(f"not recorded: the bundle differs from {which}: {bad}")
    d = Path(golden_dir)
    d.mkdir(parents=True, exist_ok=True)
    np.savez(d / "inputs.npz", **feeds)
    np.savez(d / "outputs.npz", **got)
    meta = {"aicc_version": __version__, "model_sha256": b.manifest["model_sha256"],
            "target": b.manifest["target"], "rtol": rtol, "atol": atol,
            "checked_against": which,
            "outputs": {r.name: {"max_abs_err_vs_reference": r.max_abs} for r in res}}
    (d / "golden.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    return f"recorded {d}: {len(feeds)} input(s), {len(got)} output(s), checked against {which}"


def check(bundle, golden_dir):
    d = Path(golden_dir)
    if not (d / "golden.json").is_file():
        raise InputError(f"{d}: not a golden folder (no golden.json)")
    meta = json.loads((d / "golden.json").read_text())
    feeds = load_npz(d / "inputs.npz")
    want = load_npz(d / "outputs.npz")
    got = _opened(bundle).run(feeds)
    rtol, atol = float(meta.get("rtol", 1e-4)), float(meta.get("atol", 1e-5))
    return compare(got, want, rtol, atol), rtol, atol
