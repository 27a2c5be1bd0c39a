"""Shared helpers of the spec suite: the implementation under test, skips for what it lacks, tolerances.

* :data:`IMPL` — the adapter module named by ``REFPOS_IMPL`` (default ``refpos.testing.adapter``).
* :func:`require` — the adapter's functions, or a skip naming what is missing.
* :func:`assert_close` / :func:`tolerance_array` / :func:`tolerance` — tolerances that follow from
  ``INFO["dtype"]`` and, for angle-derived values, from the position: the rule of docs/conventions.md#tolerances as
  :mod:`refpos.golden.tolerance` implements it (the rule ``refpos check`` and the goldens use).
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import refpos.golden.tolerance as tol_rules
from refpos.backend import to_numpy
from refpos.golden.compare import compare

IMPL_NAME = os.environ.get("REFPOS_IMPL", "refpos.testing.adapter")
#: the repository root, so that the adapters shipped with the suite import as ``spec_tests.<...>``
ROOT = Path(__file__).resolve().parent.parent


def load_impl() -> ModuleType:
    if str(ROOT) not in sys.path:
        sys.path.append(str(ROOT))
    try:
        return importlib.import_module(IMPL_NAME)
    except ImportError as exc:
        raise pytest.UsageError(f"REFPOS_IMPL={IMPL_NAME!r} cannot be imported: {exc}") from exc


IMPL = load_impl()


def require(impl: ModuleType, *names: str) -> Any:
    """The adapter's functions ``names``; skip the test (with the reason) if one is missing."""
    missing = [n for n in names if not callable(getattr(impl, n, None))]
    if missing:
        pytest.skip(f"{IMPL_NAME} does not provide {', '.join(missing)}")
    funcs = tuple(getattr(impl, n) for n in names)
    return funcs[0] if len(funcs) == 1 else funcs


def info(impl: ModuleType) -> dict[str, Any]:
    """The adapter's ``INFO`` dict (empty when it declares none)."""
    declared = getattr(impl, "INFO", None)
    return dict(declared) if isinstance(declared, dict) else {}


# ------------------------------------------------------------------------------------- tolerances
#: kinds of compared quantity (docs/conventions.md#tolerances; :mod:`refpos.golden.tolerance` has one rule per kind)
KINDS = ("exact", "value", "phase", "probability")


def declared_dtype(impl: ModuleType) -> str:
    """``INFO["dtype"]`` of the adapter (``"float64"`` when it declares none), normalised."""
    try:
        return tol_rules.check_dtype(info(impl).get("dtype", "float64"))
    except ValueError as exc:
        raise pytest.UsageError(f"{IMPL_NAME}: INFO['dtype']: {exc}") from exc


