from .onnx_import import file_sha256, import_model, load_model, prepare, to_graph

__all__ = ["file_sha256", "import_model", "load_model", "prepare", "to_graph"]
