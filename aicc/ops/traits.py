"""Op traits: what the passes may assume of an op, declared where the op is registered (the
class's ``traits``, or ``traits=`` of ``register_many`` when one class serves several op
types). A pass asks ``has_trait(node, T)`` instead of keeping its own list of op types, so a
new op states its traits in its own module and every pass sees them.
"""

ACTIVATION = "activation"      # element-wise activation a producer's step can apply on its
                               # results (fuse-activation, fuse-binary-activation)
EPILOGUE = "epilogue"          # a producer whose kernel takes a fused activation (absorb)
ARITHMETIC = "arithmetic"      # binary arithmetic whose step takes a fused activation
ELEMENTWISE = "elementwise"    # each output element depends on the same position of the
                               # inputs only: the layout does not matter (layout-nhwc moves
                               # transposes across it); Q/DQ with per-tensor scales
ROUNDING_COMMUTES = "rounding_commutes"   # commutes with a monotone, symmetric rounding:
                               # maxima, minima, sign changes (upcast-half runs it on half)
HALF_NATIVE = "half_native"    # takes float16 / bfloat16 itself: moves bits or converts
LOWP_NATIVE = "lowp_native"    # takes the 8-bit float types itself (conversions)
SCHEDULABLE = "schedulable"    # takes per-node kernel / schedule overrides (node-overrides)