def tolerance_array(
    impl: ModuleType,
    expected: Any,
    kind: str = "value",
    *,
    positions: Any = None,
    inv_freq: Any = None,
    magnitude: Any = 1.0,
    scale: Any = None,
    logits: Any = None,
) -> np.ndarray:
    """Elementwise atol for the adapter's output against the float64 ``expected``, by the rule of
    ``refpos check`` (:mod:`refpos.golden.tolerance`, docs/conventions.md#tolerances) for the adapter's
    ``INFO["dtype"]``.

    Parameters
    ----------
    kind
        ``"exact"`` — integers (buckets, indices); ``"value"`` — position-independent values (slopes,
        inverse frequencies, bias tables, attention outputs; ``scale`` is the natural magnitude, a floor
        for entries that cancel to zero); ``"phase"`` — values computed from angles ``p·ω`` (cos/sin,
        rotated q/k, sinusoid tables): ``positions`` ``(..., T)`` are the positions of the rows of
        ``expected`` ``(..., T, n)``, ``inv_freq`` the frequencies in use (only max ω enters; default 1),
        ``magnitude`` the size of a rotated pair (1 for cos/sin, ``A·‖pair‖`` for q/k);
        ``"probability"`` — softmax outputs of ``logits``.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    dtype = declared_dtype(impl)
    ref = np.asarray(expected, dtype=np.float64)
    if kind == "exact":
        return np.zeros(ref.shape)
    if kind == "value":
        atol = tol_rules.value_tolerance(dtype, ref, scale=None if scale is None else np.asarray(scale, float))
    elif kind == "phase":
        if positions is None:
            raise ValueError("kind='phase' needs the positions of the compared rows")
        freqs = np.ones(1) if inv_freq is None else np.asarray(inv_freq, dtype=np.float64)
        pos = np.asarray(positions)
        per_row = ref[..., None] if ref.ndim == pos.ndim else ref  # one value per position: (..., T, 1)
        atol = tol_rules.rope_tolerance(dtype, pos, freqs, reference=per_row,
                                        magnitude=np.asarray(magnitude, dtype=np.float64))
        atol = np.reshape(to_numpy(atol), ref.shape)
    else:
        if logits is None:
            raise ValueError("kind='probability' needs the logits")
        atol = tol_rules.probability_tolerance(dtype, np.asarray(logits, dtype=np.float64))
    return np.broadcast_to(np.asarray(to_numpy(atol) if not np.isscalar(atol) else atol, float), ref.shape)


def assert_close(actual: Any, expected: Any, impl: ModuleType, kind: str = "value", *, what: str = "",
                 **rule: Any) -> None:
    """Assert ``|actual − expected| ≤ atol`` elementwise, atol from :func:`tolerance_array`.

    The message names the quantity, the rule, the declared dtype and the worst entry.
    """
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    label = what or "output"
    if actual.shape != expected.shape:
        raise AssertionError(f"{label}: shape {actual.shape}, expected {expected.shape}")
    atol = tolerance_array(impl, expected, kind, **rule)
    result = compare(actual, expected, atol=atol)  # refpos's one comparison: a NaN never passes
    if not result.ok:
        worst = result.worst_index
        raise AssertionError(
            f"{label} ({kind} rule, dtype {declared_dtype(impl)}): {result.n_outside} of {result.n} entries "
            f"outside tolerance; worst at {worst}: got {actual[worst]!r}, expected {expected[worst]!r}, "
            f"|diff| {result.error[worst]:.3g} > atol {result.allowed[worst]:.3g}"
        )


def tolerance(impl: ModuleType, kind: str = "value") -> dict[str, float]:
    """Scalar ``{"rtol", "atol"}`` for ``numpy.testing.assert_allclose`` on O(1) values, by the dtype
    rule of :mod:`refpos.golden.tolerance` (position-independent kinds only; phases need
    :func:`assert_close`): float64 rtol 1e-13, float32 1e-6, bfloat16/float16 two ulps, each with the
    same number as an absolute floor for entries near zero."""
    if kind not in ("exact", "value", "probability"):
        raise ValueError(f"kind must be 'exact', 'value' or 'probability' here, got {kind!r}")
    if kind == "exact":
        return {"rtol": 0.0, "atol": 0.0}
    rel = float(to_numpy(tol_rules.value_tolerance(declared_dtype(impl), np.ones(1)))[0])
    if kind == "probability":
        return {"rtol": rel, "atol": max(rel, tol_rules.probability_tolerance(declared_dtype(impl), np.ones(1)))}
    return {"rtol": rel, "atol": rel}


def float_tolerance_note(impl: ModuleType) -> str:
    """One line for the report header: the tolerance rule that follows from the declared dtype."""
    dtype = declared_dtype(impl)
    c = tol_rules.ANGLE_C[dtype] if isinstance(tol_rules.ANGLE_C, dict) else tol_rules.ANGLE_C
    return (f"tolerances: dtype {dtype} -> {tol_rules.describe('value', dtype)['reason']}; angle-derived "
            f"values add {c:g}·p·max ω·{tol_rules.ANGLE_ROUNDOFF[dtype]:.3g} "
            "(refpos.golden.tolerance, docs/conventions.md#tolerances)")
