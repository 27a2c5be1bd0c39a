"""llama.cpp's converter as the ggml adapter calls it: the per-pair ``freq_factors`` it writes into a GGUF file.

llama3 and Gemma 4's proportional rule reach ggml only as these factors (ggml divides pair j's angle by
``c_j``), so the ggml adapter takes them from the converter of the same source package
(``vendor/llama.cpp/conversion/`` of llama-cpp-python, with its ``gguf-py``), never from its own arithmetic:
the matrix then credits llama.cpp's converter and ggml together (spec_tests/adapters/_ggml_calls.py).
"""

from __future__ import annotations

import functools
import os
import sys
import types

import numpy as np


class _Converter:
    """llama.cpp's converter (``conversion/`` of the llama-cpp-python source package, with its ``gguf-py``),
    its ``generate_extra_tensors`` called on a stand-in for a model with only the hyperparameters they read."""

    def __init__(self, source: str) -> None:
        for path in (source, os.path.join(source, "gguf-py")):
            if path not in sys.path:
                sys.path.append(path)
        from conversion.gemma import Gemma4Model
        from conversion.llama import LlamaModel

        self.llama_model, self.gemma4_model = LlamaModel, Gemma4Model

    @staticmethod
    def _one_tensor(tensors) -> np.ndarray:
        (_, tensor), = list(tensors)
        return tensor.numpy().astype(np.float32)

    def llama3(self, params: dict, n_dims: int) -> np.ndarray:
        stub = types.SimpleNamespace(rope_parameters=params, hparams={"head_dim": n_dims},
                                     format_tensor_name=lambda *_: "rope_freqs.weight")
        return self._one_tensor(self.llama_model.generate_extra_tensors(stub))

    def proportional(self, theta: float, head: int, fraction: float) -> np.ndarray:
        full = {"rope_type": "proportional", "partial_rotary_factor": fraction, "rope_theta": theta}
        stub = types.SimpleNamespace(hparams={"rope_parameters": {"full_attention": full}, "global_head_dim": head},
                                     format_tensor_name=lambda *_: "rope_freqs.weight")
        return self._one_tensor(self.gemma4_model.generate_extra_tensors(stub))


@functools.cache
def converter() -> _Converter | None:
    """llama.cpp's converter from ``REFPOS_LLAMA_CPP_SOURCE`` (``vendor/llama.cpp`` of the unpacked source
    package), or ``None`` where it or torch is missing."""
    source = os.environ.get("REFPOS_LLAMA_CPP_SOURCE")
    if not source or not os.path.isdir(os.path.join(source, "conversion")):
        return None
    try:
        return _Converter(source)
    except ImportError:
        return None
