r"""Tolerances by dtype and position: the error a *correct* implementation can show.

The rule (docs/conventions.md#tolerances, docs/anchors.md#the-cossin-tables), one function per kind of value:

* :func:`value_tolerance` — position-independent values (inverse frequencies, ALiBi slopes, bias
  tables, attention outputs): float64 ``rtol = 1e-13`` (a float64 re-derivation: algebraically equal
  forms differ by a few ulps, 38 ulps ≈ 8e-15 relative for ALiBi slopes at n = 112); float32
  ``rtol = 1e-6`` (float32 anchors: HF ``inv_freq`` ≤ 3.2e-7 relative, BLOOM slopes 5.7e-8);
  bfloat16 / float16 two ulps of the reference (one rounding on each side), never absolute-only.
* :func:`rope_tolerance` — values computed from angles ``p·ω`` (cos/sin, rotated q/k, sinusoid tables).
  The angle of a correct implementation is off by up to ``|p|·u·k_j·ω_j`` and its rounding is a few units
  of the pair's size ``m``, both by the **form** of its computation (:mod:`refpos.golden.exact.forms`: ``pow``,
  ``exp_log``, ``running_product`` angles; float32 rotation, or an input, tables and output stored in
  bfloat16 / float16), so ``atol = m·|p|·max_f u_f·max_j k_{f,j}ω_j + storage(m)`` for the forms in force
  (every form the dtype admits unless named). A fixed float32 atol of 1e-5 rejects correct code from p ≈ 170.
* :func:`integer_tolerance` — T5 buckets, indices: exact.
* :func:`probability_tolerance` — softmax outputs of a float32 softmax: ``max|logit|·2⁻²³``.

Every rule is also available as a JSON-ready description (:func:`describe`) stored in the golden
manifest. ``refpos tolerance`` prints the numbers.

Examples
--------
>>> import numpy as np
>>> atol = rope_tolerance("float32", np.array([0, 1, 2048, 131071]), np.array([1.0, 0.01]), forms=["pow"])
>>> [f"{v:.2e}" for v in np.asarray(atol)]
['4.77e-07', '7.15e-07', '4.89e-04', '3.13e-02']
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from refpos.backend import Array, array_namespace, to_numpy
from refpos.golden.exact.forms import angle_rate, check_forms, describe_forms, storage_coefficients
from refpos.golden.exact.ulp import DTYPES as DTYPES  # the dtype facts every rule is stated in, re-exported
from refpos.golden.exact.ulp import MANTISSA, as_float_array, check_dtype, ulp

#: unit roundoff of the phase path: float64 angles for float64, else a float32 phase path (a bf16 or
#: fp16 phase path is the bf16_angles bug, not a tolerance); the forms of refpos.golden.exact.forms say more
ANGLE_ROUNDOFF = {"float64": 2.0**-53, "float32": 2.0**-24, "bfloat16": 2.0**-24, "float16": 2.0**-24}
#: float64 re-derivation: operation order moves the last digits (docs/conventions.md#tolerances)
RTOL_FLOAT64 = 1e-13
#: position-independent float32 anchor values (docs/conventions.md#tolerances)
RTOL_FLOAT32 = 1e-6
#: ulps allowed for reduced-precision position-independent values: one rounding on each side
ULPS_LOW = 2.0

REASONS = {
    "float64": "float64 re-derivation: algebraically equal forms differ by a few ulps (rtol 1e-13)",
    "float32": "float32 computation: rtol 1e-6 for position-independent values (HF inv_freq <= 3.2e-7)",
    "bfloat16": "bfloat16 output: 2 ulps of the reference (one rounding each side), never absolute-only",
    "float16": "float16 output: 2 ulps of the reference (one rounding each side), never absolute-only",
}


def value_tolerance(dtype: str, reference: Any, *, scale: Any = None) -> Array:
    r"""Elementwise atol for position-independent values (frequencies, slopes, bias tables, outputs).

    Notes
    -----
    .. math::
        \mathrm{atol} = \begin{cases}
            10^{-13}\,\max(|r|, s) & \text{float64 (re-derivation)}\\
            10^{-6}\,\max(|r|, s) & \text{float32 (anchor values)}\\
            2\,\mathrm{ulp}_{\text{dtype}}(\max(|r|, s)) & \text{bfloat16, float16}
        \end{cases}

    ``s`` (``scale``, default 0) is the natural magnitude of the quantity, a floor for entries that
    cancel to (nearly) zero, e.g. the row norm of an attention output.
    """
    dtype = check_dtype(dtype)
    ref = as_float_array(reference, "reference")
    xp = array_namespace(ref)
    mag = xp.abs(ref)
    if scale is not None:
        mag = xp.maximum(mag, as_float_array(scale, "scale", xp))
    if dtype == "float64":
        return RTOL_FLOAT64 * mag
    if dtype == "float32":
        return RTOL_FLOAT32 * mag
    return ULPS_LOW * ulp(mag, dtype)


def integer_tolerance(reference: Any) -> Array:
    """Integers (T5 buckets, indices) compare exactly: an all-zero atol."""
    ref = as_float_array(reference, "reference")
    return array_namespace(ref).zeros_like(ref)


def probability_tolerance(dtype: str, logits: Any) -> float:
    r"""atol for softmax probabilities: float32 :math:`\max|\mathrm{logit}|\,2^{-23}` (≈ 1e-6 for
    logits ≤ 10), float64 the same with :math:`2^{-52}\cdot 10^{3}` (operation order), low precision
    two ulps of 1."""
    dtype = check_dtype(dtype)
    z = to_numpy(as_float_array(logits, "logits"))
    top = float(abs(z[z == z]).max()) if z.size and (z == z).any() else 0.0  # NaN-safe max
    top = max(top, 1.0)
    if dtype == "float64":
        return top * 2.0**-52 * 1e3
    if dtype == "float32":
        return top * 2.0**-23
    return ULPS_LOW * 2.0 ** -MANTISSA[dtype]


def _max_omega(inv_freq: Any) -> float:
    r""":math:`\max_j |\omega_j|` (0 without frequencies): the fastest-turning pair sets every angle bound."""
    w = to_numpy(as_float_array(inv_freq, "inv_freq"))
    return float(abs(w).max()) if w.size else 0.0


def _half_ulp_at_one(dtype: str) -> float:
    """Half an ulp of ``dtype`` at 1 (2⁻⁵³, 2⁻²⁴, 2⁻⁸, 2⁻¹¹): a correct output's own rounding at unit size."""
    return 0.5 * 2.0 ** -MANTISSA[dtype]


