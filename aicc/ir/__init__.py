from .graph import Graph, Node, TensorType
from .verify import verify

__all__ = ["Graph", "Node", "TensorType", "verify"]
