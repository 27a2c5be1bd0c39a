r"""What a candidate's exponent was: the structural reading of fitted frequencies, before the key that also fits.

A base change reproduces many other mistakes exactly. Plain RoPE divides by the rotary size ``d``; a port that
divides by ``n = d + 2`` computes :math:`\hat\omega_j = \theta^{-2j/n} = (\theta^{d/n})^{-2j/d}`, which plain
RoPE at the base :math:`\theta' = \theta^{d/n}` gives too (θ = 10⁶, d = 128: θ' = 808523). The rule fit
(:mod:`refpos.check.rule_fit`) rightly finds that ``rope_theta``, and points at a key the user has right. A
*reading* names the structure first; the report then gives the equivalence after it:

* ``exponent_denominator`` — :math:`\hat\omega_j = \omega_0 B^{-2j/n}` with ``B`` the config's own base and
  ``n ≠ d`` an integer. It applies to every rule whose frequencies are geometric,
  :math:`\omega_j = \omega_0 B^{-2j/d}` (default, linear, NTK-aware, dynamic NTK, vLLM's fixed NTK), with ``B``
  read from the config's own ratio :math:`\omega_1/\omega_0 = B^{-2/d}`. The fit:
  :math:`\ln(\hat\omega_j/\omega_0) = -(2j/n)\ln B` is a line through the origin in ``j``; its least-squares
  slope :math:`\sigma` gives :math:`n = -2\ln B/\sigma`, rounded to an integer;
* ``ntk_exponent`` — the NTK base :math:`\theta r^{d/k}` with an integer ``k ≠ d − 2`` where the rule's exponent
  is :math:`d/(d-2)` (NTK-aware: ``r = s``; dynamic NTK: :math:`r = sL/L_\text{max} - (s - 1)`). The config's
  base :math:`B = \theta r^{d/(d-2)}` gives :math:`\ln r`; the fitted base :math:`\hat B` (the same line at
  ``n = d``) gives the exponent :math:`e = \ln(\hat B/\theta)/\ln r` and :math:`k = d/e`, rounded.

A reading counts only when its own frequencies give every determined :math:`\hat\omega_j` within its bound (the
test of the rule fit, :func:`refpos.check.rule_fit.matches`): a base that is merely wrong gives a non-integer
``n`` or ``k``, whose rounding reproduces nothing.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from refpos.backend import to_numpy
from refpos.check.problem import np_ns
from refpos.check.rule_fit import matches
from refpos.rope.rules.inverse import Fitted

#: relative spread of the ratios ω_{j+1}/ω_j below which a config's frequencies are geometric
GEOMETRIC = 1e-12
#: the rules whose base is θ·r^(d/(d−2)): (rope_type, the key naming the form, the form that has that base)
NTK_BASES = (("ntk", "ntk_rule", "aware"), ("dynamic", "dynamic_rule", "hf"), ("dynamic", "dynamic_rule",
                                                                                "vllm_static"))


def _offset(n: int, d: int, name: str = "d") -> str:
    """``n`` in terms of ``d``: ``d + 2``, ``d − 1``, or the number itself when far from ``d``."""
    if n == d:
        return name
    return f"{name} {'+' if n > d else '−'} {abs(n - d)}" if abs(n - d) <= 8 else str(n)


def structural_reading(rope: Any, seq_len: int | None, omega: np.ndarray, bound: np.ndarray) -> dict[str, Any] | None:
    """The reading of the fitted ``omega`` ``(m,)`` (NaN where undetermined) with its ``bound``: ``{"reading",
    "text", …}`` (the module docstring), or ``None`` when no reading reproduces them."""
    import refpos

    reference = np.asarray(to_numpy(refpos.rope_frequencies(rope, seq_len=seq_len, xp=np_ns())[0]), dtype=np.float64)
    m, d = reference.size, rope.rotary_dim
    if m < 2 or reference.shape != np.shape(omega) or not np.all(reference > 0):
        return None
    ratios = reference[1:] / reference[:-1]
    if np.ptp(ratios) > GEOMETRIC * float(ratios.mean()):
        return None  # not one geometric sequence: llama3, YaRN, LongRoPE …
    fitted = Fitted(rope, seq_len, np.asarray(omega, dtype=np.float64), np.asarray(bound, dtype=np.float64))
    use = fitted.use & (fitted.omega > 0)
    if use.sum() < 2:
        return None
    w0, log_base = float(reference[0]), -(d / 2) * math.log(float(ratios.mean()))  # ω_0 and ln B
    j = np.arange(m, dtype=np.float64)
    y = np.log(fitted.omega[use] / w0)
    slope = float(np.sum(j[use] * y) / np.sum(j[use] ** 2))  # ln(ω̂/ω_0) = slope·j
    if slope >= 0 or log_base <= 0:
        return None
    return _denominator(rope, fitted, w0, log_base, slope) or _ntk_exponent(rope, fitted, log_base, slope)


def _denominator(rope: Any, fitted: Fitted, w0: float, log_base: float, slope: float) -> dict[str, Any] | None:
    """``exponent_denominator``: ω̂_j = ω_0·B^(−2j/n), n ≠ d."""
    d = rope.rotary_dim
    n = round(-2 * log_base / slope)
    j = fitted.pair
    if n <= 0 or n == d or not matches(w0 * np.exp(-2 * j * log_base / n), fitted)[0]:
        return None
    name = "head_dim" if n == rope.head_dim and rope.head_dim != d else _offset(n, d)
    plain = w0 == 1.0 and math.isclose(log_base, math.log(rope.theta), rel_tol=1e-12)
    formula = (f"θ^(−2j/({name}))" if plain else
               f"ω_0·B^(−2j/({name})) (B = {math.exp(log_base):.6g}, the rule's base)")
    return {"reading": "exponent_denominator", "denominator": n, "text": (
        f"ω̂ = {formula}: the exponent's denominator is {name} = {n} where the rule's is the rotary size d = {d} "
        f"({math.exp(log_base * d / n):.6g} = {'θ' if plain else 'B'}^(d/({name})))")}


def _ntk_exponent(rope: Any, fitted: Fitted, log_base: float, slope: float) -> dict[str, Any] | None:
    """``ntk_exponent``: the NTK base θ·r^(d/k), k ≠ d − 2."""
    if not any(rope.rope_type == kind and getattr(rope, key) == form for kind, key, form in NTK_BASES):
        return None
    d, log_theta = rope.rotary_dim, math.log(rope.theta)
    log_r = (d - 2) / d * (log_base - log_theta)  # B = θ·r^(d/(d−2))
    if abs(log_r) < 1e-12:
        return None  # r = 1 (dynamic NTK within L_max): the exponent does not show
    exponent = (-(d / 2) * slope - log_theta) / log_r  # the fitted base B̂ = θ·r^e
    if exponent == 0:
        return None
    k = round(d / exponent)
    if k <= 0 or k == d - 2:
        return None
    omega = np.exp(-2 * fitted.pair / d * (log_theta + d / k * log_r))
    if not matches(omega, fitted)[0]:
        return None
    name = _offset(k, d)
    return {"reading": "ntk_exponent", "exponent": [d, k], "text": (
        f"ω̂ = (θ·r^(d/({name})))^(−2j/d): the NTK exponent is d/({name}) = {d}/{k} where the rule's is "
        f"d/(d − 2) = {d}/{d - 2} (r = {math.exp(log_r):.6g})")}
