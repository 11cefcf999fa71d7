from .graph import Graph, Node, TensorType, dtype_from_name
from .verify import verify

__all__ = ["Graph", "Node", "TensorType", "dtype_from_name", "verify"]