def angle_error_bound(dtype: str, positions: Any, inv_freq: Any, *, forms: Any = None) -> Array:
    r"""Per-position bound of the angle error of a correct phase path: :math:`|p|\,\max_f u_f\max_j k_{f,j}\,\omega_j`.

    ``k_{f,j} = c + b·j + e·ln(1/ω_j)`` of each angle form ``f`` in force (:mod:`refpos.golden.exact.forms`; every
    form the dtype admits unless ``forms`` names some): float64 ``c = 4, e = 3``, ``u = 2⁻⁵³``; float32 paths
    ``pow`` (c = 4, e = 1), ``exp_log`` (c = 3, e = 4), ``running_product`` (c = 3, b = 3, e = 1), ``u = 2⁻²⁴``.
    """
    dtype = check_dtype(dtype)
    p = as_float_array(positions, "positions")
    xp = array_namespace(p)
    return xp.abs(p) * angle_rate(dtype, to_numpy(as_float_array(inv_freq, "inv_freq")), forms)


def correct_error(dtype: str, positions: Any, inv_freq: Any) -> Array:
    r"""The error a correct implementation in ``dtype`` typically shows on a rotated pair of unit size.

    Not a bound (that is :func:`rope_tolerance`, which is never smaller): the size of what a fixed atol
    has to admit, used to say from which position a fixed atol rejects correct code.

    Notes
    -----
    .. math:: e(p) = \tfrac12\,\mathrm{ulp}_{\text{dtype}}(1) + p\,\max_j\omega_j\,u

    the output's own rounding (half an ulp of the dtype at 1: 2⁻²⁴ float32, 2⁻⁸ bfloat16, 2⁻¹¹ float16,
    2⁻⁵³ float64) plus the angle error of the phase path (``u`` = 2⁻²⁴ for a float32 phase path, measured
    0.9–1.2·p·max ω·2⁻²⁴; 2⁻⁵³ for float64 angles).

    >>> [f"{e:.4g}" for e in np.asarray(correct_error("float32", np.array([0, 166, 167]), np.array([1.0])))]
    ['5.96e-08', '9.954e-06', '1.001e-05']
    """
    dtype = check_dtype(dtype)
    p = as_float_array(positions, "positions")
    xp = array_namespace(p)
    max_omega = _max_omega(inv_freq)
    return _half_ulp_at_one(dtype) + xp.abs(p) * max_omega * ANGLE_ROUNDOFF[dtype]


