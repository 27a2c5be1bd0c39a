"""Correct ports at another precision, written independently of refpos: the candidates the check and
diagnosis tests must accept (or name as ``float32_angles`` against a float64 declaration)."""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.rope.forms import pair_channels


def float32_table_atol(max_angle: float, factor: float = 1.0) -> float:
    r"""The largest difference between a float32 cos/sin table and float64's, as a library computes it:

    .. math:: A\,(3\,|\varphi|_{max} + 4)\,2^{-24}

    The angle: ω computed by a float32 ``pow`` (≤ u relative), ω stored in float32 (≤ u) and p·ω rounded
    (≤ u, the position exact below 2²⁴): 3·|φ|·u; cos and sin then evaluated (≤ 2u) and stored (≤ 2u) in
    float32: 4u (u = 2⁻²⁴). ``factor`` is the attention factor A the table is multiplied by."""
    return factor * (3 * float(max_angle) + 4) * 2.0**-24


def float32_rope(x: np.ndarray, positions: np.ndarray, rope: Any, inv_freq: Any, attention_factor: float) -> np.ndarray:
    """RoPE computed the way a float32 library does: float32 ω, positions, angles, cos/sin and products.

    ``x`` is ``(T, D)``, ``positions`` ``(T,)``; the pairs are the ones refpos's layout rule gives.
    """
    u_in, v_in, u_out, v_out = pair_channels(rope)
    angles = positions.astype(np.float32)[:, None] * np.asarray(inv_freq).astype(np.float32)[None, :]  # (T, m)
    cos, sin = np.cos(angles) * np.float32(attention_factor), np.sin(angles) * np.float32(attention_factor)
    x32 = x.astype(np.float32)
    y = x32.copy()
    y[:, u_out] = x32[:, u_in] * cos - x32[:, v_in] * sin
    y[:, v_out] = x32[:, v_in] * cos + x32[:, u_in] * sin
    return y
