"""neon: the vmath kernels' spellings (kernels/vmath, the softmax rows).

The float vector vocabulary is the description's ``vector``, the bit operations its
``integer`` and ``int_bits``. A compare gives a vector of all-ones / all-zeros 32-bit lanes
(``mask``, uint32x4_t); the _CMP_ predicate names the kernels pass ({p}) select the prelude's
compares aicc_neon_CMP_* (isa/neon/__init__.py). No ``half``: float16 Casts stay portable.
"""
from . import binary
from .norm import layernorm

TABLE: dict = dict(
    mask="uint32x4_t",                              # the type of a compare's lanes
    cmp="aicc_neon{p}({x}, {y})",                   # lanes where x p y (a _CMP_ predicate)
    blend="vbslq_f32({m}, {b}, {a})",               # b where m holds, else a
    mask_andnot="vbicq_u32({b}, {a})",              # lanes of mask b and not of mask a
    any="vmaxvq_u32({m})",                          # != 0 when any lane of m holds
    cvtt="vcvtq_s32_f32",                           # float -> int32, truncating
    layernorm=layernorm,    # the LayerNormalization rows (isa/neon/norm.py)
    binary=binary.emit,     # float Add / Sub / Mul / Div, same shapes or one value (binary.py)
    erf="tbl",      # erf: one Horner chain per lane, TBL-picked coefficients (vmath/erf_tbl.py)
    # the lanes of v reduced to a float by op (max, add): FMAXV / FADDP across the vector
    hred="""\
    return v{op}vq_f32(v);""",
    # activations the vector forms leave to the portable C loops, which GCC vectorizes into
    # the same compares and bit selects here: Clip (as a fused conv epilogue the vector helper
    # was inlined into the depthwise kernel, MobileNetV2 +0.36M executed instructions)
    portable=frozenset({"Clip"}),
)