def first_rejected_position(dtype: str, atol: float, inv_freq: Any, max_position: int) -> int | None:
    r"""The first position ``p ≤ max_position`` where :func:`correct_error` exceeds ``atol``, else None.

    Notes
    -----
    .. math:: p^* = \max\Bigl(0,\ \Bigl\lfloor \frac{\mathrm{atol} - \tfrac12\mathrm{ulp}(1)}
        {\max_j\omega_j\,u} \Bigr\rfloor + 1\Bigr)

    (0 when the output's rounding alone exceeds ``atol``: bfloat16 and float16 against 1e-5).

    >>> [first_rejected_position(d, 1e-5, [1.0], 131072) for d in ("float64", "float32", "bfloat16")]
    [None, 167, 0]
    """
    dtype = check_dtype(dtype)
    max_omega = _max_omega(inv_freq)
    rounding = _half_ulp_at_one(dtype)
    if rounding > atol:
        return 0
    if max_omega == 0.0:
        return None
    first = int(np.floor((atol - rounding) / (max_omega * ANGLE_ROUNDOFF[dtype]))) + 1
    return first if first <= max_position else None


def frequency_promise(dtype: str, inv_freq: Any, max_position: int) -> str:
    """What the ``dtype`` tolerances assume about the frequencies, in one sentence with its number.

    Every rule here assumes ω and the angles p·ω computed in float32 (or float64) and only the output
    stored in ``dtype``. Frequencies or angles rounded to bfloat16 or float16 are a mistake (``refpos
    check`` names it ``bf16_angles``), not a tolerance: rounding ω to a dtype with unit roundoff ``u``
    moves the angle at position p by up to ``p·max ω·u``.
    """
    dtype = check_dtype(dtype)
    if dtype == "float64":
        return "ω and the angles p·ω in float64 throughout"
    max_omega = _max_omega(inv_freq)
    shift = max_position * max_omega * _half_ulp_at_one("bfloat16")
    kept = "float32 (HF's inv_freq: rtol 1e-6 of float64)" if dtype == "float32" else "float32 or float64"
    return (f"ω and p·ω in {kept}, only the output in {dtype}; ω or p·ω rounded to bfloat16 or float16 is a "
            f"bug (refpos check: bf16_angles), not a tolerance: a bfloat16 ω moves the angle at position "
            f"{max_position} by up to {shift:.3g} rad")


