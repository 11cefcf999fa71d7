"""The weights image: every constant a program reads, aligned, little-endian, deduplicated.

One image may serve several programs (the plans of a dynamic-shape bundle's buckets): an
array already in the image (same dtype, shape and bytes) is placed once.
"""
from __future__ import annotations

import hashlib

import numpy as np


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


class WeightsImage:
    def __init__(self, align: int) -> None:
        self.align = align
        self.blob = bytearray()
        self.entries: list = []          # (what, offset, nbytes)
        self._seen: dict = {}            # (dtype, shape, sha256) -> offset

    def put(self, what: str, arr: np.ndarray) -> int:
        data = np.ascontiguousarray(arr)
        if data.dtype == np.bool_:
            data = data.astype(np.uint8)
        data = data.astype(data.dtype.newbyteorder("<"), copy=False)
        raw = data.tobytes()
        key = (data.dtype.str, data.shape, hashlib.sha256(raw).hexdigest())
        if key in self._seen:
            return self._seen[key]
        off = _align(len(self.blob), self.align)
        self.blob.extend(b"\0" * (off - len(self.blob)))
        self.blob.extend(raw)
        self.entries.append((what, off, data.nbytes))
        self._seen[key] = off
        return off

    def image(self) -> bytes:
        pad = _align(len(self.blob), self.align) - len(self.blob)
        return bytes(self.blob) + b"\0" * pad
