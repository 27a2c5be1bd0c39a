"""What every float32 form shares: the configured forms, the planted bfloat16 step, the frequencies and angles
in each angle form, and the argument checks.

``FORM`` holds the forms chosen by :func:`spec_tests.float32_forms.configure`; ``INFO`` is the adapter's
declaration. Every function of the package computes in float32 (``F32``) from the formula its module names.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

import refpos.testing.adapter as reference

F32 = np.float32
ANGLE_FORMS = ("pow", "exp_log", "running_product")
SOFTMAX_FORMS = ("max", "logsumexp")
#: the groups of functions a ``wrong`` implementation gets wrong (one bfloat16 rounding each): ω, the angles
#: ``p·ω`` (every sinusoid's too), the softmax's logits, the attention's logits, ALiBi's ``m·distance``, T5's
#: log-bucket ratio, the 2-D sin–cos grid's angles
WRONG = ("frequencies", "angles", "softmax", "attention", "alibi", "t5", "sincos2d")

INFO: dict[str, Any] = {
    "dtype": "float32", "rope_layout": "half",
    "rope_types": ["default", "linear", "ntk", "dynamic", "dynamic_step", "yarn", "yarn_log", "llama3", "longrope",
                   "proportional"],
    "mrope": ["contiguous", "interleaved", "hw_alternating", "four_rows"],
    "description": "plain float32 NumPy implementations of every contract function that computes floating-point "
                   "values, in the configured angle and softmax forms (spec_tests/float32_forms/)",
}
FORM: dict[str, Any] = {"angles": "pow", "softmax": "max", "wrong": None}


def planted(group: str, values: Any) -> np.ndarray:
    """``values``, rounded to bfloat16 (round to nearest even, kept in float32) when ``group`` is made wrong."""
    values = np.asarray(values, dtype=F32)
    if FORM["wrong"] != group:
        return values
    bits = np.ascontiguousarray(values, dtype=F32).view(np.uint32)
    return ((bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)).view(F32)


def checked(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` behind the contract's argument checks: the reference adapter's function of the same name is
    called first, for its ``ValueError`` / ``TypeError`` on bad input only; its result is discarded, and the
    value returned is ``function``'s own float32 computation."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        getattr(reference, function.__name__)(*args, **kwargs)
        return function(*args, **kwargs)

    return wrapper


# ---------------------------------------------------------------------------------------- angles
def ratio_powers(base: float, denom: float, n: int, start: int = 0) -> np.ndarray:
    """``ω_j = base^(−j/denom)`` for ``j = start … start + n − 1`` in float32, by the configured form:
    ``1/base^(j/denom)`` (one rounding of the exponent, as transformers' ``arange(0, d, 2)/d``),
    ``exp(−j·(ln base/denom))`` (MLX's, tensor2tensor's), or the running product ``ω_{j+1} = ω_j·s``,
    ``s = base^(−1/denom)`` (ggml's)."""
    j = np.arange(start, start + n, dtype=F32)
    b = F32(base)
    if FORM["angles"] == "pow":
        return F32(1) / b ** (j / F32(denom))
    if FORM["angles"] == "exp_log":
        return np.exp(-(j * (np.log(b) / F32(denom))))
    step = b ** (F32(-1) / F32(denom))
    out, w = np.empty(start + n, dtype=F32), F32(1)
    for index in range(start + n):
        out[index] = w
        w = F32(w * step)
    return out[start:]


def angles(positions: Any, base: float, denom: float, factors: np.ndarray, start: int = 0) -> np.ndarray:
    """``p·ω_j`` ``(..., n)`` in float32, ``n = factors.size``: one product ``p·(ω_j·factor_j)`` (pow, exp_log),
    or ggml's running product ``θ_{j+1} = θ_j·s`` from ``θ_start = p·s^start`` with the per-pair factor after
    it. ``positions`` may be integers or float coordinates."""
    p = np.asarray(positions).astype(F32)[..., None]
    n = factors.size
    if FORM["angles"] != "running_product":
        inv = planted("frequencies", ratio_powers(base, denom, n, start) * factors)
        return planted("angles", p * inv)
    step = F32(base) ** (F32(-1) / F32(denom))
    out = np.empty((*np.shape(positions), n), dtype=F32)
    theta = p[..., 0]
    for _ in range(start):
        theta = theta * step
    for index in range(n):
        out[..., index] = theta * factors[index]
        theta = theta * step
    return planted("angles", planted("frequencies", out) if np.ndim(positions) == 0 else out)


def sin_cos(phase: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(sin φ, cos φ)`` of float32 angles, in float32."""
    phase = np.asarray(phase, dtype=F32)
    return np.sin(phase), np.cos(phase)
