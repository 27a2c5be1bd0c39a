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
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from refpos.encodings.tiled_grid import aspect_ratio_rows, gated_tile_grid, tiled_input_positions
from refpos.mistake_match import KindMistake, identify_output
from refpos.validation import check_float, check_int, floating_array

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
    # the grid's class row skipped: the patches read rows 0 … n − 1 (plus their pre-tile row), the class token none
    shifted = np.zeros_like(right)
    shifted[:, 1:] = gated_tile_grid(embedding, tile_table, gate, a, tiles)[:, :-1] + pre[:, None, :]
    out["class_row_skipped"] = shifted
    # a grid row read patch by patch (N, T, D) instead of tile by tile (T, N, D)
    patch_major = table[a].reshape(grid.shape[0], tiles, grid.shape[1]).transpose(1, 0, 2)
    out["tile_grid_patch_major"] = right + t * (patch_major - shaped)
    # the pre-tile row's gate not tanh'd
    out["pre_gate_not_tanh"] = right + np.concatenate(
        [np.zeros_like(pre[:, None]), ((pre_gate - math.tanh(pre_gate)) / math.tanh(pre_gate) * pre)[:, None]
         .repeat(grid.shape[0] - 1, axis=1)], axis=1) if math.tanh(pre_gate) else None
    return out


@dataclass(frozen=True)
class TiledGridInputs:
    """One call: the gated grid ``E``, ``G``, ``g``, the pre- and post-tile tables and gates, the aspect-ratio id and
    the tiles ``T`` (the post-tile table is what a port swapping the two tables adds before the local encoder)."""

    embedding: np.ndarray
    tile_table: np.ndarray
    gate: float
    pre_table: np.ndarray
    pre_gate: float
    post_table: np.ndarray
    post_gate: float
    aspect_ratio_id: int
    max_num_tiles: int

    def _grid_args(self) -> tuple[Any, ...]:
        return (self.embedding, self.tile_table, self.gate, self.pre_table, self.pre_gate, self.aspect_ratio_id,
                self.max_num_tiles)

    def output(self) -> np.ndarray:
        return tiled_input_positions(*self._grid_args())

    def bound(self) -> np.ndarray:
        """Per entry: :func:`input_bound` (module docstring)."""
        return input_bound(*self._grid_args())

    def reference(self) -> tuple[np.ndarray, np.ndarray]:
        return self.output(), self.bound()

    @cached_property
    def wrong_outputs(self) -> dict[str, np.ndarray | None]:
        """Every wrong answer of :func:`input_mistakes` at these inputs, computed once for all the mistakes."""
        return input_mistakes(self.embedding, self.tile_table, self.gate, self.pre_table, self.pre_gate,
                              self.post_table, self.post_gate, self.aspect_ratio_id, self.max_num_tiles)


def tiled_grid_inputs(embedding: Any, tile_table: Any, gate: Any, pre_table: Any, pre_gate: Any, post_table: Any,
                      post_gate: Any, aspect_ratio_id: Any, max_num_tiles: Any) -> TiledGridInputs:
    """The inputs of one call, tables as float64 NumPy arrays, checked: a ``ValueError``/``TypeError`` naming the
    parameter (the post-tile table of the pre-tile table's shape)."""
    gates = [check_float(name, value) for name, value in (("gate", gate), ("pre_gate", pre_gate),
                                                           ("post_gate", post_gate))]
    tables = [np.asarray(floating_array(t, name=n), dtype=np.float64) for n, t in (
        ("embedding", embedding), ("tile_table", tile_table), ("pre_table", pre_table), ("post_table", post_table))]
    inputs = TiledGridInputs(tables[0], tables[1], gates[0], tables[2], gates[1], tables[3], gates[2],
                             check_int("aspect_ratio_id", aspect_ratio_id, minimum=0),
                             check_int("max_num_tiles", max_num_tiles, minimum=1))
    inputs.output()  # every shape and the id checked, by name
    if tables[3].shape != tables[2].shape:
        raise ValueError(f"post_table must have pre_table's shape {tables[2].shape}, got {tables[3].shape}")
    return inputs


def _mistake(name: str) -> Any:
    """Mistake ``name`` of :func:`input_mistakes` at the inputs, within the reference's bound plus four roundings
    of the wrong output (the same computation with one step changed)."""
    def compute(inputs: TiledGridInputs) -> tuple[np.ndarray, np.ndarray] | None:
        wrong = inputs.wrong_outputs[name]
        # the reference's bound + 4u|wrong|(1 + 4u)
        return None if wrong is None else (wrong, inputs.bound() + 4 * U32 * np.abs(wrong) * (1 + 4 * U32))
    return compute


#: the mistakes :func:`identify_tiled_grid` names, each one of :func:`input_mistakes`
TILED_GRID_MISTAKES: tuple[KindMistake, ...] = tuple(KindMistake(name, text, _mistake(name)) for name, text in (
    ("gate_not_tanh", "the grid's gate taken as it is: (1 − g)E + gG instead of (1 − tanh g)E + tanh g·G"),
    ("grid_gate_missing", "the patch grid not gated down: E + tanh g·G"),
    ("tile_grid_other_id", "the tile grids and pre-tile rows of another aspect-ratio id"),
    ("pre_post_swapped", "the post-tile table and gate added before the local encoder in place of the pre-tile ones"),
    ("pre_tile_on_class_row", "the pre-tile row added to the class token too"),
    ("class_row_skipped", "the grid's class row skipped: the patches read grid rows 0 … n − 1, the class token none"),
    ("tile_grid_patch_major", "a row of the tile grids read patch by patch (N, T, D) instead of tile by tile "
     "(T, N, D)"),
    ("pre_gate_not_tanh", "the pre-tile row's gate taken as it is: g_pre·A_pre[a] instead of tanh(g_pre)·A_pre[a]"),
))


def identify_tiled_grid(candidate: Any, inputs: TiledGridInputs) -> str | None:
    """The catalogued mistake ``candidate`` matches, or ``None`` (a correct port, or an output no mistake explains)."""
    return identify_output(candidate, inputs.reference(), TILED_GRID_MISTAKES, inputs)


__all__ = ["TANH_ULPS", "TILED_GRID_MISTAKES", "U32", "TiledGridInputs", "aspect_ratio_bound", "identify_tiled_grid",
           "input_bound", "input_mistakes", "tile_grid_bound", "tiled_grid_inputs"]
