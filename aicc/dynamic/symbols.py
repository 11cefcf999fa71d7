"""The model's dynamic dims and the buckets of each.

A dynamic dim is a named symbolic dim (ONNX ``dim_param``) of a graph input that no
``--input-shape`` pins. Buckets come from ``--buckets DIM=a,b,c`` / YAML ``dynamic.buckets``
(explicit sizes) or ``--buckets DIM=max:N`` / YAML ``dynamic.max`` (an automatic ladder:
powers of two from ``dynamic.ladder_start``, default 8, below N, then N). A dynamic dim with
neither is an error naming the dim and the inputs that carry it.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError, ModelError


@dataclass
class DynDims:
    names: list                 # dynamic dim names, in order of first appearance
    carriers: dict              # name -> [(input, axis)]
    shapes: dict                # input -> shape with names for dynamic dims
    buckets: dict               # name -> sorted bucket sizes

    @property
    def maxima(self) -> list:
        return [self.buckets[n][-1] for n in self.names]


MAX_BUCKET = (1 << 31) - 1      # a dim past this is no bucket a tensor limit would allow


def ladder(maximum: int, start: int = 8) -> list:
    if maximum < 1:
        raise ConfigError(f"dynamic max {maximum}: must be at least 1")
    out, p = [], 1
    while p < maximum:
        if p >= start:
            out.append(p)
        p *= 2
    return out + [maximum]


def parse_bucket_spec(text: str, what: str):
    """'16,32,64' -> [16, 32, 64]; 'max:128' -> ('max', 128)."""
    t = text.strip()
    try:
        vals = ([int(t[4:])] if t.startswith("max:")
                else sorted({int(v) for v in t.split(",") if v.strip()}))
    except ValueError:
        raise ConfigError(f"{what}: expected sizes like 16,32,64 or max:N, not {text!r}") from None
    if not vals or vals[0] < 1 or vals[-1] > MAX_BUCKET:
        raise ConfigError(f"{what}: bucket sizes must be positive integers up to {MAX_BUCKET}, "
                          f"not {text!r}")
    return ("max", vals[0]) if t.startswith("max:") else vals


def find_dynamic_dims(g, config: dict, cli_buckets: dict) -> DynDims | None:
    """g: the imported graph (user pins applied). None when every input is static."""
    names, carriers, shapes, unnamed = [], {}, {}, []
    for inp in g.inputs:
        shape = list(g.shape(inp))
        shapes[inp] = shape
        for ax, d in enumerate(shape):
            if isinstance(d, int):
                continue
            if d.startswith("?"):
                unnamed.append(f"{inp!r} axis {ax}")
                continue
            if d not in carriers:
                names.append(d)
                carriers[d] = []
            carriers[d].append((inp, ax))
    spec = dict((config or {}).get("buckets") or {})
    for k, v in ((config or {}).get("max") or {}).items():
        spec.setdefault(k, f"max:{v}")
    spec.update(cli_buckets)
    unknown = [k for k in spec if k not in carriers]
    if unknown:
        have = ", ".join(repr(n) for n in names) or "none"
        raise ConfigError(f"buckets for unknown dynamic dim(s) {', '.join(map(repr, unknown))} "
                          f"(the model's dynamic dims: {have})")
    if unnamed:
        raise ModelError(f"input dim(s) with neither a size nor a name: {', '.join(unnamed)}; "
                         "pin them with --input-shape NAME=d0,d1,...")
    if not names:
        return None
    missing = [n for n in names if n not in spec]
    if missing:
        parts = [f"{n!r} (inputs {', '.join(f'{i!r} axis {a}' for i, a in carriers[n])})"
                 for n in missing]
        raise ConfigError(f"dynamic dim(s) without buckets: {'; '.join(parts)}; give "
                          "--buckets DIM=a,b,c (or DIM=max:N) or pin with --input-shape")
    start = int((config or {}).get("ladder_start", 8))
    buckets = {}
    for n in names:
        v = spec[n]
        if not isinstance(v, tuple):        # YAML lists and numbers, --buckets text
            v = parse_bucket_spec(",".join(map(str, v)) if isinstance(v, (list, set))
                                  else str(v), f"buckets of {n!r}")
        buckets[n] = ladder(v[1], start) if isinstance(v, tuple) else v
    return DynDims(names, carriers, shapes, buckets)
