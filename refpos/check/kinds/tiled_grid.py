"""``refpos check tiled_grid``: a tiled image's positions before the local encoder from a call of
``tiled_input_positions`` (the gated grid, the tile grids and their gate, the pre- and post-tile tables and gates,
the aspect-ratio id, the tiles), against :mod:`refpos.encodings.tiled_grid` within the bound of a float32 port per
entry (:meth:`refpos.encodings.tiled_grid_mistakes.TiledGridInputs.bound`), the mistake named by
:func:`~refpos.encodings.tiled_grid_mistakes.identify_tiled_grid` (docs/tiled-grid.md#mistakes).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from refpos.check.kinds.target import KindCheck, mistake_output
from refpos.encodings.tiled_grid_mistakes import (
    TILED_GRID_MISTAKES,
    TiledGridInputs,
    identify_tiled_grid,
    tiled_grid_inputs,
)


def tiled_input_positions(embedding: Any, tile_table: Any, gate: Any, pre_table: Any, pre_gate: Any,
                          post_table: Any, post_gate: Any, aspect_ratio_id: Any, max_num_tiles: Any
                          ) -> TiledGridInputs:
    """The inputs of a ``tiled_input_positions`` call: what each tile's rows gain before the local encoder,
    ``(T, N, D)`` (the post-tile table and gate given so that a port adding them there is named)."""
    return tiled_grid_inputs(embedding, tile_table, gate, pre_table, pre_gate, post_table, post_gate,
                             aspect_ratio_id, max_num_tiles)


def _examples() -> list[tuple[str, dict[str, Any]]]:
    """Llama 3.2 Vision's layout at a small size: 4 tiles of a class row and 4 patches, 3 channels, 9 aspect-ratio
    ids, tables of float32 values and gates of float32 values, at id 2 and at the last id."""
    rng = np.random.default_rng(23)
    tiles, rows, width, ids = 4, 5, 3, 9

    def table(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32).astype(np.float64)

    weights = {"embedding": table(rows, width), "tile_table": table(ids, tiles * rows * width), "gate": 0.4,
               "pre_table": table(ids, tiles * width), "pre_gate": -0.3, "post_table": table(ids, tiles * width),
               "post_gate": 0.6, "max_num_tiles": tiles}
    weights.update({k: float(np.float32(weights[k])) for k in ("gate", "pre_gate", "post_gate")})
    return [("tiled_input_positions", {**weights, "aspect_ratio_id": a}) for a in (2, ids - 1)]


TILED_GRID_CHECK = KindCheck(
    kind="tiled_grid", calls=(tiled_input_positions,), reference=TiledGridInputs.reference,
    identify=identify_tiled_grid, mistakes={m.name: m.description for m in TILED_GRID_MISTAKES},
    wrong=partial(mistake_output, TILED_GRID_MISTAKES), examples=_examples)

__all__ = ["TILED_GRID_CHECK", "tiled_input_positions"]
