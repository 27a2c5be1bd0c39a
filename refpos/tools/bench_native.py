"""Native RoPE kernels beside refpos: ggml's ``rope_ext`` (ctypes) and onnxruntime's ``RotaryEmbedding``.

Used by ``refpos bench rope`` (:func:`ggml_rope_timer`, :func:`ort_rope_timer`) and by the ggml adapter of the
spec suite (``spec_tests/adapters/_ggml_calls.py`` calls :func:`load_ggml`). Neither library is a dependency:
each timer is ``None`` when its library is absent.

ggml is found in the directory named by ``REFPOS_GGML_LIB`` (``libggml-base.so`` and ``libggml-cpu.so``, as
``python -m spec_tests.adapters.build_ggml`` builds them from the llama-cpp-python source package). Only
functions that take pointers and scalars are bound, plus ``ggml_init``, whose one struct argument
(``ggml_init_params``: ``size_t mem_size; void *mem_buffer; bool no_alloc``) is declared below.
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

#: ggml's rope modes (include/ggml.h, GGML_ROPE_TYPE_*)
ROPE_NORMAL, ROPE_NEOX, ROPE_MROPE, ROPE_VISION, ROPE_IMROPE = 0, 2, 8, 24, 40
#: ggml_type values used here (include/ggml.h, enum ggml_type)
GGML_F32, GGML_F16, GGML_I32 = 0, 1, 26


class InitParams(ctypes.Structure):
    """``struct ggml_init_params`` (include/ggml.h)."""

    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p), ("no_alloc", ctypes.c_bool)]


_P, _F, _I, _I64 = ctypes.c_void_p, ctypes.c_float, ctypes.c_int, ctypes.c_int64
#: name -> (restype, argtypes) of every ggml function bound
SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "ggml_init": (_P, [InitParams]),
    "ggml_free": (None, [_P]),
    "ggml_new_tensor_1d": (_P, [_P, _I, _I64]),
    "ggml_new_tensor_2d": (_P, [_P, _I, _I64, _I64]),
    "ggml_new_tensor_3d": (_P, [_P, _I, _I64, _I64, _I64]),
    "ggml_new_tensor_4d": (_P, [_P, _I, _I64, _I64, _I64, _I64]),
    "ggml_get_data": (_P, [_P]),
    "ggml_nbytes": (ctypes.c_size_t, [_P]),
    "ggml_new_graph": (_P, [_P]),
    "ggml_build_forward_expand": (None, [_P, _P]),
    "ggml_graph_compute_with_ctx": (_I, [_P, _P, _I]),
    "ggml_rope_ext": (_P, [_P, _P, _P, _P, _I, _I, _I, _F, _F, _F, _F, _F, _F]),
    "ggml_rope_multi": (_P, [_P, _P, _P, _P, _I, ctypes.POINTER(_I), _I, _I, _F, _F, _F, _F, _F, _F]),
    "ggml_soft_max_ext": (_P, [_P, _P, _P, _F, _F]),
    "ggml_flash_attn_ext": (_P, [_P, _P, _P, _P, _P, _F, _F, _F]),
    "ggml_cont": (_P, [_P, _P]),
}


@functools.cache
def load_ggml(directory: str | None = None) -> ctypes.CDLL | None:
    """ggml's CPU library with :data:`SIGNATURES` declared, from ``directory`` or ``$REFPOS_GGML_LIB``;
    ``None`` when neither names a directory holding it."""
    directory = directory or os.environ.get("REFPOS_GGML_LIB")
    if not directory or not (Path(directory) / "libggml-cpu.so").is_file():
        return None
    # OpenMP's threads sleep between calls instead of spinning (read when libgomp loads with ggml): a spinning
    # pool would take the cores from whatever runs next (the next function of a timed round)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    ctypes.CDLL(str(Path(directory) / "libggml-base.so"), mode=ctypes.RTLD_GLOBAL)
    lib = ctypes.CDLL(str(Path(directory) / "libggml-cpu.so"), mode=ctypes.RTLD_GLOBAL)
    base = ctypes.CDLL(str(Path(directory) / "libggml-base.so"))
    for name, (restype, argtypes) in SIGNATURES.items():
        fn = getattr(lib, name, None) or getattr(base, name)
        fn.restype, fn.argtypes = restype, argtypes
        setattr(lib, name, fn)
    if hasattr(lib, "ggml_cpu_init"):
        lib.ggml_cpu_init()  # the CPU backend's tables (fp16 conversion)
    return lib


class Graph:
    """One ggml context and graph: tensors made from NumPy arrays, one output, computed on ``threads``.

    ggml's axis 0 is the fastest: a C-order NumPy array of shape ``(a, b, c, d)`` is the ggml tensor
    ``ne = [d, c, b, a]``.
    """

    def __init__(self, lib: ctypes.CDLL, nbytes: int) -> None:
        self.lib = lib
        self.ctx = lib.ggml_init(InitParams(nbytes + 2**20, None, False))
        if not self.ctx:
            raise MemoryError(f"ggml_init could not allocate {nbytes} bytes")

    def tensor(self, array: np.ndarray) -> int:
        """A ggml tensor holding a copy of ``array`` (float32, float16 or int32, at most 4 axes)."""
        kind = {np.dtype(np.float32): GGML_F32, np.dtype(np.float16): GGML_F16, np.dtype(np.int32): GGML_I32}
        array = np.ascontiguousarray(array)
        ne = list(array.shape[::-1]) + [1] * (4 - array.ndim)
        t = self.lib.ggml_new_tensor_4d(self.ctx, kind[array.dtype], *ne)
        ctypes.memmove(self.lib.ggml_get_data(t), array.ctypes.data, array.nbytes)
        return t

    def compute(self, out: int, shape: tuple[int, ...], threads: int) -> Callable[[], np.ndarray]:
        """A function computing ``out`` and returning it as float32 of NumPy ``shape`` (a copy)."""
        graph = self.lib.ggml_new_graph(self.ctx)
        self.lib.ggml_build_forward_expand(graph, out)

        def run() -> np.ndarray:
            status = self.lib.ggml_graph_compute_with_ctx(self.ctx, graph, threads)
            if status != 0:
                raise RuntimeError(f"ggml_graph_compute returned status {status}")
            data = ctypes.cast(self.lib.ggml_get_data(out), ctypes.POINTER(ctypes.c_float))
            return np.ctypeslib.as_array(data, shape=shape).copy()

        return run

    def close(self) -> None:
        if self.ctx:
            self.lib.ggml_free(self.ctx)
            self.ctx = None


# ---------------------------------------------------------------------------------------------- timers
def ggml_rope_timer(x: np.ndarray, theta: float, threads: int, neox: bool = True,
                    n_dims: int | None = None) -> Callable[[], Any] | None:
    """ggml's ``rope_ext`` on ``x`` ``(B, H, T, D)`` float32 at positions ``0 … T − 1``, angles computed by the
    kernel (default rule, θ) for the first ``n_dims`` channels (default all D; the rest pass through): a
    function computing it once, or ``None`` without ggml. The input is laid out as ggml's ``[D, H, T, B]`` (a
    NumPy ``(B, T, H, D)`` array) once, outside the timed call."""
    lib = load_ggml()
    if lib is None or x.dtype != np.float32 or x.ndim != 4:
        return None
    t, d = x.shape[-2:]
    graph = Graph(lib, 2 * x.nbytes + 4 * t)
    a = graph.tensor(np.ascontiguousarray(x.transpose(0, 2, 1, 3)))  # ne = [D, H, T, B]
    pos = graph.tensor(np.arange(t, dtype=np.int32))
    out = lib.ggml_rope_ext(graph.ctx, a, pos, None, n_dims or d, ROPE_NEOX if neox else ROPE_NORMAL, 0, theta, 1.0,
                            0.0, 1.0, 0.0, 0.0)
    gf = lib.ggml_new_graph(graph.ctx)
    lib.ggml_build_forward_expand(gf, out)

    def rope() -> None:
        lib.ggml_graph_compute_with_ctx(graph.ctx, gf, threads)

    def result() -> np.ndarray:
        """The last call's output as ``(B, H, T, D)`` (a copy)."""
        data = ctypes.cast(lib.ggml_get_data(out), ctypes.POINTER(ctypes.c_float))
        return np.ctypeslib.as_array(data, shape=(x.shape[0], t, x.shape[1], d)).transpose(0, 2, 1, 3).copy()

    rope.graph, rope.result = graph, result  # the graph lives as long as the timer
    return rope


