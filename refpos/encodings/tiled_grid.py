r"""A tiled image's learned positions: a gated mix of one patch grid and a grid per aspect-ratio tile, plus a
gated row per tile before and after the tiles' own encoder (Llama 3.2 Vision's tower, transformers'
``mllama_vision_model``; docs/tiled-grid.md#the-math).

An image is cut into at most ``T`` tiles (``max_num_tiles``), each of ``n`` patches; the tiles' layout (1×1, 1×2,
2×1, …) is one id ``a`` of the model's list of aspect ratios (``aspect_ratio_id``; id 0 is reserved for a padding
image, and is still a row of every table). Every tile's tokens are its class token then its ``n`` patches,
``N = n + 1`` rows. What they gain is a function of the checkpoint's weights and of ``a`` alone:

* **pre-tile rows** ``A_pre`` ``(ids, T·D)`` and gate ``g_pre``: the patches of tile ``t`` (not its class token,
  which is put before them afterwards) gain :math:`\tanh(g_{pre})\,A_{pre}[a]_t`;
* **the gated grid** ``E`` ``(N, D)``, the tile grids ``G`` ``(ids, T·N·D)`` and gate ``g``: row ``i`` of tile
  ``t`` (row 0 the class token) gains :math:`(1 - \tanh g)\,E_i + \tanh g\;G[a]_{t, i}`;

both before the local encoder (its input layer norm after them); after it, its output layer norm and the padding
of each tile to a multiple of 8 rows, every row of tile ``t`` (padding rows too) gains
:math:`\tanh(g_{post})\,A_{post}[a]_t` before the global encoder over all tiles. A table row ``A[a]`` of ``T·D``
entries is read tile by tile (``(T, D)``), a grid row ``G[a]`` of ``T·N·D`` as ``(T, N, D)``.

Examples
--------
>>> import numpy as np
>>> E = np.ones((2, 1)); G = np.arange(12.0).reshape(3, 4)  # N = 2 rows of width 1, T = 2 tiles, 3 ids
>>> gated_tile_grid(E, G, 0.0, 2, 2)[:, :, 0].tolist()  # gate 0: the patch grid alone, on every tile
[[1.0, 1.0], [1.0, 1.0]]
>>> np.round(gated_tile_grid(E, G, 100.0, 2, 2)[:, :, 0], 12).tolist()  # tanh g = 1: tile grid of id 2 alone
[[8.0, 9.0], [10.0, 11.0]]
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from refpos.validation import check_float, check_int, floating_array


def _id(aspect_ratio_id: Any, rows: int) -> int:
    return check_int("aspect_ratio_id", aspect_ratio_id, minimum=0, maximum=rows - 1)


def _table(name: str, table: Any) -> np.ndarray:
    array = np.asarray(floating_array(table, name=name), dtype=np.float64)
    if array.ndim != 2:
        raise ValueError(f"{name} must have shape (aspect ratio ids, entries), got {array.shape}")
    return array


def _tiles(name: str, entries: int, per_tile: int, tiles: Any) -> int:
    tiles = check_int("max_num_tiles", tiles, minimum=1)
    if entries != tiles * per_tile:
        raise ValueError(f"{name}: a row of {entries} entries is not max_num_tiles = {tiles} tiles of {per_tile}")
    return tiles


def gated_tile_grid(embedding: Any, tile_table: Any, gate: Any, aspect_ratio_id: Any, max_num_tiles: Any
                    ) -> np.ndarray:
    r"""What each tile's rows gain from the gated grid, ``(T, N, D)``, row 0 of each tile its class token.

    Parameters
    ----------
    embedding : real floating array ``(N, D)``
        The patch grid ``E`` shared by every tile (``gated_positional_embedding.embedding``), class row first.
    tile_table : real floating array ``(ids, T·N·D)``
        The tile grids ``G``, one row per aspect-ratio id (``gated_positional_embedding.tile_embedding``).
    gate : float
        The gate ``g`` (``gated_positional_embedding.gate``), taken through ``tanh``.
    aspect_ratio_id : int
        The image's aspect-ratio id ``a``, a row of ``tile_table``.
    max_num_tiles : int
        ``T``: the tiles every image is laid out in (padding tiles included).

    Returns
    -------
    numpy.ndarray ``(T, N, D)``, float64

    See Also
    --------
    aspect_ratio_rows : the gated row per tile added before and after the local encoder.
    tiled_input_positions : everything the tokens gain before the local encoder.
    """
    grid = np.asarray(floating_array(embedding, name="embedding"), dtype=np.float64)
    if grid.ndim != 2:
        raise ValueError(f"embedding must have shape (N, D), got {grid.shape}")
    table = _table("tile_table", tile_table)
    tiles = _tiles("tile_table", table.shape[1], grid.size, max_num_tiles)
    row = _id(aspect_ratio_id, table.shape[0])
    t = math.tanh(check_float("gate", gate))
    # P_t,i = (1 − tanh g)·E_i + tanh g·G[a]_{t,i}, with G[a] read as (T, N, D)
    return (1.0 - t) * grid[None] + t * table[row].reshape(tiles, *grid.shape)


def aspect_ratio_rows(table: Any, gate: Any, aspect_ratio_id: Any, max_num_tiles: Any) -> np.ndarray:
    r"""The row each tile's tokens gain from one aspect-ratio table, ``(T, D)``:
    :math:`\tanh(g)\,A[a]_t`, ``A[a]`` of ``T·D`` entries read as ``(T, D)``.

    Parameters
    ----------
    table : real floating array ``(ids, T·D)``
        ``pre_tile_positional_embedding.embedding`` or ``post_tile_positional_embedding.embedding``.
    gate : float or None
        Its gate ``g``; ``None`` where the table is not gated (the rows are added as stored).
    aspect_ratio_id, max_num_tiles : int
        As :func:`gated_tile_grid`.

    See Also
    --------
    gated_tile_grid : the gated grid added to every row of each tile.
    """
    array = _table("table", table)
    check_int("max_num_tiles", max_num_tiles, minimum=1)
    if array.shape[1] % max_num_tiles:
        raise ValueError(f"table: a row of {array.shape[1]} entries is not max_num_tiles = {max_num_tiles} rows")
    width = array.shape[1] // max_num_tiles
    tiles = _tiles("table", array.shape[1], width, max_num_tiles)
    rows = array[_id(aspect_ratio_id, array.shape[0])].reshape(tiles, width)
    # R_t = tanh(g)·A[a]_t  (as stored where the table has no gate)
    return rows if gate is None else math.tanh(check_float("gate", gate)) * rows


def tiled_input_positions(embedding: Any, tile_table: Any, gate: Any, pre_table: Any, pre_gate: Any,
                          aspect_ratio_id: Any, max_num_tiles: Any) -> np.ndarray:
    r"""Everything each tile's tokens gain before the local encoder, ``(T, N, D)``: the gated grid, and the
    pre-tile row on the patches only (the class token is put before them after that row is added).

    Parameters
    ----------
    embedding, tile_table, gate, aspect_ratio_id, max_num_tiles
        As :func:`gated_tile_grid`.
    pre_table, pre_gate
        The pre-tile table and its gate (:func:`aspect_ratio_rows`).

    Returns
    -------
    numpy.ndarray ``(T, N, D)``, float64

    Notes
    -----
    .. math:: e_{t,0} = P_{t,0}, \qquad e_{t,i} = \tanh(g_{pre})\,A_{pre}[a]_t + P_{t,i} \quad (i \ge 1)

    with ``P`` the gated grid; the post-tile rows (:func:`aspect_ratio_rows` of the post table) come after the
    local encoder, on every row of the tile, padding included.

    See Also
    --------
    gated_tile_grid, aspect_ratio_rows

    Examples
    --------
    >>> import numpy as np
    >>> e = tiled_input_positions(np.zeros((3, 1)), np.zeros((1, 6)), 0.0, np.ones((1, 2)), 100.0, 0, 2)
    >>> np.round(e[:, :, 0], 12).tolist()  # the class row (first) gains no pre-tile row
    [[0.0, 1.0, 1.0], [0.0, 1.0, 1.0]]
    """
    grid = gated_tile_grid(embedding, tile_table, gate, aspect_ratio_id, max_num_tiles)
    pre = aspect_ratio_rows(pre_table, pre_gate, aspect_ratio_id, max_num_tiles)
    if pre.shape[1] != grid.shape[2]:
        raise ValueError(f"pre_table: rows of width {pre.shape[1]} per tile, the grid's width is {grid.shape[2]}")
    out = grid.copy()
    # e_{t,i} = R_pre,t + P_{t,i} for the patches i ≥ 1; the class row e_{t,0} = P_{t,0}
    out[:, 1:] += pre[:, None, :]
    return out


__all__ = ["aspect_ratio_rows", "gated_tile_grid", "tiled_input_positions"]
