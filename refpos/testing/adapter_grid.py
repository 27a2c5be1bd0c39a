"""The reference adapter's functions for vision position grids (the contract of ``spec_tests/README.md``):
resampling as ``torch.nn.functional.interpolate`` computes it, learned position tables resampled to a patch grid
(docs/grid.md), and decomposed relative positions (docs/decomposed.md).

:mod:`refpos.testing.adapter` imports them, so ``REFPOS_IMPL=refpos.testing.adapter`` provides them; they live
here to keep each module of one concern. Arrays in and out are NumPy; inside they move to the current backend.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refpos.encodings.decomposed import add_decomposed_rel_pos as _add_decomposed
from refpos.encodings.grid import resample_position_table as _resample_table
from refpos.encodings.grid_variants import WAY_FIELDS
from refpos.encodings.resample import interpolate as _interpolate
from refpos.testing.adapter_arrays import to_backend, to_host


def interpolate(x: np.ndarray, size: Any = None, mode: str = "bilinear", align_corners: bool = False,
                antialias: bool = False, scale_factor: Any = None, recompute_scale_factor: bool = False) -> np.ndarray:
    """``x`` ``(..., n_1[, n_2])`` resampled along its last one (``"linear"``) or two (``"bilinear"``,
    ``"bicubic"``) axes, or as many as ``size`` names (``"nearest"``), exactly as torch's CPU
    ``F.interpolate`` on ``(N, C, ...)`` computes it (docs/grid.md#resampling): exactly one of ``size`` (an int
    or one per axis) and ``scale_factor`` (a float or one per axis; output ``⌊n·s⌋``, step ``1/s`` unless
    ``recompute_scale_factor``). Bad input: ValueError / TypeError naming the parameter."""
    return to_host(_interpolate(to_backend(x, np.float64), size, mode=mode, scale_factor=scale_factor,
                                align_corners=align_corners, antialias=antialias,
                                recompute_scale_factor=recompute_scale_factor))


def resample_position_table(table: np.ndarray, grid: list[int], way: dict, prefix_tokens: int = 0,
                            suffix_tokens: int = 0) -> np.ndarray:
    """A position table ``(prefix + M·M + suffix, d)`` (grid rows in raster order, row = height) resampled to the
    patch grid ``(h, w)`` the ``way`` says (docs/grid.md#the-ways): ``{"mode", "align_corners", "antialias",
    "scale_factor_offset"`` (None: the size form; δ: scale factors ``(g + δ)/M``), ``"padding"`` (``border`` /
    ``zeros``), ``"keep_extra"`` (the first ``prefix_tokens`` and last ``suffix_tokens`` rows returned
    unchanged around the grid, or left out), ``"axes"`` (``hw``; ``wh``: resampled to ``(w, h)`` and read in
    that order), ``"read"`` (``resample``; ``buckets``: rows gathered at ``⌊i·M/n⌋``, mode ``nearest``)};
    unknown keys: ValueError."""
    if not isinstance(way, dict):
        raise TypeError(f"way must be a dict with keys {tuple(WAY_FIELDS)}, got {type(way).__name__}")
    unknown = sorted(set(way) - set(WAY_FIELDS))
    if unknown or way.get("mode") is None:
        raise ValueError(f"way takes the keys {tuple(WAY_FIELDS)} ('mode' required); unknown {unknown}")
    options = {**WAY_FIELDS, **way}
    return to_host(_resample_table(to_backend(table, np.float64), tuple(grid), prefix_tokens=prefix_tokens,
                                   suffix_tokens=suffix_tokens, **options))


def add_decomposed_rel_pos(attn: np.ndarray, q: np.ndarray, rel_pos_h: np.ndarray, rel_pos_w: np.ndarray,
                           q_size: list[int], k_size: list[int]) -> np.ndarray:
    """Logits ``attn`` ``(..., q_h·q_w, k_h·k_w)`` plus ``q_yx·R_h[y, y'] + q_yx·R_w[x, x']`` (docs/decomposed.md):
    ``q`` ``(..., q_h·q_w, C)`` raster order, tables ``(L, C)`` resampled (1-D linear) to ``2·max(q, k) − 1`` rows
    and read at row ``⌊i·max(k/q, 1) − j·max(q/k, 1) + (k − 1)·max(q/k, 1)⌋`` (exact arithmetic)."""
    return to_host(_add_decomposed(to_backend(attn, np.float64), to_backend(q, np.float64),
                                   to_backend(rel_pos_h, np.float64), to_backend(rel_pos_w, np.float64),
                                   tuple(q_size), tuple(k_size)))
