r"""A learned background grid resampled to the feature map plus a learned window table tiled over it (SAM 2's Hiera).

Hiera's image encoder (Bolya et al., "Window Attention is Bugged", 2023: the *windowed* absolute position embedding)
holds two tables of width ``d``: a background ``B`` of ``M_h × M_w`` cells (``window_positional_embedding_background_
size``, 7 × 7) and a window table ``W`` of ``m × m`` cells (the first stage's window side, ``window_size_per_stage[0]``,
8). Its patch map of ``h × w`` cells gains the background resampled bicubic to ``(h, w)`` (the size form,
``align_corners=False``, no antialiasing: :data:`~refpos.encodings.grid_variants.GRID_VARIANTS` ``bicubic``) plus the
window table repeated ``h / m`` times down and ``w / m`` times across, so that every window of the first stage's
windowed attention reads the same ``m × m`` rows:

.. math:: P_{i,j} = \mathcal{R}_{h,w}(B)_{i,j} + W_{i \bmod m,\ j \bmod m}

Its code repeats the window table a whole number of times (``tile`` by ``h // m`` and ``w // m``): a map whose sides
are not multiples of ``m`` does not add up in transformers, and is refused here.

:data:`WINDOW_MISTAKES` are wrong ways to build ``P``, each a function of the two tables and the grid.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from refpos.backend import Array, array_namespace
from refpos.encodings.grid_variants import GRID_VARIANTS
from refpos.validation import check_int, floating_array


def _rows(name: str, table: Any, cells: int, width: int | None = None) -> Array:
    table = floating_array(table, name=name)
    if table.ndim != 2 or table.shape[0] != cells or (width is not None and table.shape[1] != width):
        wanted = f"({cells}, {'dim' if width is None else width})"
        raise ValueError(f"{name} must have shape {wanted}, got {tuple(table.shape)}")
    return table


def windowed_position_grid(background: Array, window: Array, grid: tuple[int, int], *,
                           source_grid: tuple[int, int], window_side: int) -> Array:
    r"""Hiera's positions of an ``h × w`` patch map, ``(h·w, d)`` in raster order (module docstring).

    Parameters
    ----------
    background : real floating array ``(M_h·M_w, d)``
        The background table's cells in raster order (transformers' ``pos_embed`` ``(1, d, M_h, M_w)`` read
        channels last).
    window : real floating array ``(m·m, d)``
        The window table's cells in raster order (``pos_embed_window`` ``(1, d, m, m)`` read channels last).
    grid : (int, int)
        The patch map ``(h, w)``; each side a multiple of ``m``.
    source_grid : (int, int)
        ``(M_h, M_w)``.
    window_side : int
        ``m``.

    Notes
    -----
    .. math:: P_{i,j} = \mathcal{R}_{h,w}(B)_{i,j} + W_{i \bmod m,\ j \bmod m}

    See Also
    --------
    refpos.encodings.grid.resample_position_table : ``R`` (``mode="bicubic"``) and the tiled read (``read="tile"``).
    refpos.models.kinds.grid.GridLayer.reference : the record that calls this for a windowed grid.

    References
    ----------
    .. [1] Bolya et al., "Window Attention is Bugged: How not to Interpolate Position Embeddings", 2023.
    .. [2] transformers ``models/sam2/modeling_sam2.py``, ``Sam2HieraDetModel._get_pos_embed``.

    Examples
    --------
    >>> import numpy as np
    >>> rows = windowed_position_grid(np.zeros((1, 1)), np.array([[1.0], [2.0], [3.0], [4.0]]), (2, 4),
    ...                               source_grid=(1, 1), window_side=2)
    >>> rows[:, 0].tolist()
    [1.0, 2.0, 1.0, 2.0, 3.0, 4.0, 3.0, 4.0]
    """
    side = check_int("window_side", window_side, minimum=1)
    rows_, columns = (check_int(f"source_grid[{i}]", v, minimum=1) for i, v in enumerate(source_grid))
    h, w = (check_int(f"grid[{i}]", v, minimum=1) for i, v in enumerate(grid))
    if h % side or w % side:
        raise ValueError(f"grid: the window table of {side} × {side} cells is repeated a whole number of times over "
                         f"the patch map, whose sides must be multiples of {side}, got {(h, w)}")
    background = _rows("background", background, rows_ * columns)
    window = _rows("window", window, side * side, background.shape[1])
    return _resampled(background, (h, w), (rows_, columns)) + _tiled(window, (h, w), side)


def _resampled(background: Array, grid: tuple[int, int], source: tuple[int, int]) -> Array:
    """``R_{h,w}(B)``: the background resampled bicubic (GRID_VARIANTS ``bicubic``, no extra rows)."""
    return GRID_VARIANTS["bicubic"].resample(background, grid, prefix_tokens=0, source_grid=source)


def _tiled(window: Array, grid: tuple[int, int], side: int) -> Array:
    """``W_{i mod m, j mod m}``: the window table repeated over the map (GRID_VARIANTS ``tile``)."""
    return GRID_VARIANTS["tile"].resample(window, grid, prefix_tokens=0, source_grid=(side, side))


def _transposed(window: Array, side: int) -> Array:
    xp = array_namespace(window)
    return xp.reshape(xp.permute_dims(xp.reshape(window, (side, side, -1)), (1, 0, 2)), (side * side, -1))


#: a wrong way to build Hiera's positions -> its rows, from (background, window, grid, source_grid, window_side)
WINDOW_MISTAKES: Mapping[str, Callable[..., Array]] = MappingProxyType({
    "window_table_missing": lambda b, w, grid, source, m: _resampled(b, grid, source),
    "background_missing": lambda b, w, grid, source, m: _tiled(w, grid, m),
    "window_resampled_not_tiled": lambda b, w, grid, source, m: (
        _resampled(b, grid, source) + GRID_VARIANTS["bicubic"].resample(w, grid, prefix_tokens=0,
                                                                         source_grid=(m, m))),
    "window_transposed": lambda b, w, grid, source, m: _resampled(b, grid, source) + _tiled(_transposed(w, m),
                                                                                          grid, m),
    "background_tiled_not_resampled": lambda b, w, grid, source, m: (
        GRID_VARIANTS["tile"].resample(b, grid, prefix_tokens=0, source_grid=source) + _tiled(w, grid, m)),
})

__all__ = ["WINDOW_MISTAKES", "windowed_position_grid"]
