r"""A rule's formula run backwards: from fitted frequencies to the keys that would give them, and each pair's band.

``refpos check`` fits the frequencies :math:`\hat\omega_j` a candidate used (refpos/check/shared/fit.py) and asks
the config's rule which of its keys reproduce them (refpos/check/rope/rule_fit.py). Each
:class:`~refpos.rope.rules.RopeRule` answers with two entries of its record:

* ``invert(fitted)`` yields *proposals*: changes of the rule's keys (``{"factor": 4.0}``; ``"seq_len"`` for the
  length a rule reads) computed in closed form from the fitted frequencies, each only a candidate answer: the
  check keeps the first proposal under which the rule's own formula reproduces every :math:`\hat\omega_j`;
* ``bands(rope, seq_len)`` names the part of the rule each pair falls in (llama3's wavelength bands, YaRN's
  ramp, LongRoPE's factor index; ``""`` for a rule with one formula for every pair).

This module holds what the inversions share: :class:`Fitted` (the frequencies and their bounds) and the
log-linear fit of a base (:func:`log_line`: :math:`\ln\hat\omega_j = -\ln s - (2j/d)\ln\theta` is a line in ``j``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

#: a change of a rule's keys (RopeConfig fields, or ``"seq_len"``) -> its value
Changes = dict[str, Any]


class Fitted(NamedTuple):
    """What an inversion reads: the config, its length, and the fitted frequencies with their bounds."""

    rope: Any  # the config's RopeConfig
    seq_len: int | None
    omega: np.ndarray  # (m,) ω̂, NaN where undetermined
    bound: np.ndarray  # (m,) |ω̂ − ω| bound

    @property
    def use(self) -> np.ndarray:
        """The pairs whose frequency is determined."""
        return np.isfinite(self.omega) & np.isfinite(self.bound)

    @property
    def pair(self) -> np.ndarray:
        """``j = 0 … m − 1`` as floats."""
        return np.arange(self.omega.size, dtype=np.float64)

    def plain(self, theta: float | None = None, denominator: int | None = None) -> np.ndarray:
        r""":math:`\theta^{-2j/d}` for every pair (``d`` the rotary size, or ``denominator``)."""
        d = denominator or self.rope.rotary_dim
        return float(theta or self.rope.theta) ** (-2.0 * self.pair / d)

    def ratio(self, theta: float | None = None) -> np.ndarray:
        r""":math:`\hat\omega_j/\theta^{-2j/d}`: 1 where a pair kept its plain frequency, ``1/s`` where divided."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.omega / self.plain(theta)


def log_line(fitted: Fitted, mask: np.ndarray | None = None, *, divisor: float | None = None,
             denominator: int | None = None) -> tuple[float, float] | None:
    r"""Least squares :math:`\ln\hat\omega_j = -\ln s - x_j \ln\theta`, :math:`x_j = 2j/d`: ``(θ, s)``, the base
    and the divisor, over the pairs of ``mask``. ``divisor``: ``s`` given, only ``θ`` fitted. ``None`` with fewer
    than 2 usable pairs."""
    d = denominator or fitted.rope.rotary_dim
    use = fitted.use & (fitted.omega > 0) & (True if mask is None else mask)
    if use.sum() < 2:
        return None
    x, y = 2 * fitted.pair[use] / d, np.log(fitted.omega[use])
    if divisor is not None:
        y = y + math.log(divisor)
        slope = float(np.sum(x * y) / np.sum(x * x)) if np.any(x) else 0.0
        return math.exp(-slope), divisor
    slope, intercept = np.polyfit(x, y, 1)
    return math.exp(-float(slope)), math.exp(-float(intercept))


def invert_theta(fitted: Fitted, mask: np.ndarray | None = None, divisor: float = 1.0) -> Iterator[Changes]:
    """The base alone, from the pairs of ``mask`` (divided by ``divisor`` under the config): every rule's
    fallback proposal, and plain RoPE's only one."""
    line = log_line(fitted, mask, divisor=divisor)
    if line:
        yield {"theta": line[0]}


def no_bands(rope: Any, seq_len: int | None) -> list[str]:
    """One formula for every pair: no bands."""
    return [""] * rope.n_pairs
