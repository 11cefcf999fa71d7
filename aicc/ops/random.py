"""Random generators: RandomNormal, RandomUniform, RandomNormalLike, RandomUniformLike,
Multinomial, Bernoulli. Registered only to refuse them with a clear reason: their outputs
are draws from a generator that cannot be reproduced bit for bit against onnxruntime (or any
other runtime), so a compiled model could not be validated. They are never constant-folded.
"""
from __future__ import annotations

from .base import Op, register_many

RANDOM = ["RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
          "Multinomial", "Bernoulli"]


@register_many(RANDOM, since=1)
class RandomOp(Op):
    folds = False

    def check(self, node, g):
        return ("random generator: its outputs are not reproducible (no runtime draws the "
                "same numbers), so it is not supported")
