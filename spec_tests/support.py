"""Shared helpers of the spec suite: the implementation under test, skips for what it lacks, tolerances.

* :data:`IMPL` — the adapter module named by ``REFPOS_IMPL`` (default ``refpos.adapter``).
* :func:`require` — the adapter's functions, or a skip naming what is missing.
* :func:`tolerance` / :func:`assert_close` — tolerances that follow from ``INFO["dtype"]`` and, for
  phase-derived quantities, from the largest position, by the rule of pitfalls.md §20 (the rule that
  ``refpos check`` applies; :mod:`refpos.tolerance` when it is importable).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Any

import numpy as np
import pytest

IMPL_NAME = os.environ.get("REFPOS_IMPL", "refpos.adapter")


def load_impl() -> ModuleType:
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
#: unit roundoff u = 2^-(p) of each dtype an adapter may declare (half the machine epsilon).
UNIT_ROUNDOFF: dict[str, float] = {
    "float64": 2.0**-53,
    "float32": 2.0**-24,
    "float16": 2.0**-11,
    "bfloat16": 2.0**-8,
}

#: kinds of compared quantity and what the tolerance covers (pitfalls.md §20)
KINDS = ("exact", "value", "phase", "probability")


def declared_dtype(impl: ModuleType) -> str:
    """``INFO["dtype"]`` of the adapter (``"float64"`` when it declares none); must be a known dtype."""
    dtype = info(impl).get("dtype", "float64")
    if dtype not in UNIT_ROUNDOFF:
        raise pytest.UsageError(
            f"{IMPL_NAME}: INFO['dtype'] must be one of {tuple(UNIT_ROUNDOFF)}, got {dtype!r}"
        )
    return dtype


def tolerance(
    impl: ModuleType,
    kind: str = "value",
    *,
    max_position: float = 0.0,
    max_frequency: float = 1.0,
    magnitude: float = 1.0,
) -> dict[str, float]:
    """``{"rtol": ..., "atol": ...}`` for comparing the adapter's output with a float64 reference.

    Parameters
    ----------
    impl
        The adapter; its ``INFO["dtype"]`` names the dtype of its computation.
    kind
        ``"exact"`` (integers: buckets, indices), ``"value"`` (position-independent: slopes, inverse
        frequencies, bias tables, outputs of a few float operations), ``"phase"`` (angles, cos/sin, rotated
        q/k, sinusoid tables: the error grows with the position) or ``"probability"`` (softmax outputs).
    max_position
        Largest position whose phase enters the compared values (``"phase"`` only).
    max_frequency
        Largest angular frequency max ω (``"phase"``; 1 for RoPE and sinusoids).
    magnitude
        Largest |logit| fed to the softmax (``"probability"``).

    Notes
    -----
    With u the unit roundoff of the declared dtype (2⁻⁵³ float64, 2⁻²⁴ float32, 2⁻¹¹ float16, 2⁻⁸
    bfloat16), pitfalls.md §20 gives

    .. math::

        \\mathrm{tol} = \\max\\bigl(k\\,\\mathrm{ulp}(|\\mathrm{ref}|),\\; c\\,p\\,\\max_j \\omega_j\\,u_\\phi,\\;
        \\mathrm{floor}\\bigr)

    realised here as ``rtol`` (the ulp term: 1e-13 for float64, where algebraically equal forms differ
    by a few dozen ulps, 1e-6 for float32 anchor values, 2 ulps = 4u for float16/bfloat16) and ``atol``
    (the floor, plus for ``"phase"`` the term c·p·max ω·u_φ with c = 2 and u_φ = 2⁻²⁴ for a float32 or
    narrower phase path, measured ratio ≤ 1.33 in rope.md §4; u_φ = 2⁻⁵³ for float64, where an
    independent but correct derivation of ω moves the phase by p·ulp(ω)). Probabilities get
    ``atol = 2·|logit|·u`` (a float32 softmax: ≈ max|logit|·2⁻²³).
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    dtype = declared_dtype(impl)
    u = UNIT_ROUNDOFF[dtype]
    if kind == "exact":
        return {"rtol": 0.0, "atol": 0.0}
    if dtype == "float64":
        rtol, floor = 1e-13, 1e-14
    elif dtype == "float32":
        rtol, floor = 1e-6, 1e-6
    else:
        rtol, floor = 4.0 * u, 4.0 * u
    atol = floor
    if kind == "phase":
        phase_u = UNIT_ROUNDOFF["float64"] if dtype == "float64" else UNIT_ROUNDOFF["float32"]
        atol += 2.0 * abs(float(max_position)) * abs(float(max_frequency)) * phase_u
    elif kind == "probability":
        atol = max(atol, 2.0 * abs(float(magnitude)) * u)
    return {"rtol": rtol, "atol": atol}


def assert_close(
    actual: Any,
    expected: Any,
    impl: ModuleType,
    kind: str = "value",
    *,
    max_position: float = 0.0,
    max_frequency: float = 1.0,
    magnitude: float = 1.0,
    what: str = "",
) -> None:
    """Assert ``actual`` (the adapter's output) equals ``expected`` within :func:`tolerance`.

    The message names the tolerance, the declared dtype and where the worst difference is.
    """
    tol = tolerance(impl, kind, max_position=max_position, max_frequency=max_frequency,
                    magnitude=magnitude)
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    if actual.shape != expected.shape:
        raise AssertionError(f"{what or 'output'}: shape {actual.shape}, expected {expected.shape}")
    if kind == "exact":
        np.testing.assert_array_equal(actual, expected, err_msg=what)
        return
    header = f"{what or 'output'} ({kind}, {declared_dtype(impl)}: rtol={tol['rtol']:.3g}, atol={tol['atol']:.3g})"
    np.testing.assert_allclose(actual, expected, err_msg=header, equal_nan=False, **tol)


def float_tolerance_note(impl: ModuleType) -> str:
    """One line for the report header: the tolerances that follow from the declared dtype."""
    dtype = declared_dtype(impl)
    value = tolerance(impl, "value")
    return (
        f"tolerances for dtype {dtype}: value rtol={value['rtol']:.3g} atol={value['atol']:.3g}; "
        f"phase atol += 2·p·max ω·{'2^-53' if dtype == 'float64' else '2^-24'} (pitfalls.md §20)"
    )
