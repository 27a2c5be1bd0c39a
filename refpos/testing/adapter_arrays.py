"""NumPy arrays in and out of the reference adapter, the current backend inside (``REFPOS_BACKEND``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.backend import get_xp, to_numpy


def to_backend(a: Any, dtype: Any = None) -> Any:
    """NumPy in -> the current backend (``None`` stays ``None``; ``dtype`` casts first)."""
    if a is None:
        return None
    xp = get_xp()
    return xp.asarray(np.asarray(a, dtype=dtype) if dtype is not None else np.asarray(a))


def to_host(a: Any) -> np.ndarray:
    """The current backend -> NumPy."""
    return np.asarray(to_numpy(a))
