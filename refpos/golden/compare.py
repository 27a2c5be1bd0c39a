r"""The one comparison of a candidate with a reference: ``|y − r| ≤ atol + rtol·|r| + ulps·ulp(r)``.

Every "within tolerance" in refpos goes through :func:`compare`: ``refpos check`` (the reference and
each mutant of the catalogue of mistakes), ``refpos golden verify`` and the golden manifest's
:func:`refpos.golden.manifest.compare`, and the spec suite's ``assert_close``. The *numbers* (which
atol, rtol, ulps a dtype and position allow) come from :mod:`refpos.golden.tolerance`; this module only
applies them.

Rules, elementwise:

* the error is ``|y − r|``, and 0 where ``y == r`` (so equal infinities, e.g. masked logits, agree);
* a NaN never passes: a NaN in the candidate or the reference makes the entry fail, unless
  ``equal_nan=True`` and both are NaN at that entry (the golden format's ``"nan"`` policy for fully
  masked rows);
* a NaN tolerance never passes (``err <= NaN`` is false), not even for an exact match;
* ``atol`` may be an array broadcastable to the reference (per-position tolerances).

Examples
--------
>>> import numpy as np
>>> c = compare(np.array([1.0, 2.0 + 1e-9]), np.array([1.0, 2.0]), atol=1e-12, rtol=1e-10)
>>> c.ok, c.n_outside, c.worst_index
(False, 1, (1,))
>>> compare(np.array([np.nan]), np.array([np.nan]), atol=1.0).ok
False
>>> compare(np.array([np.nan]), np.array([np.nan]), equal_nan=True).ok
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from refpos.backend import to_numpy
from refpos.golden.ulp import check_dtype, ulp

FORMULA = "|y - ref| <= atol + rtol*|ref| + ulps*ulp_dtype(|ref|)"


def _host(x: Any) -> np.ndarray:
    """A float64 NumPy copy of an array of any backend (comparisons are reported on the host)."""
    return np.asarray(to_numpy(x), dtype=np.float64)


def _coefficient(value: float, name: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}") from None
    if number < 0:
        raise ValueError(f"{name} must be >= 0, got {number!r}")
    return number


def allowed_error(reference: Any, *, atol: Any = 0.0, rtol: float = 0.0, ulps: float = 0.0,
                  dtype: str | None = None) -> np.ndarray:
    r"""Elementwise allowed error for ``reference``.

    Parameters
    ----------
    reference : array
        The float64 reference values.
    atol : float or array broadcastable to ``reference``
        Absolute part (per position for angle-derived values); must be >= 0 where it is not NaN.
    rtol : float
        Relative part, times ``|reference|``.
    ulps : float
        ulps of ``dtype`` at ``|reference|`` (one rounding on each side of a low-precision output).
    dtype : str, optional
        The dtype the candidate computed in; required when ``ulps > 0``.

    Notes
    -----
    .. math::
        \varepsilon_i = \mathrm{atol}_i + \mathrm{rtol}\,|r_i| + \mathrm{ulps}\cdot\mathrm{ulp}_{\text{dtype}}(|r_i|)

    A NaN reference entry contributes a magnitude of 0 (its entry fails or passes by the NaN rule of
    :func:`compare`, not by its tolerance).
    """
    ref = _host(reference)
    rtol, ulps = _coefficient(rtol, "rtol"), _coefficient(ulps, "ulps")
    atol_arr = _host(atol)
    if np.any(atol_arr < 0):
        raise ValueError(f"atol must be >= 0, got a minimum of {float(np.nanmin(atol_arr))!r}")
    magnitude = np.abs(np.nan_to_num(ref, nan=0.0))
    allowed = atol_arr + rtol * magnitude
    if ulps:
        if dtype is None:
            raise ValueError("ulps > 0 needs the dtype whose ulp is meant (dtype=...)")
        allowed = allowed + ulps * np.asarray(to_numpy(ulp(magnitude, check_dtype(dtype))))
    try:
        return np.broadcast_to(allowed, ref.shape)
    except ValueError:
        raise ValueError(f"atol of shape {atol_arr.shape} does not broadcast to the reference {ref.shape}") from None


@dataclass(frozen=True)
class Comparison:
    """The outcome of :func:`compare`.

    ``error`` and ``allowed`` are elementwise (float64, the reference's shape); ``outside`` marks the
    failing entries. ``max_ratio`` is the largest ``error / allowed`` (inf where an entry fails with
    nothing allowed, or by a NaN); ``worst_index`` is where it is reached (``None`` for empty arrays).
    ``max_abs_error`` is the largest error, which may be another element's (a large value with a large
    tolerance): :meth:`describe` pairs each error with its own element's tolerance.
    """

    ok: bool
    max_abs_error: float
    max_ratio: float
    worst_index: tuple[int, ...] | None
    n_outside: int
    n: int
    error: np.ndarray
    allowed: np.ndarray
    outside: np.ndarray

    def summary(self) -> dict[str, Any]:
        """The JSON-ready numbers (no arrays)."""
        return {"ok": self.ok, "max_abs_error": self.max_abs_error, "max_ratio": self.max_ratio,
                "worst_index": None if self.worst_index is None else list(self.worst_index),
                "n_outside": self.n_outside, "n": self.n}

    def describe(self, dtype: str = "") -> str:
        r"""The comparison in words, each error beside its own element's tolerance: the element farthest outside
        (its error, its ratio, its tolerance) and, when another element has the largest error, that one too.

        >>> import numpy as np
        >>> c = compare(np.array([1.1, 100.5]), np.array([1.0, 100.0]), atol=np.array([0.01, 1.0]))
        >>> print(c.describe("float64").replace("; ", ";\n"))
        |diff| 0.1 at index (0,) = 10× its float64 tolerance 0.01;
        the largest |diff|, 0.5 at index (1,), is 0.5× its tolerance 1
        """
        if self.worst_index is None:
            return "nothing compared (empty arrays)"
        which = f"{dtype} " if dtype else ""
        text = (f"|diff| {self._error_at(self.worst_index):.3g} at index {self.worst_index} = {self.max_ratio:.3g}× "
                f"its {which}tolerance {float(self.allowed[self.worst_index]):.3g}")
        largest = self._largest_index()
        if largest != self.worst_index:
            ratio = self._error_at(largest) / float(self.allowed[largest]) if self.allowed[largest] else math.inf
            text += (f"; the largest |diff|, {self._error_at(largest):.3g} at index {largest}, is {ratio:.3g}× its "
                     f"tolerance {float(self.allowed[largest]):.3g}")
        return text

    def _error_at(self, index: tuple[int, ...]) -> float:
        value = float(self.error[index])
        return math.inf if math.isnan(value) else value

    def _largest_index(self) -> tuple[int, ...]:
        reported = np.where(np.isnan(self.error), np.inf, self.error)
        return tuple(int(i) for i in np.unravel_index(int(np.argmax(reported)), reported.shape))


def abs_error(candidate: Any, reference: Any, *, equal_nan: bool = False) -> np.ndarray:
    """``|y − r|`` elementwise, 0 where ``y == r`` (equal infinities), NaN where a NaN makes it undefined.

    With ``equal_nan`` both-NaN entries count as equal (error 0).
    """
    y, r = _host(candidate), _host(reference)
    if y.shape != r.shape:
        raise ValueError(f"candidate has shape {tuple(y.shape)}, the reference {tuple(r.shape)}")
    same = y == r
    if equal_nan:
        same = same | (np.isnan(y) & np.isnan(r))
    with np.errstate(invalid="ignore", over="ignore"):
        return np.where(same, 0.0, np.abs(y - r))


def compare(candidate: Any, reference: Any, *, atol: Any = 0.0, rtol: float = 0.0, ulps: float = 0.0,
            dtype: str | None = None, equal_nan: bool = False) -> Comparison:
    """Compare ``candidate`` with ``reference`` by :data:`FORMULA` (see the module for the NaN rules).

    Shapes must agree exactly (no broadcasting of the candidate); the tolerance arguments are those of
    :func:`allowed_error`.
    """
    error = abs_error(candidate, reference, equal_nan=equal_nan)
    allowed = allowed_error(reference, atol=atol, rtol=rtol, ulps=ulps, dtype=dtype)
    outside = ~(error <= allowed)  # NaN error or NaN tolerance: outside
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(outside, error / allowed, np.where(error == 0, 0.0, error / allowed))
    ratio = np.where(outside & ~(ratio > 1.0), np.inf, ratio)  # NaN, or an exact match under a NaN tolerance
    ratio = np.where(~outside & np.isnan(ratio), 1.0, ratio)  # an infinite error inside an infinite atol
    reported = np.where(np.isnan(error), np.inf, error)
    worst = tuple(int(i) for i in np.unravel_index(int(np.argmax(ratio)), ratio.shape)) if ratio.size else None
    return Comparison(ok=not bool(outside.any()), max_abs_error=float(reported.max()) if reported.size else 0.0,
                      max_ratio=float(ratio.max()) if ratio.size else 0.0, worst_index=worst,
                      n_outside=int(outside.sum()), n=int(error.size), error=error, allowed=allowed,
                      outside=outside)


def within(candidate: Any, reference: Any, **tolerance: Any) -> bool:
    """``compare(candidate, reference, **tolerance).ok``."""
    return compare(candidate, reference, **tolerance).ok
