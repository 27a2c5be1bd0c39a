"""Helpers shared by the encoding spec tests: tolerances and small NumPy oracles.

The oracles are written from the formulas of the family pages of docs/, independently of refpos, so that
a test compares the adapter under test against the formula and not against itself.
"""

from __future__ import annotations

import math

import numpy as np
from support import declared_dtype

from refpos.backend import to_numpy
from refpos.golden.exact.tolerance import MANTISSA, rope_tolerance


def is_float64(impl) -> bool:
    return declared_dtype(impl) == "float64"


def tol(impl, *, rtol: float = 1e-12, atol: float = 1e-13, terms: int = 12) -> dict[str, float]:
    r"""Tolerance of a re-derivation of a sum of at most ``terms`` products of O(1) values, by ``INFO["dtype"]``.

    float64: the caller's ``rtol`` / ``atol`` (1e-12, 1e-13 unless the test states its own with its reason): two
    float64 evaluations of one formula in another operation order, the reference's own rule.

    Lower precisions, derived: with ``n = terms``, ``u = 2⁻²⁴`` the float32 arithmetic and :math:`u_t` the
    declared dtype's unit roundoff (2⁻²⁴, 2⁻⁸ bfloat16, 2⁻¹¹ float16), a correct implementation stores each of the
    ``2n`` factors in the dtype (:math:`u_t` relative each, on products of size at most 1: :math:`2n\,u_t`), forms
    the ``n`` products and their running sum in float32 (:math:`\gamma_n\sum|a_i b_i| \le n\cdot u\cdot n`), and
    stores the result (:math:`u_t` of it):

    .. math:: \mathrm{atol} = n^2 u + 2n\,u_t, \qquad \mathrm{rtol} = u_t + n\,u

    (the relative part covers results larger than the O(1) terms' sum: a bias ``slope·distance``). For n = 12:
    float32 atol 1.0e-5, rtol 7.7e-7; bfloat16 0.094, 3.9e-3.
    """
    dtype = declared_dtype(impl)
    if dtype == "float64":
        return {"rtol": rtol, "atol": atol}
    u, stored = 2.0**-24, 2.0 ** -(MANTISSA[dtype] + 1)
    return {"rtol": stored + terms * u, "atol": terms**2 * u + 2 * terms * stored}


def angle_atol(impl, max_position: int, magnitude: float = 2.0) -> float:
    """Absolute tolerance of an entry built from sinusoid rows at positions up to ``max_position``: the phase
    rule of :func:`refpos.golden.exact.tolerance.rope_tolerance` for the declared dtype at that position (the
    sinusoid's largest ω is 1), for values of size ``magnitude``: 2 by default (a shifted or multiplied row adds
    two products ``cos·a + sin·b`` of size ≤ 1 per pair), 1 for an entry ``sin`` or ``cos`` itself."""
    bound = rope_tolerance(declared_dtype(impl), np.array([max_position]), np.ones(1), magnitude=magnitude)
    return float(np.asarray(to_numpy(bound)).max())


def softmax(s: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """Stable softmax over the last axis; masked entries (False) get 0."""
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    m = np.max(s, axis=-1, keepdims=True)
    e = np.exp(s - m)
    return e / e.sum(axis=-1, keepdims=True)


def nope_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool = False) -> np.ndarray:
    """softmax(q kᵀ/√d [causal]) v for (H, T, d) inputs."""
    t = q.shape[-2]
    mask = np.tril(np.ones((t, t), dtype=bool)) if causal else None
    return softmax(q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1]), mask) @ v
