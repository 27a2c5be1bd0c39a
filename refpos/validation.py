"""Input validation shared by every module.

Every message names the parameter and says what is allowed. Nothing here clips, wraps or defaults a
bad value: it raises ``ValueError`` for a bad value and ``TypeError`` for a value of the wrong type.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from refpos.backend import array_namespace, get_xp


def check_choice(name: str, value: object, allowed: Sequence[str]) -> str:
    """``value`` must be one of the strings in ``allowed``."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, one of {tuple(allowed)}; got {type(value).__name__}")
    if value not in allowed:
        raise ValueError(f"{name} must be one of {tuple(allowed)}, got {value!r}")
    return value


def check_bool(name: str, value: object) -> bool:
    """``value`` must be a bool (``True``/``False`` or a NumPy bool): a string such as ``"False"`` is not."""
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__} {value!r}")
    return bool(value)


def check_int(name: str, value: object, *, minimum: int | None = None) -> int:
    """``value`` must be an integer (not a bool, not a float), at least ``minimum`` when given."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def check_float(
    name: str,
    value: object,
    *,
    positive: bool = False,
    minimum: float | None = None,
    allow_inf: bool = False,
) -> float:
    """``value`` must be a real number (not a bool), finite unless ``allow_inf``; optional bounds."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    value = float(value)
    if math.isnan(value) or (math.isinf(value) and not allow_inf):
        raise ValueError(f"{name} must be finite, got {value}")
    if positive and not value > 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def as_positions(
    positions: Any,
    *,
    name: str = "positions",
    xp: ModuleType | None = None,
    allow_negative: bool = False,
) -> Any:
    """Validate integer positions and return them as an int64 array of the right namespace.

    Python ints, lists of ints and integer arrays are accepted; floats and bools are a ``TypeError``
    (positions are integers, never floats); negative values are a ``ValueError`` unless
    ``allow_negative``.
    """
    if isinstance(positions, bool):
        raise TypeError(f"{name} must be integers, got bool")
    if isinstance(positions, numbers.Integral) or isinstance(positions, (list, tuple)):
        arr = np.asarray(positions)
        if arr.size and arr.dtype.kind not in "iu":
            raise TypeError(f"{name} must be integers, got values of dtype {arr.dtype}")
        xp = get_xp(xp)
        out = xp.asarray(arr.astype(np.int64))
    else:
        try:
            ns = array_namespace(positions)
        except TypeError:
            raise TypeError(f"{name} must be an int or an integer array, got {type(positions).__name__}") from None
        if not ns.isdtype(positions.dtype, "integral"):
            raise TypeError(f"{name} must be an integer array, got dtype {positions.dtype}")
        out = ns.astype(positions, ns.int64)
    if not allow_negative:
        ns = array_namespace(out)
        if out.size and bool(ns.any(out < 0)):
            raise ValueError(f"{name} must be >= 0, got a minimum of {int(ns.min(out))}")
    return out


def float64_array(x: Any, *, name: str, xp: ModuleType | None = None) -> Any:
    """``x`` as a floating array of its own namespace (lists become float64 in ``xp``).

    Floating arrays keep their dtype (float32 stays float32: lower precision is an input option for
    studying error). Integer and bool arrays are rejected rather than silently converted.
    """
    if isinstance(x, (list, tuple, numbers.Real)) and not isinstance(x, bool):
        arr = np.asarray(x, dtype=np.float64)
        return get_xp(xp).asarray(arr)
    try:
        ns = array_namespace(x)
    except TypeError:
        raise TypeError(f"{name} must be an array of floats, got {type(x).__name__}") from None
    if not ns.isdtype(x.dtype, "real floating"):
        raise TypeError(f"{name} must be a real floating array (float64 or float32), got dtype {x.dtype}")
    return x
