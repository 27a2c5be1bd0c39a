"""A rotation oracle for the spec tests, written from docs/conventions.md#pair-layouts, independently of refpos.

:func:`rotate_with_rows` turns every pair of ``x`` by given per-pair cos/sin rows (``A·cos φ``, ``A·sin φ``),
in the layout's channels and the placement's span: what every test that knows the angles it expects
compares an adapter's rotation with (the given-tables kernels, the LongRoPE switch through ``apply_rope``).
"""

from __future__ import annotations

import numpy as np


def rotated_width(rope: dict) -> int:
    """The rotated channels of a contract rope dict (``rotary_dim``, else ``head_dim``)."""
    return rope.get("rotary_dim", rope["head_dim"])


def _span(rope: dict) -> slice:
    w, d = rotated_width(rope), rope["head_dim"]
    return slice(d - w, d) if rope.get("placement") == "last" else slice(0, w)


def rotate_with_rows(x: np.ndarray, cos_rows: np.ndarray, sin_rows: np.ndarray, rope: dict) -> np.ndarray:
    """The oracle, from docs/conventions.md#pair-layouts: ``x`` ``(..., T, D)``, rows ``(..., T, m)`` per pair."""
    span, w = _span(rope), rotated_width(rope)
    m = w // 2
    part = x[..., span]
    if rope["layout"] == "half":
        u, v = part[..., :m], part[..., m:]
    else:  # interleaved and deinterleaved read the pairs (2j, 2j + 1)
        u, v = part[..., 0::2], part[..., 1::2]
    u_new, v_new = u * cos_rows - v * sin_rows, v * cos_rows + u * sin_rows
    if rope["layout"] == "interleaved":
        rotated = np.stack([u_new, v_new], axis=-1).reshape(*u_new.shape[:-1], w)
    else:  # half, and deinterleaved writes half-split
        rotated = np.concatenate([u_new, v_new], axis=-1)
    out = np.array(np.broadcast_to(x, (*rotated.shape[:-1], x.shape[-1])))
    out[..., span] = rotated
    return out


def rotate_by_frequencies(x: np.ndarray, positions: np.ndarray, inv_freq: np.ndarray, attention_factor: float,
                          rope: dict) -> np.ndarray:
    """``x`` ``(..., T, D)`` rotated at ``positions`` ``(T,)`` by ``φ_j = p·ω_j`` (float64) times ``A``."""
    angles = np.asarray(positions, dtype=np.float64)[:, None] * np.asarray(inv_freq)[None, :]  # (T, m)
    return rotate_with_rows(x, attention_factor * np.cos(angles), attention_factor * np.sin(angles), rope)
