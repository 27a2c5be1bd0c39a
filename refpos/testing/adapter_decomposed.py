"""The reference adapter's function for decomposed relative positions (the contract of ``spec_tests/README.md``;
docs/decomposed.md). :mod:`refpos.testing.adapter` imports it; arrays in and out are NumPy, inside they move to
the current backend.
"""

from __future__ import annotations

import numpy as np

from refpos.encodings.decomposed import add_decomposed_rel_pos as _add_decomposed
from refpos.testing.adapter_arrays import to_backend, to_host


def add_decomposed_rel_pos(attn: np.ndarray, q: np.ndarray, rel_pos_h: np.ndarray, rel_pos_w: np.ndarray,
                           q_size: list[int], k_size: list[int]) -> np.ndarray:
    """Logits ``attn`` ``(..., q_h·q_w, k_h·k_w)`` plus ``q_yx·R_h[y, y'] + q_yx·R_w[x, x']`` (docs/decomposed.md):
    ``q`` ``(..., q_h·q_w, C)`` raster order, tables ``(L, C)`` resampled (1-D linear) to ``2·max(q, k) − 1`` rows
    and read at row ``⌊i·max(k/q, 1) − j·max(q/k, 1) + (k − 1)·max(q/k, 1)⌋`` (exact arithmetic)."""
    return to_host(_add_decomposed(to_backend(attn, np.float64), to_backend(q, np.float64),
                                   to_backend(rel_pos_h, np.float64), to_backend(rel_pos_w, np.float64),
                                   tuple(q_size), tuple(k_size)))
