"""The reference adapter: refpos itself behind the adapter contract of ``spec_tests/README.md``.

Arrays in and out are NumPy. Inside, they are moved to the current backend (``REFPOS_BACKEND``:
numpy, cupy or array_api_strict), so the spec suite run on this adapter exercises every backend.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import refpos
from refpos.backend import get_xp, to_numpy

INFO: dict[str, Any] = {
    "name": "refpos",
    "dtype": "float64",
    "rope_layout": "half",
    "description": "the refpos float64 reference, on the backend named by REFPOS_BACKEND",
}


def _in(a: Any, dtype: Any = None) -> Any:
    """NumPy in -> current backend."""
    if a is None:
        return None
    xp = get_xp()
    return xp.asarray(np.asarray(a, dtype=dtype) if dtype is not None else np.asarray(a))


def _out(a: Any) -> np.ndarray:
    return np.asarray(to_numpy(a))


# ------------------------------------------------------------------------------- attention core
def softmax(logits: np.ndarray, mask: np.ndarray | None = None, fully_masked: str = "zeros") -> np.ndarray:
    return _out(refpos.softmax(_in(logits), mask=_in(mask), fully_masked=fully_masked))


def attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    bias: np.ndarray | None = None,
    mask: np.ndarray | None = None,
    scale: float | None = None,
    causal: bool = False,
    softcap: float | None = None,
) -> np.ndarray:
    return _out(
        refpos.attention(_in(q), _in(k), _in(v), bias=_in(bias), mask=_in(mask), scale=scale,
                         causal=causal, softcap=softcap)
    )


def chunked_attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    chunk_size: int,
    bias: np.ndarray | None = None,
    mask: np.ndarray | None = None,
    scale: float | None = None,
    causal: bool = False,
    softcap: float | None = None,
) -> np.ndarray:
    return _out(
        refpos.chunked_attention(_in(q), _in(k), _in(v), bias=_in(bias), mask=_in(mask), scale=scale,
                                 causal=causal, softcap=softcap, chunk_size=chunk_size)
    )


# ------------------------------------------------------------------------------- encodings (issue 3)

# ------------------------------------------------------------------------------- RoPE (issue 4)
