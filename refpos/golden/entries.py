"""The tolerance entries of a golden manifest: what each output may differ by, per dtype.

An output's entry holds, for every dtype a candidate may compute in, ``atol`` (a number, or a list
indexed along ``atol_axis``, the position axis of angle-derived outputs), ``rtol`` and ``ulps``. The
numbers come from the rules of :mod:`refpos.golden.tolerance`; :func:`compare` applies an entry through
the one comparison of :mod:`refpos.golden.compare`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from refpos.golden import compare as comparison
from refpos.golden import tolerance as tol
from refpos.golden.schema import SchemaError, check_tolerance

#: the reason of each tolerance rule (stored once in the manifest)
RULES = {
    "value": "position-independent values: " + "; ".join(tol.REASONS[d] for d in ("float64", "float32", "bfloat16")),
    "integer": "integers (buckets, indices, positions) compare exactly",
    "rope": "angle-derived: per dtype, the bound of every form a correct implementation in it may take (angles "
            "by pow, exp/log or a running product; a rotation in float32, or input, tables and output stored in "
            "the dtype: docs/conventions.md#tolerances); atol per position (axis -2) scaled by the largest "
            "rotated pair of the row",
    "frequencies": "inverse frequencies: float32 per pair (atol along axis -1), the angle forms' bound at position 1, "
                   "u·(c + b·j + e·ln(1/ω_j))·ω_j, the largest over the forms (docs/conventions.md#tolerances); "
                   "the other dtypes by the value rule",
    "attention": "attention output after RoPE: 2·max|v|·δlogit with δlogit = scale·|q|·|k|·(2·δrot + 2·D·u) from "
                 "the rotation tolerance at the largest position, plus the value rule",
}


def round_up(value: float, digits: int = 3) -> float:
    """``value`` rounded up to ``digits`` significant digits (a compact, never tighter tolerance)."""
    if value <= 0 or not math.isfinite(value):
        return value
    exponent = math.floor(math.log10(value)) - digits + 1
    mantissa = math.ceil(value / 10.0**exponent - 1e-9)  # 1e-9: no bump for an exact 3-digit value
    while float(f"{mantissa}e{exponent}") < value:
        mantissa += 1
    return float(f"{mantissa}e{exponent}")


def tolerance_value(reference: np.ndarray, *, scale: float | None = None) -> dict[str, Any]:
    """Tolerance entry of a position-independent output (frequencies, slopes, biases, attention)."""
    mag = float(scale) if scale is not None else 0.0
    out: dict[str, Any] = {"rule": "value"}
    out["float64"] = {"atol": round_up(tol.RTOL_FLOAT64 * mag), "rtol": tol.RTOL_FLOAT64, "ulps": 0.0}
    out["float32"] = {"atol": round_up(tol.RTOL_FLOAT32 * mag), "rtol": tol.RTOL_FLOAT32, "ulps": 0.0}
    for d in ("bfloat16", "float16"):
        out[d] = {"atol": round_up(tol.ULPS_LOW * 2.0 ** -tol.MANTISSA[d] * mag), "rtol": 0.0, "ulps": tol.ULPS_LOW}
    return out


def tolerance_frequencies(inv_freq: np.ndarray) -> dict[str, Any]:
    """Tolerance entry of inverse frequencies ``(..., m)``: float32 one atol per pair (axis -1) by
    :func:`refpos.golden.tolerance.frequency_tolerance`, the other dtypes as :func:`tolerance_value`."""
    out: dict[str, Any] = {**tolerance_value(inv_freq), "rule": "frequencies", "atol_axis": -1}
    atol = tol.frequency_tolerance("float32", inv_freq)
    out["float32"] = {"atol": [round_up(float(a)) for a in atol], "rtol": 0.0, "ulps": 0.0}
    return out


def tolerance_integer() -> dict[str, Any]:
    """Tolerance entry of an integer output: exact in every dtype."""
    exact = {"atol": 0.0, "rtol": 0.0, "ulps": 0.0}
    return {"rule": "integer", **{d: dict(exact) for d in tol.DTYPES}}


def tolerance_rope(positions: np.ndarray, inv_freq: np.ndarray, magnitude: np.ndarray) -> dict[str, Any]:
    """Tolerance entry of an angle-derived output with rows indexed by ``positions`` (axis -2).

    ``magnitude`` ``(T,)`` is the largest size of a rotated pair in each row (1 for cos/sin,
    ``A·max‖pair‖`` for rotated q/k). Per row and dtype: ``atol = m·c·p·max ω·u + rounding(m)``.
    """
    p = np.asarray(positions, dtype=np.int64)
    m = np.asarray(magnitude, dtype=np.float64)
    out: dict[str, Any] = {"rule": "rope", "atol_axis": -2}
    for d in tol.DTYPES:
        # every form the dtype admits (a golden is read without a declaration): its angle and storage bound
        atol = np.asarray(tol.rope_tolerance(d, p, inv_freq, magnitude=m), dtype=np.float64)
        out[d] = {"atol": [round_up(float(a)) for a in atol], "rtol": 0.0, "ulps": 0.0}
    return out


def tolerance_attention(reference: np.ndarray, *, qk_norm: float, v_max: float, scale: float,
                        max_position: int, inv_freq: np.ndarray, head_dim: int) -> dict[str, Any]:
    """Tolerance entry of an attention output whose q and k were rotated at positions ≤ ``max_position``.

    The rotation error of each dtype (:func:`refpos.golden.tolerance.rope_tolerance`, unit magnitude) moves a
    logit by at most ``scale·‖q‖·‖k‖·(2·δ_rot + 2·D·u)`` (both vectors rotated, plus the dot product's
    rounding), and a softmax row moves by at most twice the largest logit change (in the 1-norm), so the
    output moves by at most ``2·max|v|·δ_logit``; the value rule of the output is added on top.
    """
    out = tolerance_value(reference, scale=v_max)
    out["rule"] = "attention"
    for d in tol.DTYPES:
        rot = float(np.asarray(tol.rope_tolerance(d, np.array([max_position]), inv_freq))[0])
        u = 2.0**-53 if d == "float64" else 2.0**-24
        dlogit = scale * qk_norm * (2.0 * rot + 2.0 * head_dim * u)
        out[d]["atol"] = round_up(out[d]["atol"] + 2.0 * v_max * dlogit)
    return out


def entry_tolerance(reference: np.ndarray, entry: dict[str, Any], dtype: str) -> dict[str, Any]:
    """The arguments of :func:`refpos.golden.compare.compare` that ``entry[dtype]`` stands for.

    A list ``atol`` is laid along ``entry["atol_axis"]`` (default -2, the position axis).
    """
    dtype = tol.check_dtype(dtype)
    spec = entry[dtype]
    atol = spec["atol"]
    if isinstance(atol, list):
        ndim = np.ndim(reference)
        shape = [1] * ndim
        shape[entry.get("atol_axis", -2)] = len(atol)
        atol = np.reshape(np.asarray(atol, dtype=np.float64), shape)  # broadcast along atol_axis
    return {"atol": atol, "rtol": spec.get("rtol", 0.0), "ulps": spec.get("ulps", 0.0), "dtype": dtype}


def allowed_error(reference: np.ndarray, entry: dict[str, Any], dtype: str) -> np.ndarray:
    """Elementwise allowed error of ``entry[dtype]`` (see :data:`FORMULA`) for ``reference``."""
    return comparison.allowed_error(reference, **entry_tolerance(reference, entry, dtype))


def compare(candidate: Any, reference: np.ndarray, entry: dict[str, Any], dtype: str) -> dict[str, Any]:
    """Compare within a tolerance entry: ``{"ok", "max_abs_error", "max_ratio", "worst_index", "n_bad",
    "message"}`` (``message``: :meth:`refpos.golden.compare.Comparison.describe`).

    The comparison is :func:`refpos.golden.compare.compare` with ``equal_nan=True`` (the ``"nan"``
    policy of fully masked rows); an integer reference compares exactly (its entries are all zero).
    The entry is checked first (:func:`refpos.golden.schema.check_tolerance`: finite numbers >= 0, one
    ``atol`` per index along ``atol_axis``; ``ValueError`` otherwise), so a NaN, negative or string
    tolerance is refused rather than compared with.
    """
    ref = np.asarray(reference)
    cand = np.asarray(candidate)
    if cand.shape != ref.shape:
        raise ValueError(f"candidate has shape {tuple(cand.shape)}, the reference {tuple(ref.shape)}")
    dtype = tol.check_dtype(dtype)
    try:
        check_tolerance(entry, "tolerance", list(ref.shape), dtypes=(dtype,))
    except SchemaError as exc:
        raise ValueError(str(exc)) from None
    result = comparison.compare(cand, ref, equal_nan=True, **entry_tolerance(ref, entry, dtype))
    return {"ok": result.ok, "max_abs_error": result.max_abs_error, "max_ratio": result.max_ratio,
            "worst_index": result.worst_index, "n_bad": result.n_outside, "message": result.describe(dtype)}
