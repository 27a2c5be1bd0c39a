"""What every ``refpos check`` target does with its arrays before it compares: read them as NumPy arrays on the
host, refuse what cannot be checked (:class:`Unusable`: exit status 2), and report the comparison in one form.

Everything here works on NumPy arrays (``refpos check`` reads ``.npy`` files); :func:`np_ns` is the NumPy array
namespace the reference functions are called with, whatever the current backend.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.backend import get_xp, to_numpy
from refpos.check.shared.catalogue import known
from refpos.golden.exact.compare import compare
from refpos.golden.files.npy_file import NpyFile
from refpos.validation import as_positions


class Unusable(ValueError):
    """Input that cannot be checked (exit status 2)."""


def np_ns() -> Any:
    """The NumPy array namespace (a check computes on NumPy whatever the current backend)."""
    return get_xp("numpy")


def host(a: Any) -> Any:
    """``a`` on the host: an :class:`~refpos.golden.files.npy_file.NpyFile` as it is (read block by block), any
    other array as a NumPy array (a memory map stays one)."""
    return a if isinstance(a, NpyFile) else np.asarray(to_numpy(a))


def integer_positions(a: Any) -> np.ndarray:
    """Integer positions as int64, checked as the API checks them (:func:`refpos.validation.as_positions`:
    >= 0, at most 2**53, uint64 values read exactly, never wrapped around); :class:`Unusable` otherwise."""
    a = np.asarray(host(a))
    if a.dtype.kind not in "iu":
        raise Unusable(f"positions must be an integer array, got {a.dtype}")
    try:
        return np.asarray(as_positions(a, xp=np_ns()))
    except (ValueError, TypeError) as exc:
        raise Unusable(str(exc)) from None


def same_shape(candidate: np.ndarray, shape: tuple[int, ...], what: str) -> None:
    """:class:`Unusable` naming both shapes when ``candidate`` is not of ``shape`` (what ``what`` needs)."""
    if tuple(candidate.shape) != tuple(shape):
        raise Unusable(f"the candidate has shape {tuple(candidate.shape)}, {what} needs {tuple(shape)}")


def default_dtype(candidate: np.ndarray) -> str:
    """The dtype a candidate is taken to have computed in: its own when float32 or float16, else float64."""
    return candidate.dtype.name if candidate.dtype.name in ("float32", "float16") else "float64"


def float_kind(a: np.ndarray, what: str) -> np.ndarray:
    """``a`` unchanged (a memory map stays one) when it holds floats; :class:`Unusable` otherwise."""
    if a.dtype.kind != "f":
        raise Unusable(f"{what} must be a floating array (float64, float32 or float16), got {a.dtype}")
    return a


def summary(candidate: np.ndarray, reference: np.ndarray, atol: Any) -> dict[str, Any]:
    """The JSON numbers of :func:`refpos.golden.exact.compare.compare` (equal NaNs agree: a NaN policy)."""
    result = compare(candidate, reference, atol=atol, equal_nan=True).summary()
    result["worst_index"] = result["worst_index"] or []
    return result


def non_finite(candidate: np.ndarray, reference: np.ndarray, positions: np.ndarray | None = None) -> list[dict]:
    """``non_finite``: NaN or infinity where the reference is finite (θ = 0, overflow, uninitialised tables)."""
    bad = ~np.isfinite(candidate) & np.isfinite(reference)
    if not bad.any():
        return []
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    at = ""
    if positions is not None:
        at = f" (first at position {int(np.broadcast_to(positions, candidate.shape[:-1])[where[:-1]])})"
    return [{"id": known("non_finite"), "evidence": f"{int(bad.sum())} of {bad.size} values are NaN or infinite "
             f"where the reference is finite{at}: e.g. rope_theta = 0 (powf(0, −x) = inf), an overflowing exponent, "
             "or an uninitialised table"}]


__all__ = ["Unusable", "default_dtype", "float_kind", "host", "integer_positions", "non_finite", "np_ns",
           "same_shape", "summary"]
