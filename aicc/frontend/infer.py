"""onnx shape inference for the frontend and the infer-shapes pass: on the model without its
large weights, in a child process killed after a time limit.

onnx's inference is C++ that Python cannot interrupt, and it has looped forever on inputs
the checker accepts (an Einsum term with two ellipses, refused before it now). On Linux it
runs in a child process forked once (the model without its weights goes there and the
inferred model comes back through pipes) that is killed after SHAPE_INFERENCE_SECONDS and
replaced at the next call: the build then fails with one line instead of hanging, and a crash
inside onnx becomes an error too. Elsewhere it runs in the process.
"""
from __future__ import annotations

import json
import math
import os
import select
import signal
import sys
import threading
import time

import onnx
from onnx import helper, shape_inference

SHAPE_INFERENCE_SECONDS = 300.0     # ViT-B/16: about 1 s
LIGHT_MAX = 256     # initializers above this many elements (not int32 / int64) are shape-only


def shape_only(size: int, integer: bool) -> bool:
    """Whether shape inference never reads a constant's values: a weight of more than
    LIGHT_MAX elements; int32 / int64 tensors (``integer``), which may hold shapes, are kept
    whatever their size."""
    return size > LIGHT_MAX and not integer


def _shape_only(t: onnx.TensorProto) -> bool:
    return shape_only(math.prod(t.dims),
                      t.data_type in (onnx.TensorProto.INT32, onnx.TensorProto.INT64))


def infer_without_weights(model: onnx.ModelProto, **kw) -> onnx.ModelProto:
    """onnx shape inference on a copy of ``model`` whose large weights are typed graph inputs
    instead of data (a ViT-B/16 carries 330 MB that inference would serialize and parse):
    ``model`` with that run's results (value_info, output types, the nodes with their
    subgraphs' annotations)."""
    g = model.graph
    big = [t for t in g.initializer if _shape_only(t)]
    if not big:
        return infer_limited(model, **kw)
    light = onnx.ModelProto()
    light.ir_version = model.ir_version
    light.opset_import.extend(model.opset_import)
    lg = light.graph
    lg.name = g.name
    lg.node.extend(g.node)
    lg.input.extend(g.input)
    lg.output.extend(g.output)
    lg.value_info.extend(g.value_info)
    lg.sparse_initializer.extend(g.sparse_initializer)
    lg.initializer.extend(t for t in g.initializer if not _shape_only(t))
    declared = {i.name for i in g.input}
    lg.input.extend(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                    for t in big if t.name not in declared)
    light = infer_limited(light, **kw)
    out = onnx.ModelProto()
    out.CopyFrom(model)         # a memory copy; shape inference would serialize it twice
    o = out.graph
    for field in ("node", "output", "value_info"):
        del getattr(o, field)[:]
        getattr(o, field).extend(getattr(light.graph, field))
    return out




class InferenceTimeout(RuntimeError):
    def __init__(self, seconds: float):
        super().__init__(f"onnx shape inference did not finish in {seconds:g} s (the limit "
                         "around it: aicc.frontend.infer.SHAPE_INFERENCE_SECONDS)")


class _Server:
    """A forked child that runs onnx's inference on models sent to it through a pipe: forked
    once per process (forking a large Python process for every call costs ~20 ms), killed
    and replaced when a call passes its time limit or the child dies."""

    def __init__(self):
        self.pid = None
        self.owner = None

    def _start(self) -> None:
        req_r, req_w = os.pipe()
        rsp_r, rsp_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(req_w)
                os.close(rsp_r)
                _serve(req_r, rsp_w)
            finally:
                os._exit(0)
        os.close(req_r)
        os.close(rsp_w)
        self.pid, self.owner, self.req, self.rsp = pid, os.getpid(), req_w, rsp_r

    def stop(self) -> None:
        if self.pid is not None and self.owner == os.getpid():
            for fd in (self.req, self.rsp):
                os.close(fd)
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(self.pid, 0)
        self.pid = None

    def call(self, model: onnx.ModelProto, seconds: float, kw: dict) -> onnx.ModelProto:
        if self.pid is None or self.owner != os.getpid():    # (a forked parent: its own)
            self.pid = None
            self._start()
        body = json.dumps(kw).encode() + b"\n" + model.SerializeToString()
        try:
            _write_msg(self.req, body)
            out = _read_msg(self.rsp, time.monotonic() + seconds)
        except TimeoutError:
            self.stop()
            raise InferenceTimeout(seconds) from None
        except OSError:
            self.stop()
            raise RuntimeError("onnx shape inference ended without a result (its process "
                               "died)") from None
        if out[:1] == b"\1":
            raise RuntimeError(out[1:].decode("utf-8", "replace"))
        return onnx.load_from_string(out[1:])


def _write_msg(fd: int, body: bytes) -> None:
    data = len(body).to_bytes(8, "little") + body
    while data:
        data = data[os.write(fd, data):]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    chunks, got = [], 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
        b = os.read(fd, min(n - got, 1 << 20))
        if not b:
            raise OSError("closed")
        chunks.append(b)
        got += len(b)
    return b"".join(chunks)


def _read_msg(fd: int, deadline: float | None) -> bytes:
    n = int.from_bytes(_read_exact(fd, 8, deadline), "little")
    return _read_exact(fd, n, deadline)


def _serve(req: int, rsp: int) -> None:
    """The child's loop: a request is the keyword arguments as JSON, a newline and the
    model; the answer b"\\0" + the inferred model or b"\\1" + the error. Ends when the parent
    closes its end."""
    while True:
        try:
            body = _read_msg(req, None)
        except OSError:
            return
        head, _, data = body.partition(b"\n")
        try:
            m = shape_inference.infer_shapes(onnx.load_from_string(data), **json.loads(head))
            out = b"\0" + m.SerializeToString()
        except Exception as e:  # noqa: BLE001 - any failure goes back as text
            out = b"\1" + str(e).encode("utf-8", "replace")
        _write_msg(rsp, out)


_SERVER = _Server()
_LOCK = threading.Lock()


def infer_limited(model: onnx.ModelProto, seconds: float | None = None, **kw) -> onnx.ModelProto:
    """shape_inference.infer_shapes(model, **kw) in the inference child on Linux, which is
    killed after ``seconds`` (InferenceTimeout); its exceptions come back as RuntimeError."""
    seconds = SHAPE_INFERENCE_SECONDS if seconds is None else seconds
    if not sys.platform.startswith("linux") or seconds <= 0:
        return shape_inference.infer_shapes(model, **kw)
    with _LOCK:
        return _SERVER.call(model, seconds, kw)
