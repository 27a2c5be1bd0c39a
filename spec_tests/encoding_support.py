"""Helpers shared by the encoding spec tests: tolerances and small NumPy oracles.

The oracles are written from the formulas of the family pages of docs/, independently of refpos, so that
a test compares the adapter under test against the formula and not against itself.
"""

from __future__ import annotations

import math

import numpy as np
from support import declared_dtype

from refpos.backend import to_numpy
from refpos.golden.tolerance import MANTISSA, rope_tolerance


def is_float64(impl) -> bool:
    return declared_dtype(impl) == "float64"


def tol(impl, *, rtol: float = 1e-12, atol: float = 1e-13) -> dict[str, float]:
    """Tolerance of a re-derivation of sums of a dozen O(1) terms, by ``INFO["dtype"]``: float64 a few
    ulps (``rtol``, ``atol``: 1e-12, 1e-13 unless the test states its own); float32 rounding of about a
    dozen operations, rtol 2e-5, atol 2e-6 (≈ 170 and 17 float32 ulps of 1); bfloat16 / float16 the same
    dozen operations in their ulp (16 ulps of 1: 0.125 and 0.0156)."""
    dtype = declared_dtype(impl)
    if dtype == "float64":
        return {"rtol": rtol, "atol": atol}
    if dtype == "float32":
        return {"rtol": 2e-5, "atol": 2e-6}
    unit = 16 * 2.0 ** -MANTISSA[dtype]
    return {"rtol": unit, "atol": unit}


def angle_atol(impl, max_position: int, magnitude: float = 2.0) -> float:
    """Absolute tolerance of an entry built from sinusoid rows at positions up to ``max_position``: the phase
    rule of :func:`refpos.golden.tolerance.rope_tolerance` for the declared dtype at that position (the
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