def ort_rope_timer(x: np.ndarray, theta: float, threads: int, interleaved: bool = False,
                   rotary_dim: int | None = None) -> Callable[[], Any] | None:
    """onnxruntime's ``RotaryEmbedding`` (ai.onnx, opset 23) on ``x`` ``(B, H, T, D)`` at positions
    ``0 … T − 1`` for the first ``rotary_dim`` channels (default all D; the rest pass through), given its
    float32 cos/sin cache (built once, outside the timed call): a function computing it once, or ``None``
    without onnxruntime and onnx."""
    try:
        import onnx
        import onnxruntime as ort
    except ImportError:
        return None
    b, h, t, d = x.shape
    rotary = rotary_dim or d
    elem = onnx.helper.np_dtype_to_tensor_dtype(x.dtype)
    node = onnx.helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "ids"], ["y"], interleaved=int(interleaved),
                                 rotary_embedding_dim=rotary if rotary != d else 0)
    graph = onnx.helper.make_graph([node], "rope", [
        onnx.helper.make_tensor_value_info("x", elem, [b, h, t, d]),
        onnx.helper.make_tensor_value_info("cos", elem, [t, rotary // 2]),
        onnx.helper.make_tensor_value_info("sin", elem, [t, rotary // 2]),
        onnx.helper.make_tensor_value_info("ids", onnx.TensorProto.INT64, [b, t])],
        [onnx.helper.make_tensor_value_info("y", elem, [b, h, t, d])])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 23)], ir_version=10)
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # no spinning pool between calls
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    angles = np.arange(t, dtype=np.float64)[:, None] * theta ** (-np.arange(0, rotary, 2) / rotary)[None, :]
    feeds = {"x": x, "cos": np.cos(angles).astype(x.dtype), "sin": np.sin(angles).astype(x.dtype),
             "ids": np.broadcast_to(np.arange(t, dtype=np.int64), (b, t)).copy()}

    def rope() -> Any:
        return session.run(None, feeds)

    return rope
