"""Convolution geometry from a node's attributes and static shapes: pads (auto_pad included),
strides, dilations, groups and the output size, shared by Conv, ConvTranspose, pooling, the
integer convs and the layout pass.
"""
from __future__ import annotations

from .base_c import params_c


AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


def ints(v, n, default) -> list:
    """An int-list attribute of length n (default repeated when absent)."""
    if v is None or len(v) == 0:
        return [default] * n
    return [int(a) for a in v]


def same_pads(in_sz, k, s, d, mode) -> tuple:
    """(begin, end) padding of auto_pad SAME_UPPER/SAME_LOWER (output = ceil(in / s))."""
    out = -(-in_sz // s)
    total = max(0, (out - 1) * s + (k - 1) * d + 1 - in_sz)
    small, big = total // 2, total - total // 2
    return (small, big) if mode == "SAME_UPPER" else (big, small)


class ConvGeometry:
    """Spatial attributes of a Conv node resolved against its input and weight shapes."""

    def __init__(self, op, node, x_shape, w_shape):
        r = len(x_shape) - 2
        if r < 1 or r > 3:
            raise ValueError(f"rank {len(x_shape)} input (1-D, 2-D and 3-D convs only)")
        if len(w_shape) != r + 2:
            raise ValueError(f"weights of rank {len(w_shape)} for a rank {r + 2} input")
        self.group = int(op.attr(node, "group"))
        self.batch, self.cin = int(x_shape[0]), int(x_shape[1])
        self.cout = int(w_shape[0])
        self.k = [int(d) for d in w_shape[2:]]
        ks = op.attr(node, "kernel_shape")
        if ks is not None and len(ks) and [int(v) for v in ks] != self.k:
            raise ValueError(f"kernel_shape {list(ks)} does not match weights {self.k}")
        if self.group < 1 or self.cin % self.group or self.cout % self.group:
            raise ValueError(f"group {self.group} does not divide channels {self.cin}->{self.cout}")
        if int(w_shape[1]) * self.group != self.cin:
            raise ValueError(f"weights have {w_shape[1]} input channels per group, "
                             f"input has {self.cin} channels in {self.group} groups")
        self.cin_g, self.cout_g = self.cin // self.group, self.cout // self.group
        self.stride = ints(op.attr(node, "strides"), r, 1)
        self.dil = ints(op.attr(node, "dilations"), r, 1)
        self.inp = [int(d) for d in x_shape[2:]]
        mode = op.attr(node, "auto_pad") or "NOTSET"
        if mode not in AUTO_PADS:
            raise ValueError(f"auto_pad {mode!r}")
        if min(self.stride + self.dil + self.k) < 1:
            raise ValueError("strides, dilations and kernel sizes must be positive")
        if mode in ("SAME_UPPER", "SAME_LOWER"):
            be = [same_pads(i, k, s, d, mode)
                  for i, k, s, d in zip(self.inp, self.k, self.stride, self.dil)]
            self.pad, self.pad_end = [b for b, _ in be], [e for _, e in be]
        elif mode == "VALID":
            self.pad, self.pad_end = [0] * r, [0] * r
        else:
            pads = ints(op.attr(node, "pads"), 2 * r, 0)
            if len(pads) != 2 * r or min(pads) < 0:
                raise ValueError(f"pads {pads} (need {2 * r} non-negative values)")
            self.pad, self.pad_end = pads[:r], pads[r:]
        self.out = [(i + b + e - (k - 1) * d - 1) // s + 1 for i, b, e, k, d, s in
                    zip(self.inp, self.pad, self.pad_end, self.k, self.dil, self.stride)]
        if min(self.out) < 1:
            raise ValueError(f"empty output (spatial size {self.out})")

    def params(self, tile=0) -> str:
        return params_c(batch=self.batch, group=self.group, cin_g=self.cin_g,
                        cout_g=self.cout_g, inp=self.inp, out=self.out, k=self.k,
                        stride=self.stride, dil=self.dil, pad=self.pad, pad_end=self.pad_end,
                        tile=tile)

    def describe(self) -> str:
        k = "x".join(map(str, self.k))
        parts = [f"{k} kernel"]
        if set(self.stride) != {1}:
            parts.append("stride " + "x".join(map(str, self.stride)))
        if set(self.dil) != {1}:
            parts.append("dilation " + "x".join(map(str, self.dil)))
        if any(self.pad) or any(self.pad_end):
            parts.append(f"pads {self.pad + self.pad_end}")
        if self.group > 1:
            parts.append(f"{self.group} groups")
        return ", ".join(parts)


def static_shapes(g, names):
    ts = [g.type_of(n) for n in names]
    if not all(t.is_static for t in ts):
        return None
    return [tuple(int(d) for d in t.shape) for t in ts]
