"""The reference adapter's tiled-image positions (docs/tiled-grid.md; the contract of ``spec_tests/README.md``).

NumPy in and out: the kind's formulas (:mod:`refpos.encodings.tiled_grid`) are table rows read at one id and scaled,
computed in NumPy float64. :mod:`refpos.testing.adapter` re-exports it; ``spec_tests/test_tiled_grid.py`` is its
spec.
"""

from __future__ import annotations

import numpy as np

from refpos.encodings.tiled_grid_mistakes import tiled_grid_inputs
from refpos.testing.adapter_arrays import to_host


def tiled_input_positions(embedding: np.ndarray, tile_table: np.ndarray, gate: float, pre_table: np.ndarray,
                          pre_gate: float, post_table: np.ndarray, post_gate: float, aspect_ratio_id: int,
                          max_num_tiles: int) -> np.ndarray:
    """What each tile's rows gain before the local encoder, ``(T, N, D)``: row ``i`` of tile ``t`` (row 0 the class
    token) gains ``(1 − tanh g)·E_i + tanh g·G[a]_{t,i}``, the patches ``i ≥ 1`` also ``tanh(g_pre)·A_pre[a]_t``;
    ``G[a]`` read as ``(T, N, D)``, ``A_pre[a]`` as ``(T, D)``. The post-tile table and gate add nothing here (they
    are checked: the shape of ``pre_table``). An id past the tables, a row that is not ``max_num_tiles`` tiles, a
    non-numeric gate: ValueError / TypeError naming the parameter."""
    arrays = [to_host(t) for t in (embedding, tile_table, pre_table, post_table)]
    return tiled_grid_inputs(arrays[0], arrays[1], gate, arrays[2], pre_gate, arrays[3], post_gate,
                             aspect_ratio_id, max_num_tiles).output()