def rope_tolerance(
    dtype: str,
    positions: Any,
    inv_freq: Any,
    *,
    reference: Any = None,
    magnitude: Any = 1.0,
    forms: Any = None,
) -> Array:
    r"""atol for angle-derived values (cos/sin, rotated q/k, sinusoid tables) of a correct implementation.

    Parameters
    ----------
    dtype : {"float64", "float32", "bfloat16", "float16"}
        The dtype the candidate computed (and stored) in.
    positions : int array ``(..., T)``
    inv_freq : array ``(m,)``
        The frequencies in use, in pair order (the running product's bound grows with the pair index).
    reference : array ``(..., T, n)``, optional
        The reference values: the result is broadcast to their shape. Without it the result is per
        position, shape ``(..., T)``.
    magnitude : float or array broadcastable to the result
        Size ``m`` of the rotated quantity: 1 for cos/sin (``A`` with the attention factor), ``A·‖pair‖``
        for rotated q/k.
    forms : names of :data:`refpos.golden.exact.forms.FORMS`, optional
        The forms the candidate takes (``INFO["forms"]``, ``refpos check --forms``); a kind left out (angles,
        storage) means every form of that kind the dtype admits, ``None`` every admitted form.

    Notes
    -----
    .. math::
        \mathrm{atol} = m\,|p|\,\max_f u_f\max_j k_{f,j}\,\omega_j \;+\; \begin{cases}
            10^{-13}\, m & \text{float64}\\
            4\,\mathrm{ulp}_{32}(m) & \text{float32}\\
            \frac{n u_t}{1 - n u_t}\,m + 4\,\mathrm{ulp}_{32}(m) + \tfrac n2\,\mathrm{sub}_t & \text{bfloat16, float16}
        \end{cases}

    with ``n`` the largest number of roundings to the dtype among the storage forms in force (2 fused
    float32, 3 input in the dtype, 4 tables in the dtype), ``u_t`` the dtype's unit roundoff and ``sub_t``
    its subnormal spacing.
    """
    dtype = check_dtype(dtype)
    angle = angle_error_bound(dtype, positions, inv_freq, forms=forms)  # (..., T)
    xp = array_namespace(angle)
    mag = as_float_array(magnitude, "magnitude", xp)
    if reference is None:
        base = angle * mag
    else:
        ref = as_float_array(reference, "reference", xp)
        base = angle[..., None] * mag  # (..., T, n)
        if tuple(base.shape) != tuple(ref.shape):
            base = base + xp.zeros_like(ref)  # broadcast to the reference's shape
    relative, path_ulps, floor = storage_coefficients(dtype, forms)
    stored = relative * mag + floor
    if path_ulps:
        stored = stored + path_ulps * ulp(mag, "float32")
    return base + stored


@dataclass(frozen=True)
class ToleranceRule:
    """A tolerance rule as stored in the golden manifest (JSON-ready)."""

    rule: str  # "value", "rope", "integer", "probability"
    dtype: str
    reason: str
    rtol: float = 0.0
    ulps: float = 0.0
    angle_c: float = 0.0
    angle_roundoff: float = 0.0
    forms: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if v not in (0.0, ()) or k in ("rule", "dtype", "reason")}
        if self.forms:
            out["forms"] = list(self.forms)
        return out


def describe(rule: str, dtype: str) -> dict[str, Any]:
    """JSON description of a rule for one dtype: name, parameters and reason (manifest field)."""
    dtype = check_dtype(dtype)
    if rule == "integer":
        return ToleranceRule("integer", dtype, "integers (buckets, indices) compare exactly").to_json()
    if rule == "value":
        if dtype in ("float64", "float32"):
            rtol = RTOL_FLOAT64 if dtype == "float64" else RTOL_FLOAT32
            return ToleranceRule("value", dtype, REASONS[dtype], rtol=rtol).to_json()
        return ToleranceRule("value", dtype, REASONS[dtype], ulps=ULPS_LOW).to_json()
    if rule == "rope":
        names = check_forms(dtype)
        reason = ("angle-derived: every form a correct " + dtype + " implementation may take ("
                  + ", ".join(names) + "; docs/conventions.md#tolerances): " + describe_forms(dtype)
                  + "; the bound of the forms in force, per position, scaled by the pair's size m")
        return ToleranceRule("rope", dtype, reason, angle_roundoff=ANGLE_ROUNDOFF[dtype], forms=names).to_json()
    if rule == "probability":
        return ToleranceRule("probability", dtype, "float softmax: max|logit|·2^-23 (float32)").to_json()
    raise ValueError(f"rule must be one of ('value', 'rope', 'integer', 'probability'), got {rule!r}")
