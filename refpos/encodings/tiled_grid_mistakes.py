r"""The bound of a float32 port of a tiled image's positions, and the mistakes a port can make
(docs/tiled-grid.md#mistakes).

**Bound.** A port holds the weights in float32 (``u = 2⁻²⁴``) and computes there; the weights given are those
float32 values, so only the arithmetic rounds. ``t = tanh g`` is returned within ``c_t·u·|t|`` (``c_t = 2``: one
ulp of a float32 ``tanh``, at most ``2u`` relative). The gated grid ``(1 − t̂)E + t̂G`` rounds ``1 − t̂`` (error
``|ε_t| + u|1 − t|``), each product once (``u`` of it) and the sum once, so per entry

.. math:: |\Delta P| \le u\,\big(c_t|t|(|E| + |G|) + |1 - t|\,|E| + |(1 - t)E| + |tG| + |P|\big)(1 + 4u)

and a gated row ``t̂A`` is within ``u(c_t + 1)|t||A|(1 + 4u)``; the pre-tile row added to a patch's grid entry
rounds that sum once more (``u`` of it). The factor ``1 + 4u`` holds the second-order terms.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from refpos.encodings.tiled_grid import aspect_ratio_rows, gated_tile_grid, tiled_input_positions

#: float32's unit roundoff: the precision a correct port may compute in
U32 = 2.0**-24
#: a float32 tanh's error, in units of ``u`` relative to ``|tanh g|`` (one ulp)
TANH_ULPS = 2.0


def tile_grid_bound(embedding: Any, tile_table: Any, gate: float, aspect_ratio_id: int, max_num_tiles: int
                    ) -> np.ndarray:
    """Per entry of :func:`~refpos.encodings.tiled_grid.gated_tile_grid`: a float32 port's bound (module
    docstring)."""
    t = math.tanh(gate)
    grid = np.asarray(embedding, dtype=np.float64)
    tiles = np.asarray(tile_table, dtype=np.float64)[aspect_ratio_id].reshape(max_num_tiles, *grid.shape)
    value = gated_tile_grid(embedding, tile_table, gate, aspect_ratio_id, max_num_tiles)
    # u·(c_t|t|(|E| + |G|) + |1 − t||E| + |(1 − t)E| + |tG| + |P|)(1 + 4u)
    return U32 * (TANH_ULPS * abs(t) * (np.abs(grid) + np.abs(tiles)) + 2 * abs(1 - t) * np.abs(grid)
                  + abs(t) * np.abs(tiles) + np.abs(value)) * (1 + 4 * U32)


def aspect_ratio_bound(table: Any, gate: float | None, aspect_ratio_id: int, max_num_tiles: int) -> np.ndarray:
    """Per entry of :func:`~refpos.encodings.tiled_grid.aspect_ratio_rows`: ``u(c_t + 1)|t||A|(1 + 4u)`` (zero
    where the table has no gate: its rows are copied)."""
    rows = np.abs(aspect_ratio_rows(table, None, aspect_ratio_id, max_num_tiles))
    if gate is None:
        return np.zeros_like(rows)
    # u(c_t + 1)|t||A|(1 + 4u)
    return U32 * (TANH_ULPS + 1) * abs(math.tanh(gate)) * rows * (1 + 4 * U32)


def input_bound(embedding: Any, tile_table: Any, gate: float, pre_table: Any, pre_gate: float | None,
                aspect_ratio_id: int, max_num_tiles: int) -> np.ndarray:
    """Per entry of :func:`~refpos.encodings.tiled_grid.tiled_input_positions`: the grid's bound, and on the
    patches the pre-tile row's plus the one sum's ``u·|e|``."""
    out = tile_grid_bound(embedding, tile_table, gate, aspect_ratio_id, max_num_tiles)
    value = tiled_input_positions(embedding, tile_table, gate, pre_table, pre_gate, aspect_ratio_id, max_num_tiles)
    pre = aspect_ratio_bound(pre_table, pre_gate, aspect_ratio_id, max_num_tiles)
    out[:, 1:] += pre[:, None, :] + U32 * np.abs(value[:, 1:]) * (1 + 4 * U32)
    return out


def _other_id(aspect_ratio_id: int, ids: int) -> int:
    return (aspect_ratio_id + 1) % ids


def input_mistakes(embedding: Any, tile_table: Any, gate: float, pre_table: Any, pre_gate: float,
                   post_table: Any, post_gate: float, aspect_ratio_id: int, max_num_tiles: int
                   ) -> dict[str, np.ndarray | None]:
    """The wrong answers a port may give for the rows before the local encoder, by name: each is
    :func:`~refpos.encodings.tiled_grid.tiled_input_positions` with one thing changed (``None`` where the change
    is not possible at these inputs: one aspect-ratio id)."""
    grid = np.asarray(embedding, dtype=np.float64)
    table = np.asarray(tile_table, dtype=np.float64)
    a, tiles = aspect_ratio_id, max_num_tiles
    right = tiled_input_positions(embedding, tile_table, gate, pre_table, pre_gate, a, tiles)
    t = math.tanh(gate)
    pre = aspect_ratio_rows(pre_table, pre_gate, a, tiles)
    shaped = table[a].reshape(tiles, *grid.shape)
    out: dict[str, np.ndarray | None] = {}
    # the gate taken as it is: (1 − g)E + gG
    out["gate_not_tanh"] = right + (gate - t) * (shaped - grid[None])
    # the grid not gated down: E + tanh g·G
    out["grid_gate_missing"] = right + t * grid[None]
    # the tile grids of another aspect-ratio id
    other = _other_id(a, table.shape[0])
    out["tile_grid_other_id"] = None if other == a else tiled_input_positions(
        embedding, tile_table, gate, pre_table, pre_gate, other, tiles)
    # the post-tile table added before the local encoder (pre and post swapped)
    out["pre_post_swapped"] = tiled_input_positions(embedding, tile_table, gate, post_table, post_gate, a, tiles)
    # the pre-tile row added to the class token too
    wrong = right.copy()
    wrong[:, 0] += pre
    out["pre_tile_on_class_row"] = wrong
    # the grid's class row skipped: the patches read rows 0 … n − 1 and the class token none
    shifted = right.copy()
    shifted[:, 1:] = right[:, :-1] + pre[:, None, :]
    shifted[:, :1] = 0.0
    out["class_row_skipped"] = shifted
    # a grid row read patch by patch (N, T, D) instead of tile by tile (T, N, D)
    patch_major = table[a].reshape(grid.shape[0], tiles, grid.shape[1]).transpose(1, 0, 2)
    out["tile_grid_patch_major"] = right + t * (patch_major - shaped)
    # the pre-tile row's gate not tanh'd
    out["pre_gate_not_tanh"] = right + np.concatenate(
        [np.zeros_like(pre[:, None]), ((pre_gate - math.tanh(pre_gate)) / math.tanh(pre_gate) * pre)[:, None]
         .repeat(grid.shape[0] - 1, axis=1)], axis=1) if math.tanh(pre_gate) else None
    return out


__all__ = ["TANH_ULPS", "U32", "aspect_ratio_bound", "input_bound", "input_mistakes", "tile_grid_bound"]
