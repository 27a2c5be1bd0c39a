"""The tolerance entry of a golden output whose entries are ``a·sin θ`` or ``a·cos θ`` of angles a kind bounds itself
(2-D sin–cos, Fourier features, 1-D audio sinusoids: :mod:`refpos.golden.sincos2d_cases`,
:mod:`refpos.golden.fourier_cases`, :mod:`refpos.golden.sinusoid1d_cases`).

The kind's mistakes module derives the bound ``β₃₂`` of a correct float32 computation per row, linear in the unit
roundoff ``u = 2⁻²⁴``; the entry states, per dtype (rule ``"rope"``: angle-derived values):

* float64: the same derivation with ``u = 2⁻⁵³`` (``β₃₂·2⁻²⁹``) plus the float64 re-derivation floor ``10⁻¹³·a``;
* float32: ``β₃₂``;
* bfloat16, float16: ``β₃₂`` (the angles in float32) plus the storage of the dtype
  (:func:`refpos.golden.forms.storage_coefficients`: ``n`` roundings of the output, ``n·u_t/(1 − n·u_t)·a`` and the
  float32 path's ulps).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.golden.entries import round_up
from refpos.golden.forms import storage_coefficients
from refpos.golden.tolerance import DTYPES, RTOL_FLOAT64

#: float64's unit roundoff over float32's: the factor from a float32 bound to the float64 one
FLOAT64_PER_FLOAT32 = 2.0**-29


def angle_entry(bound32: Any, *, magnitude: float = 1.0) -> dict[str, Any]:
    """The entry of an output with per-row float32 bound ``bound32`` (a number, or one per index of axis -2)."""
    rows = np.atleast_1d(np.asarray(bound32, dtype=np.float64))
    scalar = np.ndim(bound32) == 0
    out: dict[str, Any] = {"rule": "rope"} if scalar else {"rule": "rope", "atol_axis": -2}
    for dtype in DTYPES:
        if dtype == "float64":
            atol = rows * FLOAT64_PER_FLOAT32 + RTOL_FLOAT64 * magnitude
        elif dtype == "float32":
            atol = rows
        else:
            relative, path_ulps, floor = storage_coefficients(dtype)
            atol = rows + relative * magnitude + path_ulps * 2.0**-23 * magnitude + floor
        values = [round_up(float(a)) for a in atol]
        out[dtype] = {"atol": values[0] if scalar else values, "rtol": 0.0, "ulps": 0.0}
    return out
