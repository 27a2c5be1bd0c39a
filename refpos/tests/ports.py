"""Correct ports at another precision, written independently of refpos: the candidates the check and
diagnosis tests must accept (or name as ``float32_angles`` against a float64 declaration)."""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.rope.forms import pair_channels


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
