"""Op traits (aicc/ops/traits.py) as the ops declare them: the passes act on exactly these op
types, so an op gaining or losing a trait shows up here as a reviewed change."""
import pytest

from aicc.ir import Node
from aicc.ops import has_trait, ops_with
from aicc.ops import traits as T

EXPECTED = {
    T.ACTIVATION: {"Relu", "Clip", "LeakyRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh",
                   "Swish", "aicc.Swish"},
    T.EPILOGUE: {"Conv", "ConvTranspose", "Gemm", "MatMul"},
    T.ARITHMETIC: {"Add", "Sub", "Mul", "Div"},
    T.ELEMENTWISE: {"Add", "Sub", "Mul", "Div", "Max", "Min", "Relu", "Clip", "LeakyRelu",
                    "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Elu", "Selu", "Neg",
                    "Abs", "Identity", "DequantizeLinear", "QuantizeLinear", "Cast",
                    "aicc.RoundHalf"},
    T.ROUNDING_COMMUTES: {"Relu", "Abs", "Neg", "Max", "Min", "MaxPool", "GlobalMaxPool",
                          "Clip"},
    T.HALF_NATIVE: {
        "Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Concat",
        "Split", "Slice", "Gather", "GatherElements", "GatherND", "Expand", "Tile", "Where",
        "Cast", "CastLike", "Shape", "Size", "Constant", "ConstantOfShape", "DepthToSpace",
        "SpaceToDepth", "ReverseSequence", "Trilu", "ScatterND", "ScatterElements",
        "Scatter", "EyeLike", "Compress", "Dropout", "BitCast"},
    T.LOWP_NATIVE: {"QuantizeLinear", "DequantizeLinear"},
    T.SCHEDULABLE: {"Conv", "Gemm", "MatMul", "Softmax"},
}


@pytest.mark.parametrize("trait", sorted(EXPECTED))
def test_ops_declaring(trait):
    assert set(ops_with(trait)) == EXPECTED[trait]


def test_has_trait_follows_domain():
    assert has_trait(Node("Relu", ["x"], ["y"]), T.ACTIVATION)
    assert has_trait(Node("Relu", ["x"], ["y"], domain="ai.onnx"), T.ACTIVATION)
    assert not has_trait(Node("Relu", ["x"], ["y"], domain="com.example"), T.ACTIVATION)
    assert has_trait(Node("RoundHalf", ["x"], ["y"], domain="aicc"), T.ELEMENTWISE)
    assert not has_trait(Node("RoundHalf", ["x"], ["y"]), T.ELEMENTWISE)
    assert not has_trait(Node("Exp", ["x"], ["y"]), T.ACTIVATION)
